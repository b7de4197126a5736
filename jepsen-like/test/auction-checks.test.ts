/**
 * The auction checks must be able to fail: a clean hand-made history (logged by the real machine) passes, and a
 * lost acknowledged bid, a bid applied twice, a price going down, an accepted bid not above the price, a log whose
 * replay differs (proxy answered wrongly, close_at not extended), a wrong winner, an auction never closed and a
 * close_at seen going backwards are each rejected.
 */
import t from 'tap';
import { AuctionMachine, type BidResult } from '@raftkit/auction';
import { checkAuctionHistory, type CheckResult, type HistoryEvent, type LoggedBid } from '../src/index.js';

const T0 = 1_700_000_000_000;
const CREATE = {
  auction_id: 'A',
  seller_id: 'seller',
  start_price: 100,
  reserve_price: 150,
  min_increment: 5,
  start_at: T0,
  end_at: T0 + 60_000,
  anti_snipe_window_s: 10,
};

let clock = 0;
let nextProcess = 0;
function op(
  f: string,
  input: Record<string, unknown>,
  type: 'ok' | 'fail' | 'info',
  output?: Record<string, unknown>,
  key = 'A',
): HistoryEvent[] {
  const process = nextProcess++;
  return [
    { process, type: 'invoke', f, key, value: input, time: (clock += 10) },
    {
      process,
      type,
      f,
      key,
      ...(output !== undefined ? { value: output } : {}),
      ...(type !== 'ok' ? { error: 'timeout' } : {}),
      time: (clock += 10),
    },
  ];
}

interface Bid {
  bidder: string;
  amount: number;
  max: number | null;
  key: string;
  at: number;
}

/** Runs the bids through the real machine: the client answers and the log the service would hold. */
function scenario(
  bids: Bid[],
  closeAt?: number,
): { events: HistoryEvent[]; log: LoggedBid[]; final: Record<string, unknown> } {
  const m = new AuctionMachine();
  let index = 0;
  m.apply(
    {
      op: 'create',
      auctionId: 'A',
      itemId: 'item-A',
      sellerId: CREATE.seller_id,
      startPrice: CREATE.start_price,
      reservePrice: CREATE.reserve_price,
      minIncrement: CREATE.min_increment,
      startAt: CREATE.start_at,
      endAt: CREATE.end_at,
      antiSnipeWindowS: CREATE.anti_snipe_window_s,
    },
    { index: ++index, term: 1, time: T0 },
  );
  const events: HistoryEvent[] = [...op('create', CREATE, 'ok', { auction_id: 'A' })];
  const log: LoggedBid[] = [];
  let last = T0;
  for (const b of bids) {
    const r = m.apply(
      {
        op: 'bid',
        bidId: `x${index}`,
        auctionId: 'A',
        bidderId: b.bidder,
        amount: b.amount,
        maxProxyAmount: b.max,
        idempotencyKey: b.key,
      },
      { index: ++index, term: 1, time: b.at },
    ) as BidResult;
    last = b.at;
    if (r.status !== 'duplicate')
      log.push({
        bidder_id: b.bidder,
        amount: b.amount,
        max_proxy_amount: b.max,
        idempotency_key: b.key,
        placed_at: b.at,
        status: r.status,
        high_bid: r.newHighBid,
        high_bidder_id: r.highBidderId,
        close_at: r.closeAt!,
      });
    const wire = (x: BidResult): Record<string, unknown> => ({
      auction_id: 'A',
      status: x.status,
      bid_id: x.bidId,
      seq: x.seq,
      new_high_bid: x.newHighBid,
      high_bidder_id: x.highBidderId,
      close_at: x.closeAt,
      ...(x.newCloseAt !== undefined ? { new_close_at: x.newCloseAt } : {}),
    });
    const answer = { ...wire(r), ...(r.original !== undefined ? { original: wire(r.original) } : {}) };
    events.push(
      ...op(
        'bid',
        { auction_id: 'A', bidder_id: b.bidder, amount: b.amount, max_proxy_amount: b.max, idempotency_key: b.key },
        'ok',
        answer,
      ),
    );
  }
  const view = m.getAuction('A', last)!;
  let winner: string | null = null;
  let price: number | null = null;
  let state = view.state as string;
  if (closeAt !== undefined) {
    const c = m.apply(
      { op: 'close', auctionId: 'A' },
      { index: ++index, term: 1, time: Math.max(closeAt, view.closeAt) },
    );
    if (c.op === 'close' && c.status === 'closed') {
      winner = c.handoff.winnerId;
      price = c.handoff.finalPrice;
      state = 'closed';
    }
  }
  const final = {
    auction_id: 'A',
    state,
    close_at: view.closeAt,
    current_high_bid: view.currentHighBid,
    current_high_bidder_id: view.currentHighBidderId,
    winner,
    final_price: price,
    now: view.closeAt + 1_000,
    visible: view.bidHistory.map((h) => ({
      seq: h.seq,
      bid_id: h.bidId,
      bidder_id: h.bidderId,
      amount: h.price,
      at: h.at,
      kind: h.kind,
    })),
  };
  return { events, log, final };
}

const BIDS: Bid[] = [
  { bidder: 'b1', amount: 100, max: 200, key: 'k1', at: T0 + 1_000 }, // accepted at 100 (max 200)
  { bidder: 'b2', amount: 120, max: 150, key: 'k2', at: T0 + 2_000 }, // outbid: b1's proxy answers at 155
  { bidder: 'b2', amount: 160, max: 260, key: 'k3', at: T0 + 3_000 }, // accepted at 205
  { bidder: 'b2', amount: 160, max: 260, key: 'k3', at: T0 + 3_500 }, // duplicate of k3
  { bidder: 'b1', amount: 207, max: null, key: 'k4', at: T0 + 4_000 }, // below_increment
  { bidder: 'b3', amount: 300, max: null, key: 'k5', at: T0 + 55_000 }, // accepted at 300, extends close to T0+65s
  { bidder: 'b3', amount: 320, max: 400, key: 'k6', at: T0 + 56_000 }, // the high bidder raises only the maximum
  { bidder: 'b1', amount: 310, max: 399, key: 'k7', at: T0 + 64_000 }, // outbid, proxy answers at 400 capped 400 -> 400
];

function history(
  mutate: (s: { events: HistoryEvent[]; log: LoggedBid[]; final: Record<string, unknown> }) => void = () => {},
  close = true,
): HistoryEvent[] {
  const s = scenario(BIDS, close ? T0 + 70_000 : undefined);
  mutate(s);
  return [...s.events, ...op('read-log', { auction_id: 'A' }, 'ok', { ...s.final, log: s.log, log_complete: true })];
}

/** The same run read as the service shows it: visible changes only (the log is rebuilt from them and the answers). */
function visibleOnly(
  mutate: (s: { events: HistoryEvent[]; final: Record<string, unknown> }) => void = () => {},
  close = true,
): HistoryEvent[] {
  const s = scenario(BIDS, close ? T0 + 70_000 : undefined);
  mutate(s);
  return [...s.events, ...op('read-log', { auction_id: 'A' }, 'ok', { ...s.final, log: null })];
}

type Visible = Array<{ seq: number; bid_id: string; bidder_id: string; amount: number; at: number; kind: string }>;

function byName(results: CheckResult[], name: string): CheckResult {
  return results.find((r) => r.name === name)!;
}

function types(r: CheckResult): string[] {
  return [...new Set(r.anomalies.map((a) => a.type))];
}

t.test('a clean history passes every check', async (t) => {
  const s = scenario(BIDS, T0 + 70_000);
  t.same(
    s.log.map((e) => e.status),
    ['accepted', 'outbid', 'accepted', 'below_increment', 'accepted', 'accepted', 'outbid'],
    'the scenario covers the outcomes',
  );
  t.equal(s.final.winner, 'b3');
  const results = checkAuctionHistory(history());
  for (const r of results) t.equal(r.valid, true, `${r.name}: ${JSON.stringify(r.anomalies.slice(0, 2))}`);
  t.equal(byName(results, 'auction-acknowledged').stats!.present, 5, 'four accepted bids and the duplicate of one');
  t.equal(byName(results, 'auction-replay').stats!.closed, 1);
  t.ok((byName(results, 'auction-close-at').stats!.auctions_extended as number) >= 1, 'close_at was extended');
});

t.test('an acknowledged bid missing from the log is lost', async (t) => {
  const r = byName(checkAuctionHistory(history((s) => s.log.splice(4, 1))), 'auction-acknowledged');
  t.equal(r.valid, false);
  t.same(types(r), ['acknowledged-lost']);
});

t.test('an acknowledged bid logged with another status fails', async (t) => {
  const r = byName(checkAuctionHistory(history((s) => (s.log[0]!.status = 'outbid'))), 'auction-acknowledged');
  t.equal(r.valid, false);
  t.match(types(r), ['acknowledged-other-status']);
});

t.test('a key decided twice (a retry applied again after a failover) fails', async (t) => {
  const r = byName(
    checkAuctionHistory(history((s) => s.log.splice(3, 0, { ...s.log[2]!, placed_at: s.log[2]!.placed_at + 1 }))),
    'auction-acknowledged',
  );
  t.equal(r.valid, false);
  t.same(types(r), ['applied-twice']);
});

t.test('the price going down in log order fails', async (t) => {
  const r = byName(checkAuctionHistory(history((s) => (s.log[3]!.high_bid = 150))), 'auction-log-order');
  t.equal(r.valid, false);
  t.match(types(r), ['price-decreased']);
});

t.test('an accepted bid that does not raise the price fails', async (t) => {
  // b3's bid logged as accepted at the price b2 already held.
  const r = byName(checkAuctionHistory(history((s) => (s.log[4]!.high_bid = 205))), 'auction-log-order');
  t.equal(r.valid, false);
  t.ok(types(r).includes('accepted-not-increasing'), types(r).join(', '));
});

t.test("a visible history that is not the log's changes fails", async (t) => {
  const r = byName(
    checkAuctionHistory(history((s) => ((s.final.visible as Visible)[2]!.bidder_id = 'b9'))),
    'auction-log-order',
  );
  t.same(types(r), ['visible-differs-from-log']);
  const shorter = byName(checkAuctionHistory(history((s) => (s.final.visible as Visible).pop())), 'auction-log-order');
  t.same(types(shorter), ['visible-differs-from-log']);
});

t.test('visible history out of order fails', async (t) => {
  const r = byName(
    checkAuctionHistory(history((s) => (s.final.visible as Array<{ price: number }>).reverse())),
    'auction-log-order',
  );
  t.equal(r.valid, false);
  t.match(types(r), ['visible-not-increasing']);
});

t.test('a log whose replay differs fails: a wrong proxy answer', async (t) => {
  // The service let b2 lead at its own amount instead of b1's maximum plus the increment.
  const r = byName(checkAuctionHistory(history((s) => (s.log[1]!.high_bid = 125))), 'auction-replay');
  t.equal(r.valid, false);
  t.same(types(r), ['replay-differs']);
});

t.test('a log whose replay differs fails: anti-snipe not applied', async (t) => {
  const r = byName(
    checkAuctionHistory(
      history((s) => {
        for (const e of s.log) e.close_at = T0 + 60_000;
        s.final.close_at = T0 + 60_000;
      }),
    ),
    'auction-replay',
  );
  t.equal(r.valid, false);
  t.same(types(r), ['replay-differs']);
});

t.test("a winner other than the replay's fails", async (t) => {
  const r = byName(checkAuctionHistory(history((s) => (s.final.winner = 'b1'))), 'auction-replay');
  t.equal(r.valid, false);
  t.same(types(r), ['winner-differs']);
  const noReserve = byName(checkAuctionHistory(history((s) => (s.final.final_price = 100))), 'auction-replay');
  t.same(types(noReserve), ['winner-differs']);
});

t.test('an auction still live long after its close_at fails', async (t) => {
  const r = byName(
    checkAuctionHistory(history((s) => (s.final.now = (s.final.close_at as number) + 60_000), false)),
    'auction-replay',
  );
  t.equal(r.valid, false);
  t.same(types(r), ['not-closed']);
});

t.test('close_at seen going backwards fails', async (t) => {
  const events = history();
  // A fresh read after b3's extension that shows the original close time (a new leader that rolled it back).
  events.push(...op('read', { auction_id: 'A' }, 'ok', { auction_id: 'A', close_at: T0 + 60_000, fresh: true }));
  const r = byName(checkAuctionHistory(events), 'auction-close-at');
  t.equal(r.valid, false);
  t.same(types(r), ['close-at-backwards']);
  // The same read from the lagging query view is allowed to be stale.
  const stale = history();
  stale.push(...op('read', { auction_id: 'A' }, 'ok', { auction_id: 'A', close_at: T0 + 60_000, fresh: false }));
  t.equal(byName(checkAuctionHistory(stale), 'auction-close-at').valid, true);
  // Concurrent observations may disagree (the earlier one may be the later in log order).
  const concurrent = history();
  const p = 9_999;
  const base = clock;
  concurrent.push(
    { process: p, type: 'invoke', f: 'read', key: 'A', value: { auction_id: 'A' }, time: base - 500 },
    {
      process: p,
      type: 'ok',
      f: 'read',
      key: 'A',
      value: { auction_id: 'A', close_at: T0 + 60_000, fresh: true },
      time: base + 1,
    },
  );
  concurrent.sort((a, b) => a.time - b.time);
  t.equal(
    byName(checkAuctionHistory(concurrent), 'auction-close-at').valid,
    true,
    'an overlapping observation may be older',
  );
});

t.test('a final close_at earlier than one observed fails', async (t) => {
  const r = byName(checkAuctionHistory(history((s) => (s.final.close_at = T0 + 60_000))), 'auction-close-at');
  t.equal(r.valid, false);
  t.same(types(r), ['final-close-at-earlier']);
});

t.test('rebuilt from the visible history: a clean run passes, and the replay covers the raise', async (t) => {
  const results = checkAuctionHistory(visibleOnly());
  for (const r of results) t.equal(r.valid, true, `${r.name}: ${JSON.stringify(r.anomalies.slice(0, 2))}`);
  t.equal(byName(results, 'auction-replay').stats!.replayed, 1);
  t.equal(byName(results, 'auction-acknowledged').stats!.present, 5);
});

t.test('rebuilt: an acknowledged change missing from the history is lost', async (t) => {
  const r = byName(
    checkAuctionHistory(visibleOnly((s) => (s.final.visible as Visible).splice(3, 1))),
    'auction-acknowledged',
  );
  t.match(types(r), ['acknowledged-lost']);
});

t.test('rebuilt: a seq gap, a wrong proxy price, a raise shown as a change, a wrong winner each fail', async (t) => {
  const gap = checkAuctionHistory(visibleOnly((s) => (s.final.visible as Visible).splice(1, 1)));
  t.match(types(byName(gap, 'auction-log-order')), ['seq-gap']);
  const proxy = checkAuctionHistory(visibleOnly((s) => ((s.final.visible as Visible)[1]!.amount = 125)));
  t.same(types(byName(proxy, 'auction-replay')), ['replay-differs']);
  const winner = checkAuctionHistory(visibleOnly((s) => (s.final.winner = 'b2')));
  t.same(types(byName(winner, 'auction-replay')), ['winner-differs']);
  // The raise (k6) answered accepted with b3 high at 300, but the history says b1 held seq 4.
  const raise = checkAuctionHistory(visibleOnly((s) => ((s.final.visible as Visible)[3]!.bidder_id = 'b1')));
  t.equal(byName(raise, 'auction-acknowledged').valid, false, 'the raise is not where its answer says');
});

t.test('rebuilt: a history naming a bid no client heard of cannot be replayed (unknown, not valid)', async (t) => {
  const r = byName(
    checkAuctionHistory(visibleOnly((s) => ((s.final.visible as Visible)[0]!.bid_id = 'ghost'))),
    'auction-replay',
  );
  t.equal(r.valid, 'unknown');
  t.match(JSON.stringify(r.stats), /ghost/);
});
