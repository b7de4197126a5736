/**
 * The gateway's deal cache against a scripted inventory: a refresh asked for "begun no earlier than t" is never
 * answered by a read that began before t (the winner a retry needs may have committed in between), and a winner
 * list the inventory cut short keeps the bitmap marked ahead of the winners until a read brings the rest.
 */
import t from 'tap';
import type { DealSnapshot, InventoryBackend } from '../src/inventory.js';
import { DealCache } from '../src/workers/gateway/deal-cache.js';

interface Scripted {
  backend: InventoryBackend;
  /** deal() calls so far, each with when it began and a way to answer it. */
  calls: Array<{ startedAt: number; answer(snapshot: DealSnapshot): void }>;
}

function scriptedInventory(): Scripted {
  const calls: Scripted['calls'] = [];
  const backend = {
    deal: (): Promise<DealSnapshot | null> =>
      new Promise((resolve) => calls.push({ startedAt: Date.now(), answer: resolve })),
  } as unknown as InventoryBackend;
  return { backend, calls };
}

function snapshot(winners: DealSnapshot['winners'], winnersComplete?: boolean): DealSnapshot {
  return {
    dealId: 'd1',
    skuId: 'sku',
    totalInventory: 2,
    startAt: 0,
    endAt: Date.now() + 60_000,
    shards: 2,
    liveAt: 1,
    alive: [],
    remaining: 0,
    winners,
    ...(winnersComplete === undefined ? {} : { winnersComplete }),
  };
}

const hooks = { adopted: () => undefined, dropped: () => undefined };
const won = (userId: string) => ({ userId, reservationId: `0-${userId}`, expiresAt: Date.now() + 60_000 });
const tick = () => new Promise((r) => setTimeout(r, 5));

t.test('a refresh that must begin after t waits out a read begun before t and takes the next one', async (t) => {
  const inv = scriptedInventory();
  const cache = new DealCache(inv.backend, 0, 2, hooks);
  const loading = cache.load('d1', true);
  inv.calls[0]!.answer(snapshot([won('early')]));
  const entry = (await loading)!;

  const older = cache.refresh(entry);
  await tick();
  const asked = Date.now();
  let settled = false;
  const fresh = cache.refresh(entry, asked).then(() => (settled = true));
  // The read in flight (begun before `asked`) answers without the late winner.
  inv.calls[1]!.answer(snapshot([]));
  await older;
  await tick();
  t.equal(settled, false, 'not answered by the read begun before it was asked');
  t.equal(inv.calls.length, 3, 'a second read was started');
  t.ok(inv.calls[2]!.startedAt >= asked, 'the second read began no earlier than asked');
  inv.calls[2]!.answer(snapshot([won('late')]));
  await fresh;
  t.equal(entry.winners.get('late')?.status, 'won', 'the winner committed meanwhile is known');
  t.equal(entry.winners.get('early')?.status, 'won');

  // A caller with no bound shares the read in flight.
  const shared1 = cache.refresh(entry);
  const shared2 = cache.refresh(entry, 0);
  t.equal(inv.calls.length, 4, 'one read for both');
  inv.calls[3]!.answer(snapshot([]));
  await Promise.all([shared1, shared2]);
});

t.test('a winner list cut short keeps the bitmap ahead of the winners until the rest arrives', async (t) => {
  const inv = scriptedInventory();
  const cache = new DealCache(inv.backend, 0, 2, hooks);
  const loading = cache.load('d1', true);
  inv.calls[0]!.answer(snapshot([won('a')], false));
  const entry = (await loading)!;
  t.equal(entry.aheadOfWinners, true, 'first copy cut short: not yet proof of a sold out');
  const r1 = cache.refresh(entry);
  inv.calls[1]!.answer(snapshot([won('b')], false));
  await r1;
  t.equal(entry.aheadOfWinners, true, 'still cut short');
  const r2 = cache.refresh(entry);
  inv.calls[2]!.answer(snapshot([won('c')], true));
  await r2;
  t.equal(entry.aheadOfWinners, false, 'complete: a sold out may be answered from memory');
  t.same([...entry.winners.keys()].sort(), ['a', 'b', 'c']);
});
