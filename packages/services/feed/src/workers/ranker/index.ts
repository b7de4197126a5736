/** The feed's ranker: pure scoring, the features fed by engagement events, the ranker process and its client. */
export { CONTENT_TYPES, ENGAGEMENT_TYPES, NO_FEATURES } from './types.js';
export type { Affinity, Candidate, EngagementType, FeatureView, Velocity } from './types.js';
export {
  affinityScore,
  baseScore,
  DEFAULT_WEIGHTS,
  INTERACTION_WEIGHTS,
  interactionsPerMinute,
  rank,
  recencyScore,
  timeOrder,
  velocityScore,
} from './score.js';
export type { ScoreWeights } from './score.js';
export { FeatureStore, FAST_HALF_LIFE_MS, SLOW_HALF_LIFE_MS } from './features.js';
export type { FeatureLimits } from './features.js';
export { encodeEngagement, isEngagementType, parseEngagement } from './engagement.js';
export { fingerprint, RecentRankings, RECENT_RANKING_TTL_MS } from './cache.js';
export { MAX_CANDIDATES, MAX_ID_LENGTH, parseRankerRequest } from './wire.js';
export type {
  AffinityAnswer,
  RankAnswer,
  RankerRequest,
  RankerStats,
  RankRequest as RankerRankRequest,
} from './wire.js';
export { RankerClient, rankerAddresses } from './client.js';
export type { Ordering, RankerClientOptions } from './client.js';
export { rankerCore, rankerRole } from './worker.js';
export type { RankerCore } from './worker.js';
