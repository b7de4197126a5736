export * from './rank-wire.js';
