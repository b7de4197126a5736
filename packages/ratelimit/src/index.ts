export * from './bucket.js';
