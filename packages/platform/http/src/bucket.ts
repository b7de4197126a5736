/**
 * The token bucket of the rate-limiting spec's check rules 2 to 4, as a pure function over a counter and a clock reading.
 * Every limiter in the project (the counter store, the local fallback and hot-key buckets, the short-link
 * service's create limits) takes tokens through `take`, so the arithmetic lives once.
 */

export interface BucketCounter {
  tokens: number;
  /** Milliseconds on the clock of whoever holds the counter. */
  lastRefill: number;
}

export interface BucketLimits {
  capacity: number;
  /** Tokens per second. */
  refillRate: number;
}

export interface TakeResult {
  allowed: boolean;
  /** floor(tokens) after the take (0 when denied). */
  remaining: number;
  /** Present when denied: ceil((1 - tokens) / refill_rate * 1000). */
  retryAfterMs?: number;
  /** Milliseconds until the bucket is full again. */
  resetMs: number;
}

/** A counter that does not exist starts full. */
export function fullCounter(limits: BucketLimits, now: number): BucketCounter {
  return { tokens: limits.capacity, lastRefill: now };
}

/** Lazy refill: tokens = min(capacity, tokens + elapsed_seconds * refill_rate). Mutates and returns `counter`. */
export function refill(counter: BucketCounter, limits: BucketLimits, now: number): BucketCounter {
  const elapsed = Math.max(0, now - counter.lastRefill) / 1000;
  counter.tokens = Math.min(limits.capacity, counter.tokens + elapsed * limits.refillRate);
  counter.lastRefill = Math.max(counter.lastRefill, now);
  return counter;
}

/**
 * Refill, then take `cost` tokens if there are that many (rule 3), else deny (rule 4). Mutates `counter`. The spec
 * sets last_refill to now on both paths through the refill, so elapsed time is never counted twice.
 */
export function take(counter: BucketCounter, limits: BucketLimits, now: number, cost = 1): TakeResult {
  refill(counter, limits, now);
  if (counter.tokens >= cost) {
    counter.tokens -= cost;
    return { allowed: true, remaining: Math.floor(counter.tokens), resetMs: resetMs(counter, limits) };
  }
  return {
    allowed: false,
    remaining: 0,
    retryAfterMs: Math.ceil(((cost - counter.tokens) / limits.refillRate) * 1000),
    resetMs: resetMs(counter, limits),
  };
}

/** Milliseconds until `counter` is full again. */
export function resetMs(counter: BucketCounter, limits: BucketLimits): number {
  return Math.ceil(((limits.capacity - counter.tokens) / limits.refillRate) * 1000);
}

/** How long an idle counter lives after its last update: capacity / refill_rate * 1000 + 1000 ms. */
export function idleExpiryMs(limits: BucketLimits): number {
  return idleExpiryFor(limits.capacity, limits.refillRate);
}

/** idleExpiryMs from the two numbers, for a caller that keeps its limits in typed arrays (no object per call). */
export function idleExpiryFor(capacity: number, refillRate: number): number {
  return Math.ceil((capacity / refillRate) * 1000) + 1000;
}
