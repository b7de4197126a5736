export {
  CollabMachine,
  MAX_CHARS,
  LEASE_MS,
  SNAPSHOT_EVERY,
  HOT_MS,
  IDLE_SNAPSHOT_MS,
  SERVER_CLIENT,
  atLeast,
  clientBelongsTo,
} from './machine.js';
export type {
  CollabCommand,
  CollabResult,
  ChangeEntry,
  ChangeInput,
  ChangeResult,
  DocMeta,
  Owner,
  Role,
  Comment,
  NamedSnapshot,
} from './machine.js';
export { checkCommand } from './commands.js';
export { createCollabService } from './members/api.js';
export { groupName, slotsOf, DEFAULT_GROUPS } from './placement.js';
export { startCollabWorker } from './workers/editor/worker.js';
export * from './protocol.js';
export { CollabClient, CollabError, nodeSocket } from './client.js';
export type {
  ClientStatus,
  CollabClientOptions,
  CollabEvents,
  PresenceEvent,
  SocketFactory,
  SocketLike,
} from './client.js';
export { applyWithEdits, MAX_EDIT_DELETES, type Edit } from './edits.js';
