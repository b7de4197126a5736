/**
 * One generator thread of the ratelimit benchmark's open loop (load.ts runOpenLoopThreads): its own connection(s)
 * to the measured side, ours (RateLimitClient) or redis (the Lua bucket over ioredis), and its share of the rate.
 * The same thread code drives both sides, so both are measured by the same generator.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { RateLimitClient } from '@raftkit/ratelimit';
import { runOpenLoopShare, type OpenLoopShare } from '../load.js';
import { RedisBuckets } from '../peers/redis.js';
import { Answers, identifiers } from './ratelimit-checks.js';

export type GeneratorData =
  | { side: 'ours'; address: string; token: string; keys: number; tenant: string; endpoint: string }
  | {
      side: 'redis';
      port: number;
      connections: number;
      keys: number;
      keyPrefix: string;
      limits: { capacity: number; refillRate: number };
      dimensions: readonly string[];
    };

async function main(): Promise<void> {
  const port = parentPort;
  if (port === null) throw new Error('ratelimit-generator runs as a worker thread');
  const data = workerData as GeneratorData;
  // The answers this thread saw; fail-open and overloaded answers are failures, not checks.
  const answers = new Answers();
  // The op returns the side's own promise; its answer is counted when the loop takes it (runOpenLoopShare's
  // `answer`), not by a `.then` per check: one promise and reaction fewer per check, on both sides alike.
  const add = (r: { allowed: boolean; remaining: number; overloaded?: boolean }): void => answers.add(r);
  let op: () => Promise<{ allowed: boolean; remaining: number; overloaded?: boolean }>;
  let close: () => void;
  if (data.side === 'ours') {
    const client = new RateLimitClient({ addresses: [data.address], token: data.token });
    op = () => client.check({ serviceId: data.tenant, endpoint: data.endpoint, identifiers: identifiers(data.keys) });
    close = () => client.close();
  } else {
    const pool = await RedisBuckets.open(data.port, data.connections);
    const limits = data.dimensions.map(() => data.limits);
    op = () => {
      const ids: Record<string, string> = identifiers(data.keys);
      return pool.check(
        data.dimensions.map((d) => `${data.keyPrefix}${d}:${ids[d]}`),
        limits,
      );
    };
    close = () => pool.close();
  }
  port.once('message', (m: { type: 'go'; share: OpenLoopShare }) => {
    void runOpenLoopShare(m.share, op, () => answers.figures(), add).then((result) => {
      close();
      port.postMessage({ type: 'done', result }, [
        result.latencies.buffer as ArrayBuffer,
        result.fromSchedule.buffer as ArrayBuffer,
      ]);
    });
  });
  port.postMessage({ type: 'ready' });
}

await main();
