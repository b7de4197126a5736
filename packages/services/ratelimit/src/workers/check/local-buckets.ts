/**
 * Token buckets kept in this process (the degraded-mode fallback limiter), with the shared bucket arithmetic and
 * the spec's idle expiry. Pure: time is passed in.
 */
import {
  fullCounter,
  idleExpiryMs,
  take,
  type BucketLimits,
  type BucketCounter as Counter,
  type TakeResult,
} from '@raftkit/http';

interface Entry {
  counter: Counter;
  expiresAt: number;
}

export class LocalBuckets {
  private readonly entries = new Map<string, Entry>();

  take(key: string, limits: BucketLimits, now: number): TakeResult {
    let entry = this.entries.get(key);
    if (entry === undefined || entry.expiresAt <= now) {
      entry = { counter: fullCounter(limits, now), expiresAt: 0 };
      this.entries.set(key, entry);
    }
    const result = take(entry.counter, limits, now);
    entry.expiresAt = now + idleExpiryMs(limits);
    return result;
  }

  /** Forget idle buckets (call now and then; a forgotten bucket starts full, as an expired counter does). */
  sweep(now: number): void {
    for (const [key, entry] of this.entries) if (entry.expiresAt <= now) this.entries.delete(key);
  }

  clear(): void {
    this.entries.clear();
  }

  get size(): number {
    return this.entries.size;
  }
}

/** A rule's limits divided among `instances` processes that each enforce their share alone. */
export function share(limits: BucketLimits, instances: number): BucketLimits {
  return { capacity: limits.capacity / instances, refillRate: limits.refillRate / instances };
}
