/**
 * The read path's side of the ranker contract (src/rank-wire.ts): calls the ranker workers round robin with the
 * 50 ms deadline; any failure (late, error, no ranker, a paused process) is null, and the caller serves time order.
 */
import type { PeerAddress } from '@raftkit/http';
import { RpcClient } from '@raftkit/rpc';
import { RANK_DEADLINE_MS, RANKER_ROLE, type RankCandidate, type RankRequest, type RankResponse, type RankedPost } from './rank-wire.js';

export class RankerClient {
  private readonly clients: RpcClient[];
  private next = 0;
  readonly stats = { ranked: 0, fallbacks: 0 };

  constructor(workers: readonly PeerAddress[], token: string, private readonly deadlineMs = RANK_DEADLINE_MS) {
    this.clients = workers.filter((w) => w.role === RANKER_ROLE && w.tcpAddress !== undefined).map((w) => new RpcClient({ address: w.tcpAddress!, token, timeoutMs: deadlineMs, reconnectDelayMs: 200 }));
  }

  async rank(viewer: string, now: number, candidates: RankCandidate[]): Promise<RankedPost[] | null> {
    if (this.clients.length === 0 || candidates.length === 0) {
      this.stats.fallbacks++;
      return null;
    }
    const client = this.clients[this.next++ % this.clients.length]!;
    const request: RankRequest = { op: 'rank', viewer, now, candidates };
    try {
      const answer = (await client.call(request, { timeoutMs: this.deadlineMs })) as RankResponse;
      if (answer === null || typeof answer !== 'object' || !Array.isArray(answer.ranked)) throw new Error('malformed rank answer');
      this.stats.ranked++;
      return answer.ranked.filter((r) => r !== null && typeof r === 'object' && typeof r.post_id === 'string');
    } catch {
      this.stats.fallbacks++;
      return null;
    }
  }

  close(): void {
    for (const c of this.clients) c.close();
  }
}
