/** The auction machine's rules, one example each from the spec's bid rules 2 to 4 and the decisions of README.md. */
import t from 'tap';
import {
  AuctionMachine,
  type AuctionCommand,
  type AuctionResult,
  type BidResult,
  type CreateInput,
} from '../src/machine.js';

const T0 = 1_700_000_000_000;
const MIN = 60_000;
let index = 0;
function run(m: AuctionMachine, command: AuctionCommand, time: number): AuctionResult {
  return m.apply(command, { index: ++index, term: 1, time });
}
function auction(over: Partial<CreateInput> = {}): { m: AuctionMachine; create: CreateInput } {
  const m = new AuctionMachine();
  const create: CreateInput = {
    op: 'create',
    auctionId: 'A',
    itemId: 'item',
    sellerId: 'seller',
    startPrice: 100,
    reservePrice: null,
    minIncrement: 10,
    startAt: T0,
    endAt: T0 + 60 * MIN,
    antiSnipeWindowS: 60,
    ...over,
  };
  run(m, create, T0 - MIN);
  return { m, create };
}
let n = 0;
function bid(
  m: AuctionMachine,
  bidderId: string,
  amount: number,
  time: number,
  max: number | null = null,
  key = `k${++n}`,
  auctionId = 'A',
): BidResult {
  return run(
    m,
    { op: 'bid', bidId: `b${++n}`, auctionId, bidderId, amount, maxProxyAmount: max, idempotencyKey: key },
    time,
  ) as BidResult;
}

t.test('create: a retried create answers exists and changes nothing', async (t) => {
  const { m, create } = auction();
  t.match(run(m, { ...create, startPrice: 5 }, T0), { status: 'exists' });
  t.equal(m.getAuction('A', T0)!.startPrice, 100);
});

t.test('states: scheduled before start_at, live, closed', async (t) => {
  const { m } = auction();
  t.equal(m.getAuction('A', T0 - 1)!.state, 'scheduled');
  t.equal(m.getAuction('A', T0)!.state, 'live');
  t.match(bid(m, 'b', 100, T0 - 1), { status: 'not_started', changed: false });
  run(m, { op: 'close', auctionId: 'A' }, T0 + 60 * MIN);
  t.equal(m.getAuction('A', T0)!.state, 'closed');
});

t.test('first bid: at least the start price, else below_increment', async (t) => {
  const { m } = auction();
  t.match(bid(m, 'b1', 99, T0), { status: 'below_increment', newHighBid: null });
  t.match(bid(m, 'b1', 100, T0), { status: 'accepted', newHighBid: 100, highBidderId: 'b1', seq: 1, changed: true });
});

t.test(
  'rule 2: amount must beat the high bid by the increment; outbid at or below it, below_increment between',
  async (t) => {
    const { m } = auction();
    bid(m, 'b1', 100, T0);
    t.match(bid(m, 'b2', 100, T0 + 1), { status: 'outbid', newHighBid: 100, highBidderId: 'b1', changed: false });
    t.match(bid(m, 'b2', 50, T0 + 2), { status: 'outbid' });
    t.match(bid(m, 'b2', 109, T0 + 3), { status: 'below_increment', newHighBid: 100 });
    t.match(bid(m, 'b2', 110, T0 + 4), { status: 'accepted', newHighBid: 110, highBidderId: 'b2', seq: 2 });
  },
);

t.test('rule 2: the seller cannot bid; unknown auction; bid at or after close_at is auction_ended', async (t) => {
  const { m } = auction();
  t.match(bid(m, 'seller', 500, T0), { status: 'seller_cannot_bid' });
  t.match(bid(m, 'b1', 500, T0, null, 'x', 'nope'), { status: 'unknown_auction', newHighBid: null });
  t.match(bid(m, 'b1', 500, T0 + 60 * MIN - 1), { status: 'accepted' });
  t.match(bid(m, 'b2', 900, T0 + 60 * MIN + 60_000 - 1 + 1), { status: 'auction_ended', newHighBid: 500 });
});

t.test(
  'rule 2: idempotency key: a repeat answers duplicate with the original outcome, 24 h per auction and bidder',
  async (t) => {
    const { m } = auction({ endAt: T0 + 48 * 60 * MIN });
    const first = bid(m, 'b1', 100, T0, null, 'K');
    const before = Buffer.from(m.snapshot());
    const again = bid(m, 'b1', 999, T0 + 5, null, 'K');
    t.equal(again.status, 'duplicate');
    t.same(again.original, first, 'the original outcome');
    t.equal(again.newHighBid, 100, 'the different amount of the repeat is ignored');
    t.ok(before.equals(Buffer.from(m.snapshot())), 'nothing changed');
    t.match(bid(m, 'b2', 100, T0, null, 'K'), { status: 'outbid' }, 'the same key of another bidder is another key');
    t.match(
      bid(m, 'b1', 200, T0 + 24 * 60 * MIN - 1, null, 'K'),
      { status: 'duplicate' },
      'still kept just before 24 h',
    );
    t.match(
      bid(m, 'b1', 200, T0 + 24 * 60 * MIN, null, 'K'),
      { status: 'accepted', newHighBid: 100 },
      'expired at 24 h: a new bid (b1 holds the high bid, so it raises only the max)',
    );
  },
);

t.test('refusals that may pass later (not_started, too_frequent) do not use up the key', async (t) => {
  const { m } = auction();
  t.match(bid(m, 'b1', 100, T0 - 5, null, 'K'), { status: 'not_started' });
  t.match(bid(m, 'b1', 100, T0, null, 'K'), { status: 'accepted' });
});

t.test('rule 3: anti-snipe extends close_at to placed_at + window, new_close_at only when it changed', async (t) => {
  const { m } = auction();
  const end = T0 + 60 * MIN;
  const early = bid(m, 'b1', 100, end - 60_000);
  t.equal(early.status, 'accepted');
  t.equal(early.newCloseAt, undefined, 'exactly the window left: no extension');
  t.equal(early.closeAt, end);
  const late = bid(m, 'b2', 110, end - 59_999);
  t.equal(late.newCloseAt, end + 1, 'one ms inside the window: extended by the window from placed_at');
  t.equal(m.getAuction('A', end)!.closeAt, end + 1);
  t.match(
    bid(m, 'b3', 120, end),
    { status: 'accepted', newCloseAt: end + 60_000 },
    'a bid during the extension is on time',
  );
  const losing = bid(m, 'b4', 120, end + 30_000);
  t.equal(losing.status, 'outbid');
  t.equal(losing.newCloseAt, undefined, 'a bid that is not accepted never extends');
  t.match(run(m, { op: 'close', auctionId: 'A' }, end + 59_999), { status: 'not_due', closeAt: end + 60_000 });
  t.match(bid(m, 'b5', 500, end + 60_000), { status: 'auction_ended' }, 'at the server close time: ended');
});

t.test('rule 4: a new max above the high max wins at the old max plus the increment', async (t) => {
  const { m } = auction();
  bid(m, 'b1', 100, T0, 300);
  const r = bid(m, 'b2', 150, T0 + 1, 500);
  t.match(r, { status: 'accepted', newHighBid: 310, highBidderId: 'b2' });
  t.match(m.getAuction('A', T0)!.bidHistory.at(-1), { bidderId: 'b2', price: 310, kind: 'bid' });
});

t.test('rule 4: the new winner never pays above their own max, nor below the amount they bid', async (t) => {
  const { m } = auction();
  bid(m, 'b1', 100, T0, 300);
  t.match(bid(m, 'b2', 150, T0 + 1, 305), { status: 'accepted', newHighBid: 305 });
  t.match(bid(m, 'b3', 700, T0 + 2, 800), { status: 'accepted', newHighBid: 700 });
});

t.test(
  'rule 4: a new max at or below the high max is outbid; the high bidder stays at the new max plus increment',
  async (t) => {
    const { m } = auction();
    bid(m, 'b1', 100, T0, 300);
    const r = bid(m, 'b2', 150, T0 + 1, 200);
    t.match(r, { status: 'outbid', newHighBid: 210, highBidderId: 'b1', changed: true });
    t.match(m.getAuction('A', T0)!.bidHistory.at(-1), { bidderId: 'b1', price: 210, kind: 'proxy' });
    t.match(bid(m, 'b3', 220, T0 + 2, 295), { status: 'outbid', newHighBid: 300 }, 'capped at the high max');
  },
);

t.test('rule 4: equal maxima: the earlier bid wins, at that maximum', async (t) => {
  const { m } = auction();
  bid(m, 'b1', 100, T0, 300);
  t.match(bid(m, 'b2', 150, T0 + 1, 300), { status: 'outbid', newHighBid: 300, highBidderId: 'b1' });
  t.match(
    bid(m, 'b3', 310, T0 + 2),
    { status: 'accepted', newHighBid: 310, highBidderId: 'b3' },
    'a bid without max behaves as max = amount',
  );
});

t.test('rule 4: a bid without max_proxy_amount behaves as one whose max is its amount', async (t) => {
  const { m } = auction();
  bid(m, 'b1', 100, T0);
  t.match(
    bid(m, 'b2', 200, T0 + 1),
    { status: 'accepted', newHighBid: 200 },
    'amount above old max + increment: price is the amount',
  );
  t.match(bid(m, 'b1', 205, T0 + 2), { status: 'below_increment' });
});

t.test(
  'rule 4: the high bidder raising only their maximum: accepted, price unchanged, no push, no extension',
  async (t) => {
    const { m } = auction();
    const end = T0 + 60 * MIN;
    bid(m, 'b1', 100, T0, 200);
    const raise = bid(m, 'b1', 150, end - 1_000, 400);
    t.match(raise, { status: 'accepted', newHighBid: 100, highBidderId: 'b1', changed: false, seq: 1 });
    t.equal(raise.newCloseAt, undefined);
    const lower = bid(m, 'b1', 100, end - 900, 150);
    t.match(lower, { status: 'accepted', newHighBid: 100 }, 'a lower max never lowers it (no retraction)');
    t.match(
      bid(m, 'b2', 390, end - 800),
      { status: 'outbid', newHighBid: 400, highBidderId: 'b1' },
      'the raised max answers',
    );
  },
);

t.test('per-bidder frequency limit on an auction: 5 bids per 1 s window of entry time', async (t) => {
  const { m } = auction();
  for (let i = 0; i < 5; i++) t.not(bid(m, 'b1', 100 + i * 10, T0 + 10).status, 'too_frequent');
  t.match(bid(m, 'b1', 1_000, T0 + 999), { status: 'too_frequent', changed: false });
  t.match(bid(m, 'b2', 1_000, T0 + 999), { status: 'accepted' }, 'another bidder is not limited');
  t.match(bid(m, 'b1', 2_000, T0 + 1_000), { status: 'accepted' }, 'next window');
});

t.test(
  'close: the winner when the reserve is met, a hand-off in the outbox until checkout acknowledges it',
  async (t) => {
    const { m } = auction({ reservePrice: 150 });
    const end = T0 + 60 * MIN;
    bid(m, 'b1', 100, T0, 400);
    bid(m, 'b2', 160, T0 + 1);
    t.same(m.due(end - 1), []);
    t.same(m.due(end), ['A']);
    const bound = m.nextCloseBound();
    t.ok(
      bound !== null && bound <= end && bound > end - 1_000,
      `the close timer's bound is at or before the close, within a second (${bound})`,
    );
    const closed = run(m, { op: 'close', auctionId: 'A' }, end);
    t.match(closed, {
      status: 'closed',
      handoff: { winnerId: 'b1', finalPrice: 170, reserveMet: true, closedAt: end },
    });
    t.match(
      run(m, { op: 'close', auctionId: 'A' }, end + 5),
      { status: 'already_closed', handoff: { winnerId: 'b1' } },
      'a second close changes nothing',
    );
    t.same(m.due(end + 10), []);
    t.equal(m.nextCloseBound(), null, 'nothing open: no bound, the timer sleeps its idle period');
    t.equal(m.pendingHandoffs().length, 1);
    t.match(run(m, { op: 'ackHandoff', auctionId: 'A' }, end + 20), { removed: true });
    t.match(
      run(m, { op: 'ackHandoff', auctionId: 'A' }, end + 21),
      { removed: false },
      'acknowledging again is harmless',
    );
    t.same(m.pendingHandoffs(), []);
    t.match(bid(m, 'b3', 10_000, end + 1), { status: 'auction_ended' });
  },
);

t.test('close: reserve not met, or no bid: no winner', async (t) => {
  const { m } = auction({ reservePrice: 1_000 });
  bid(m, 'b1', 500, T0);
  t.match(run(m, { op: 'close', auctionId: 'A' }, T0 + 60 * MIN), {
    status: 'closed',
    handoff: { winnerId: null, finalPrice: null, reserveMet: false },
  });
  const { m: m2 } = auction();
  t.match(run(m2, { op: 'close', auctionId: 'A' }, T0 + 60 * MIN), {
    status: 'closed',
    handoff: { winnerId: null, reserveMet: false },
  });
});

t.test(
  'retention: an acknowledged closed auction is dropped 7 days after close; keys expire by entry time',
  async (t) => {
    const { m } = auction();
    const end = T0 + 60 * MIN;
    bid(m, 'b1', 100, T0);
    run(m, { op: 'close', auctionId: 'A' }, end);
    run(m, { op: 'get', auctionId: 'A' }, end + 8 * 24 * 60 * MIN);
    t.ok(m.getAuction('A', end) !== null, 'get changes nothing, and the hand-off is not acknowledged yet');
    run(m, { op: 'ackHandoff', auctionId: 'A' }, end + 8 * 24 * 60 * MIN);
    run(m, { op: 'ackHandoff', auctionId: 'A' }, end + 8 * 24 * 60 * MIN + 1);
    t.equal(m.getAuction('A', end), null);
    t.same(m.stats, { auctions: 0, keys: 0, keysEvictedEarly: 0, outbox: 0, blocked: 0 });
  },
);

t.test('bounded memory: history and keys are capped', async (t) => {
  const m = new AuctionMachine({ historyLimit: 3, maxKeys: 4, maxBidsPerWindow: 1_000 });
  run(
    m,
    {
      op: 'create',
      auctionId: 'A',
      itemId: 'i',
      sellerId: 's',
      startPrice: 1,
      reservePrice: null,
      minIncrement: 1,
      startAt: T0,
      endAt: T0 + MIN,
      antiSnipeWindowS: 0,
    },
    T0,
  );
  for (let i = 1; i <= 10; i++) bid(m, `b${i % 2}`, i, T0 + i);
  const view = m.getAuction('A', T0)!;
  t.same(
    view.bidHistory.map((h) => h.price),
    [8, 9, 10],
  );
  t.equal(view.bidCount, 10);
  t.same(m.stats, { auctions: 1, keys: 4, keysEvictedEarly: 6, outbox: 0, blocked: 0 });
});

t.test('a batch applies as the same bids one command each', async (t) => {
  const { m } = auction();
  const r = run(
    m,
    {
      op: 'bids',
      bids: [
        { bidId: 'x1', auctionId: 'A', bidderId: 'b1', amount: 100, maxProxyAmount: 300, idempotencyKey: 'k1' },
        { bidId: 'x2', auctionId: 'A', bidderId: 'b2', amount: 200, maxProxyAmount: null, idempotencyKey: 'k2' },
        { bidId: 'x2', auctionId: 'A', bidderId: 'b2', amount: 200, maxProxyAmount: null, idempotencyKey: 'k2' },
      ],
    },
    T0,
  );
  t.match(r, {
    op: 'bids',
    results: [{ status: 'accepted' }, { status: 'outbid', newHighBid: 210 }, { status: 'duplicate' }],
  });
});

t.test(
  'due: many auctions, found by close time, moved by extensions, gone when closed, rebuilt on restore',
  async (t) => {
    const m = new AuctionMachine();
    for (let i = 0; i < 50; i++) {
      run(
        m,
        {
          op: 'create',
          auctionId: `a${i}`,
          itemId: 'i',
          sellerId: 's',
          startPrice: 1,
          reservePrice: null,
          minIncrement: 1,
          startAt: T0,
          endAt: T0 + 5_000 + i * 10_000,
          antiSnipeWindowS: 60,
        },
        T0 - 1,
      );
    }
    t.same(m.due(T0 + 25_000), ['a0', 'a1', 'a2'], 'earliest first');
    t.same(m.due(T0 + 25_000, 2), ['a0', 'a1'], 'at most max');
    bid(m, 'b', 5, T0 + 15_000, null, 'k', 'a2');
    t.same(m.due(T0 + 25_000), ['a0', 'a1'], 'a2 extended to 75,000');
    run(m, { op: 'close', auctionId: 'a0' }, T0 + 25_000);
    const copy = new AuctionMachine();
    copy.restore(m.snapshot());
    for (const x of [m, copy]) {
      t.same(
        x.due(T0 + 75_000),
        ['a1', 'a3', 'a4', 'a5', 'a6', 'a2', 'a7'],
        'by close time, then id (a2 extended to 75,000, a7 ends at 75,000)',
      );
      t.equal(x.due(T0 + 10_000_000).length, 49);
    }
  },
);

t.test(
  'rule 2: a blocked bidder is refused on every auction of the group until unblocked; snapshots keep the list',
  async (t) => {
    const { m } = auction();
    run(
      m,
      {
        op: 'create',
        auctionId: 'B',
        itemId: 'i',
        sellerId: 's',
        startPrice: 1,
        reservePrice: null,
        minIncrement: 1,
        startAt: T0,
        endAt: T0 + MIN,
        antiSnipeWindowS: 0,
      },
      T0,
    );
    t.match(run(m, { op: 'block', bidderId: 'mallory', blocked: true }, T0), {
      op: 'block',
      blocked: true,
      changed: true,
    });
    t.match(
      run(m, { op: 'block', bidderId: 'mallory', blocked: true }, T0),
      { changed: false },
      'blocking twice changes nothing',
    );
    t.match(bid(m, 'mallory', 500, T0 + 1), { status: 'bidder_blocked', newHighBid: null, changed: false });
    t.match(bid(m, 'mallory', 5, T0 + 2, null, 'kb', 'B'), { status: 'bidder_blocked' });
    t.match(
      bid(m, 'mallory', 5, T0 + 3, null, 'kb', 'B'),
      { status: 'duplicate', original: { status: 'bidder_blocked' } },
      'recorded under its key',
    );
    const copy = new AuctionMachine();
    copy.restore(m.snapshot());
    t.match(bid(copy, 'mallory', 600, T0 + 4), { status: 'bidder_blocked' }, 'the list survives a snapshot');
    run(m, { op: 'block', bidderId: 'mallory', blocked: false }, T0 + 5);
    t.match(bid(m, 'mallory', 500, T0 + 6), { status: 'accepted', newHighBid: 500 }, 'unblocked');
  },
);
