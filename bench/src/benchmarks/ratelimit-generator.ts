/**
 * One generator thread of the ratelimit benchmark's open loop (load.ts runOpenLoopThreads): its own connection(s)
 * to the measured side, ours (RateLimitClient) or redis (the Lua bucket over ioredis), and its share of the rate.
 * The same thread code drives both sides, so both are measured by the same generator.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { RateLimitClient } from '@raftkit/ratelimit';
import { OpError, runOpenLoopShare, type OpenLoopShare } from '../load.js';
import { RedisBuckets } from '../peers/redis.js';

export type GeneratorData =
  | { side: 'ours'; address: string; token: string; keys: number; tenant: string; endpoint: string }
  | { side: 'redis'; port: number; connections: number; keys: number; keyPrefix: string; limits: { capacity: number; refillRate: number }; dimensions: readonly string[] };

/** A check's identifiers, as ratelimit.ts draws them: IP and user uniform over `keys` values each. */
export function identifiers(keys: number): { ip: string; user_id: string } {
  const ip = Math.floor(Math.random() * keys);
  return { ip: `10.${(ip >> 16) & 255}.${(ip >> 8) & 255}.${ip & 255}`, user_id: `u${Math.floor(Math.random() * keys)}` };
}

/** The answers this thread saw; fail-open and overloaded answers are failures, not checks (ratelimit.ts Answers). */
const counts = { answers_allowed: 0, answers_denied: 0, answers_fail_open: 0, answers_overloaded: 0 };
function count(r: { allowed: boolean; remaining: number; overloaded?: boolean }): void {
  if (r.overloaded === true) {
    counts.answers_overloaded++;
    throw new OpError('overloaded (decided from the local fallback bucket: the queue to the store was full)');
  }
  if (r.allowed && r.remaining < 0) {
    counts.answers_fail_open++;
    throw new OpError('fail-open (the store did not answer within the budget)');
  }
  if (r.allowed) counts.answers_allowed++;
  else counts.answers_denied++;
}

async function main(): Promise<void> {
  const port = parentPort;
  if (port === null) throw new Error('ratelimit-generator runs as a worker thread');
  const data = workerData as GeneratorData;
  let op: () => Promise<void>;
  let close: () => void;
  if (data.side === 'ours') {
    const client = new RateLimitClient({ addresses: [data.address], token: data.token });
    op = async () => count(await client.check({ serviceId: data.tenant, endpoint: data.endpoint, identifiers: identifiers(data.keys) }));
    close = () => client.close();
  } else {
    const pool = await RedisBuckets.open(data.port, data.connections);
    const limits = data.dimensions.map(() => data.limits);
    op = async () => {
      const ids: Record<string, string> = identifiers(data.keys);
      count(await pool.check(data.dimensions.map((d) => `${data.keyPrefix}${d}:${ids[d]}`), limits));
    };
    close = () => pool.close();
  }
  port.once('message', (m: { type: 'go'; share: OpenLoopShare }) => {
    void runOpenLoopShare(m.share, op, () => ({ ...counts })).then((result) => {
      close();
      port.postMessage({ type: 'done', result }, [result.latencies.buffer as ArrayBuffer, result.fromSchedule.buffer as ArrayBuffer]);
    });
  });
  port.postMessage({ type: 'ready' });
}

await main();
