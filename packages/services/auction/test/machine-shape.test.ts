/**
 * The auction machine refuses a command of the wrong shape (a bug or a forged entry) with CommandShapeError before
 * it changes anything, so every member answers ApplyError alike; valid commands still apply.
 */
import t from 'tap';
import { checkCommandShapes } from '@raftkit/testkit';
import { AuctionMachine } from '../src/machine.js';

const T0 = 1_700_000_000_000;
const create = {
  op: 'create',
  auctionId: 'a1',
  itemId: 'i1',
  sellerId: 's',
  startPrice: 100,
  reservePrice: 500,
  minIncrement: 10,
  startAt: T0 - 60_000,
  endAt: T0 + 3_600_000,
  antiSnipeWindowS: 60,
};
const bid = { bidId: 'b9', auctionId: 'a1', bidderId: 'x', amount: 200, maxProxyAmount: 300, idempotencyKey: 'k9' };
function machine(): AuctionMachine {
  const m = new AuctionMachine();
  m.apply(create as never, { index: 1, term: 1, time: T0 - 1_000 });
  m.apply(
    { op: 'bid', bidId: 'b1', auctionId: 'a1', bidderId: 'y', amount: 120, maxProxyAmount: null, idempotencyKey: 'k1' },
    { index: 2, term: 1, time: T0 - 500 },
  );
  return m;
}

t.test('malformed commands are refused without a change; valid ones apply', async (t) => {
  const outcome = checkCommandShapes({
    make: machine,
    valid: [
      { ...create, auctionId: 'a2' },
      { op: 'bid', ...bid },
      { op: 'bids', bids: [bid, { ...bid, bidId: 'b10', bidderId: 'z', idempotencyKey: 'k10' }] },
      { op: 'close', auctionId: 'a1' },
      { op: 'ackHandoff', auctionId: 'a1' },
      { op: 'get', auctionId: 'a1' },
      { op: 'block', bidderId: 'x', blocked: true },
    ],
    malformed: [
      null,
      [],
      'bid',
      { op: 'retract', auctionId: 'a1' },
      { ...create, endAt: create.startAt },
      { ...create, startPrice: 0 },
      { ...create, minIncrement: 0 },
      { ...create, minIncrement: 2.5 },
      { ...create, reservePrice: -1 },
      { ...create, antiSnipeWindowS: -1 },
      { ...create, startAt: Number.NaN },
      { ...create, auctionId: '' },
      { op: 'bid', ...bid, amount: 0 },
      { op: 'bid', ...bid, amount: 10.5 },
      { op: 'bid', ...bid, amount: '200' },
      { op: 'bid', ...bid, maxProxyAmount: 150 },
      { op: 'bid', ...bid, maxProxyAmount: undefined },
      { op: 'bid', ...bid, idempotencyKey: null },
      { op: 'bid', ...bid, bidderId: 'x'.repeat(257) },
      { op: 'bid', ...bid, amount: 2 ** 60 },
      // One bad bid refuses the whole batch, the good one before it included.
      { op: 'bids', bids: [bid, { ...bid, amount: -1 }] },
      { op: 'bids', bids: [bid, null] },
      {
        op: 'bids',
        bids: Array.from({ length: 1_001 }, (_, i) => ({ ...bid, bidId: `b${i}`, idempotencyKey: `k${i}` })),
      },
      { op: 'close' },
      { op: 'get', auctionId: 5 },
      { op: 'block', bidderId: 'x' },
      { op: 'block', bidderId: 'x', blocked: 'yes' },
      { op: 'block', blocked: true },
    ],
  });
  t.equal(outcome.violation, null, 'no other throw, no change before a refusal');
  t.ok(outcome.refused > 100, `${outcome.refused} refused`);
  const m = machine();
  t.match(m.apply({ op: 'bid', ...bid }, { index: 3, term: 1, time: T0 }), { status: 'accepted', newHighBid: 200 });
});
