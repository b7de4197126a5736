/** The checkout consumer's record (real LevelDB in a temp dir): idempotent under redelivery, durable across reopen. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { CheckoutStore } from '../src/workers/checkout/checkout.js';
import type { Handoff } from '../src/machine.js';

const handoff = (auctionId: string): Handoff => ({
  auctionId,
  itemId: 'i',
  sellerId: 's',
  winnerId: 'w',
  finalPrice: 120,
  reserveMet: true,
  closedAt: 1,
});

t.test('a redelivered hand-off is recorded once and counted; the record survives a reopen', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'auction-checkout-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  let store = await CheckoutStore.open(dir);
  t.equal(await store.deliver(handoff('a'), 10), 'new');
  t.equal(await store.deliver(handoff('b'), 11), 'new');
  // The ack of `a` was lost (or the consumer died before acking): the outbox delivers it again.
  t.equal(await store.deliver(handoff('a'), 12), 'redelivery');
  t.same(store.stats, { processed: 2, redelivered: 1 });
  await store.close();
  store = await CheckoutStore.open(dir);
  t.equal(await store.deliver(handoff('a'), 13), 'redelivery', 'still known after a restart');
  const orders = await store.all();
  t.same(
    orders.map((o) => [o.auction_id, o.deliveries, o.receivedAt]),
    [
      ['a', 3, 10],
      ['b', 1, 11],
    ],
  );
  t.match(orders[0]!.handoff, { winnerId: 'w', finalPrice: 120 });
  await store.close();
});
