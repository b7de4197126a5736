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
 *
 * Counters are held by key prefix, then by value: a rule's counter key is `{service_id}:{endpoint}:{dimension}:`
 * (none of which holds a ":") followed by the identifier's value (which may). A check instance with embedded
 * counters looks its counters up with the rule's prefix and the value as they came off the wire: building the
 * whole key for every lookup (a concatenation, then flattening and hashing the new string) was about a third of
 * such an instance's CPU. Whole keys (the store protocol, region syncs, debits) are split at their third ":".
 */
import { fullCounter, idleExpiryMs, refill, resetMs, type BucketLimits, type BucketCounter as Counter } from '@raftkit/http';
import type { SyncEntry, WireOp, WireResult } from './protocol.js';

export interface StoredCounter extends Counter {
  /** Its key's prefix (up to the third ":") and value: the key is prefix + value. */
  prefix: string;
  value: string;
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

/** One op of takeInto: the counter's key as prefix and value (see the module comment), then a WireOp's numbers. */
export type TakeOp = [prefix: string, value: string, capacity: number, refillRate: number, cost: number, budget: 0 | 1];

/** How many ":" a key's prefix holds, the last one ending it. */
const PREFIX_COLONS = 3;

/** A whole key as [prefix, value]: split after its third ":", or all value when it has fewer. */
export function splitKey(key: string): [string, string] {
  let at = -1;
  for (let i = 0; i < PREFIX_COLONS; i++) {
    at = key.indexOf(':', at + 1);
    if (at < 0) return ['', key];
  }
  return [key.slice(0, at + 1), key.slice(at + 1)];
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
  /** Counters by key prefix, then value. */
  private readonly groups = new Map<string, Map<string, StoredCounter>>();
  private count = 0;
  /** Counters changed by local takes/debits since the last snapshot (only tracked with more than one region). */
  private readonly changed = new Set<StoredCounter>();
  /** The sweep's place: the group it walks, and its walk of the groups. */
  private sweepGroups: Iterator<[string, Map<string, StoredCounter>]> | null = null;
  private sweepGroup: { prefix: string; group: Map<string, StoredCounter>; walk: Iterator<StoredCounter> } | null = null;
  /** takeInto's scratch: each op's counter, its limits and the tokens it must hold; take's ops as TakeOps. */
  private readonly counters_: (StoredCounter | undefined)[] = [];
  private readonly limits_: (BucketLimits | undefined)[] = [];
  private readonly takeOps: TakeOp[] = [];
  private needed = new Float64Array(8);
  private out = new Float64Array(8 * WIRE_RESULT_FIELDS);

  constructor(private readonly options: CounterTableOptions) {}

  get size(): number {
    return this.count;
  }

  /** Refill-check-decrement for one request's ops, all or nothing (see the module comment). */
  take(ops: readonly WireOp[], now: number): WireResult[] {
    const out = this.scratchOut(ops.length);
    const takeOps = this.takeOps;
    for (let i = 0; i < ops.length; i++) {
      const [key, capacity, refillRate, cost, budget] = ops[i]!;
      const [prefix, value] = splitKey(key);
      takeOps[i] = [prefix, value, capacity, refillRate, cost, budget];
    }
    this.takeInto(takeOps, ops.length, now, out);
    takeOps.length = 0;
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
  takeInto(ops: readonly TakeOp[], n: number, now: number, out: Float64Array): void {
    // Reused between calls (the step is synchronous); cleared after, so no counter is kept alive by them.
    const counters = this.counters_;
    const limits = this.limits_;
    const needed = this.needed.length >= n ? this.needed : (this.needed = new Float64Array(n * 2));
    let allTaken = true;
    for (let i = 0; i < n; i++) {
      const [prefix, value, capacity, refillRate, cost, budget] = ops[i]!;
      const counter = this.touch(prefix, value, capacity, refillRate, budget === 1, now);
      if (counter.budget) this.countDemand(counter, now);
      const l = this.effectiveLimits(counter, now);
      refill(counter, l, now);
      counters[i] = counter;
      limits[i] = l;
      // Duplicate keys in one request each take their cost, so shortfall is judged against what earlier ops took.
      // A scan of the earlier ops rather than a map: a request has a handful of ops (at most 256), and this runs
      // once per check at the store's full rate.
      let need = cost;
      for (let j = 0; j < i; j++) if (counters[j] === counter) need += ops[j]![4];
      if (counter.tokens < need) allTaken = false;
      needed[i] = need;
    }
    for (let i = 0; i < n; i++) {
      const counter = counters[i]!;
      const l = limits[i]!;
      const need = needed[i]!;
      const at = i * WIRE_RESULT_FIELDS;
      if (allTaken) {
        const cost = ops[i]![4];
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
      this.touched(counter, now);
    }
    counters.fill(undefined, 0, n);
    limits.fill(undefined, 0, n);
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
    const [prefix, value] = splitKey(key);
    const counter = this.touch(prefix, value, limits.capacity, limits.refillRate, false, now);
    refill(counter, limits, now);
    counter.tokens = Math.max(-limits.capacity, counter.tokens - count);
    counter.taken += count;
    this.touched(counter, now);
    return counter.tokens;
  }

  /**
   * The changes since the last snapshot, for the other regions, and starts a new delta. Budget counters report
   * their demand in the last complete sync window instead of tokens (their tokens stay regional).
   */
  snapshot(now: number): SyncEntry[] {
    const entries: SyncEntry[] = [];
    for (const c of this.changed) {
      if (c.budget) this.rollWindow(c, now);
      entries.push([c.prefix + c.value, c.tokens, c.lastRefill, c.capacity, c.refillRate, c.taken, c.budget ? c.demandPrev : 0, c.budget ? 1 : 0]);
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
      const [prefix, value] = splitKey(key);
      const counter = this.touch(prefix, value, capacity, refillRate, budget === 1, now);
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
      if (this.sweepGroup === null) {
        this.sweepGroups ??= this.groups.entries();
        const nextGroup = this.sweepGroups.next();
        if (nextGroup.done === true) {
          this.sweepGroups = null;
          break;
        }
        const [prefix, group] = nextGroup.value;
        // Values, not entries: a counter knows its own value, and walking values allocates nothing per counter
        // (an entries() walk made a [value, counter] pair for each one: 65 bytes, 50,000 times a second).
        this.sweepGroup = { prefix, group, walk: group.values() };
      }
      const { prefix, group, walk } = this.sweepGroup;
      const next = walk.next();
      if (next.done === true) {
        this.sweepGroup = null;
        if (group.size === 0) this.groups.delete(prefix);
        continue;
      }
      const counter = next.value;
      if (now >= counter.expiresAt) {
        group.delete(counter.value);
        this.changed.delete(counter);
        this.count--;
        expired++;
      }
    }
    return expired;
  }

  /** The counter's state (for tests and diagnostics), or undefined when it does not exist. */
  peek(key: string): Readonly<StoredCounter> | undefined {
    const [prefix, value] = splitKey(key);
    return this.groups.get(prefix)?.get(value);
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

  /** The live counter for prefix + value with the given limits, created full (or re-created full when it had expired). */
  private touch(prefix: string, value: string, capacity: number, refillRate: number, budget: boolean, now: number): StoredCounter {
    let group = this.groups.get(prefix);
    if (group === undefined) this.groups.set(prefix, (group = new Map()));
    let counter = group.get(value);
    if (counter === undefined || now >= counter.expiresAt) {
      const old = counter;
      const { tokens, lastRefill } = fullCounter({ capacity, refillRate }, now);
      counter = {
        prefix,
        value,
        tokens,
        lastRefill,
        capacity,
        refillRate,
        budget,
        expiresAt: now + idleExpiryMs({ capacity, refillRate }),
        taken: 0,
        window: this.windowOf(now),
        demandNow: 0,
        demandPrev: 0,
        remote: null,
      };
      if (budget) counter.tokens = this.effectiveLimits(counter, now).capacity;
      group.set(value, counter);
      if (old === undefined) this.count++;
      // The key stays marked changed for the next region sync, as the counter that now holds it.
      else if (this.changed.delete(old)) this.changed.add(counter);
    } else {
      counter.capacity = capacity;
      counter.refillRate = refillRate;
      counter.budget = budget;
    }
    return counter;
  }

  /** After a local change: refresh the idle expiry and remember the counter for the next region sync. */
  private touched(counter: StoredCounter, now: number): void {
    counter.expiresAt = now + idleExpiryMs(counter);
    if (this.options.regions > 1) this.changed.add(counter);
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
