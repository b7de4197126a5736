export { LockMachine } from './machine.js';
export type { LockCommand, LockResult, LockState, SessionState, LockChange, LockError } from './machine.js';
export { lockService, lockRoutes, LOCK_NAME, DEFAULT_TIMEOUT_MS } from './members/api.js';
export { LockClient, LockServiceError, ProtectedResource, LeaderElection } from './client.js';
export type { LockClientOptions, Grant, LockBody } from './client.js';
