export {
  FlashMachine,
  checkFlashCommand,
  dealState,
  RESERVATION_WINDOW_MS,
  GO_LIVE_LEAD_MS,
  MAX_DEALS,
  MAX_SHARDS,
  MAX_SHARD_COUNT,
  KEYS_PER_UNIT,
  MIN_KEYS,
} from './machine.js';
export type {
  FlashCommand,
  FlashResult,
  FlashError,
  DealState,
  DealView,
  ReservationView,
  ReservationStatus,
} from './machine.js';
export {
  AliveShards,
  homeShard,
  firstRoute,
  rerouteCandidate,
  nextRoute,
  poolSize,
  distributeTokens,
  tokensValid,
  TokenPool,
  TOKENS_PER_UNIT,
  TOKEN_GRACE_MS,
} from './workers/gateway/gates.js';
export type { RouteDecision } from './workers/gateway/gates.js';
export { shardOfReservation, snapshotState } from './inventory.js';
export type {
  InventoryBackend,
  DealSpec,
  DealSnapshot,
  ReserveRequest,
  ReserveOutcome,
  ReservationChange,
  AttemptRecord,
} from './inventory.js';
export { RaftInventory } from './raft-inventory.js';
export type { RaftInventoryOptions } from './raft-inventory.js';
export { INVENTORY_GROUPS, groupOfShard, inventoryGroup, groupsOfDeal, shardCounts } from './placement.js';
export { createFlashService } from './members/api.js';
export {
  gatewayRole,
  gatewaySettings,
  GATEWAY_NODE_FLAGS,
  startGateway,
  Gateway,
  BOT_COOKIE,
  STATE_CACHE_CONTROL,
} from './workers/gateway/gateway.js';
export type { GatewaySettings, AttemptAnswer } from './workers/gateway/gateway.js';
export {
  solveChallenge,
  workBits,
  makeUserToken,
  checkUserToken,
  eligible,
  MIN_ACCOUNT_AGE_MS,
} from './workers/gateway/tokens.js';
export type { Account } from './workers/gateway/tokens.js';
export { FlashClient } from './client.js';
export type { FlashClientOptions, FlashAnswer } from './client.js';
