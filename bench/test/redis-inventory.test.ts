/**
 * The benchmark's Redis inventory (src/peers/redis-inventory.ts) against a real redis-server: it must keep the same
 * contract as ours (one unit per user per deal, a retried key answers what it answered, decrement only while
 * positive, the one re-route pinned), or the comparison would measure a different service.
 */
import t from 'tap';
import { cleanupAll } from '../src/cleanup.js';
import { startRedis } from '../src/peers/redis.js';
import { RedisInventory } from '../src/peers/redis-inventory.js';

const redis = await startRedis();
const inv = new RedisInventory({ url: `redis://127.0.0.1:${redis.port}`, connections: 2 });
t.teardown(async () => {
  await inv.close();
  await cleanupAll();
});
for (let i = 0; ; i++) {
  try {
    await inv.dealIds();
    break;
  } catch (e) {
    if (i > 100) throw e;
    await new Promise((r) => setTimeout(r, 50));
  }
}

const now = Date.now();
const spec = { dealId: 'd1', skuId: 'sku', totalInventory: 3, startAt: now + 3_000, endAt: now + 3_600_000, shards: 2 };

t.test('deal creation: counts split over shards, idempotent, another record refused', async (t) => {
  await inv.createDeal(spec);
  await inv.createDeal(spec);
  await t.rejects(inv.createDeal({ ...spec, totalInventory: 4 }), /deal_exists/);
  t.same(await inv.dealIds(), ['d1']);
  t.match(await inv.deal('d1'), { totalInventory: 3, shards: 2, liveAt: null, alive: [0, 1], remaining: 3 });
  t.equal(await inv.deal('nope'), null);
});

t.test('not live before the broadcast; then reserve, retries, one unit per user, pins', async (t) => {
  const r = (shard: number, user: string, key: string, reroute: number | null = null) =>
    inv.reserve({ dealId: 'd1', shard, userId: user, key, reservationId: `${shard}-${user}${key}`, reroute });
  t.same(await r(0, 'u1', 'k1'), { outcome: 'refused', error: 'not_live' });
  await t.rejects(inv.goLive('nope'), /no deal/);
  await inv.goLive('d1');
  t.not((await inv.deal('d1'))!.liveAt, null);
  await inv.createDeal({ ...spec, dealId: 'd2', startAt: Date.now() - 1 });
  t.not((await inv.deal('d2'))!.liveAt, null, 'a refresh after start_at records the go-live');
  const won = await r(0, 'u1', 'k1');
  t.match(won, {
    outcome: 'won',
    reservation: { reservationId: '0-u1k1', userId: 'u1', shard: 0, status: 'reserved', paymentId: null },
  });
  t.same(await r(0, 'u1', 'k1'), won, 'the same key: the same answer');
  t.same(await r(1, 'u1', 'k2'), won, 'another key on another shard: the reservation the user holds');
  t.match(await r(0, 'u2', 'k1'), { outcome: 'won', reservation: { reservationId: '0-u2k1' } });
  t.same(
    await r(0, 'u3', 'k1', 1),
    { outcome: 'lost', shard: 0, shardEmpty: true, reroute: 1 },
    'shard 0 empty: pinned to the drawn re-route',
  );
  t.same(
    await r(0, 'u3', 'k9', 0),
    { outcome: 'lost', shard: 0, shardEmpty: false, reroute: 1 },
    'a later attempt is sent to the pin',
  );
  t.match(await r(1, 'u3', 'k1'), { outcome: 'won', reservation: { shard: 1 } }, 'the re-route wins on shard 1');
  t.same(await r(1, 'u4', 'k1'), { outcome: 'lost', shard: 1, shardEmpty: true, reroute: null });
  t.same(
    await r(1, 'u4', 'k1'),
    { outcome: 'lost', shard: 1, shardEmpty: false, reroute: null },
    'a lost key is remembered',
  );
  const sold = (await inv.deal('d1'))!;
  t.match(sold, { alive: [], remaining: 0 });
  t.same(
    sold.winners.map((w) => [w.userId, w.reservationId]),
    [
      ['u1', '0-u1k1'],
      ['u2', '0-u2k1'],
      ['u3', '1-u3k1'],
    ],
    'the winners, in order',
  );
  t.same((await inv.deal('d1'))!.winners, [], 'only new winners on the next refresh');
  t.match(await inv.attempt('d1', 'u1', 'k1'), { status: 'won', reservation: { reservationId: '0-u1k1' } });
  t.same(await inv.attempt('d1', 'u4', 'k1'), { status: 'lost' });
  t.same(await inv.attempt('d1', 'u5', 'k1'), { status: 'unknown' });
});

t.test('pay and cancel: owner only, cancel returns the unit', async (t) => {
  t.same(await inv.pay('0-u1k1', 'u2', 'p'), { ok: false, error: 'not_owner' });
  t.match(await inv.pay('0-u1k1', 'u1', 'p1'), { ok: true, reservation: { status: 'paid', paymentId: 'p1' } });
  t.match(
    await inv.pay('0-u1k1', 'u1', 'p1'),
    { ok: true, reservation: { status: 'paid' } },
    'repeated: the first outcome',
  );
  t.same(await inv.cancel('0-u1k1', 'u1'), { ok: false, error: 'reservation_paid' });
  t.match(await inv.cancel('0-u2k1', 'u2'), { ok: true, reservation: { status: 'cancelled' } });
  t.match(await inv.deal('d1'), { alive: [0], remaining: 1 });
  t.same(await inv.probe('d1', 0), { remaining: 1 });
  t.equal(await inv.reservation('0-nothing'), null);
  t.match(await inv.reservation('0-u2k1'), { status: 'cancelled', userId: 'u2' });
});
