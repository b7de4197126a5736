/**
 * Client traffic for failure tests: a few writers, each a KvClient (sessions, so a retried write applies once;
 * moves to another member on 503 or a dead connection) putting unique keys in sequence. Every acknowledged write
 * is recorded, so a test can check afterwards that none was lost.
 */
import { KvClient } from '@raftkit/kv';
import type { TestCluster } from './cluster.js';
import { sleep } from './cluster.js';

export interface Ack {
  key: string;
  value: string;
  revision: number;
  at: number;
}

export class Traffic {
  readonly acked: Ack[] = [];
  readonly errors: Array<{ key: string; error: string; at: number }> = [];
  private stopping = false;
  private readonly loops: Array<Promise<void>> = [];

  /**
   * `endpoints`: member base URLs; writer k starts at endpoint k (so writes enter through several members).
   * `pauseMs` between two writes of one writer keeps the volume (and the check afterwards) small.
   */
  constructor(
    endpoints: string[],
    token: string,
    readonly prefix: string,
    writers = 2,
    pauseMs = 20,
  ) {
    for (let w = 0; w < writers; w++) {
      const rotated = endpoints.map((_, i) => endpoints[(i + w) % endpoints.length]!);
      const client = new KvClient({ endpoints: rotated, token, timeoutMs: 20_000 });
      this.loops.push(this.run(client, `${prefix}-w${w}`, pauseMs));
    }
  }

  private async run(client: KvClient, keyPrefix: string, pauseMs: number): Promise<void> {
    for (let i = 0; !this.stopping; i++) {
      const key = `${keyPrefix}-${i}`;
      const value = `${i}:${Math.random().toString(36).slice(2)}`;
      try {
        const { revision } = await client.put(key, value);
        this.acked.push({ key, value, revision, at: Date.now() });
      } catch (e) {
        this.errors.push({ key, error: String((e as Error)?.message ?? e), at: Date.now() });
      }
      if (pauseMs > 0) await sleep(pauseMs);
    }
  }

  /** Acknowledged writes after `since` (ms since the epoch). */
  ackedSince(since: number): number {
    return this.acked.filter((a) => a.at >= since).length;
  }

  /** Wait until `n` more writes are acknowledged (bounded). */
  async progress(n: number, timeoutMs = 20_000): Promise<void> {
    const target = this.acked.length + n;
    const deadline = Date.now() + timeoutMs;
    while (this.acked.length < target) {
      if (Date.now() > deadline)
        throw new Error(
          `traffic stalled: ${this.acked.length - (target - n)} of ${n} writes in ${timeoutMs} ms (errors: ${JSON.stringify(this.errors.slice(-3))})`,
        );
      await sleep(20);
    }
  }

  async stop(): Promise<void> {
    this.stopping = true;
    await Promise.all(this.loops);
  }
}

/**
 * Every acknowledged write, read back from `id` (linearizable unless told otherwise): the keys whose value is
 * not the acknowledged one (missing or different).
 */
export async function missingWrites(
  cluster: TestCluster,
  id: string,
  acked: Ack[],
  consistency: 'linearizable' | 'serializable' = 'linearizable',
): Promise<string[]> {
  const wrong: string[] = [];
  const queue = [...acked];
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      for (let a = queue.shift(); a !== undefined; a = queue.shift()) {
        const r = await cluster.call(id, 'GET', `/v1/kv/${encodeURIComponent(a.key)}?consistency=${consistency}`);
        if (r.status !== 200 || r.json?.value !== a.value) wrong.push(`${a.key}: ${r.status} ${r.text.slice(0, 100)}`);
      }
    }),
  );
  return wrong;
}
