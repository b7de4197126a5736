/**
 * On every member: which gateways have watchers on which auctions (each gateway sends its table to every member
 * every 2 s and on change, so a new writer after a failover already knows them), and the writer's publisher: one
 * message per gateway with watchers on the auction, batched per turn into one POST per gateway. A push that fails
 * is dropped (counted): gateways poll an auction they have not heard about for 2 s, so watchers still converge.
 */
import { Pool } from 'undici';
import type { Push } from '../wire.js';

/** A gateway's table expires this long after its last refresh (it refreshes every 2 s). */
const GATEWAY_TTL_MS = 6_000;
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
    for (const [id, g] of this.gateways)
      if (g.expiresAt > now && (g.auctions.get(auctionId) ?? 0) > 0) out.push({ id, url: g.url, secret: g.secret });
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

/** Pushes queued per gateway at most (one POST carries up to this many). */
export const MAX_QUEUED_PUSHES = 10_000;

export class Publisher {
  /** Per gateway: messages waiting, and whether a POST to it is in flight (one at a time, so pushes stay in order). */
  private readonly queues = new Map<string, { url: string; secret: string; messages: Push[]; busy: boolean }>();
  private readonly pools = new Map<string, Pool>();
  private scheduled = false;
  sent = 0;
  failed = 0;
  published = 0;
  /** Times a gateway's queue was full and its oldest pushes were dropped. */
  dropped = 0;

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
        q = { url: t.url, secret: t.secret, messages: [], busy: q?.busy ?? false };
        this.queues.set(t.id, q);
      }
      q.messages.push(message);
      // A gateway that cannot keep up (or is gone until its registration expires) must not grow the writer's
      // memory: the oldest pushes go first. Nothing is lost that matters: every push carries the auction's whole
      // state, newer ones supersede older ones, and a gateway whose pushes fall silent polls every 2 s.
      if (q.messages.length > MAX_QUEUED_PUSHES) {
        q.messages.splice(0, q.messages.length - MAX_QUEUED_PUSHES);
        this.dropped++;
      }
    }
    if (!this.scheduled) {
      this.scheduled = true;
      setImmediate(() => this.flush());
    }
  }

  /** Pushes waiting over every gateway (not yet in a POST). */
  get queued(): number {
    let n = 0;
    for (const q of this.queues.values()) n += q.messages.length;
    return n;
  }

  async close(): Promise<void> {
    await Promise.all([...this.pools.values()].map((p) => p.destroy()));
  }

  private flush(): void {
    this.scheduled = false;
    for (const q of this.queues.values()) if (!q.busy && q.messages.length > 0) this.send(q);
  }

  /**
   * One POST per gateway at a time, carrying everything queued for it: a gateway receives pushes in publish order
   * (its watchers would drop an older one arriving late), and under load batches grow instead of requests.
   */
  private send(q: { url: string; secret: string; messages: Push[]; busy: boolean }): void {
    const messages = q.messages.splice(0, MAX_QUEUED_PUSHES);
    q.busy = true;
    let pool = this.pools.get(q.url);
    if (pool === undefined) {
      pool = new Pool(q.url, { connections: 1, keepAliveTimeout: 30_000 });
      this.pools.set(q.url, pool);
    }
    const done = (ok: boolean): void => {
      if (ok) this.sent++;
      else this.failed++;
      q.busy = false;
      if (q.messages.length > 0) this.send(q);
    };
    pool
      .request({
        method: 'POST',
        path: '/internal/auction/updates',
        headers: { 'content-type': 'application/json', [FEED_SECRET_HEADER]: q.secret },
        body: JSON.stringify({ from: this.from(), messages }),
        headersTimeout: 5_000,
        bodyTimeout: 5_000,
      })
      .then(
        async (res) => {
          await res.body.dump();
          done(res.statusCode < 300);
        },
        () => done(false),
      );
  }
}
