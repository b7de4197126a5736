export * from './rank-wire.js';
export * from './ranker/index.js';
