/** The service's pure parts, without sockets: projector, fan-out channel, bidder tokens, bid batcher. */
import t from 'tap';
import { BidBatcher } from '../src/members/bid-batcher.js';
import { bidderToken, verifyBidderToken } from '../src/bidder-token.js';
import { Channel, SHARD_SIZE, snapshotSent, type Watcher } from '../src/workers/gateway/fanout.js';
import { AuctionMachine, type AuctionCommand, type AuctionResult, type BidInput } from '../src/machine.js';
import { ObservedAuctionMachine } from '../src/members/observed-machine.js';
import { Projector } from '../src/members/projector.js';
import { groupPlan, locateAuction } from '../src/placement.js';
import type { Push } from '../src/wire.js';

const T0 = 1_700_000_000_000;
const create = (auctionId: string, startAt = T0, endAt = T0 + 60_000): AuctionCommand => ({
  op: 'create',
  auctionId,
  itemId: 'i',
  sellerId: 's',
  startPrice: 100,
  reservePrice: null,
  minIncrement: 10,
  startAt,
  endAt,
  antiSnipeWindowS: 0,
});
const bid = (
  auctionId: string,
  bidderId: string,
  amount: number,
  n: number,
  max: number | null = null,
): AuctionCommand => ({
  op: 'bid',
  bidId: `b${n}`,
  auctionId,
  bidderId,
  amount,
  maxProxyAmount: max,
  idempotencyKey: `k${n}`,
});

/** A machine whose applied entries feed a projector, as on a member. */
function fed(): {
  machine: ObservedAuctionMachine;
  projector: Projector;
  apply: (c: AuctionCommand, time: number) => AuctionResult;
} {
  const projector = new Projector(() => T0);
  const machine = new ObservedAuctionMachine({
    applied: (c, r, time) => projector.push('g', c, r, time),
    restored: (m) => projector.reseed('g', m),
  });
  const config = { voters: [], learners: [] } as never;
  return { machine, projector, apply: (c, time) => machine.apply(c, { index: 0, term: 0, time, config } as never) };
}

t.test('the projector folds the log into the view asynchronously: full history, lists by state', async (t) => {
  const { projector, apply } = fed();
  apply(create('a'), T0);
  apply(create('later', T0 + 100_000, T0 + 200_000), T0);
  t.equal(projector.get('a'), undefined, 'not folded in the same turn');
  t.ok(projector.lagMs() >= 0);
  await new Promise((r) => setImmediate(r));
  t.ok(projector.get('a'), 'folded on the next turn');
  apply(bid('a', 'x', 100, 1, 150), T0 + 1);
  apply(bid('a', 'y', 120, 2), T0 + 2); // outbid by x's proxy at 130
  apply(bid('a', 'x', 500, 3, 900), T0 + 3); // max-only raise: no change
  apply(bid('a', 'y', 130, 2), T0 + 4); // duplicate key k2 for y: nothing
  apply(
    {
      op: 'bids',
      bids: [bid('a', 'z', 300, 4) as BidInput & { op: 'bid' }, bid('a', 'w', 310, 5) as BidInput & { op: 'bid' }],
    },
    T0 + 5,
  );
  projector.drain();
  const a = projector.get('a')!;
  t.same(
    a.history.map((h) => [h.bidder_id, h.amount, h.kind]),
    [
      ['x', 100, 'bid'],
      ['x', 130, 'proxy'],
      ['x', 310, 'proxy'],
    ],
    'every visible change once, proxies as the high bidder (w at 310 is outbid: not above the price)',
  );
  t.equal(a.currentHighBid, 310);
  t.same(
    a.log.map((e) => [e.bidder_id, e.status, e.high_bid]),
    [
      ['x', 'accepted', 100],
      ['y', 'outbid', 130],
      ['x', 'accepted', 130],
      ['y', 'duplicate', 130],
      ['z', 'outbid', 310],
      ['w', 'outbid', 310],
    ],
    'the bid log: every entry in order',
  );
  t.equal(a.logComplete, true);
  t.same(
    projector.list('g', 'live', T0 + 10, 10).map((x) => x.auctionId),
    ['a'],
  );
  t.same(
    projector.list('g', 'scheduled', T0 + 10, 10).map((x) => x.auctionId),
    ['later'],
  );
  apply({ op: 'close', auctionId: 'a' }, T0 + 60_000);
  projector.drain();
  t.same(
    projector.list('g', 'closed', T0 + 60_001, 10).map((x) => x.auctionId),
    ['a'],
  );
  t.match(projector.get('a')!.handoff, { winnerId: 'x', finalPrice: 310 });
});

t.test('the projector is rebuilt from a restored machine', async (t) => {
  const first = fed();
  first.apply(create('a'), T0);
  first.apply(bid('a', 'x', 100, 1), T0 + 1);
  first.apply(bid('a', 'y', 200, 2), T0 + 2);
  const second = fed();
  second.machine.restore(first.machine.snapshot());
  t.same(
    second.projector.get('a')!.history.map((h) => h.amount),
    [100, 200],
  );
  t.equal(second.projector.get('a')!.currentHighBid, 200);
  t.equal(second.projector.get('a')!.logComplete, false, 'a view rebuilt from a snapshot says its log is partial');
});

function watcher(): Watcher & { got: Push[] } {
  const got: Push[] = [];
  return { got, seq: -1, early: null, send: (frame) => got.push(JSON.parse(frame.text) as Push) };
}
const update = (seq: number): Push => ({
  type: 'bid_update',
  auction_id: 'a',
  high_bid: seq * 10,
  bidder: 'x',
  close_at: 1,
  seq,
});

t.test('fan-out: shards of at most 10,000 watchers, each push once and in order', async (t) => {
  const channel = new Channel();
  const all = Array.from({ length: 2 * SHARD_SIZE + 5 }, () => watcher());
  for (const w of all) channel.add(w);
  t.same(
    channel.shards.map((s) => s.size),
    [SHARD_SIZE, SHARD_SIZE, 5],
    'split above 10K',
  );
  for (const w of all) snapshotSent(w, 0);
  await channel.forward(update(2));
  await channel.forward(update(1)); // a repeat from an older writer, or a poll overtaken: dropped
  await channel.forward(update(2));
  await channel.forward(update(3));
  t.ok(
    all.every((w) => w.got.map((p) => p.seq).join() === '2,3'),
    'every watcher got 2 then 3, nothing twice or backwards',
  );
  channel.remove(all[0]!);
  t.equal(channel.size, 2 * SHARD_SIZE + 4);
});

t.test('fan-out: pushes before the snapshot are replayed after it when newer', async (t) => {
  const channel = new Channel();
  const w = watcher();
  w.early = [];
  channel.add(w);
  await channel.forward(update(4));
  await channel.forward(update(6));
  t.same(w.got, [], 'nothing before the snapshot');
  snapshotSent(w, 5);
  t.same(
    w.got.map((p) => p.seq),
    [6],
    'only what the snapshot did not show',
  );
});

t.test('bidder tokens: bound to the id and the cluster token', async (t) => {
  const tk = bidderToken('cluster-secret', 'alice');
  t.ok(verifyBidderToken(['cluster-secret'], 'alice', tk));
  t.notOk(verifyBidderToken(['cluster-secret'], 'bob', tk));
  t.notOk(verifyBidderToken(['other'], 'alice', tk));
  t.notOk(verifyBidderToken(['cluster-secret'], 'alice', tk.slice(0, -1)));
});

t.test('placement: slot ranges cover every id once', async (t) => {
  const groups = groupPlan(4).map((g) => ({ name: g.name, members: [], data: g.data }));
  const seen = new Map<string, number>();
  for (let i = 0; i < 2_000; i++) {
    const g = locateAuction(`id-${i}`, groups);
    t.ok(g !== null, `id-${i} placed`);
    seen.set(g!, (seen.get(g!) ?? 0) + 1);
    if (g === null) break;
  }
  t.equal(seen.size, 4, 'every group used');
  t.equal(
    locateAuction('x', [{ name: 'log.t.0', members: [], data: { slots: [0, 16383] } }]),
    null,
    "other services' groups are ignored",
  );
});

t.test('the bid batcher: bids of one turn share one entry and keep their own results', async (t) => {
  const machine = new AuctionMachine();
  const ctx = { index: 0, term: 0, time: T0 + 1, config: { voters: [], learners: [] } } as never;
  machine.apply(create('a'), ctx);
  const proposed: AuctionCommand[] = [];
  const propose = async (c: AuctionCommand): Promise<AuctionResult> => {
    proposed.push(c);
    return machine.apply(c, ctx);
  };
  const batcher = new BidBatcher();
  const results = await Promise.all(
    [1, 2, 3].map((n) =>
      batcher.submit('g', propose, { ...(bid('a', `u${n}`, 100 + n * 10, n) as BidInput & { op: 'bid' }) }),
    ),
  );
  t.equal(proposed.length, 1, 'one entry');
  t.equal(proposed[0]!.op, 'bids');
  t.same(
    results.map((r) => [r.bidderId, r.status, r.newHighBid]),
    [
      ['u1', 'accepted', 110],
      ['u2', 'accepted', 120],
      ['u3', 'accepted', 130],
    ],
  );
  const single = await batcher.submit('g', propose, { ...(bid('a', 'u4', 200, 4) as BidInput & { op: 'bid' }) });
  t.equal(proposed[1]!.op, 'bid', 'a lone bid is a plain entry');
  t.equal(single.status, 'accepted');
  const failing = new BidBatcher();
  await t.rejects(
    failing.submit('g', () => Promise.reject(new Error('no leader')), {
      ...(bid('a', 'u5', 300, 5) as BidInput & { op: 'bid' }),
    }),
    /no leader/,
    'a failed entry fails its bids',
  );
});
