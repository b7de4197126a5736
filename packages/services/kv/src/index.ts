export { KvMachine } from './machine.js';
export type { KvCommand, KvResult, KvEntry } from './machine.js';
export { kvService, kvRoutes, MAX_KEY_BYTES, MAX_VALUE_BYTES } from './members/api.js';
export { KvClient, KvError } from './client.js';
export type { KvClientOptions, KvValue } from './client.js';
