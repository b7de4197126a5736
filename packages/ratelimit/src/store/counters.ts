/**
 * The counter store's state: token-bucket counters by key, on the store's own clock (every method takes `now`).
 * Pure and synchronous: the worker feeds it requests and timer ticks; tests feed it an injected clock.
 *
 * Semantics (the spec's check rules 1 to 4, via bucket.ts):
 * - a counter that does not exist (or has expired) starts full: tokens = capacity, last_refill = now;
 * - refill is lazy, at each use: tokens = min(capacity, tokens + elapsed_s * refill_rate);
 * - one take request's ops are applied together in one synchronous step: when every op's counter holds its cost,
 *   all are taken; when any is short, none is (a request denied by its per-user rule does not spend its per-IP
 *   budget), and each short op reports retry_after_ms = ceil((cost - tokens) / refill_rate * 1000);
 * - a counter idle for capacity / refill_rate * 1000 + 1000 ms is forgotten (it would be full again anyway).
 */
import { fullCounter, idleExpiryMs, refill, resetMs, type BucketLimits, type BucketCounter as Counter } from '@raftkit/http';
import type { SyncEntry, WireOp, WireResult } from './protocol.js';

export interface StoredCounter extends Counter {
  /** The rule's limits as last given (budget counters scale them by the region's share at each take). */
  capacity: number;
  refillRate: number;
  budget: boolean;
  expiresAt: number;
  /** Tokens taken here (takes and debits) since the last sync snapshot: the delta other regions subtract. */
  taken: number;
  /** Budget counters: requests seen here in sync window `window` and in the window before it. */
  window: number;
  demandNow: number;
  demandPrev: number;
  /** Budget counters: other regions' demand per sync window, with the time it was reported. */
  remote: Map<number, { demand: number; at: number }> | null;
}

export interface CounterTableOptions {
  /** Regions of the deployment (1: no syncs, no change tracking). */
  regions: number;
  /** The region sync interval; budget demand is counted per interval of this length. */
  syncMs: number;
}

/** Numbers per op in takeInto's output: allowed (1/0), tokens, retry_after_ms (-1 when allowed), reset_ms. */
export const WIRE_RESULT_FIELDS = 4;

/** What a result tells its caller is left: the whole tokens when allowed, 0 when denied. */
export function remainingOf(allowed: boolean, tokens: number): number {
  return allowed ? Math.max(0, Math.floor(tokens)) : 0;
}

/** Remote demand older than this many sync intervals is treated as zero (the region went quiet). */
const REMOTE_DEMAND_TTL_INTERVALS = 3;

export class CounterTable {
  private readonly counters = new Map<string, StoredCounter>();
  /** Keys changed by local takes/debits since the last snapshot (only tracked with more than one region). */
  private readonly changed = new Set<string>();
  private sweepCursor: Iterator<[string, StoredCounter]> | null = null;
  /** takeInto's scratch: each op's counter and the tokens it must hold. */
  private readonly counters_: (StoredCounter | undefined)[] = [];
  private needed = new Float64Array(8);
  private out = new Float64Array(8 * WIRE_RESULT_FIELDS);

  constructor(private readonly options: CounterTableOptions) {}

  get size(): number {
    return this.counters.size;
  }

  /** Refill-check-decrement for one request's ops, all or nothing (see the module comment). */
  take(ops: readonly WireOp[], now: number): WireResult[] {
    const out = this.scratchOut(ops.length);
    this.takeInto(ops, ops.length, now, out);
    const results: WireResult[] = new Array(ops.length);
    for (let i = 0; i < ops.length; i++) {
      const at = i * WIRE_RESULT_FIELDS;
      results[i] = [out[at] === 1 ? 1 : 0, out[at + 1]!, out[at + 2]!, out[at + 3]!];
    }
    return results;
  }

  /**
   * `take` for the first `n` of `ops`, writing each op's result as four numbers (allowed 1/0, tokens,
   * retry_after_ms or -1, reset_ms) at `out[4 * i]`: the same step without a tuple, an array or a scratch list
   * allocated per request (a check instance with embedded counters runs this for every check).
   */
  takeInto(ops: readonly WireOp[], n: number, now: number, out: Float64Array): void {
    // Reused between calls (the step is synchronous); cleared after, so no counter is kept alive by them.
    const counters = this.counters_;
    const needed = this.needed.length >= n ? this.needed : (this.needed = new Float64Array(n * 2));
    let allTaken = true;
    for (let i = 0; i < n; i++) {
      const [key, capacity, refillRate, cost, budget] = ops[i]!;
      const counter = this.touch(key, capacity, refillRate, budget === 1, now);
      if (counter.budget) this.countDemand(counter, now);
      refill(counter, this.effectiveLimits(counter, now), now);
      counters[i] = counter;
      // Duplicate keys in one request each take their cost, so shortfall is judged against what earlier ops took.
      // A scan of the earlier ops rather than a map: a request has a handful of ops (at most 256), and this runs
      // once per check at the store's full rate.
      let need = cost;
      for (let j = 0; j < i; j++) if (counters[j] === counter) need += ops[j]![3];
      if (counter.tokens < need) allTaken = false;
      needed[i] = need;
    }
    for (let i = 0; i < n; i++) {
      const counter = counters[i]!;
      // Budget counters' limits depend on the time and the demand seen, both unchanged since the first loop.
      const l = this.effectiveLimits(counter, now);
      const need = needed[i]!;
      const at = i * WIRE_RESULT_FIELDS;
      if (allTaken) {
        const cost = ops[i]![3];
        counter.tokens -= cost;
        counter.taken += cost;
        out[at] = 1;
        out[at + 2] = -1;
      } else if (counter.tokens >= need) {
        // This counter had the tokens, but another op of the request did not: nothing was taken from it.
        out[at] = 1;
        out[at + 2] = -1;
      } else {
        out[at] = 0;
        out[at + 2] = Math.ceil(((need - counter.tokens) / l.refillRate) * 1000);
      }
      out[at + 1] = counter.tokens;
      out[at + 3] = resetMs(counter, l);
      this.touched(counter, ops[i]![0], now);
    }
    counters.fill(undefined, 0, n);
  }

  /** Room for `n` results of takeInto, reused between calls of `take`. */
  private scratchOut(n: number): Float64Array {
    if (this.out.length < n * WIRE_RESULT_FIELDS) this.out = new Float64Array(n * WIRE_RESULT_FIELDS * 2);
    return this.out;
  }

  /**
   * Subtracts `count` tokens already admitted elsewhere (a check instance's local hot-key bucket). Tokens may go
   * negative, down to -capacity: the debt stands for admissions that really happened, and paying it back keeps the
   * long-run rate at the limit; the floor bounds how long a key stays shut after a burst (2 * capacity / rate).
   */
  debit(key: string, limits: BucketLimits, count: number, now: number): number {
    const counter = this.touch(key, limits.capacity, limits.refillRate, false, now);
    refill(counter, limits, now);
    counter.tokens = Math.max(-limits.capacity, counter.tokens - count);
    counter.taken += count;
    this.touched(counter, key, now);
    return counter.tokens;
  }

  /**
   * The changes since the last snapshot, for the other regions, and starts a new delta. Budget counters report
   * their demand in the last complete sync window instead of tokens (their tokens stay regional).
   */
  snapshot(now: number): SyncEntry[] {
    const entries: SyncEntry[] = [];
    for (const key of this.changed) {
      const c = this.counters.get(key);
      if (c === undefined) continue;
      if (c.budget) this.rollWindow(c, now);
      entries.push([key, c.tokens, c.lastRefill, c.capacity, c.refillRate, c.taken, c.budget ? c.demandPrev : 0, c.budget ? 1 : 0]);
      c.taken = 0;
    }
    this.changed.clear();
    return entries;
  }

  /**
   * Merges another region's changes. For a synced counter both sides are first refilled to `now`; then this
   * region subtracts the tokens the other region took since its last sync (so a key saturated in every region is
   * not admitted at the full rate in each), and the spec's merge rule applies: min(tokens), max(last_refill).
   * A last_refill ahead of this clock (skew between regions' clocks) is kept as the rule says; refill then waits
   * until this clock reaches it, which errs towards admitting less.
   * For a budget counter only the other region's demand is recorded.
   */
  merge(fromRegion: number, entries: readonly SyncEntry[], now: number): void {
    for (const [key, tokens, lastRefill, capacity, refillRate, taken, demand, budget] of entries) {
      const counter = this.touch(key, capacity, refillRate, budget === 1, now);
      if (budget === 1) {
        counter.remote ??= new Map();
        counter.remote.set(fromRegion, { demand, at: now });
      } else {
        const limits = { capacity, refillRate };
        refill(counter, limits, now);
        const theirs = refill({ tokens, lastRefill }, limits, now);
        counter.tokens = Math.min(Math.max(-capacity, counter.tokens - taken), theirs.tokens);
        counter.lastRefill = Math.max(counter.lastRefill, theirs.lastRefill);
      }
      counter.expiresAt = now + idleExpiryMs(counter);
    }
  }

  /** Deletes expired counters among the next `budget` entries of a round-robin walk; returns how many. */
  sweep(now: number, budget = 10_000): number {
    let expired = 0;
    for (let seen = 0; seen < budget; seen++) {
      if (this.sweepCursor === null) this.sweepCursor = this.counters.entries();
      const next = this.sweepCursor.next();
      if (next.done === true) {
        this.sweepCursor = null;
        break;
      }
      const [key, counter] = next.value;
      if (now >= counter.expiresAt) {
        this.counters.delete(key);
        this.changed.delete(key);
        expired++;
      }
    }
    return expired;
  }

  /** The counter's state (for tests and diagnostics), or undefined when it does not exist. */
  peek(key: string): Readonly<StoredCounter> | undefined {
    return this.counters.get(key);
  }

  /** The share of the rule's limits this region gets for a budget counter: equal until demand is known. */
  share(counter: StoredCounter, now: number): number {
    const regions = this.options.regions;
    if (regions === 1) return 1;
    this.rollWindow(counter, now);
    let remote = 0;
    if (counter.remote !== null) {
      const fresh = REMOTE_DEMAND_TTL_INTERVALS * this.options.syncMs;
      for (const r of counter.remote.values()) if (now - r.at <= fresh) remote += r.demand;
    }
    // Add-one smoothing: equal shares with no data, proportional shares under real traffic, never zero.
    return (counter.demandPrev + 1) / (counter.demandPrev + remote + regions);
  }

  private effectiveLimits(counter: StoredCounter, now: number): BucketLimits {
    if (!counter.budget || this.options.regions === 1) return counter;
    const share = this.share(counter, now);
    // A region's bucket never holds less than one token, or a small limit could never admit anything there.
    return { capacity: Math.max(1, counter.capacity * share), refillRate: counter.refillRate * share };
  }

  /** The live counter for `key` with the given limits, created full (or re-created full when it had expired). */
  private touch(key: string, capacity: number, refillRate: number, budget: boolean, now: number): StoredCounter {
    let counter = this.counters.get(key);
    if (counter === undefined || now >= counter.expiresAt) {
      const { tokens, lastRefill } = fullCounter({ capacity, refillRate }, now);
      counter = { tokens, lastRefill, capacity, refillRate, budget, expiresAt: now + idleExpiryMs({ capacity, refillRate }), taken: 0, window: this.windowOf(now), demandNow: 0, demandPrev: 0, remote: null };
      if (budget) counter.tokens = this.effectiveLimits(counter, now).capacity;
      this.counters.set(key, counter);
    } else {
      counter.capacity = capacity;
      counter.refillRate = refillRate;
      counter.budget = budget;
    }
    return counter;
  }

  /** After a local change: refresh the idle expiry and remember the key for the next region sync. */
  private touched(counter: StoredCounter, key: string, now: number): void {
    counter.expiresAt = now + idleExpiryMs(counter);
    if (this.options.regions > 1) this.changed.add(key);
  }

  private countDemand(counter: StoredCounter, now: number): void {
    this.rollWindow(counter, now);
    counter.demandNow++;
  }

  private windowOf(now: number): number {
    return Math.floor(now / this.options.syncMs);
  }

  private rollWindow(counter: StoredCounter, now: number): void {
    const window = this.windowOf(now);
    if (window === counter.window) return;
    counter.demandPrev = window === counter.window + 1 ? counter.demandNow : 0;
    counter.demandNow = 0;
    counter.window = window;
  }
}
