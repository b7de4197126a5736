/**
 * How check instances (and tests) reach the counter store: StoreClient over the wire protocol, and the topology
 * that says which store holds a tenant's counters in which region.
 */
import type { PeerAddress } from '@raftkit/http';
import { RpcClient, RpcError } from '@raftkit/rpc';
import type { WireOp, WireResult } from './protocol.js';
import { toResult, type CounterOp, type CounterResult } from './results.js';

export type { CounterOp, CounterResult } from './results.js';

/** The store did not answer in time, the connection failed, or the store refused the call (`code` says which). */
export class StoreUnavailableError extends Error {
  override name = 'StoreUnavailableError';
  constructor(
    message: string,
    readonly code = 'unavailable',
  ) {
    super(message);
  }
}

function rethrowUnavailable(error: unknown): never {
  throw unavailable(error);
}

function unavailable(error: unknown): StoreUnavailableError {
  if (error instanceof RpcError) return new StoreUnavailableError(error.message, error.code);
  return new StoreUnavailableError(String((error as Error)?.message ?? error));
}

/**
 * One store (shard). `take` sends all ops of one check in one frame, and the store applies them in one
 * synchronous step: all of them are taken, or (when any op is short of tokens) none is. Every call settles
 * within its timeout; failures reject with StoreUnavailableError.
 */
export class StoreClient {
  private readonly wire: RpcClient;

  constructor(options: { address: string; token: string; timeoutMs?: number }) {
    this.wire = new RpcClient({
      address: options.address,
      token: options.token,
      timeoutMs: options.timeoutMs ?? 50,
      reconnectDelayMs: 100,
    });
  }

  /** Plain promise chaining rather than an async function: this runs once per check at the instance's full rate. */
  take(ops: CounterOp[], timeoutMs?: number): Promise<CounterResult[]> {
    const wireOps: WireOp[] = new Array<WireOp>(ops.length);
    for (let i = 0; i < ops.length; i++) {
      const op = ops[i]!;
      wireOps[i] = [op.key, op.capacity, op.refillRate, op.cost ?? 1, op.mode === 'budget' ? 1 : 0];
    }
    return this.wire.call({ t: 'take', ops: wireOps }, { timeoutMs }).then((answer) => {
      if (!Array.isArray(answer) || answer.length !== ops.length)
        throw new StoreUnavailableError('store answered a take with the wrong shape', 'malformed');
      return (answer as WireResult[]).map(toResult);
    }, rethrowUnavailable);
  }

  async debit(
    key: string,
    limits: { capacity: number; refillRate: number },
    count: number,
    timeoutMs?: number,
  ): Promise<{ tokens: number }> {
    try {
      return (await this.wire.call(
        { t: 'debit', key, capacity: limits.capacity, refillRate: limits.refillRate, count },
        { timeoutMs },
      )) as { tokens: number };
    } catch (error) {
      throw unavailable(error);
    }
  }

  async ping(timeoutMs?: number): Promise<{ now: number }> {
    try {
      return (await this.wire.call({ t: 'ping' }, { timeoutMs })) as { now: number };
    } catch (error) {
      throw unavailable(error);
    }
  }

  close(): void {
    this.wire.close();
  }
}

interface StoreTopology {
  regions: number;
  /** The stores (shards) of a region (1-based), in shard order. */
  storesOf(region: number): PeerAddress[];
  /** The region (1-based) of check instance `index` (1-based): ((index - 1) % regions) + 1. */
  regionOfCheck(index: number): number;
  /** The stores strict-mode rules use from every region: region 1's. */
  globalStores: PeerAddress[];
}

/** Parses `settings.regions` (default 1). */
function regionCount(settings: Record<string, string>): number {
  const raw = settings.regions ?? '1';
  const regions = Number(raw);
  if (!/^\d+$/.test(raw) || !Number.isSafeInteger(regions) || regions < 1 || regions > 64)
    throw new TypeError(`regions must be an integer from 1 to 64, got ${JSON.stringify(raw)}`);
  return regions;
}

/**
 * Store worker number i (1-based, in start order among the "store" workers) belongs to region ((i - 1) % R) + 1,
 * as shard floor((i - 1) / R) of it; so `--workers store=S*R` gives every region S shards, and shard s of every
 * region holds the same tenants (shardFor hashes the same way everywhere).
 */
export function storeTopology(workers: PeerAddress[], settings: Record<string, string>): StoreTopology {
  const regions = regionCount(settings);
  const stores = workers.filter((w) => w.role === 'store');
  if (stores.length === 0 || stores.length % regions !== 0)
    throw new TypeError(
      `${stores.length} store workers cannot be split evenly into ${regions} regions (use --workers store=S*R)`,
    );
  const byRegion = Array.from({ length: regions }, (_, r) => stores.filter((_, i) => i % regions === r));
  const storesOf = (region: number): PeerAddress[] => {
    const group = byRegion[region - 1];
    if (group === undefined) throw new RangeError(`region ${region} does not exist (regions: ${regions})`);
    return group;
  };
  return {
    regions,
    storesOf,
    regionOfCheck: (index) => ((index - 1) % regions) + 1,
    globalStores: storesOf(1),
  };
}

/** FNV-1a: cheap, stable across processes, spreads short ids well enough for a handful of shards. */
function fnv1a(text: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return hash >>> 0;
}

/** The shard holding all of one tenant's counters, so one check is one round trip to one store. */
export function shardFor(stores: PeerAddress[], serviceId: string): PeerAddress {
  if (stores.length === 0) throw new RangeError('no stores to shard over');
  return stores[fnv1a(serviceId) % stores.length]!;
}
