/** fetchStats: an app server asks the analytics worker that owns a link's partition for its aggregates. */
import { HttpError, unavailable, type PeerAddress } from '@raftkit/http';
import { request } from 'undici';
import { ownerOf } from './partition.js';
import type { LinkStats } from './record.js';

const TIMEOUT_MS = 2_000;

/**
 * Asks the owner of the code's partition (partition.ts): no other worker has its clicks. Throws a 503 HttpError
 * (Retry-After 1) when it does not answer, and passes on its own 4xx errors.
 */
export async function fetchStats(
  options: { workers: PeerAddress[]; token: string; partitions: number },
  code: string,
): Promise<LinkStats> {
  const worker = ownerOf(code, options.workers, options.partitions);
  if (worker === undefined) throw unavailable('click analytics unavailable (no analytics worker in this cluster)', 1);
  let lastError: string;
  try {
    const res = await request(`http://${worker.httpAddress}/internal/stats/${encodeURIComponent(code)}`, {
      headers: { authorization: `Bearer ${options.token}` },
      headersTimeout: TIMEOUT_MS,
      bodyTimeout: TIMEOUT_MS,
    });
    const body = (await res.body.json()) as LinkStats | { error?: { code?: string; message?: string } };
    if (res.statusCode === 200) return body as LinkStats;
    const error = (body as { error?: { code?: string; message?: string } }).error;
    if (res.statusCode < 500)
      throw new HttpError(res.statusCode, error?.code ?? 'error', error?.message ?? 'analytics refused');
    lastError = `${worker.id} answered ${res.statusCode}`;
  } catch (e) {
    if (e instanceof HttpError) throw e;
    lastError = `${worker.id}: ${(e as Error).message}`;
  }
  throw unavailable(`click analytics unavailable (${lastError})`, 1);
}
