/**
 * The counter store's requests and answers on the wire (src/wire.ts carries them). Ops and results are tuples, not
 * objects: a check sends one op per matching rule at up to 100K checks/s, and tuples keep field names off the wire.
 */
import { RpcError } from '@raftkit/rpc';

/** [key, capacity, refillRate, cost, budget (1 when the rule's region mode is 'budget')] */
export type WireOp = [string, number, number, number, 0 | 1];
/** [allowed (1/0), tokens after the take, retryAfterMs (-1 when allowed), resetMs] */
export type WireResult = [0 | 1, number, number, number];
/**
 * One counter's change since the last sync to a region: [key, tokens, lastRefill, capacity, refillRate,
 * taken (tokens taken locally since the last sync), demand (requests seen locally since the last sync), budget].
 */
export type SyncEntry = [string, number, number, number, number, number, number, 0 | 1];

type StoreRequest =
  | { t: 'take'; ops: WireOp[] }
  | { t: 'debit'; key: string; capacity: number; refillRate: number; count: number }
  | { t: 'ping' }
  | { t: 'sync'; region: number; counters: SyncEntry[] };

export const MAX_KEY_LENGTH = 1024;
/** Ops in one take: one per matching rule; far above any real rule set for one request. */
export const MAX_OPS_PER_TAKE = 256;

function bad(message: string): RpcError {
  return new RpcError('bad_request', message);
}

function positive(value: unknown, what: string): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0)
    throw bad(`${what} must be a positive finite number`);
  return value;
}

function key(value: unknown): string {
  if (typeof value !== 'string' || value.length === 0 || value.length > MAX_KEY_LENGTH)
    throw bad(`key must be a string of 1 to ${MAX_KEY_LENGTH} characters`);
  return value;
}

function finite(value: unknown, what: string): number {
  if (typeof value !== 'number' || !Number.isFinite(value)) throw bad(`${what} must be a finite number`);
  return value;
}

/** Checks an untrusted request from the wire; throws a RpcError (bad_request) naming what is wrong. */
export function parseStoreRequest(request: unknown): StoreRequest {
  if (typeof request !== 'object' || request === null) throw bad('request must be an object');
  const r = request as Record<string, unknown>;
  switch (r.t) {
    case 'take': {
      if (!Array.isArray(r.ops) || r.ops.length === 0 || r.ops.length > MAX_OPS_PER_TAKE)
        throw bad(`ops must be an array of 1 to ${MAX_OPS_PER_TAKE} ops`);
      for (const op of r.ops as unknown[]) {
        if (!Array.isArray(op) || op.length !== 5)
          throw bad('each op must be [key, capacity, refillRate, cost, budget]');
        key(op[0]);
        positive(op[1], 'capacity');
        positive(op[2], 'refillRate');
        positive(op[3], 'cost');
        if (op[4] !== 0 && op[4] !== 1) throw bad('budget must be 0 or 1');
      }
      return { t: 'take', ops: r.ops as WireOp[] };
    }
    case 'debit':
      return {
        t: 'debit',
        key: key(r.key),
        capacity: positive(r.capacity, 'capacity'),
        refillRate: positive(r.refillRate, 'refillRate'),
        count: positive(r.count, 'count'),
      };
    case 'ping':
      return { t: 'ping' };
    case 'sync': {
      if (!Number.isSafeInteger(r.region) || (r.region as number) < 1) throw bad('region must be a positive integer');
      if (!Array.isArray(r.counters)) throw bad('counters must be an array');
      for (const e of r.counters as unknown[]) {
        if (!Array.isArray(e) || e.length !== 8) throw bad('each sync entry must have 8 fields');
        key(e[0]);
        finite(e[1], 'tokens');
        finite(e[2], 'lastRefill');
        positive(e[3], 'capacity');
        positive(e[4], 'refillRate');
        if (finite(e[5], 'taken') < 0 || finite(e[6], 'demand') < 0) throw bad('taken and demand must not be negative');
        if (e[7] !== 0 && e[7] !== 1) throw bad('budget must be 0 or 1');
      }
      return { t: 'sync', region: r.region as number, counters: r.counters as SyncEntry[] };
    }
    default:
      throw bad('t must be take, debit, ping or sync');
  }
}
