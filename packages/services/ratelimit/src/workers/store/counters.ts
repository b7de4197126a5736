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
 *
 * A counter's numbers live in a slot of two Float64Arrays, not in an object: the maps hold slot numbers. An object
 * with double fields is an object plus a heap number per field, scattered across the old generation, so a lookup
 * among 200,000 counters missed the cache several times over; a slot's hot numbers are 64 consecutive bytes. Freed
 * slots are reused. The bucket arithmetic is bucket.ts's (refill, reset, idle expiry), on the slot's numbers.
 */
import { idleExpiryFor, type BucketCounter as Counter, type BucketLimits } from '@raftkit/http';
import type { SyncEntry, WireOp, WireResult } from './protocol.js';

/** A counter as `peek` shows it (a copy of its slot). */
interface StoredCounter extends Counter {
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

interface CounterTableOptions {
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

/** Numbers per slot in `hot`, and their places. */
const HOT = 8;
const TOKENS = 0;
const LAST_REFILL = 1;
const CAPACITY = 2;
const REFILL_RATE = 3;
const EXPIRES_AT = 4;
const TAKEN = 5;
const BUDGET = 6;
const WINDOW = 7;
/** Numbers per slot in `cold` (budget counters only): requests in this sync window and the one before. */
const COLD = 2;
const DEMAND_NOW = 0;
const DEMAND_PREV = 1;

export class CounterTable {
  /** Counters' slots by key prefix, then value. */
  private readonly groups = new Map<string, Map<string, number>>();
  private count = 0;
  private hot = new Float64Array(1024 * HOT);
  private cold = new Float64Array(1024 * COLD);
  /** Each slot's key prefix and value ('' and '' when free); slots below `used` have been handed out. */
  private prefixes: string[] = [];
  private values: string[] = [];
  private used = 0;
  private readonly free: number[] = [];
  /** Budget counters: other regions' demand per sync window, with the time it was reported, by slot. */
  private readonly remote = new Map<number, Map<number, { demand: number; at: number }>>();
  /** Slots changed by local takes/debits since the last snapshot (only tracked with more than one region). */
  private readonly changed = new Set<number>();
  /** The sweep's place: the group it walks, and its walk of the groups. */
  private sweepGroups: Iterator<[string, Map<string, number>]> | null = null;
  private sweepGroup: { prefix: string; group: Map<string, number>; walk: Iterator<number> } | null = null;
  /** takeInto's scratch: each op's slot, its effective limits and the tokens it must hold; take's ops as TakeOps. */
  private slots_ = new Int32Array(8);
  private caps_ = new Float64Array(8);
  private rates_ = new Float64Array(8);
  private readonly takeOps: TakeOp[] = [];
  private needed = new Float64Array(8);
  private out = new Float64Array(8 * WIRE_RESULT_FIELDS);
  /** fill's own scratch for a new budget counter's limits (takeInto's may hold earlier ops' limits). */
  private readonly fillCap = new Float64Array(1);
  private readonly fillRate = new Float64Array(1);

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
    if (this.slots_.length < n) {
      this.slots_ = new Int32Array(n * 2);
      this.caps_ = new Float64Array(n * 2);
      this.rates_ = new Float64Array(n * 2);
    }
    const slots = this.slots_;
    const caps = this.caps_;
    const rates = this.rates_;
    const needed = this.needed.length >= n ? this.needed : (this.needed = new Float64Array(n * 2));
    let allTaken = true;
    for (let i = 0; i < n; i++) {
      const op = ops[i]!;
      const slot = this.touch(op[0], op[1], op[2], op[3], op[5] === 1, now);
      const hot = this.hot;
      const at = slot * HOT;
      if (hot[at + BUDGET] === 1) this.countDemand(slot, now);
      this.effectiveLimits(slot, now, caps, rates, i);
      this.refill(slot, caps[i]!, rates[i]!, now);
      slots[i] = slot;
      // Duplicate keys in one request each take their cost, so shortfall is judged against what earlier ops took.
      // A scan of the earlier ops rather than a map: a request has a handful of ops (at most 256), and this runs
      // once per check at the store's full rate.
      let need = op[4];
      for (let j = 0; j < i; j++) if (slots[j] === slot) need += ops[j]![4];
      if (this.hot[at + TOKENS]! < need) allTaken = false;
      needed[i] = need;
    }
    const hot = this.hot;
    for (let i = 0; i < n; i++) {
      const at = slots[i]! * HOT;
      const need = needed[i]!;
      const o = i * WIRE_RESULT_FIELDS;
      if (allTaken) {
        const cost = ops[i]![4];
        hot[at + TOKENS] -= cost;
        hot[at + TAKEN] += cost;
        out[o] = 1;
        out[o + 2] = -1;
      } else if (hot[at + TOKENS]! >= need) {
        // This counter had the tokens, but another op of the request did not: nothing was taken from it.
        out[o] = 1;
        out[o + 2] = -1;
      } else {
        out[o] = 0;
        out[o + 2] = Math.ceil(((need - hot[at + TOKENS]!) / rates[i]!) * 1000);
      }
      out[o + 1] = hot[at + TOKENS]!;
      out[o + 3] = Math.ceil(((caps[i]! - hot[at + TOKENS]!) / rates[i]!) * 1000);
      this.touched(slots[i]!, now);
    }
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
    const slot = this.touch(prefix, value, limits.capacity, limits.refillRate, false, now);
    this.refill(slot, limits.capacity, limits.refillRate, now);
    const at = slot * HOT;
    this.hot[at + TOKENS] = Math.max(-limits.capacity, this.hot[at + TOKENS]! - count);
    this.hot[at + TAKEN] += count;
    this.touched(slot, now);
    return this.hot[at + TOKENS]!;
  }

  /**
   * The changes since the last snapshot, for the other regions, and starts a new delta. Budget counters report
   * their demand in the last complete sync window instead of tokens (their tokens stay regional).
   */
  snapshot(now: number): SyncEntry[] {
    const entries: SyncEntry[] = [];
    const hot = this.hot;
    for (const slot of this.changed) {
      const at = slot * HOT;
      const budget = hot[at + BUDGET] === 1;
      if (budget) this.rollWindow(slot, now);
      const key = this.prefixes[slot]! + this.values[slot]!;
      entries.push([
        key,
        hot[at + TOKENS]!,
        hot[at + LAST_REFILL]!,
        hot[at + CAPACITY]!,
        hot[at + REFILL_RATE]!,
        hot[at + TAKEN]!,
        budget ? this.cold[slot * COLD + DEMAND_PREV]! : 0,
        budget ? 1 : 0,
      ]);
      hot[at + TAKEN] = 0;
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
      const slot = this.touch(prefix, value, capacity, refillRate, budget === 1, now);
      const at = slot * HOT;
      if (budget === 1) {
        let remote = this.remote.get(slot);
        if (remote === undefined) this.remote.set(slot, (remote = new Map()));
        remote.set(fromRegion, { demand, at: now });
      } else {
        this.refill(slot, capacity, refillRate, now);
        // Theirs refilled to now the same way (bucket.ts refill).
        const theirs = Math.min(capacity, tokens + (Math.max(0, now - lastRefill) / 1000) * refillRate);
        this.hot[at + TOKENS] = Math.min(Math.max(-capacity, this.hot[at + TOKENS]! - taken), theirs);
        this.hot[at + LAST_REFILL] = Math.max(this.hot[at + LAST_REFILL]!, Math.max(lastRefill, now));
      }
      this.hot[at + EXPIRES_AT] = now + idleExpiryFor(this.hot[at + CAPACITY]!, this.hot[at + REFILL_RATE]!);
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
        // Values, not entries: a slot knows its own value, and walking values allocates nothing per counter
        // (an entries() walk made a [value, slot] pair for each one: 65 bytes, 50,000 times a second).
        this.sweepGroup = { prefix, group, walk: group.values() };
      }
      const { prefix, group, walk } = this.sweepGroup;
      const next = walk.next();
      if (next.done === true) {
        this.sweepGroup = null;
        if (group.size === 0) this.groups.delete(prefix);
        continue;
      }
      const slot = next.value;
      if (now >= this.hot[slot * HOT + EXPIRES_AT]!) {
        group.delete(this.values[slot]!);
        this.release(slot);
        expired++;
      }
    }
    return expired;
  }

  /** The counter's state (for tests and diagnostics), a copy, or undefined when it does not exist. */
  peek(key: string): Readonly<StoredCounter> | undefined {
    const [prefix, value] = splitKey(key);
    const slot = this.groups.get(prefix)?.get(value);
    if (slot === undefined) return undefined;
    const at = slot * HOT;
    const hot = this.hot;
    const remote = this.remote.get(slot);
    return {
      prefix,
      value,
      tokens: hot[at + TOKENS]!,
      lastRefill: hot[at + LAST_REFILL]!,
      capacity: hot[at + CAPACITY]!,
      refillRate: hot[at + REFILL_RATE]!,
      budget: hot[at + BUDGET] === 1,
      expiresAt: hot[at + EXPIRES_AT]!,
      taken: hot[at + TAKEN]!,
      window: hot[at + WINDOW]!,
      demandNow: this.cold[slot * COLD + DEMAND_NOW]!,
      demandPrev: this.cold[slot * COLD + DEMAND_PREV]!,
      remote: remote === undefined ? null : new Map(remote),
    };
  }

  /** The share of its rule's limits this region gets for the budget counter `key`, now (1 when it does not exist). */
  share(key: string, now: number): number {
    const [prefix, value] = splitKey(key);
    const slot = this.groups.get(prefix)?.get(value);
    return slot === undefined ? 1 : this.shareOf(slot, now);
  }

  /** The share of the rule's limits this region gets for a budget counter: equal until demand is known. */
  private shareOf(slot: number, now: number): number {
    const regions = this.options.regions;
    if (regions === 1) return 1;
    this.rollWindow(slot, now);
    let remote = 0;
    const reports = this.remote.get(slot);
    if (reports !== undefined) {
      const fresh = REMOTE_DEMAND_TTL_INTERVALS * this.options.syncMs;
      for (const r of reports.values()) if (now - r.at <= fresh) remote += r.demand;
    }
    const prev = this.cold[slot * COLD + DEMAND_PREV]!;
    // Add-one smoothing: equal shares with no data, proportional shares under real traffic, never zero.
    return (prev + 1) / (prev + remote + regions);
  }

  /** The slot's limits as this region applies them, written to caps[i] and rates[i]. */
  private effectiveLimits(slot: number, now: number, caps: Float64Array, rates: Float64Array, i: number): void {
    const at = slot * HOT;
    const capacity = this.hot[at + CAPACITY]!;
    const refillRate = this.hot[at + REFILL_RATE]!;
    if (this.hot[at + BUDGET] !== 1 || this.options.regions === 1) {
      caps[i] = capacity;
      rates[i] = refillRate;
      return;
    }
    const share = this.shareOf(slot, now);
    // A region's bucket never holds less than one token, or a small limit could never admit anything there.
    caps[i] = Math.max(1, capacity * share);
    rates[i] = refillRate * share;
  }

  /** Lazy refill (bucket.ts refill): tokens = min(capacity, tokens + elapsed_s * refill_rate); last_refill = max(it, now). */
  private refill(slot: number, capacity: number, refillRate: number, now: number): void {
    const at = slot * HOT;
    const hot = this.hot;
    const last = hot[at + LAST_REFILL]!;
    hot[at + TOKENS] = Math.min(capacity, hot[at + TOKENS]! + (Math.max(0, now - last) / 1000) * refillRate);
    hot[at + LAST_REFILL] = Math.max(last, now);
  }

  /** The live counter's slot for prefix + value with the given limits, created full (or re-created full when it had expired). */
  private touch(
    prefix: string,
    value: string,
    capacity: number,
    refillRate: number,
    budget: boolean,
    now: number,
  ): number {
    let group = this.groups.get(prefix);
    if (group === undefined) this.groups.set(prefix, (group = new Map()));
    let slot = group.get(value);
    if (slot === undefined) {
      slot = this.allocate(prefix, value);
      group.set(value, slot);
      this.count++;
      this.fill(slot, capacity, refillRate, budget, now);
    } else if (now >= this.hot[slot * HOT + EXPIRES_AT]!) {
      // Expired: starts again full. The key stays marked changed for the next region sync.
      this.remote.delete(slot);
      this.fill(slot, capacity, refillRate, budget, now);
    } else {
      const at = slot * HOT;
      this.hot[at + CAPACITY] = capacity;
      this.hot[at + REFILL_RATE] = refillRate;
      this.hot[at + BUDGET] = budget ? 1 : 0;
    }
    return slot;
  }

  /** A new counter in `slot`: full, as of now (a budget counter holds its region's share of the capacity). */
  private fill(slot: number, capacity: number, refillRate: number, budget: boolean, now: number): void {
    const at = slot * HOT;
    const hot = this.hot;
    hot[at + TOKENS] = capacity;
    hot[at + LAST_REFILL] = now;
    hot[at + CAPACITY] = capacity;
    hot[at + REFILL_RATE] = refillRate;
    hot[at + EXPIRES_AT] = now + idleExpiryFor(capacity, refillRate);
    hot[at + TAKEN] = 0;
    hot[at + BUDGET] = budget ? 1 : 0;
    hot[at + WINDOW] = this.windowOf(now);
    this.cold[slot * COLD + DEMAND_NOW] = 0;
    this.cold[slot * COLD + DEMAND_PREV] = 0;
    if (budget) {
      this.effectiveLimits(slot, now, this.fillCap, this.fillRate, 0);
      hot[at + TOKENS] = this.fillCap[0]!;
    }
  }

  /** A free slot (a released one, or a new one, growing the arrays by half). */
  private allocate(prefix: string, value: string): number {
    let slot = this.free.pop();
    if (slot === undefined) {
      slot = this.used++;
      if (slot * HOT >= this.hot.length) {
        const size = Math.ceil((this.hot.length / HOT) * 1.5);
        const hot = new Float64Array(size * HOT);
        hot.set(this.hot);
        this.hot = hot;
        const cold = new Float64Array(size * COLD);
        cold.set(this.cold);
        this.cold = cold;
      }
    }
    this.prefixes[slot] = prefix;
    this.values[slot] = value;
    return slot;
  }

  /** Frees a swept counter's slot (its map entry is already gone). */
  private release(slot: number): void {
    this.changed.delete(slot);
    this.remote.delete(slot);
    this.prefixes[slot] = '';
    this.values[slot] = '';
    this.free.push(slot);
    this.count--;
  }

  /** After a local change: refresh the idle expiry and remember the counter for the next region sync. */
  private touched(slot: number, now: number): void {
    const at = slot * HOT;
    this.hot[at + EXPIRES_AT] = now + idleExpiryFor(this.hot[at + CAPACITY]!, this.hot[at + REFILL_RATE]!);
    if (this.options.regions > 1) this.changed.add(slot);
  }

  private countDemand(slot: number, now: number): void {
    this.rollWindow(slot, now);
    this.cold[slot * COLD + DEMAND_NOW]++;
  }

  private windowOf(now: number): number {
    return Math.floor(now / this.options.syncMs);
  }

  private rollWindow(slot: number, now: number): void {
    const window = this.windowOf(now);
    const at = slot * HOT;
    const current = this.hot[at + WINDOW]!;
    if (window === current) return;
    const c = slot * COLD;
    this.cold[c + DEMAND_PREV] = window === current + 1 ? this.cold[c + DEMAND_NOW]! : 0;
    this.cold[c + DEMAND_NOW] = 0;
    this.hot[at + WINDOW] = window;
  }
}
