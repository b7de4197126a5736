/**
 * Properties of the auction machine over random histories of bids from a few bidders (proxy maxima, repeated
 * idempotency keys, closes): price and close_at never decrease, the high bidder's maximum covers the price, the
 * outcome does not depend on how bids are split into commands, retries change nothing, snapshot/restore mid-history
 * answers identically afterwards, and a malformed command mid-history changes nothing.
 */
import fc from 'fast-check';
import { Packr } from 'msgpackr';
import t from 'tap';
import {
  AuctionMachine,
  type AuctionCommand,
  type AuctionResult,
  type BidInput,
  type BidResult,
} from '../src/machine.js';

const T0 = 1_700_000_000_000;
const END = T0 + 600_000;
const packr = new Packr({ useRecords: false });

interface Step {
  bid: BidInput;
  /** Milliseconds after the previous step. */
  dt: number;
  close: boolean;
}

const bidArb = fc
  .record({
    auction: fc.constantFrom('A', 'B'),
    bidder: fc.constantFrom('b0', 'b1', 'b2', 'b3', 'seller'),
    // Round amounts make equal maxima and exact-increment bids frequent; any integer reaches below_increment.
    amount: fc.oneof(
      fc.integer({ min: 1, max: 40 }).map((x) => x * 50),
      fc.integer({ min: 1, max: 2_000 }),
    ),
    extra: fc.option(
      fc.oneof(
        fc.integer({ min: 0, max: 20 }).map((x) => x * 50),
        fc.integer({ min: 0, max: 2_000 }),
      ),
      { nil: null },
    ),
    key: fc.integer({ min: 0, max: 30 }),
  })
  .map(({ auction, bidder, amount, extra, key }) => ({
    bidId: `id`,
    auctionId: auction,
    bidderId: bidder,
    amount,
    maxProxyAmount: extra === null ? null : amount + extra,
    idempotencyKey: `k${key}`,
  }));

const stepsArb = fc
  .array(fc.record({ bid: bidArb, dt: fc.integer({ min: 0, max: 40_000 }), close: fc.boolean() }), {
    minLength: 1,
    maxLength: 60,
  })
  .map((steps) => steps.map((s, i) => ({ ...s, bid: { ...s.bid, bidId: `bid${i}` }, close: s.close && i % 7 === 0 })));

function fresh(limits = {}): AuctionMachine {
  const m = new AuctionMachine(limits);
  for (const [id, window, reserve] of [
    ['A', 60, null],
    ['B', 0, 500],
  ] as const) {
    m.apply(
      {
        op: 'create',
        auctionId: id,
        itemId: `i${id}`,
        sellerId: 'seller',
        startPrice: 50,
        reservePrice: reserve,
        minIncrement: 7,
        startAt: T0,
        endAt: END,
        antiSnipeWindowS: window,
      },
      { index: 0, term: 1, time: T0 - 1 },
    );
  }
  return m;
}

/** The commands of a history, with their entry times. */
function commands(steps: Step[]): Array<[AuctionCommand, number]> {
  const out: Array<[AuctionCommand, number]> = [];
  let time = T0 - 20_000;
  for (const s of steps) {
    time += s.dt;
    out.push([{ op: 'bid', ...s.bid }, time]);
    if (s.close) out.push([{ op: 'close', auctionId: s.bid.auctionId }, time]);
  }
  return out;
}

function play(m: AuctionMachine, cmds: Array<[AuctionCommand, number]>, from = 1): AuctionResult[] {
  return cmds.map(([c, time], i) => m.apply(c, { index: from + i, term: 1, time }));
}

function hidden(m: AuctionMachine, id: string): { highMax: number; price: number | null; closeAt: number } {
  const snap = packr.unpack(m.snapshot()) as {
    auctions: Array<[string, { highMax: number; price: number | null; closeAt: number }]>;
  };
  return snap.auctions.find(([a]) => a === id)![1];
}

t.test('price and close_at never decrease; the high bidder max is at least the price; due() is exact', async (t) => {
  fc.assert(
    fc.property(stepsArb, (steps) => {
      const m = fresh();
      let index = 1;
      const last = new Map<string, { price: number; closeAt: number }>();
      for (const [c, time] of commands(steps)) {
        const r = m.apply(c, { index: index++, term: 1, time });
        for (const id of ['A', 'B']) {
          const h = hidden(m, id);
          const price = h.price ?? 0;
          const prev = last.get(id) ?? { price: 0, closeAt: END };
          if (price < prev.price || h.closeAt < prev.closeAt) return false;
          if (h.price !== null && h.highMax < h.price) return false;
          last.set(id, { price, closeAt: h.closeAt });
        }
        if (r.op === 'bid' && r.status === 'accepted' && r.newCloseAt !== undefined && r.newCloseAt !== r.closeAt)
          return false;
        // The close index finds exactly the open auctions whose close time has come, now and later.
        for (const at of [time, time + 30_000, END + 120_000]) {
          const expected = ['A', 'B'].filter((id) => {
            const v = m.getAuction(id, at)!;
            return v.state !== 'closed' && v.closeAt <= at;
          });
          if (JSON.stringify([...m.due(at)].sort()) !== JSON.stringify(expected)) return false;
        }
      }
      return true;
    }),
    { numRuns: 300, seed: 1717 },
  );
  t.pass('300 histories');
});

t.test('the outcome does not depend on how the same bids are split into commands', async (t) => {
  fc.assert(
    fc.property(stepsArb, fc.array(fc.integer({ min: 1, max: 8 }), { minLength: 1, maxLength: 60 }), (steps, cuts) => {
      // One entry time for all (the leader stamps a batch once); no frequency limit so every bid reaches rule 4.
      const bids = steps.map((s) => s.bid);
      const one = fresh({ maxBidsPerWindow: 1_000 });
      const each = bids.map(
        (b, i) => one.apply({ op: 'bid', ...b }, { index: i + 1, term: 1, time: T0 + 1 }) as BidResult,
      );
      const split = fresh({ maxBidsPerWindow: 1_000 });
      const batched: BidResult[] = [];
      let at = 0;
      let k = 0;
      while (at < bids.length) {
        const size = cuts[k++ % cuts.length]!;
        const r = split.apply({ op: 'bids', bids: bids.slice(at, at + size) }, { index: k, term: 1, time: T0 + 1 });
        if (r.op !== 'bids') return false;
        batched.push(...r.results);
        at += size;
      }
      t.same(batched, each);
      return Buffer.from(one.snapshot()).equals(Buffer.from(split.snapshot()));
    }),
    { numRuns: 200, seed: 99 },
  );
});

t.test('a retried idempotency key never changes state and answers the original outcome', async (t) => {
  fc.assert(
    fc.property(stepsArb, fc.nat(), fc.integer({ min: 1, max: 5_000 }), (steps, pick, amount) => {
      const m = fresh();
      const cmds = commands(steps);
      const results = play(m, cmds);
      const lastTime = cmds.at(-1)![1];
      const recorded = results.filter(
        (r): r is BidResult =>
          r.op === 'bid' && !['duplicate', 'not_started', 'too_frequent', 'unknown_auction'].includes(r.status),
      );
      if (recorded.length === 0) return true;
      const original = recorded[pick % recorded.length]!;
      const step = steps.find((s) => s.bid.bidId === original.bidId)!;
      const before = Buffer.from(m.snapshot());
      const again = m.apply(
        { op: 'bid', ...step.bid, bidId: 'retry', amount, maxProxyAmount: null },
        { index: 10_000, term: 1, time: lastTime },
      );
      if (again.op !== 'bid' || again.status !== 'duplicate') return false;
      // The key may have been reused after an expiry within the history; the newest outcome of that key answers.
      const newest = results
        .filter(
          (r): r is BidResult =>
            r.op === 'bid' &&
            r.status !== 'duplicate' &&
            r.bidderId === original.bidderId &&
            r.auctionId === original.auctionId &&
            steps.find((s) => s.bid.bidId === r.bidId)!.bid.idempotencyKey === step.bid.idempotencyKey &&
            !['not_started', 'too_frequent'].includes(r.status),
        )
        .at(-1);
      t.same(again.original, newest);
      return before.equals(Buffer.from(m.snapshot()));
    }),
    { numRuns: 300, seed: 7 },
  );
});

t.test('snapshot/restore mid-history gives identical answers afterwards', async (t) => {
  fc.assert(
    fc.property(stepsArb, fc.nat(), (steps, cut) => {
      const cmds = commands(steps);
      const at = cut % (cmds.length + 1);
      const a = fresh();
      play(a, cmds.slice(0, at));
      const b = new AuctionMachine();
      b.restore(a.snapshot());
      const ra = play(a, cmds.slice(at), at + 1);
      const rb = play(b, cmds.slice(at), at + 1);
      t.same(rb, ra);
      const time = cmds.at(-1)![1];
      t.same(b.getAuction('A', time), a.getAuction('A', time));
      t.same(b.due(END + 3_600_000), a.due(END + 3_600_000));
      return Buffer.from(a.snapshot()).equals(Buffer.from(b.snapshot()));
    }),
    { numRuns: 200, seed: 5 },
  );
});

t.test('a malformed command mid-history is refused with CommandShapeError and changes nothing', async (t) => {
  const malformed = fc.oneof(
    fc.anything(),
    bidArb.chain((b) =>
      fc.constantFrom<unknown>(
        { op: 'bid', ...b, amount: -b.amount },
        { op: 'bid', ...b, maxProxyAmount: 0 },
        { op: 'bids', bids: [b, { ...b, bidderId: 7 }] },
        { op: 'close', auctionId: null },
      ),
    ),
  );
  fc.assert(
    fc.property(stepsArb, malformed, (steps, bad) => {
      const m = fresh();
      const cmds = commands(steps);
      play(m, cmds);
      const before = Buffer.from(m.snapshot());
      try {
        m.apply(bad as AuctionCommand, { index: 999, term: 1, time: cmds.at(-1)![1] + 1 });
      } catch (error) {
        return (error as Error).name === 'CommandShapeError' && before.equals(Buffer.from(m.snapshot()));
      }
      return false;
    }),
    { numRuns: 300, seed: 11 },
  );
  t.pass('300 histories');
});

/** An independent, naive replay of the README's rules, to compare the machine with (statuses, price, high bidder). */
class Model {
  auctions = new Map<
    string,
    {
      price: number | null;
      high: string | null;
      max: number;
      closeAt: number;
      closed: boolean;
      window: number;
      reserve: number | null;
    }
  >();
  keys = new Map<string, string>();
  constructor() {
    this.auctions.set('A', {
      price: null,
      high: null,
      max: 0,
      closeAt: END,
      closed: false,
      window: 60_000,
      reserve: null,
    });
    this.auctions.set('B', { price: null, high: null, max: 0, closeAt: END, closed: false, window: 0, reserve: 500 });
  }
  bid(b: BidInput, now: number): string {
    const a = this.auctions.get(b.auctionId)!;
    const key = JSON.stringify([b.auctionId, b.bidderId, b.idempotencyKey]);
    if (this.keys.has(key)) return 'duplicate';
    let status: string;
    const max = b.maxProxyAmount ?? b.amount;
    const inc = 7;
    if (a.closed || now >= a.closeAt) status = 'auction_ended';
    else if (now < T0) return 'not_started';
    else if (b.bidderId === 'seller') status = 'seller_cannot_bid';
    else if (a.high === null) {
      if (b.amount >= 50) [status, a.price, a.high, a.max] = ['accepted', b.amount, b.bidderId, max];
      else status = 'below_increment';
    } else if (a.high === b.bidderId) {
      a.max = Math.max(a.max, max);
      status = 'max_raised';
    } else if (b.amount <= a.price!) status = 'outbid';
    else if (b.amount < a.price! + inc) status = 'below_increment';
    else if (max > a.max)
      [status, a.price, a.high, a.max] = ['accepted', Math.max(b.amount, Math.min(a.max + inc, max)), b.bidderId, max];
    else [status, a.price] = ['outbid', Math.max(a.price!, Math.min(max + inc, a.max))];
    if (status === 'accepted' && a.closeAt - now < a.window) a.closeAt = now + a.window;
    if (status === 'max_raised') status = 'accepted';
    this.keys.set(key, status);
    return status;
  }
  close(id: string, now: number): { winner: string | null; price: number | null } | null {
    const a = this.auctions.get(id)!;
    if (a.closed || now < a.closeAt) return null;
    a.closed = true;
    const met = a.price !== null && (a.reserve === null || a.price >= a.reserve);
    return { winner: met ? a.high : null, price: met ? a.price : null };
  }
}

t.test(
  'a naive sequential replay of the rules gives the same statuses, prices, high bidders and winners',
  async (t) => {
    fc.assert(
      fc.property(stepsArb, (steps) => {
        const m = fresh({ maxBidsPerWindow: 1_000 });
        const model = new Model();
        let index = 1;
        for (const [c, time] of commands(steps)) {
          const r = m.apply(c, { index: index++, term: 1, time });
          if (c.op === 'bid' && r.op === 'bid') {
            if (model.bid(c, time) !== r.status) return false;
            const a = model.auctions.get(c.auctionId)!;
            if (r.newHighBid !== a.price || r.highBidderId !== a.high || r.closeAt !== a.closeAt) return false;
          } else if (c.op === 'close' && r.op === 'close') {
            const expected = model.close(c.auctionId, time);
            if ((expected === null) !== (r.status !== 'closed')) return false;
            if (
              expected !== null &&
              r.status === 'closed' &&
              (r.handoff.winnerId !== expected.winner || r.handoff.finalPrice !== expected.price)
            )
              return false;
          }
        }
        return true;
      }),
      { numRuns: 500, seed: 2024 },
    );
    t.pass('500 histories');
  },
);
