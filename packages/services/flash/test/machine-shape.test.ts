/**
 * The flash machine refuses a command of the wrong shape (a bug or a forged entry) with CommandShapeError before it
 * changes anything; valid commands still apply.
 */
import t from 'tap';
import { checkCommandShapes } from '@raftkit/testkit';
import { FlashMachine } from '../src/machine.js';

const T0 = 1_700_000_000_000;
function machine(): FlashMachine {
  const m = new FlashMachine();
  m.apply(
    {
      op: 'createDeal',
      dealId: 'd',
      skuId: 'sku',
      totalInventory: 4,
      startAt: T0 - 1_000,
      endAt: T0 + 3_600_000,
      shardCount: 2,
      shards: [
        { shard: 0, count: 2 },
        { shard: 1, count: 2 },
      ],
    },
    { index: 1, term: 1, time: T0 - 2_000 },
  );
  m.apply(
    { op: 'reserve', dealId: 'd', shard: 0, userId: 'u1', key: 'k1', reservationId: 'r1' },
    { index: 2, term: 1, time: T0 },
  );
  return m;
}

t.test('malformed commands are refused without a change; valid ones apply', async (t) => {
  const outcome = checkCommandShapes({
    make: machine,
    valid: [
      {
        op: 'createDeal',
        dealId: 'e',
        skuId: 'sku',
        totalInventory: 10,
        startAt: T0,
        endAt: T0 + 60_000,
        shardCount: 2,
        shards: [{ shard: 1, count: 5 }],
      },
      { op: 'goLive', dealId: 'd' },
      { op: 'reserve', dealId: 'd', shard: 1, userId: 'u2', key: 'k', reservationId: 'r2' },
      { op: 'reserve', dealId: 'd', shard: 0, userId: 'u3', key: 'k', reservationId: 'r3', reroute: 1 },
      { op: 'pay', reservationId: 'r1', userId: 'u1', paymentId: 'p' },
      { op: 'cancel', reservationId: 'r1', userId: 'u1' },
      { op: 'expire', reservationIds: ['r1'] },
      { op: 'dropDeal', dealId: 'd' },
    ],
    malformed: [
      null,
      [],
      { op: 'nope' },
      {
        op: 'createDeal',
        dealId: 'e',
        skuId: 'sku',
        totalInventory: 10,
        startAt: T0,
        endAt: T0,
        shardCount: 2,
        shards: [{ shard: 1, count: 5 }],
      },
      {
        op: 'createDeal',
        dealId: 'e',
        skuId: 'sku',
        totalInventory: 4,
        startAt: T0,
        endAt: T0 + 1,
        shardCount: 2,
        shards: [{ shard: 1, count: 5 }],
      },
      {
        op: 'createDeal',
        dealId: 'e',
        skuId: 'sku',
        totalInventory: 10,
        startAt: T0,
        endAt: T0 + 1,
        shardCount: 2,
        shards: [{ shard: 2, count: 5 }],
      },
      {
        op: 'createDeal',
        dealId: 'e',
        skuId: 'sku',
        totalInventory: 10,
        startAt: T0,
        endAt: T0 + 1,
        shardCount: 2,
        shards: [
          { shard: 1, count: 1 },
          { shard: 1, count: 1 },
        ],
      },
      {
        op: 'createDeal',
        dealId: 'e',
        skuId: 'sku',
        totalInventory: 10,
        startAt: T0,
        endAt: T0 + 1,
        shardCount: 2,
        shards: [],
      },
      {
        op: 'createDeal',
        dealId: 'e',
        skuId: 'sku',
        totalInventory: 10,
        startAt: T0,
        endAt: T0 + 1,
        shardCount: 2,
        shards: [null],
      },
      { op: 'reserve', dealId: 'd', shard: -1, userId: 'u2', key: 'k', reservationId: 'r2' },
      { op: 'reserve', dealId: 'd', shard: 0.5, userId: 'u2', key: 'k', reservationId: 'r2' },
      { op: 'reserve', dealId: 'd', shard: 0, userId: '', key: 'k', reservationId: 'r2' },
      { op: 'reserve', dealId: 'd', shard: 0, userId: 'u2', reservationId: 'r2' },
      { op: 'reserve', dealId: 'd', shard: 0, userId: 'u2', key: 'x'.repeat(257), reservationId: 'r2' },
      { op: 'reserve', dealId: 'd', shard: 0, userId: 'u2', key: 'k', reservationId: 'r2', reroute: -1 },
      { op: 'reserve', dealId: 'd', shard: 0, userId: 'u2', key: 'k', reservationId: 'r2', reroute: '1' },
      { op: 'reserve', dealId: 'd', shard: 0, userId: 'u2', key: 'k', reservationId: 'r2', reroute: 1.5 },
      { op: 'pay', reservationId: 'r1', userId: 'u1' },
      { op: 'expire', reservationIds: [5] },
      { op: 'expire', reservationIds: null },
    ],
  });
  t.equal(outcome.violation, null, 'no other throw, no change before a refusal');
  t.ok(outcome.refused > 100, `${outcome.refused} refused`);
  const m = machine();
  t.match(
    m.apply(
      { op: 'reserve', dealId: 'd', shard: 1, userId: 'u2', key: 'k', reservationId: 'r2' },
      { index: 3, term: 1, time: T0 + 1 },
    ),
    { ok: true, outcome: 'won' },
  );
});
