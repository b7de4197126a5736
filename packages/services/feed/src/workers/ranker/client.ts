/**
 * The read path's side of ranking: `rankWithDeadline` asks a ranker process and gives up after the deadline (the
 * spec's 50 ms), answering null instead of throwing, so the caller serves time order with no error. A viewer always
 * goes to the same ranker (by hash), which is what lets that ranker's recent-ranking cache answer a repeat visit.
 */
import { createHash } from 'node:crypto';
import type { PeerAddress } from '@raftkit/http';
import { RpcClient } from '@raftkit/rpc';
import { RANK_DEADLINE_MS } from '../../rank-wire.js';
import { timeOrder } from './score.js';
import type { Affinity, Candidate, RankedPost } from './types.js';
import type { RankAnswer, RankerRequest, RankerStats } from './wire.js';

export interface RankerClientOptions {
  /** host:port of each ranker's binary listener. */
  addresses: string[];
  /** The cluster token (the ranker admits no other). */
  token: string;
}

/** The ranker addresses of a cluster, from a worker's view of its peers. */
export function rankerAddresses(workers: readonly PeerAddress[]): string[] {
  return workers.filter((w) => w.role === 'ranker' && w.tcpAddress !== undefined).map((w) => w.tcpAddress!);
}

/** What a read serves: the ranked order, or time order when the ranker did not answer in time. */
export interface Ordering {
  posts: Candidate[];
  /** Score by post_id when ranked; null for time order. */
  scores: Map<string, number> | null;
  /** The ranker's answer details when ranked (cached: a repeat visit's recent ranking). */
  cached: boolean;
  ranked_at: number | null;
}

export class RankerClient {
  private readonly clients: RpcClient[];

  constructor(options: RankerClientOptions) {
    // Unanswered calls are settled by our own deadline; the connection's timeout only bounds stray ones.
    this.clients = options.addresses.map(
      (address) => new RpcClient({ address, token: options.token, timeoutMs: 5_000, reconnectDelayMs: 200 }),
    );
  }

  get rankers(): number {
    return this.clients.length;
  }

  private clientFor(viewer: string): RpcClient | undefined {
    if (this.clients.length === 0) return undefined;
    const slot = createHash('sha1').update(viewer).digest().readUInt32BE(0) % this.clients.length;
    return this.clients[slot];
  }

  /**
   * The ranker's full answer within `deadlineMs`, or null: no ranker, a slow, paused or dead one, a malformed
   * answer, anything. Never throws and never takes much longer than the deadline.
   */
  async rankDetailed(
    viewer: string,
    candidates: readonly Candidate[],
    options: { deadlineMs?: number; now?: number; fresh?: boolean } = {},
  ): Promise<RankAnswer | null> {
    const client = this.clientFor(viewer);
    if (client === undefined) return null;
    const deadlineMs = options.deadlineMs ?? RANK_DEADLINE_MS;
    const request: RankerRequest = {
      op: 'rank',
      viewer,
      candidates: [...candidates],
      ...(options.now !== undefined ? { now: options.now } : {}),
      ...(options.fresh !== undefined ? { fresh: options.fresh } : {}),
    };
    let timer: NodeJS.Timeout | undefined;
    const aborter = new AbortController();
    try {
      const answer = await Promise.race([
        client.call(request, { timeoutMs: deadlineMs, signal: aborter.signal }),
        new Promise<null>((resolve) => {
          timer = setTimeout(() => resolve(null), deadlineMs);
        }),
      ]);
      return checkAnswer(answer, candidates);
    } catch {
      return null;
    } finally {
      clearTimeout(timer);
      aborter.abort();
    }
  }

  /** The ranked order within `deadlineMs` (default 50 ms), or null: the caller serves time order. Never throws. */
  async rankWithDeadline(
    viewer: string,
    candidates: readonly Candidate[],
    deadlineMs = RANK_DEADLINE_MS,
    now?: number,
  ): Promise<RankedPost[] | null> {
    const answer = await this.rankDetailed(viewer, candidates, { deadlineMs, ...(now !== undefined ? { now } : {}) });
    return answer?.ranked ?? null;
  }

  /** The candidates in ranked order when the ranker answers in time, else in time order (newest first). */
  async order(
    viewer: string,
    candidates: readonly Candidate[],
    deadlineMs = RANK_DEADLINE_MS,
    now?: number,
  ): Promise<Ordering> {
    const answer = await this.rankDetailed(viewer, candidates, { deadlineMs, ...(now !== undefined ? { now } : {}) });
    if (answer === null) return { posts: timeOrder(candidates), scores: null, cached: false, ranked_at: null };
    const byId = new Map(candidates.map((c) => [c.post_id, c]));
    return {
      posts: answer.ranked.map((r) => byId.get(r.post_id)!),
      scores: new Map(answer.ranked.map((r) => [r.post_id, r.score])),
      cached: answer.cached,
      ranked_at: answer.ranked_at,
    };
  }

  /** A viewer's affinity to an author as its ranker holds it (tests, debugging); throws on failure. */
  async affinity(viewer: string, author: string, timeoutMs = 2_000): Promise<Affinity | null> {
    return (await this.clientFor(viewer)!.call({ op: 'affinity', viewer, author }, { timeoutMs })) as Affinity | null;
  }

  /** Each ranker's counters, in address order; throws on failure. */
  async stats(timeoutMs = 2_000): Promise<RankerStats[]> {
    return Promise.all(this.clients.map(async (c) => (await c.call({ op: 'stats' }, { timeoutMs })) as RankerStats));
  }

  close(): void {
    for (const c of this.clients) c.close();
  }
}

/**
 * The answer if it is a ranking of exactly these candidates (each distinct post once, nothing else), else null:
 * a ranker of another version or a corrupted frame must not drop or invent posts.
 */
function checkAnswer(raw: unknown, candidates: readonly Candidate[]): RankAnswer | null {
  if (typeof raw !== 'object' || raw === null) return null;
  const answer = raw as Partial<RankAnswer>;
  if (!Array.isArray(answer.ranked) || typeof answer.cached !== 'boolean' || typeof answer.ranked_at !== 'number')
    return null;
  const wanted = new Set(candidates.map((c) => c.post_id));
  if (answer.ranked.length !== wanted.size) return null;
  const seen = new Set<string>();
  for (const r of answer.ranked as unknown[]) {
    if (typeof r !== 'object' || r === null) return null;
    const { post_id, score } = r as Partial<RankedPost>;
    if (typeof post_id !== 'string' || typeof score !== 'number' || !wanted.has(post_id) || seen.has(post_id))
      return null;
    seen.add(post_id);
  }
  return answer as RankAnswer;
}
