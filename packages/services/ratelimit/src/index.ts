// The token bucket lives in @raftkit/http (shared with the short-link service's create limits); re-exported here
// because it is part of this service's public surface.
export { fullCounter, idleExpiryMs, refill, resetMs, take } from '@raftkit/http';
export type { BucketCounter as Counter, BucketLimits, TakeResult } from '@raftkit/http';
export { ratelimitService } from './service.js';
export { RuleMachine } from './machine.js';
export type { RuleCommand, RuleResult, RuleSet, RuleError } from './machine.js';
export {
  parseRule,
  ruleBody,
  validEndpointPattern,
  patternMatches,
  DIMENSIONS,
  REGION_MODES,
  SERVICE_ID,
} from './rules.js';
export type { Rule, Dimension, RegionMode, HotKeyConfig } from './rules.js';
export { tenantKeys } from './tenants.js';
export type { TenantKeys } from './tenants.js';
export { checkRole } from './workers/check/worker.js';
export { RateLimitClient, HttpRateLimitClient, RateLimitError, rateLimitMiddleware } from './client.js';
export type { CheckInput, CheckResult, RateLimiter, MiddlewareOptions } from './client.js';
export { shardFor } from './workers/store/client.js';
