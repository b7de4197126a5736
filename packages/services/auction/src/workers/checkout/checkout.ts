/**
 * The checkout consumer (worker role `checkout`, one per cluster): the winner hand-off's reader. It reads each
 * auction group's outbox (a linearizable read on the group's leader), records each hand-off in its own LevelDB
 * keyed by auction id, and only then acknowledges it (an `ackHandoff` entry). Delivery is at least once (a crash
 * between the record and the ack, or a lost ack answer, delivers it again); the consumer is idempotent: a hand-off
 * already recorded is counted as a redelivery and not processed again. GET /checkout/orders lists what it holds.
 */
import { Level } from 'level';
import { join } from 'node:path';
import {
  clusterUrl,
  GroupRouter,
  notFound,
  serveWorkerHttp,
  type RunningWorker,
  type WorkerOptions,
  type WorkerRole,
} from '@raftkit/http';
import type { Handoff } from '../../machine.js';
import { auctionGroups } from '../gateway/gateway.js';
import { locateAuction } from '../../placement.js';

const POLL_MS = 300;
/**
 * How long the list of auction groups is kept between polls. Fetching it is a linearizable read of the meta group
 * (a round of heartbeats that wakes it); the groups are created once, when the cluster starts, so polling it at
 * POLL_MS would only keep an idle meta group awake.
 */
const GROUPS_KEPT_MS = 30_000;

export interface CheckoutOrder {
  handoff: Handoff;
  /** When this consumer first recorded it. */
  receivedAt: number;
  /** Times it was delivered (1 once acknowledged without a retry). */
  deliveries: number;
}

export const checkoutRole: WorkerRole = {
  role: 'checkout',
  count: 1,
  start: startCheckout,
};

/**
 * The consumer's own record: one order per auction id, ever. `deliver` is idempotent: a hand-off already recorded
 * (a redelivery: the ack was lost, or the consumer died between record and ack) only counts the delivery.
 */
export class CheckoutStore {
  readonly stats = { processed: 0, redelivered: 0 };

  private constructor(private readonly db: Level<string, CheckoutOrder>) {}

  static async open(dir: string): Promise<CheckoutStore> {
    const db = new Level<string, CheckoutOrder>(dir, { valueEncoding: 'json' });
    await db.open();
    return new CheckoutStore(db);
  }

  async get(auctionId: string): Promise<CheckoutOrder | undefined> {
    try {
      return (await this.db.get(auctionId)) ?? undefined;
    } catch (error) {
      if ((error as { code?: string }).code === 'LEVEL_NOT_FOUND') return undefined;
      throw error;
    }
  }

  /** Records a hand-off durably before it may be acknowledged; 'new' the first time, 'redelivery' after. */
  async deliver(h: Handoff, now = Date.now()): Promise<'new' | 'redelivery'> {
    const known = await this.get(h.auctionId);
    if (known === undefined) {
      // Checkout's own processing (create the order, notify the winner) would go here, once per auction.
      await this.db.put(h.auctionId, { handoff: h, receivedAt: now, deliveries: 1 }, { sync: true } as never);
      this.stats.processed++;
      return 'new';
    }
    await this.db.put(h.auctionId, { ...known, deliveries: known.deliveries + 1 });
    this.stats.redelivered++;
    return 'redelivery';
  }

  async all(): Promise<Array<CheckoutOrder & { auction_id: string }>> {
    const orders: Array<CheckoutOrder & { auction_id: string }> = [];
    for await (const [id, order] of this.db.iterator()) orders.push({ auction_id: id, ...order });
    return orders;
  }

  close(): Promise<void> {
    return this.db.close();
  }
}

export async function startCheckout(options: WorkerOptions): Promise<RunningWorker> {
  const token = options.tokens[0]!;
  const members = options.members.map((m) => clusterUrl(m.httpAddress));
  const router = new GroupRouter({ endpoints: members, token, timeoutMs: 5_000, locate: locateAuction });
  const store = await CheckoutStore.open(join(options.dataDir, 'checkout'));
  const stats = { acked: 0, errors: 0 };

  let stopped = false;
  let running: Promise<void> = Promise.resolve();
  let groups: string[] = [];
  let groupsAt = 0;
  const round = async (): Promise<void> => {
    if (groups.length === 0 || Date.now() - groupsAt > GROUPS_KEPT_MS) {
      groups = await auctionGroups(router);
      groupsAt = Date.now();
    }
    for (const group of groups) {
      const { handoffs } = (await router.call(group, 'GET', `/internal/groups/${group}/handoffs`)) as {
        handoffs: Handoff[];
      };
      for (const h of handoffs) {
        await store.deliver(h);
        await router.call(group, 'POST', `/internal/groups/${group}/handoffs/${encodeURIComponent(h.auctionId)}/ack`);
        stats.acked++;
      }
    }
  };
  const loop = async (): Promise<void> => {
    while (!stopped) {
      running = round().catch(() => {
        stats.errors++;
      });
      await running;
      await new Promise((r) => setTimeout(r, POLL_MS));
    }
  };
  void loop();

  const http = await serveWorkerHttp(options, { health: () => ({ ...store.stats, ...stats }) });
  http.router
    .get('/checkout/orders', { admits: 'cluster' }, async () => ({
      orders: await store.all(),
      stats: { ...store.stats, ...stats },
    }))
    .get('/checkout/orders/:id', { admits: 'cluster' }, async (ctx) => {
      const order = await store.get(ctx.params.id ?? '');
      if (order === undefined) throw notFound(`no hand-off for auction ${(ctx.params.id ?? '').slice(0, 128)}`);
      return { auction_id: ctx.params.id, ...order };
    });

  return {
    httpPort: http.port,
    async stop() {
      stopped = true;
      await running;
      await http.close();
      await router.close();
      await store.close();
    },
  };
}
