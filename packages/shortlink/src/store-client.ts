/**
 * How an application server reaches the link store: a keep-alive connection pool per member, a preferred member
 * (spread by app index) for reads, the leader for writes, and failover to the others when a member is down or
 * answers 503. Leaner than ClusterClient on purpose: the redirect path makes one of these calls on every
 * edge-cache miss. Writes sent to a follower are still correct (it forwards them); going to the leader saves that
 * hop's CPU, which is what bounds create throughput.
 */
import { Pool } from 'undici';
import { unavailable, type PeerAddress } from '@raftkit/http';

export interface StoreAnswer {
  status: number;
  body: unknown;
}

export class LinkStoreClient {
  private readonly pools: Pool[];
  private preferred: number;
  /** The member believed to lead (null: unknown, writes go to the preferred member). */
  private leader: number | null = null;
  private readonly leaderTimer: NodeJS.Timeout;

  constructor(
    private readonly members: readonly PeerAddress[],
    private readonly token: string,
    preferred: number,
    leaderRefreshMs = 2000,
  ) {
    if (members.length === 0) throw new TypeError('the link store needs at least one member');
    this.pools = members.map((m) => new Pool(`http://${m.httpAddress}`, { connections: 32, keepAliveTimeout: 30_000 }));
    this.preferred = preferred % members.length;
    void this.refreshLeader();
    this.leaderTimer = setInterval(() => void this.refreshLeader(), leaderRefreshMs);
    this.leaderTimer.unref();
  }

  /** Ask a member who leads; a hint only, so any failure just leaves writes on the preferred member. */
  private async refreshLeader(): Promise<void> {
    try {
      const answer = await this.call('GET', '/v1/cluster/status', undefined, 1000);
      const id = (answer.body as { leader_id?: unknown } | null)?.leader_id;
      const index = this.members.findIndex((m) => m.id === id);
      this.leader = index >= 0 ? index : null;
    } catch {
      this.leader = null;
    }
  }

  /**
   * One call; on a connection failure or a 503 the next member is tried (with a short backoff once every member
   * was tried) until `timeoutMs` runs out, then 503. Any other answer is returned as it is.
   */
  async call(method: 'GET' | 'POST' | 'DELETE', path: string, body?: object, timeoutMs = 10_000): Promise<StoreAnswer> {
    const write = method !== 'GET';
    const first = write && this.leader !== null ? this.leader : this.preferred;
    const deadline = Date.now() + timeoutMs;
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const headers: Record<string, string> = { authorization: `Bearer ${this.token}` };
    if (payload !== undefined) headers['content-type'] = 'application/json';
    let last = 'no member answered';
    for (let attempt = 0; ; attempt++) {
      const member = (first + attempt) % this.pools.length;
      const remaining = deadline - Date.now();
      if (remaining <= 0) break;
      try {
        const res = await this.pools[member]!.request({ method, path, headers, body: payload, headersTimeout: remaining, bodyTimeout: remaining });
        const text = await res.body.text();
        if (res.statusCode !== 503) {
          // Stick to a member that answers, so a dead preferred member costs one failed attempt, not one per call.
          if (!write) this.preferred = member;
          else if (member !== first) this.leader = null;
          return { status: res.statusCode, body: text.length > 0 ? (JSON.parse(text) as unknown) : null };
        }
        last = `member answered 503: ${text}`;
      } catch (error) {
        last = String((error as Error).message ?? error);
      }
      if ((attempt + 1) % this.pools.length === 0) await new Promise((r) => setTimeout(r, Math.min(200, 20 * (attempt + 1))));
    }
    throw unavailable(`the link store is unreachable (${last})`, 1);
  }

  async close(): Promise<void> {
    clearInterval(this.leaderTimer);
    await Promise.all(this.pools.map((p) => p.close()));
  }
}
