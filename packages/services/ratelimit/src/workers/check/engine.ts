/**
 * One check instance's decision loop: the rule cache gives the matching rules; each rule's counter is taken from
 * the tenant's store shard (all of one store's ops in one round trip), or from a local bucket when the counter is
 * hot or the store is degraded; a store that does not answer within the budget makes each rule fail open or
 * closed. Also runs the health checks that flip the store mode, and the hot-key syncs.
 */
import { StoreUnavailableError, type CounterOp, type CounterResult } from '../store/client.js';
import type { WireOp, WireResult } from '../store/protocol.js';
import type { TakeOp } from '../store/counters.js';
import { toResult } from '../store/results.js';
import type { Rule } from '../../rules.js';
import {
  combine,
  combineWire,
  counterKeyPrefix,
  dimensionValue,
  matchRules,
  nearLimit,
  unreachable,
  wireRemaining,
  type CheckAnswer,
  type CheckRequest,
  type Matched,
  type Outcome,
} from './decide.js';
import type { StoreHealth } from './health.js';
import { HotKeys, type HotCounter } from './hot-keys.js';
import { type LocalBuckets, share } from './local-buckets.js';
import type { CheckMetrics } from './metrics.js';
import type { RuleIndex } from './rule-index.js';

/** What the engine needs of a counter store (StoreClient, or LocalStore for a shard in this process). */
export interface CounterStore {
  take(ops: CounterOp[], timeoutMs?: number): Promise<CounterResult[]>;
  /**
   * A store in this process answers at once (LocalStore): the engine then decides with no promise at all, and
   * hands it wire tuples (no op objects to build and convert per check).
   */
  takeNow?(ops: WireOp[]): WireResult[];
  /** takeNow for the first `n` of `ops`, results written as numbers into `out` (CounterTable.takeInto). */
  takeInto?(ops: readonly TakeOp[], n: number, out: Float64Array): void;
  debit(
    key: string,
    limits: { capacity: number; refillRate: number },
    count: number,
    timeoutMs?: number,
  ): Promise<{ tokens: number }>;
  ping(timeoutMs?: number): Promise<{ now: number }>;
}

/** A store as this instance sees it: how to reach it and its mode. */
export interface StoreLink {
  id: string;
  store: CounterStore;
  health: StoreHealth;
  /** Local fallback buckets, used while the store is degraded or this instance's queue to it is full. */
  fallback: LocalBuckets;
  /** Store calls of this instance waiting for their answer (the bounded queue, EngineOptions.maxQueue). */
  inFlight: number;
}

interface EngineOptions {
  rules(): RuleIndex;
  /** The store holding the counters of `rule` (its tenant's shard, in this region or the global one). */
  storeFor(rule: Rule): StoreLink;
  stores: StoreLink[];
  /** Check instances sharing the counters of `rule`, when the rule does not say (expected_instances). */
  instances(rule: Rule): number;
  storeTimeoutMs: number;
  /**
   * At most this many store calls wait on one store at a time; a check that would be one more is decided from the
   * local fallback buckets at once (an overload answer, counted), instead of queueing behind a store that is
   * already behind (and then failing open on the budget, uncounted against any bucket).
   */
  maxQueue: number;
  metrics: CheckMetrics;
  onModeChange?(link: StoreLink): void;
  /** A check of a hot_key rule was counted: the hot-key tick (hotTick) has something to watch from now on. */
  onHotKeys?(): void;
}

export class UnknownServiceError extends Error {
  override name = 'UnknownServiceError';
}

interface Pending {
  link: StoreLink;
  matched: Matched[];
  /** Index in `outcomes` of each matched rule. */
  slots: number[];
  /** Whether each op crossed its hot threshold with this check. */
  promote: boolean[];
}

/** The store ops of a check's matched rules on one store. */
function toOps(matched: Matched[]): CounterOp[] {
  const ops: CounterOp[] = new Array<CounterOp>(matched.length);
  for (let j = 0; j < matched.length; j++) {
    const { rule, key } = matched[j]!;
    ops[j] =
      rule.regionMode === 'budget'
        ? { key, capacity: rule.capacity, refillRate: rule.refillRate, mode: 'budget' }
        : { key, capacity: rule.capacity, refillRate: rule.refillRate };
  }
  return ops;
}

function toWireOps(matched: Matched[]): WireOp[] {
  const ops: WireOp[] = new Array<WireOp>(matched.length);
  for (let j = 0; j < matched.length; j++) {
    const { rule, key } = matched[j]!;
    ops[j] = [key, rule.capacity, rule.refillRate, 1, rule.regionMode === 'budget' ? 1 : 0];
  }
  return ops;
}

export class CheckEngine {
  readonly hot = new HotKeys();
  /**
   * checkLocal's scratch, reused by every check (the step is synchronous): the ops handed to the store, each op's
   * rule, and the store's results. A check with embedded counters then allocates little more than its answer.
   */
  private readonly localOps: TakeOp[] = [];
  private readonly localRules: Rule[] = [];
  private localResults = new Float64Array(32);
  /** Checks this engine was asked to decide, since it started (tells an idle instance from a busy one). */
  decided = 0;

  constructor(private readonly options: EngineOptions) {}

  private instancesFor(rule: Rule): number {
    return rule.expectedInstances ?? this.options.instances(rule);
  }

  /**
   * Decides one check. Synchronous (a plain answer) when every counter is local, hot, or in this process's own
   * store shard; a promise only when a store must be asked over the wire. An unknown tenant throws.
   */
  check(request: CheckRequest): CheckAnswer | Promise<CheckAnswer> {
    const started = performance.now();
    this.decided++;
    const index = this.options.rules();
    if (!index.hasTenant(request.serviceId))
      throw new UnknownServiceError(`service_id ${request.serviceId} is not registered`);
    const rules = index.rulesFor(request.serviceId, request.endpoint);
    const local = this.localOnly(rules);
    if (local !== null) return this.checkLocal(local, rules, request, started);
    const matched = matchRules(rules, request);
    const now = Date.now();
    const outcomes: Outcome[] = new Array<Outcome>(matched.length);
    let pending: Pending[] | null = null;
    for (let i = 0; i < matched.length; i++) {
      const m = matched[i]!;
      const link = this.options.storeFor(m.rule);
      if (link.health.degraded) {
        outcomes[i] = this.fallbackTake(link, m, now);
        continue;
      }
      let promote = false;
      if (m.rule.hotKey !== null) {
        const hot = this.hot.observe(m.key, m.rule, now);
        this.options.onHotKeys?.();
        if (hot === 'promote') promote = true;
        else if (hot !== null) {
          outcomes[i] = this.hot.take(hot, now);
          if (this.hot.syncDue(hot, now)) void this.sync(hot);
          continue;
        }
      }
      pending ??= [];
      let group: Pending | undefined;
      for (const p of pending) if (p.link === link) group = p;
      if (group === undefined) pending.push((group = { link, matched: [], slots: [], promote: [] }));
      group.matched.push(m);
      group.slots.push(i);
      group.promote.push(promote);
    }
    let overloaded = false;
    let waits: Promise<void>[] | null = null;
    if (pending !== null) {
      for (const group of pending) {
        const store = group.link.store;
        if (store.takeNow !== undefined) {
          const wire = store.takeNow(toWireOps(group.matched));
          const results: CounterResult[] = new Array<CounterResult>(wire.length);
          for (let j = 0; j < wire.length; j++) results[j] = toResult(wire[j]!);
          this.settle(group, results, outcomes);
        } else if (group.link.inFlight >= this.options.maxQueue) {
          // The queue to this store is full: a clear local decision now, counted, rather than one more wait.
          overloaded = true;
          for (let j = 0; j < group.matched.length; j++)
            outcomes[group.slots[j]!] = this.fallbackTake(group.link, group.matched[j]!, now);
        } else {
          (waits ??= []).push(this.ask(group, outcomes));
        }
      }
    }
    if (overloaded) this.options.metrics.overloaded.inc();
    if (waits === null) return this.finish(matched, outcomes, started, overloaded);
    // One store is the common case (a tenant's counters live on one shard): no Promise.all for it.
    const wait = waits.length === 1 ? waits[0]! : Promise.all(waits);
    return wait.then(() => this.finish(matched, outcomes, started, overloaded));
  }

  /**
   * The store of every rule when it is one store in this process, in normal mode, and no rule has hot keys
   * (nothing to observe or promote): that store, which answers at once. Otherwise null (the general path).
   */
  private localOnly(rules: readonly Rule[]): CounterStore | null {
    if (rules.length === 0) return null;
    const link = this.options.storeFor(rules[0]!);
    const store = link.store;
    if (store.takeInto === undefined || link.health.degraded) return null;
    for (let i = 0; i < rules.length; i++) {
      const rule = rules[i]!;
      if (rule.hotKey !== null || (i > 0 && this.options.storeFor(rule) !== link)) return null;
    }
    return store;
  }

  /**
   * The usual check with embedded counters: the outcome the general path reaches (the same counter ops, all or
   * nothing, combined by the same rule), without its per-rule objects and per-store groups. A check allocates
   * a few KB; every KB less is fewer scavenges that checks wait behind.
   */
  private checkLocal(store: CounterStore, rules: readonly Rule[], request: CheckRequest, started: number): CheckAnswer {
    const ops = this.localOps;
    let n = 0;
    for (const rule of rules) {
      const value = dimensionValue(rule, request);
      if (value === null) continue;
      // The key as prefix and value, never concatenated: the store looks counters up that way (counters.ts).
      const op = ops[n] ?? (ops[n] = ['', '', 0, 0, 1, 0]);
      op[0] = counterKeyPrefix(rule);
      op[1] = value;
      op[2] = rule.capacity;
      op[3] = rule.refillRate;
      op[5] = rule.regionMode === 'budget' ? 1 : 0;
      this.localRules[n++] = rule;
    }
    if (this.localResults.length < n * 4) this.localResults = new Float64Array(n * 8);
    const results = this.localResults;
    if (n > 0) store.takeInto!(ops, n, results);
    const answer = combineWire(results, n);
    const metrics = this.options.metrics;
    (answer.allowed ? metrics.allowed : metrics.denied).inc();
    for (let i = 0; i < n; i++) {
      const rule = this.localRules[i]!;
      if (nearLimit(rule, wireRemaining(results, i))) metrics.nearLimit.inc(1, { rule_id: rule.ruleId });
    }
    metrics.latency.observe((performance.now() - started) / 1000);
    return answer;
  }

  /** The rule's share of its limit in this instance's fallback bucket (degraded mode, or a full queue). */
  private fallbackTake(link: StoreLink, m: Matched, now: number): Outcome {
    const limits = share(m.rule, this.instancesFor(m.rule));
    return link.fallback.take(m.key, { capacity: Math.max(1, limits.capacity), refillRate: limits.refillRate }, now);
  }

  private finish(matched: Matched[], outcomes: Outcome[], started: number, overloaded: boolean): CheckAnswer {
    const answer = combine(outcomes);
    if (overloaded) answer.overloaded = true;
    this.record(matched, outcomes, answer, started);
    return answer;
  }

  /** A store's answer for one group: outcomes, and hot counters that crossed their threshold promoted. */
  private settle(group: Pending, results: CounterResult[], outcomes: Outcome[]): void {
    const { matched, slots, promote } = group;
    // A CounterResult has the fields of an Outcome (retryAfterMs present exactly when denied): used as it is.
    for (let j = 0; j < matched.length; j++) outcomes[slots[j]!] = results[j]!;
    if (!promote.includes(true)) return;
    const now = Date.now();
    for (let j = 0; j < matched.length; j++) {
      if (!promote[j]) continue;
      const m = matched[j]!;
      this.hot.promote(m.key, m.rule, this.instancesFor(m.rule), results[j]!.tokens, now);
      this.options.metrics.hotPromotions.inc();
    }
  }

  /** One round trip to one store for all of this check's ops on it. */
  private async ask(group: Pending, outcomes: Outcome[]): Promise<void> {
    const { matched, slots } = group;
    const link = group.link;
    let results: CounterResult[];
    link.inFlight++;
    try {
      results = await link.store.take(toOps(matched), this.options.storeTimeoutMs);
    } catch (error) {
      if (!(error instanceof StoreUnavailableError)) throw error;
      this.options.metrics.storeErrors.inc(1, { store: link.id });
      for (let j = 0; j < matched.length; j++) {
        const rule = matched[j]!.rule;
        (rule.failClosed ? this.options.metrics.failClosed : this.options.metrics.failOpen).inc();
        outcomes[slots[j]!] = unreachable(rule);
      }
      return;
    } finally {
      link.inFlight--;
    }
    this.settle(group, results, outcomes);
  }

  private record(matched: Matched[], outcomes: Outcome[], answer: CheckAnswer, started: number): void {
    const metrics = this.options.metrics;
    (answer.allowed ? metrics.allowed : metrics.denied).inc();
    for (let i = 0; i < matched.length; i++) {
      if (nearLimit(matched[i]!.rule, outcomes[i]!.remaining))
        metrics.nearLimit.inc(1, { rule_id: matched[i]!.rule.ruleId });
    }
    metrics.latency.observe((performance.now() - started) / 1000);
  }

  /** Debit a hot counter's local admissions from its store and reset its local bucket from the answer. */
  private async sync(counter: HotCounter): Promise<void> {
    const link = this.options.storeFor(counter.rule);
    const count = this.hot.beginSync(counter);
    let tokens: number | null = null;
    try {
      tokens = (await link.store.debit(counter.key, counter.rule, count, this.options.storeTimeoutMs)).tokens;
      this.options.metrics.hotSyncs.inc();
    } catch (error) {
      if (!(error instanceof StoreUnavailableError)) throw error;
      this.options.metrics.storeErrors.inc(1, { store: link.id });
    }
    this.hot.endSync(counter, count, tokens, Date.now());
  }

  /** Debit what a counter that stops being hot still holds; on failure it is lost (bounded by one interval). */
  private flush(counter: HotCounter): void {
    if (counter.unsynced === 0) return;
    const link = this.options.storeFor(counter.rule);
    void link.store
      .debit(counter.key, counter.rule, counter.unsynced, this.options.storeTimeoutMs)
      .catch(() => undefined);
    counter.unsynced = 0;
  }

  /** Every few tens of ms: time-due hot syncs, and hot counters that cooled down. */
  hotTick(now = Date.now()): void {
    for (const counter of this.hot.due(now)) void this.sync(counter);
    for (const counter of this.hot.cool(now)) this.flush(counter);
  }

  /** The rule set changed: counters of changed or deleted rules stop being hot. */
  rulesChanged(index: RuleIndex): void {
    const live = new Map(index.rules.map((r) => [r.ruleId, JSON.stringify(r)]));
    for (const counter of this.hot.retain((rule) => live.get(rule.ruleId) === JSON.stringify(rule)))
      this.flush(counter);
  }

  /** One round of health checks (every second): ping each store within the budget; three in a row flip the mode. */
  async healthRound(): Promise<void> {
    await Promise.all(
      this.options.stores.map(async (link) => {
        const ok = await link.store.ping(Math.max(this.options.storeTimeoutMs, 250)).then(
          () => true,
          () => false,
        );
        if (!link.health.record(ok)) return;
        // Back to normal: counters resume as the store holds them; the fallback buckets are dropped.
        if (!link.health.degraded) link.fallback.clear();
        this.options.onModeChange?.(link);
      }),
    );
    const now = Date.now();
    for (const link of this.options.stores) link.fallback.sweep(now);
  }
}
