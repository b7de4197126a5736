/**
 * A real rate-limiting cluster for integration tests, through @raftkit/testkit: 5 members, store and check
 * workers as separate processes, always torn down by the caller.
 */
import { call as callJson, startCluster, type Answer, type TestCluster, type TestWorker } from '@raftkit/testkit';

export { until, type Answer } from '@raftkit/testkit';

export interface Worker extends TestWorker {
  /** Its HTTP base URL (the same as `url`). */
  http: string;
}

export interface RateLimitCluster extends Omit<TestCluster, 'workers'> {
  workers: Worker[];
  checks: Worker[];
}

export async function startRateLimitCluster(
  options: { workers?: string; set?: string[]; nodes?: number } = {},
): Promise<RateLimitCluster> {
  const settings = Object.fromEntries(
    (options.set ?? []).map((pair) => [pair.slice(0, pair.indexOf('=')), pair.slice(pair.indexOf('=') + 1)]),
  );
  const cluster = await startCluster('ratelimit', {
    workers: options.workers ?? 'store=2,check=3',
    settings,
    ...(options.nodes !== undefined ? { nodes: options.nodes } : {}),
  });
  const workers = cluster.workers.map((w) => ({ ...w, http: w.url }));
  return { ...cluster, workers, checks: workers.filter((w) => w.role === 'check') };
}

/** One HTTP call with a bearer token (null: none); a string body is sent as is. */
export function call(
  base: string,
  method: string,
  path: string,
  token: string | null,
  body?: unknown,
): Promise<Answer> {
  return callJson(base, method, path, typeof body === 'string' ? { token, raw: body } : { token, body });
}
