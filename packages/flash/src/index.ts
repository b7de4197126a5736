export { FlashMachine, checkFlashCommand, dealState, RESERVATION_WINDOW_MS, GO_LIVE_LEAD_MS, MAX_DEALS, MAX_SHARDS, MAX_SHARD_COUNT, KEYS_PER_UNIT, MIN_KEYS } from './machine.js';
export type { FlashCommand, FlashResult, FlashError, DealState, DealView, ReservationView, ReservationStatus } from './machine.js';
export { AliveShards, homeShard, firstRoute, rerouteCandidate, nextRoute, poolSize, distributeTokens, tokensValid, TokenPool, TOKENS_PER_UNIT, TOKEN_GRACE_MS } from './gates.js';
export type { RouteDecision } from './gates.js';
