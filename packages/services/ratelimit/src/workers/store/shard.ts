/**
 * One counter shard as a process serves it: the CounterTable, its metrics, the idle sweep, and the store protocol's
 * handler. A `store` worker serves it on its own listener; with embedded stores (no store workers, see
 * STORE.md "Embedded stores") a check instance holds one in its own process and serves the same protocol to the
 * other check instances, while its own checks call `takeNow` directly: no socket, no encoding, no promise.
 */
import type { MetricsRegistry, Principal } from '@raftkit/http';
import { RpcError } from '@raftkit/rpc';
import { CounterTable, WIRE_RESULT_FIELDS, type TakeOp } from './counters.js';
import { toResult, type CounterOp, type CounterResult } from './results.js';
import { parseStoreRequest, type WireOp, type WireResult } from './protocol.js';

/**
 * Counters examined per sweep tick: 50,000 a second, in small slices. A slice stalls every request queued behind
 * it, and a check's budget is one millisecond: larger slices showed as p99 spikes, so 1,000 every 20 ms keeps the
 * pace with the shortest stall (bench/RESULTS.md, ratelimit, findings). A pass over 200,000 counters takes 4 s,
 * against expiries of a minute for a 100-per-minute rule; a counter past expiry behaves as new whether swept or
 * not. With no counters the sweep looks once a second instead, so an idle process is not woken 50 times a second.
 */
const SWEEP_SLICE = 1_000;
const SWEEP_EVERY_MS = 20;
const SWEEP_IDLE_MS = 1_000;

interface ShardOptions {
  regions: number;
  syncMs: number;
  /** This shard's region: a sync from it is refused. */
  region: number;
  metrics: MetricsRegistry;
}

export class StoreShard {
  readonly table: CounterTable;
  private readonly region: number;
  private readonly takeOps;
  private readonly takesDenied;
  private readonly debits;
  private readonly pings;
  private readonly expired;
  private readonly syncsReceived;
  readonly syncEntries;
  private sweeper: NodeJS.Timeout | null = null;
  private sweeping = false;

  constructor(options: ShardOptions) {
    this.table = new CounterTable({ regions: options.regions, syncMs: options.syncMs });
    this.region = options.region;
    const m = options.metrics;
    // Unlabelled counters on the hot path: a labelled inc formats its label set on every call.
    this.takeOps = m.counter('ratelimit_store_take_ops_total', 'Counter ops in take requests');
    this.takesDenied = m.counter('ratelimit_store_takes_denied_total', 'Take requests denied (nothing taken)');
    this.debits = m.counter('ratelimit_store_debits_total', 'Debit requests');
    this.pings = m.counter('ratelimit_store_pings_total', 'Ping requests');
    this.expired = m.counter('ratelimit_store_expired_total', 'Idle counters removed');
    this.syncsReceived = m.counter(
      'ratelimit_store_region_syncs_received_total',
      'Region sync frames received, by source region',
    );
    this.syncEntries = m.counter(
      'ratelimit_store_region_sync_entries_total',
      'Counters carried by region syncs, by direction',
    );
    m.gauge('ratelimit_store_counters', 'Live counters').set(() => this.table.size);
    m.gauge('ratelimit_store_region', 'The region this store belongs to').set(options.region);
  }

  start(): void {
    if (this.sweeping) return;
    this.sweeping = true;
    this.sweepLater();
  }

  stop(): void {
    this.sweeping = false;
    if (this.sweeper !== null) clearTimeout(this.sweeper);
    this.sweeper = null;
  }

  private sweepLater(): void {
    this.sweeper = setTimeout(this.sweepTick, this.table.size === 0 ? SWEEP_IDLE_MS : SWEEP_EVERY_MS);
  }

  private readonly sweepTick = (): void => {
    this.sweeper = null;
    if (!this.sweeping) return;
    if (this.table.size > 0) this.expired.inc(this.table.sweep(Date.now(), SWEEP_SLICE));
    this.sweepLater();
  };

  /** takeWire's step for the first `n` of `ops`, results as numbers in `out` (CounterTable.takeInto). */
  takeInto(ops: readonly TakeOp[], n: number, out: Float64Array): void {
    this.takeOps.inc(n);
    this.table.takeInto(ops, n, Date.now(), out);
    for (let i = 0; i < n; i++) {
      if (out[i * WIRE_RESULT_FIELDS] === 0) {
        this.takesDenied.inc();
        break;
      }
    }
  }

  takeWire(ops: readonly WireOp[], now: number): WireResult[] {
    this.takeOps.inc(ops.length);
    const results = this.table.take(ops, now);
    for (const r of results) {
      if (r[0] === 0) {
        this.takesDenied.inc();
        break;
      }
    }
    return results;
  }

  /** The store protocol from a peer (untrusted: validated here). */
  handle(raw: unknown, principal: Principal): unknown {
    // Tenants hold client tokens; letting them reach counters directly would bypass their rules.
    if (principal.kind !== 'cluster') throw new RpcError('forbidden', 'the counter store takes the cluster token only');
    const request = parseStoreRequest(raw);
    const now = Date.now();
    switch (request.t) {
      case 'take':
        return this.takeWire(request.ops, now);
      case 'debit':
        this.debits.inc();
        return { tokens: this.table.debit(request.key, request, request.count, now) };
      case 'ping':
        this.pings.inc();
        return { now };
      case 'sync':
        if (request.region === this.region)
          throw new RpcError('bad_request', `sync from this store's own region ${this.region}`);
        this.syncsReceived.inc(1, { region: String(request.region) });
        this.syncEntries.inc(request.counters.length, { direction: 'received' });
        this.table.merge(request.region, request.counters, now);
        return {};
    }
  }

  /** A take from this process (trusted: the check engine built the ops), answered at once. */
  takeNow(ops: readonly CounterOp[]): CounterResult[] {
    const wire: WireOp[] = new Array<WireOp>(ops.length);
    for (let i = 0; i < ops.length; i++) {
      const op = ops[i]!;
      wire[i] = [op.key, op.capacity, op.refillRate, op.cost ?? 1, op.mode === 'budget' ? 1 : 0];
    }
    const results = this.takeWire(wire, Date.now());
    const out: CounterResult[] = new Array<CounterResult>(results.length);
    for (let i = 0; i < results.length; i++) out[i] = toResult(results[i]!);
    return out;
  }

  debitNow(key: string, limits: { capacity: number; refillRate: number }, count: number): { tokens: number } {
    this.debits.inc();
    return { tokens: this.table.debit(key, limits, count, Date.now()) };
  }
}

/**
 * The engine's view of a shard in its own process: the CounterStore interface, plus `takeNow` for the engine's
 * synchronous path. Never times out and never fails: it is this process.
 */
export class LocalStore {
  constructor(readonly shard: StoreShard) {}

  takeNow(ops: WireOp[]): WireResult[] {
    return this.shard.takeWire(ops, Date.now());
  }

  takeInto(ops: readonly TakeOp[], n: number, out: Float64Array): void {
    this.shard.takeInto(ops, n, out);
  }

  take(ops: CounterOp[]): Promise<CounterResult[]> {
    return Promise.resolve(this.shard.takeNow(ops));
  }

  debit(key: string, limits: { capacity: number; refillRate: number }, count: number): Promise<{ tokens: number }> {
    return Promise.resolve(this.shard.debitNow(key, limits, count));
  }

  ping(): Promise<{ now: number }> {
    return Promise.resolve({ now: Date.now() });
  }

  close(): void {}
}
