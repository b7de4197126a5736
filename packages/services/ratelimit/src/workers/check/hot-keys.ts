/**
 * Hot counters (spec rule 9). A rule with `hot_key` has its counters' rates watched on this instance; a counter
 * checked more than `qps_threshold` times in one second here is served from a local bucket holding this
 * instance's share (1/N) of the store's tokens and refilling at rate/N. The local admissions are debited from the
 * store every `sync_ms` or every `sync_every_n` admissions, and the store's answer (its tokens after the debit,
 * which may be negative: the store keeps the debt) resets the local bucket to tokens/N minus what was admitted
 * while the debit was in flight.
 *
 * Bound: what the store has not yet been told is at most, per instance, its share of the tokens it last saw plus
 * rate/N for each sync interval: summed over N instances, at most capacity + sync_interval * rate. Everything
 * debited is in the store's accounting (debts are paid back by refill before anyone is admitted again), so over
 * any period the over-admission stays within capacity + sync_interval * rate * N (the spec's bound, with the
 * burst the bucket allows anyway). Pure: time is passed in, the caller runs the debits.
 */
import { take, type BucketLimits, type BucketCounter as Counter } from '@raftkit/http';
import type { Rule } from '../../rules.js';
import type { Outcome } from './decide.js';

export interface HotCounter {
  key: string;
  rule: Rule;
  /** This instance's share of the rule's limits. */
  limits: BucketLimits;
  instances: number;
  bucket: Counter;
  /** Admitted here and not yet debited from the store. */
  unsynced: number;
  lastSync: number;
  syncing: boolean;
}

interface Rate {
  windowStart: number;
  count: number;
  /** Count of the previous one-second window (0 when it was not the one just before). */
  previous: number;
}

const WINDOW_MS = 1_000;

export class HotKeys {
  private readonly rates = new Map<string, Rate>();
  private readonly hot = new Map<string, HotCounter>();
  private lastSweep = 0;

  /**
   * Count one check on `key` (a counter of a rule with hot_key). Returns the hot counter serving it, or
   * 'promote' when this check crossed the threshold (ask the store this time, then call `promote` with the
   * store's tokens), or null (ask the store).
   */
  observe(key: string, rule: Rule, now: number): HotCounter | 'promote' | null {
    const hot = this.hot.get(key);
    const rate = this.count(key, now);
    if (hot !== undefined) return hot;
    return rate.count > rule.hotKey!.qpsThreshold ? 'promote' : null;
  }

  private count(key: string, now: number): Rate {
    let rate = this.rates.get(key);
    if (rate === undefined) {
      rate = { windowStart: now, count: 0, previous: 0 };
      this.rates.set(key, rate);
    } else if (now - rate.windowStart >= WINDOW_MS) {
      rate.previous = now - rate.windowStart < 2 * WINDOW_MS ? rate.count : 0;
      rate.windowStart = now;
      rate.count = 0;
    }
    rate.count++;
    return rate;
  }

  /** Start serving `key` locally, from the store's tokens as its last take left them. */
  promote(key: string, rule: Rule, instances: number, storeTokens: number, now: number): HotCounter {
    const existing = this.hot.get(key);
    if (existing !== undefined) return existing;
    const limits = { capacity: rule.capacity / instances, refillRate: rule.refillRate / instances };
    const counter: HotCounter = {
      key,
      rule,
      limits,
      instances,
      bucket: { tokens: storeTokens / instances, lastRefill: now },
      unsynced: 0,
      lastSync: now,
      syncing: false,
    };
    this.hot.set(key, counter);
    return counter;
  }

  /** One check served by the local bucket. remaining is scaled back to the whole limit (an estimate). */
  take(counter: HotCounter, now: number): Outcome {
    const result = take(counter.bucket, counter.limits, now);
    if (!result.allowed) return result;
    counter.unsynced++;
    return { allowed: true, remaining: Math.floor(counter.bucket.tokens * counter.instances), resetMs: result.resetMs };
  }

  /** Whether `counter` should be debited now (time, or count). */
  syncDue(counter: HotCounter, now: number): boolean {
    if (counter.syncing || counter.unsynced === 0) return false;
    const everyN = counter.rule.hotKey!.syncEveryN;
    return now - counter.lastSync >= counter.rule.hotKey!.syncMs || (everyN > 0 && counter.unsynced >= everyN);
  }

  /** Hot counters whose sync is due by time. */
  due(now: number): HotCounter[] {
    const out: HotCounter[] = [];
    for (const counter of this.hot.values()) if (this.syncDue(counter, now)) out.push(counter);
    return out;
  }

  /** The caller is about to debit this many admissions; they are no longer counted as unsynced. */
  beginSync(counter: HotCounter): number {
    counter.syncing = true;
    const count = counter.unsynced;
    counter.unsynced = 0;
    return count;
  }

  /** The debit answered with the store's tokens, or failed (null: the admissions stay to be debited later). */
  endSync(counter: HotCounter, sent: number, storeTokens: number | null, now: number): void {
    counter.syncing = false;
    counter.lastSync = now;
    if (storeTokens === null) {
      counter.unsynced += sent;
      return;
    }
    // Admissions made while the debit was in flight are not in the store's answer yet.
    counter.bucket = { tokens: storeTokens / counter.instances - counter.unsynced, lastRefill: now };
  }

  /**
   * Counters that cooled down (the last full second here was under half the threshold): no longer hot. The
   * caller debits what they still hold unsynced. Also forgets rates of counters not checked for two windows.
   */
  cool(now: number): HotCounter[] {
    const cooled: HotCounter[] = [];
    for (const [key, counter] of this.hot) {
      if (counter.syncing) continue;
      const rate = this.rates.get(key);
      const lastFull =
        rate === undefined || now - rate.windowStart >= 2 * WINDOW_MS
          ? 0
          : now - rate.windowStart >= WINDOW_MS
            ? rate.count
            : rate.previous;
      if (lastFull < counter.rule.hotKey!.qpsThreshold / 2) {
        this.hot.delete(key);
        cooled.push(counter);
      }
    }
    // The rates map holds every busy-or-not counter of hot_key rules: walk it once a second, not every tick.
    if (now - this.lastSweep >= WINDOW_MS) {
      this.lastSweep = now;
      for (const [key, rate] of this.rates)
        if (now - rate.windowStart >= 2 * WINDOW_MS && !this.hot.has(key)) this.rates.delete(key);
    }
    return cooled;
  }

  /** Drop every hot counter whose rule changed or went away (the next check starts over with the new rule). */
  retain(current: (rule: Rule) => boolean): HotCounter[] {
    const dropped: HotCounter[] = [];
    for (const [key, counter] of this.hot) {
      if (!current(counter.rule)) {
        this.hot.delete(key);
        dropped.push(counter);
      }
    }
    return dropped;
  }

  get size(): number {
    return this.hot.size;
  }

  /** Whether there is anything for the tick to do: hot counters to sync or cool, or rates to forget. */
  get watching(): boolean {
    return this.hot.size > 0 || this.rates.size > 0;
  }
}
