export { CacheTier, IMMUTABLE, MEDIA_PREFIX, MAX_PREFILL_KEYS, parseRange, videoPrefix } from './tier.js';
export type { Downstream, TierConfig, TierStats } from './tier.js';
export { edgeRole, regionalRole, originUrl, startTierProcess, EDGE_ROLE, REGIONAL_ROLE } from './process.js';
export type { RunningTier } from './process.js';
export { pickEdge, checkKey, contentTypeOf, etagOf } from './keys.js';
export { Coalescer } from './coalesce.js';
export { ObjectCache } from './store.js';
export type { CachedObject } from './store.js';
export { playlistReferences } from './playlist.js';
