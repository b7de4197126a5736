/**
 * On every member: which gateways have watchers on which auctions (each gateway sends its table to every member
 * every 2 s and on change, so a new writer after a failover already knows them), and the writer's publisher: one
 * message per gateway with watchers on the auction, batched per turn into one POST per gateway. A push that fails
 * is dropped (counted): gateways poll an auction they have not heard about for 2 s, so watchers still converge.
 */
import { Pool } from 'undici';
import type { Push } from './wire.js';

/** A gateway's table expires this long after its last refresh (it refreshes every 2 s). */
export const GATEWAY_TTL_MS = 6_000;
export const FEED_SECRET_HEADER = 'x-auction-feed-secret';

interface GatewayEntry {
  url: string;
  secret: string;
  auctions: Map<string, number>;
  expiresAt: number;
}

export class WatcherRegistry {
  private readonly gateways = new Map<string, GatewayEntry>();

  constructor(private readonly clock: () => number = Date.now) {}

  /** Replace a gateway's whole table (`full`), or set some counts (a watcher joining, `full` false). */
  update(gateway: string, url: string, secret: string, auctions: Record<string, number>, full: boolean): void {
    let entry = this.gateways.get(gateway);
    if (entry === undefined || entry.url !== url || entry.secret !== secret) {
      entry = { url, secret, auctions: new Map(), expiresAt: 0 };
      this.gateways.set(gateway, entry);
    }
    if (full) entry.auctions.clear();
    for (const [id, n] of Object.entries(auctions)) {
      if (n > 0) entry.auctions.set(id, n);
      else entry.auctions.delete(id);
    }
    entry.expiresAt = this.clock() + GATEWAY_TTL_MS;
  }

  /** Watchers of an auction over every live gateway. */
  count(auctionId: string): number {
    const now = this.clock();
    let n = 0;
    for (const g of this.gateways.values()) if (g.expiresAt > now) n += g.auctions.get(auctionId) ?? 0;
    return n;
  }

  /** Gateways with watchers on the auction. */
  targets(auctionId: string): Array<{ id: string; url: string; secret: string }> {
    const now = this.clock();
    const out: Array<{ id: string; url: string; secret: string }> = [];
    for (const [id, g] of this.gateways) if (g.expiresAt > now && (g.auctions.get(auctionId) ?? 0) > 0) out.push({ id, url: g.url, secret: g.secret });
    return out;
  }

  expire(): void {
    const now = this.clock();
    for (const [id, g] of this.gateways) if (g.expiresAt <= now) this.gateways.delete(id);
  }

  get size(): number {
    return this.gateways.size;
  }
}

export class Publisher {
  private readonly queues = new Map<string, { url: string; secret: string; messages: Push[] }>();
  private readonly pools = new Map<string, Pool>();
  private scheduled = false;
  sent = 0;
  failed = 0;
  published = 0;

  constructor(
    private readonly registry: WatcherRegistry,
    private readonly from: () => string,
  ) {}

  /** Queue `message` once for each gateway watching its auction; sent on the next turn. */
  publish(message: Push): void {
    const targets = this.registry.targets(message.auction_id);
    if (targets.length === 0) return;
    this.published++;
    for (const t of targets) {
      let q = this.queues.get(t.id);
      if (q === undefined || q.url !== t.url) {
        q = { url: t.url, secret: t.secret, messages: [] };
        this.queues.set(t.id, q);
      }
      q.messages.push(message);
    }
    if (!this.scheduled) {
      this.scheduled = true;
      setImmediate(() => this.flush());
    }
  }

  async close(): Promise<void> {
    await Promise.all([...this.pools.values()].map((p) => p.close()));
  }

  private flush(): void {
    this.scheduled = false;
    for (const [id, q] of this.queues) {
      this.queues.delete(id);
      this.send(q.url, q.secret, q.messages);
    }
  }

  private send(url: string, secret: string, messages: Push[]): void {
    let pool = this.pools.get(url);
    if (pool === undefined) {
      pool = new Pool(url, { connections: 4, keepAliveTimeout: 30_000 });
      this.pools.set(url, pool);
    }
    pool
      .request({
        method: 'POST',
        path: '/internal/auction/updates',
        headers: { 'content-type': 'application/json', [FEED_SECRET_HEADER]: secret },
        body: JSON.stringify({ from: this.from(), messages }),
        headersTimeout: 5_000,
        bodyTimeout: 5_000,
      })
      .then(
        async (res) => {
          await res.body.dump();
          if (res.statusCode < 300) this.sent++;
          else this.failed++;
        },
        () => {
          this.failed++;
        },
      );
  }
}
