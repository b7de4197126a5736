/**
 * What a rule is, and the validation of a rule as the management API receives it. Pure: the member API, the
 * check instances' cache and the tests share these definitions. Decisions are documented in README.md.
 */
import { badRequest, optionalBoolean, requireObject, requireString, type JsonObject } from '@raftkit/http';

/** The dimensions a rule counts by: one counter per distinct value of the dimension. */
export const DIMENSIONS = ['ip', 'user_id', 'api_key', 'endpoint', 'tenant'] as const;
export type Dimension = (typeof DIMENSIONS)[number];

export const REGION_MODES = ['sync', 'budget', 'strict'] as const;
export type RegionMode = (typeof REGION_MODES)[number];

export interface HotKeyConfig {
  /** Checks per second of one counter on one instance above which it is served from a local bucket. */
  qpsThreshold: number;
  /** Sync the local bucket with the store at least this often. */
  syncMs: number;
  /** ... and also after this many locally admitted checks (0: time only). */
  syncEveryN: number;
}

export interface Rule {
  ruleId: string;
  serviceId: string;
  dimension: Dimension;
  endpointPattern: string;
  /** As given (or capacity when the rule was given as capacity and refill_rate). */
  limit: number;
  windowSec: number;
  capacity: number;
  /** Tokens per second. */
  refillRate: number;
  failClosed: boolean;
  hotKey: HotKeyConfig | null;
  regionMode: RegionMode;
  /** For the degraded-mode fallback bucket and hot-key shares; null: the number of check instances. */
  expectedInstances: number | null;
}

/** A tenant id: also part of counter keys and of derived token names (`admin.<id>`), so no ':' and no '.'. */
export const SERVICE_ID = /^[A-Za-z0-9_-]{1,58}$/;
export const RULE_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** Path characters (RFC 3986 pchar and '/') except ':', which separates the parts of a counter key. */
const PATH = /^\/[A-Za-z0-9._~!$&'()+,;=@%/-]*$/;
const MAX_PATTERN = 512;
const MAX_CAPACITY = 1_000_000_000;
const MAX_WINDOW_SEC = 86_400;
/**
 * The slowest refill taken: one token every 11.6 days. Slower rates only produce waits no client can act on, and
 * at denormal rates (5e-324) the waits overflowed to Infinity, answered as null.
 */
export const MIN_REFILL_RATE = 1e-6;
/** The longest a bucket may take to refill from empty, so reset and retry times stay finite and idle counters expire. */
const MAX_REFILL_SECONDS = 366 * 86_400;

/**
 * Endpoint patterns: `*` (every endpoint), an exact path (`/v1/orders`), or a prefix ending in `/*`
 * (`/v1/orders/*` matches `/v1/orders` and every path below it). No other wildcards.
 */
export function validEndpointPattern(pattern: string): boolean {
  if (pattern === '*') return true;
  if (pattern.length > MAX_PATTERN) return false;
  const path = pattern.endsWith('/*') ? pattern.slice(0, -2) : pattern;
  return (path === '' && pattern === '/*') || PATH.test(path);
}

/** Whether `pattern` (valid) covers the requested `endpoint`. */
export function patternMatches(pattern: string, endpoint: string): boolean {
  if (pattern === '*') return true;
  if (!pattern.endsWith('/*')) return pattern === endpoint;
  const prefix = pattern.slice(0, -1);
  return endpoint.startsWith(prefix) || endpoint === prefix.slice(0, -1);
}

function positiveNumber(body: JsonObject, field: string, opts: { integer: boolean; max: number }): number {
  const v = body[field];
  const ok =
    typeof v === 'number' && Number.isFinite(v) && v > 0 && v <= opts.max && (!opts.integer || Number.isSafeInteger(v));
  if (!ok)
    throw badRequest(
      'invalid_field',
      `${field} must be a positive ${opts.integer ? 'integer' : 'number'} up to ${opts.max}`,
      { field },
    );
  return v as number;
}

function optionalPositiveInteger(body: JsonObject, field: string, max: number, fallback: number | null): number | null {
  if (body[field] === undefined || body[field] === null) return fallback;
  return positiveNumber(body, field, { integer: true, max });
}

function hotKey(value: unknown): HotKeyConfig | null {
  if (value === undefined || value === null) return null;
  const body = requireObject(value, 'hot_key');
  const qpsThreshold = positiveNumber(body, 'qps_threshold', { integer: false, max: 10_000_000 });
  const syncMs = body.sync_ms === undefined ? 100 : positiveNumber(body, 'sync_ms', { integer: true, max: 5_000 });
  const syncEveryN =
    body.sync_every_n === undefined ? 0 : positiveNumber(body, 'sync_every_n', { integer: true, max: 1_000_000 });
  return { qpsThreshold, syncMs, syncEveryN };
}

/**
 * A rule from the body of `PUT /v1/rules/{rule_id}`. The limits come either as `limit` and `window_sec`
 * (capacity = limit, refill_rate = limit / window_sec: the whole limit may be spent at once, and it comes back
 * over the window) or directly as `capacity` and `refill_rate` (window_sec is then optional and defaults to the
 * time an empty bucket takes to fill). Every failure is a 400 naming the field.
 */
export function parseRule(ruleId: string, input: unknown): Rule {
  if (!RULE_ID.test(ruleId)) throw badRequest('invalid_field', 'rule_id must be a UUID', { field: 'rule_id' });
  const body = requireObject(input);
  const serviceId = requireString(body, 'service_id', { pattern: SERVICE_ID });
  const dimension = body.dimension;
  if (typeof dimension !== 'string' || !(DIMENSIONS as readonly string[]).includes(dimension)) {
    throw badRequest('invalid_field', `dimension must be one of ${DIMENSIONS.join(', ')}`, { field: 'dimension' });
  }
  const patternField =
    body.endpoint_pattern === undefined && body.endpoint !== undefined ? 'endpoint' : 'endpoint_pattern';
  const endpointPattern = requireString(body, patternField);
  if (!validEndpointPattern(endpointPattern)) {
    throw badRequest(
      'invalid_field',
      `${patternField} must be "*", an exact path starting with "/", or a path prefix ending in "/*" (no ":")`,
      { field: patternField },
    );
  }
  let limit: number, windowSec: number, capacity: number, refillRate: number;
  if (body.limit !== undefined) {
    for (const field of ['capacity', 'refill_rate']) {
      if (body[field] !== undefined)
        throw badRequest(
          'invalid_field',
          `give either limit and window_sec, or capacity and refill_rate, not ${field} with limit`,
          { field },
        );
    }
    limit = positiveNumber(body, 'limit', { integer: true, max: MAX_CAPACITY });
    windowSec = positiveNumber(body, 'window_sec', { integer: true, max: MAX_WINDOW_SEC });
    capacity = limit;
    refillRate = limit / windowSec;
  } else {
    if (body.capacity === undefined && body.refill_rate === undefined) {
      throw badRequest('invalid_field', 'limit (with window_sec) or capacity (with refill_rate) is required', {
        field: 'limit',
      });
    }
    capacity = positiveNumber(body, 'capacity', { integer: true, max: MAX_CAPACITY });
    refillRate = positiveNumber(body, 'refill_rate', { integer: false, max: MAX_CAPACITY });
    if (refillRate < MIN_REFILL_RATE)
      throw badRequest('invalid_field', `refill_rate must be at least ${MIN_REFILL_RATE} tokens per second`, {
        field: 'refill_rate',
      });
    if (capacity / refillRate > MAX_REFILL_SECONDS) {
      throw badRequest(
        'invalid_field',
        `capacity / refill_rate must be at most ${MAX_REFILL_SECONDS} seconds (a bucket refills from empty within 366 days)`,
        { field: 'refill_rate' },
      );
    }
    limit = capacity;
    windowSec =
      body.window_sec === undefined
        ? Math.ceil(capacity / refillRate)
        : positiveNumber(body, 'window_sec', { integer: true, max: MAX_WINDOW_SEC });
  }
  const regionMode = body.region_mode ?? 'sync';
  if (typeof regionMode !== 'string' || !(REGION_MODES as readonly string[]).includes(regionMode)) {
    throw badRequest('invalid_field', `region_mode must be one of ${REGION_MODES.join(', ')}`, {
      field: 'region_mode',
    });
  }
  return {
    ruleId: ruleId.toLowerCase(),
    serviceId,
    dimension: dimension as Dimension,
    endpointPattern,
    limit,
    windowSec,
    capacity,
    refillRate,
    failClosed: optionalBoolean(body, 'fail_closed', false),
    hotKey: hotKey(body.hot_key),
    regionMode: regionMode as RegionMode,
    expectedInstances: optionalPositiveInteger(body, 'expected_instances', 10_000, null),
  };
}

/** The rule as the API shows it (snake_case, the spec's field names). */
export function ruleBody(rule: Rule): Record<string, unknown> {
  return {
    rule_id: rule.ruleId,
    service_id: rule.serviceId,
    dimension: rule.dimension,
    endpoint_pattern: rule.endpointPattern,
    limit: rule.limit,
    window_sec: rule.windowSec,
    capacity: rule.capacity,
    refill_rate: rule.refillRate,
    fail_closed: rule.failClosed,
    hot_key:
      rule.hotKey === null
        ? null
        : {
            qps_threshold: rule.hotKey.qpsThreshold,
            sync_ms: rule.hotKey.syncMs,
            sync_every_n: rule.hotKey.syncEveryN,
          },
    region_mode: rule.regionMode,
    expected_instances: rule.expectedInstances,
  };
}
