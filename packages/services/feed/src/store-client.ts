/**
 * How the app tier and the fan-out workers reach the store partitions: a user's partition is the FNV-1a hash of
 * its id modulo the number of store workers (the same function everywhere), each call one POST over a keep-alive
 * pool. Errors come back as ServiceError (status 503 `unavailable` when the partition's process does not answer).
 */
import { Pool } from 'undici';
import { ServiceError, type PeerAddress } from '@raftkit/http';
import { partitionOf } from '@raftkit/log';
import type { StoreAnswer, StoreCall } from './store-protocol.js';
import { STORE_ROLE } from './workers/store/worker.js';

export class StoreClient {
  private readonly pools: Pool[];

  constructor(
    stores: readonly PeerAddress[] | readonly string[],
    private readonly token: string,
    private readonly timeoutMs = 5_000,
  ) {
    const addresses = stores.map((s) => (typeof s === 'string' ? s : s.httpAddress));
    if (addresses.length === 0) throw new Error('no store workers');
    this.pools = addresses.map((a) => new Pool(`http://${a}`, { connections: 8, keepAliveTimeout: 30_000 }));
  }

  static fromWorkers(workers: readonly PeerAddress[], token: string, timeoutMs?: number): StoreClient {
    return new StoreClient(
      workers.filter((w) => w.role === STORE_ROLE),
      token,
      timeoutMs,
    );
  }

  get partitions(): number {
    return this.pools.length;
  }

  partitionOf(user: string): number {
    return partitionOf(user, this.pools.length);
  }

  /** One call on the partition of `user`. */
  call<C extends StoreCall>(user: string, call: C): Promise<StoreAnswer<C>> {
    return this.callPartition(this.partitionOf(user), call);
  }

  async callPartition<C extends StoreCall>(partition: number, call: C): Promise<StoreAnswer<C>> {
    const pool = this.pools[partition]!;
    let res;
    try {
      res = await pool.request({
        method: 'POST',
        path: '/internal/store/call',
        headers: { authorization: `Bearer ${this.token}`, 'content-type': 'application/json' },
        body: JSON.stringify(call),
        headersTimeout: this.timeoutMs,
        bodyTimeout: this.timeoutMs,
      });
    } catch (e) {
      throw new ServiceError(
        503,
        'store_unavailable',
        `store partition ${partition} did not answer: ${(e as Error).message}`,
        { partition },
      );
    }
    const text = await res.body.text();
    let body: unknown = null;
    try {
      body = JSON.parse(text);
    } catch {
      /* not JSON: reported below */
    }
    if (res.statusCode >= 200 && res.statusCode < 300) return body as StoreAnswer<C>;
    const error = (body as { error?: { code?: string; message?: string } } | null)?.error;
    throw new ServiceError(res.statusCode, error?.code ?? 'store_error', error?.message ?? text.slice(0, 200), body);
  }

  /** Groups items by their user's partition. */
  byPartition<T>(items: readonly T[], userOf: (item: T) => string): Map<number, T[]> {
    const out = new Map<number, T[]>();
    for (const item of items) {
      const p = this.partitionOf(userOf(item));
      let list = out.get(p);
      if (list === undefined) out.set(p, (list = []));
      list.push(item);
    }
    return out;
  }

  async close(): Promise<void> {
    await Promise.all(this.pools.map((p) => p.close()));
  }
}
