/** fetchStats: an app server asks the analytics workers that count a link's partition for its aggregates. */
import { HttpError, unavailable, type PeerAddress } from '@raftkit/http';
import { request } from 'undici';
import { ownersOf } from './partition.js';
import type { LinkStats } from './record.js';

const TIMEOUT_MS = 2_000;

/**
 * Asks the workers counting the code's partition (partition.ts), first owner first, and answers the first copy
 * that answers: no other worker has its clicks. Throws a 503 HttpError (Retry-After 1) when none answers, and
 * passes on a 4xx other than 421 (a worker that does not count the partition, as a changed layout would make it).
 */
export async function fetchStats(
  options: { workers: PeerAddress[]; token: string; partitions: number; replicas: number },
  code: string,
): Promise<LinkStats> {
  const owners = ownersOf(code, options.workers, options.partitions, options.replicas);
  if (owners.length === 0) throw unavailable('click analytics unavailable (no analytics worker in this cluster)', 1);
  const failures: string[] = [];
  for (const worker of owners) {
    try {
      const res = await request(`http://${worker.httpAddress}/internal/stats/${encodeURIComponent(code)}`, {
        headers: { authorization: `Bearer ${options.token}` },
        headersTimeout: TIMEOUT_MS,
        bodyTimeout: TIMEOUT_MS,
      });
      const body = (await res.body.json()) as LinkStats | { error?: { code?: string; message?: string } };
      if (res.statusCode === 200) return body as LinkStats;
      const error = (body as { error?: { code?: string; message?: string } }).error;
      if (res.statusCode < 500 && res.statusCode !== 421)
        throw new HttpError(res.statusCode, error?.code ?? 'error', error?.message ?? 'analytics refused');
      failures.push(`${worker.id} answered ${res.statusCode}`);
    } catch (e) {
      if (e instanceof HttpError) throw e;
      failures.push(`${worker.id}: ${(e as Error).message}`);
    }
  }
  throw unavailable(`click analytics unavailable (${failures.join('; ')})`, 1);
}
