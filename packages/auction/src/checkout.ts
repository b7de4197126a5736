/**
 * The checkout consumer (worker role `checkout`, one per cluster): the winner hand-off's reader. It reads each
 * auction group's outbox (a linearizable read on the group's leader), records each hand-off in its own LevelDB
 * keyed by auction id, and only then acknowledges it (an `ackHandoff` entry). Delivery is at least once (a crash
 * between the record and the ack, or a lost ack answer, delivers it again); the consumer is idempotent: a hand-off
 * already recorded is counted as a redelivery and not processed again. GET /checkout/orders lists what it holds.
 */
import { Level } from 'level';
import { join } from 'node:path';
import { GroupRouter, notFound, serveWorkerHttp, type RunningWorker, type WorkerOptions, type WorkerRole } from '@raftkit/http';
import type { Handoff } from './machine.js';
import { auctionGroups } from './gateway.js';
import { locateAuction } from './placement.js';

const POLL_MS = 300;

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

export async function startCheckout(options: WorkerOptions): Promise<RunningWorker> {
  const token = options.tokens[0]!;
  const members = options.members.map((m) => `http://${m.httpAddress}`);
  const router = new GroupRouter({ endpoints: members, token, timeoutMs: 5_000, locate: locateAuction });
  const db = new Level<string, CheckoutOrder>(join(options.dataDir, 'checkout'), { valueEncoding: 'json' });
  await db.open();
  const stats = { processed: 0, redelivered: 0, acked: 0, errors: 0 };

  const get = async (id: string): Promise<CheckoutOrder | undefined> => {
    try {
      return (await db.get(id)) ?? undefined;
    } catch (error) {
      if ((error as { code?: string }).code === 'LEVEL_NOT_FOUND') return undefined;
      throw error;
    }
  };

  let stopped = false;
  let running: Promise<void> = Promise.resolve();
  const round = async (): Promise<void> => {
    const groups = await auctionGroups(router, members, token);
    for (const group of groups) {
      const { handoffs } = (await router.call(group, 'GET', `/internal/groups/${group}/handoffs`)) as { handoffs: Handoff[] };
      for (const h of handoffs) {
        const known = await get(h.auctionId);
        if (known === undefined) {
          // Checkout's own processing would go here (create the order, notify the winner); recorded durably first.
          await db.put(h.auctionId, { handoff: h, receivedAt: Date.now(), deliveries: 1 }, { sync: true } as never);
          stats.processed++;
        } else {
          await db.put(h.auctionId, { ...known, deliveries: known.deliveries + 1 });
          stats.redelivered++;
        }
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

  const http = await serveWorkerHttp(options, { health: () => ({ ...stats }) });
  http.router
    .get('/checkout/orders', { admits: 'cluster' }, async () => {
      const orders: Array<CheckoutOrder & { auction_id: string }> = [];
      for await (const [id, order] of db.iterator()) orders.push({ auction_id: id, ...order });
      return { orders, stats };
    })
    .get('/checkout/orders/:id', { admits: 'cluster' }, async (ctx) => {
      const order = await get(ctx.params.id ?? '');
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
      await db.close();
    },
  };
}
