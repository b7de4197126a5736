/**
 * How the app tier and the fan-out workers reach the store partitions: a user's partition is the FNV-1a hash of
 * its id modulo the number of store workers (the same function everywhere), and each partition has replicas on
 * several workers (store-placement.ts). A call goes to the partition's preferred replica, and to the next on a
 * connection failure, a 503 or a 421; each call is one POST over a keep-alive pool. A write's answer carries the log
 * offset it was applied at, and this client's later reads of that partition ask for it (`min_offset`), so a caller
 * reads its own writes whichever replica answers. Errors come back as ServiceError (503 `store_unavailable` when
 * no replica answers).
 */
import { Pool } from 'undici';
import { ServiceError, type PeerAddress } from '@raftkit/http';
import { partitionOf } from '@raftkit/log';
import { isWrite, type StoreAnswer, type StoreCall } from './store-protocol.js';
import { replicaWorkers } from './store-placement.js';
import { STORE_ROLE } from './workers/store/worker.js';

/** How long a store worker that did not answer is tried after the other replicas. */
const SUSPECT_MS = 5_000;

export class StoreClient {
  private readonly pools: Pool[];
  /** Per partition: the offset after this client's latest write (what its reads wait for). */
  private readonly written: number[];
  /** Per worker: until when it is tried after the other replicas (it did not answer). */
  private readonly suspectUntil: number[];
  /** Told of each write this client made once it is applied (the app tier drops the ranked feeds it changes). */
  onWrite: ((call: StoreCall) => void) | null = null;

  constructor(
    stores: readonly PeerAddress[] | readonly string[],
    private readonly token: string,
    private readonly timeoutMs = 5_000,
  ) {
    const addresses = stores.map((s) => (typeof s === 'string' ? s : s.httpAddress));
    if (addresses.length === 0) throw new Error('no store workers');
    this.pools = addresses.map((a) => new Pool(`http://${a}`, { connections: 8, keepAliveTimeout: 30_000 }));
    this.written = addresses.map(() => 0);
    this.suspectUntil = addresses.map(() => 0);
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

  /** One call on `partition`: its replicas in order until one answers. */
  async callPartition<C extends StoreCall>(partition: number, call: C): Promise<StoreAnswer<C>> {
    const write = isWrite(call);
    let last: ServiceError | null = null;
    const now = Date.now();
    // Replicas that failed lately go last: a paused process would cost every call its whole timeout.
    const order = replicaWorkers(partition, this.pools.length).sort(
      (a, b) => Number(this.suspectUntil[a]! > now) - Number(this.suspectUntil[b]! > now),
    );
    for (const worker of order) {
      try {
        const answer = await this.send<C>(worker, partition, call, write ? 0 : this.written[partition]!);
        if (write && typeof answer.offset === 'number')
          this.written[partition] = Math.max(this.written[partition]!, answer.offset + 1);
        if (write) this.onWrite?.(call);
        return answer;
      } catch (e) {
        if (!(e instanceof ServiceError) || (e.status < 500 && e.status !== 421)) throw e;
        // Not answering at all (refused, timed out) marks the process; a 503 of one replica (not ready, behind)
        // says nothing about its other partitions.
        if (e.code === 'store_unavailable') this.suspectUntil[worker] = Date.now() + SUSPECT_MS;
        last = e;
      }
    }
    throw new ServiceError(
      503,
      'store_unavailable',
      `no replica of store partition ${partition} answered: ${last?.message ?? 'none'}`,
      { partition },
    );
  }

  private async send<C extends StoreCall>(
    worker: number,
    partition: number,
    call: C,
    minOffset: number,
  ): Promise<StoreAnswer<C>> {
    let res;
    try {
      res = await this.pools[worker]!.request({
        method: 'POST',
        path: `/internal/store/call?partition=${partition}${minOffset > 0 ? `&min_offset=${minOffset}` : ''}`,
        headers: { authorization: `Bearer ${this.token}`, 'content-type': 'application/json' },
        body: JSON.stringify(call),
        headersTimeout: this.timeoutMs,
        bodyTimeout: this.timeoutMs,
      });
    } catch (e) {
      throw new ServiceError(
        503,
        'store_unavailable',
        `store worker ${worker + 1} did not answer for partition ${partition}: ${(e as Error).message}`,
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

  /**
   * Reads of `partition` from now on wait for a replica that has applied the log up to `offset` (a write this
   * process learnt of another way: the app tier's tail of the store log).
   */
  observe(partition: number, offset: number): void {
    if (partition >= 0 && partition < this.written.length)
      this.written[partition] = Math.max(this.written[partition]!, offset);
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
