/**
 * Create limits of one application server: a token bucket per API key and one per client IP, through the
 * project's one token-bucket function. A create needs a token from both; a request denied by the IP bucket gets
 * its key token back, so one noisy address does not drain a key's budget elsewhere.
 */
import { LRUCache } from 'lru-cache';
import { fullCounter, idleExpiryMs, take, type BucketLimits, type BucketCounter as Counter } from '@raftkit/http';

type LimitDecision =
  | { allowed: true; remaining: number }
  | { allowed: false; retryAfterMs: number; dimension: 'api_key' | 'ip' };

class Buckets {
  private readonly counters: LRUCache<string, Counter>;

  constructor(
    readonly limits: BucketLimits,
    maxKeys: number,
  ) {
    // An idle counter is full again after idleExpiryMs, so forgetting it then loses nothing.
    this.counters = new LRUCache<string, Counter>({ max: maxKeys, ttl: idleExpiryMs(limits) });
  }

  take(key: string, now: number) {
    const counter = this.counters.get(key) ?? fullCounter(this.limits, now);
    const result = take(counter, this.limits, now);
    this.counters.set(key, counter);
    return { result, counter };
  }
}

export class CreateLimits {
  private readonly perKey: Buckets;
  private readonly perIp: Buckets;

  constructor(perKey: BucketLimits, perIp: BucketLimits, maxKeys = 100_000) {
    this.perKey = new Buckets(perKey, maxKeys);
    this.perIp = new Buckets(perIp, maxKeys);
  }

  check(apiKey: string, ip: string, now: number): LimitDecision {
    const key = this.perKey.take(apiKey, now);
    if (!key.result.allowed) return { allowed: false, retryAfterMs: key.result.retryAfterMs!, dimension: 'api_key' };
    const address = this.perIp.take(ip, now);
    if (!address.result.allowed) {
      key.counter.tokens += 1;
      return { allowed: false, retryAfterMs: address.result.retryAfterMs!, dimension: 'ip' };
    }
    return { allowed: true, remaining: Math.min(key.result.remaining, address.result.remaining) };
  }
}
