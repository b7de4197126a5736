/**
 * The gateway cores: routing never takes more than one re-route, never sends to a dead shard, and answers sold out
 * only when the bitmap is empty; the token pool sums to about 3x the inventory and an empty share answers sold out.
 */
import fc from 'fast-check';
import t from 'tap';
import {
  AliveShards,
  distributeTokens,
  firstRoute,
  homeShard,
  nextRoute,
  rerouteCandidate,
  poolSize,
  TOKEN_GRACE_MS,
  TokenPool,
  tokensValid,
  type RouteDecision,
} from '../src/workers/gateway/gates.js';

t.test('alive-shards bitmap: set, clear, count, bytes round trip', async (t) => {
  const a = AliveShards.all(20);
  t.equal(a.count, 20);
  a.set(3, false);
  a.set(3, false);
  a.set(19, false);
  t.equal(a.count, 18);
  t.notOk(a.has(3));
  t.notOk(a.has(20), 'out of range is not alive');
  const b = AliveShards.fromBytes(20, a.toBytes());
  t.same(b.list(), a.list());
  t.equal(b.count, 18);
  t.throws(() => a.set(20, true), RangeError);
  t.throws(() => new AliveShards(0), RangeError);
});

t.test('home shard: stable, in range, spread', async (t) => {
  t.equal(homeShard('d', 'alice', 20), homeShard('d', 'alice', 20));
  const per = new Array<number>(20).fill(0);
  for (let i = 0; i < 20_000; i++) per[homeShard('d', `user-${i}`, 20)]!++;
  t.ok(
    Math.min(...per) > 800 && Math.max(...per) < 1_200,
    `20,000 users over 20 shards: ${Math.min(...per)} to ${Math.max(...per)}`,
  );
});

t.test(
  'routing: at most one re-route, only to the pin (even one the bitmap says is empty), sold out only from an empty bitmap',
  async (t) => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 24 }),
        fc.array(fc.boolean(), { minLength: 24, maxLength: 24 }),
        fc.array(fc.boolean(), { minLength: 24, maxLength: 24 }),
        fc.string(),
        fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }),
        fc.option(fc.nat(30), { nil: null }),
        (n, bits, stock, user, random, pinned) => {
          // The gateway's bitmap (possibly stale: a set bit on a shard with no stock), the shards' real stock, and a pin
          // the home shard may already hold for this user from an earlier attempt (any shard, even a dead one).
          const alive = new AliveShards(
            n,
            bits.slice(0, n).flatMap((b, i) => (b ? [i] : [])),
          );
          const home = homeShard('deal', user, n);
          const candidate = rerouteCandidate(alive, home, random);
          if (candidate !== null && (candidate === home || !alive.has(candidate)))
            throw new Error(`drew ${candidate}: home or dead`);
          if (candidate === null && alive.list().some((s) => s !== home))
            throw new Error('drew nothing with other shards alive');
          const before = alive.count;
          let decision: RouteDecision = firstRoute(alive, home);
          if (decision.kind === 'sold_out' && before !== 0) throw new Error('sold out with shards alive');
          if (decision.kind === 'shard' && decision.shard !== home) throw new Error('first hop not home');
          let hops = 0;
          while (decision.kind === 'shard') {
            hops++;
            if (hops > 1 && decision.shard !== (pinned !== null ? pinned % n : candidate))
              throw new Error(`re-routed to ${decision.shard}, not the pin`);
            if (hops > 2) throw new Error('more than one re-route');
            if (stock[decision.shard]) break; // won
            alive.set(decision.shard, false); // the shard answered empty
            // The home shard answers its pin (an earlier one, else the candidate); the re-routed shard should answer
            // none, but the gateway must not take a second re-route even if it names one.
            const reroute = pinned !== null ? pinned % n : candidate;
            const left = alive.count;
            decision = nextRoute(decision, alive, reroute);
            if (decision.kind === 'sold_out' && left !== 0) throw new Error('sold out with shards alive');
          }
          if (decision.kind === 'lost' && alive.count === 0)
            throw new Error('lost with an empty bitmap: should be sold out');
        },
      ),
      { numRuns: 2_000, seed: 20 },
    );
    t.pass('2,000 routes');
  },
);

t.test('routing examples', async (t) => {
  const alive = AliveShards.all(4);
  t.same(firstRoute(alive, 2), { kind: 'shard', shard: 2, rerouted: false });
  t.equal(rerouteCandidate(alive, 2, 0.99), 3, 'random picks among alive shards but home');
  t.equal(rerouteCandidate(alive, 2, 0), 0);
  alive.set(2, false);
  t.same(
    firstRoute(alive, 2),
    { kind: 'shard', shard: 2, rerouted: false },
    'home even when known empty: it holds the pin',
  );
  t.same(nextRoute({ kind: 'shard', shard: 2, rerouted: false }, alive, 3), {
    kind: 'shard',
    shard: 3,
    rerouted: true,
  });
  t.same(nextRoute({ kind: 'shard', shard: 3, rerouted: true }, alive, 1), { kind: 'lost' }, 'no second re-route');
  alive.set(3, false);
  t.same(
    nextRoute({ kind: 'shard', shard: 2, rerouted: false }, alive, 3),
    { kind: 'shard', shard: 3, rerouted: true },
    'the pin even when the bitmap says it is empty: it answers its winner',
  );
  t.same(
    nextRoute({ kind: 'shard', shard: 2, rerouted: false }, new AliveShards(4), 3),
    { kind: 'shard', shard: 3, rerouted: true },
    'the pin even with an empty bitmap',
  );
  t.same(
    nextRoute({ kind: 'shard', shard: 3, rerouted: true }, new AliveShards(4), null),
    { kind: 'sold_out' },
    'sold out once no pin is left',
  );
  t.same(nextRoute({ kind: 'shard', shard: 2, rerouted: false }, alive, null), { kind: 'lost' });
  t.same(firstRoute(new AliveShards(4), 2), { kind: 'sold_out' });
  t.equal(rerouteCandidate(new AliveShards(4, [2]), 2, 0.5), null, 'only home alive: no candidate');
  t.throws(() => rerouteCandidate(alive, 0, 1), RangeError);
  t.throws(() => rerouteCandidate(alive, 0, Number.NaN), RangeError);
});

t.test(
  'admission tokens: 3x the inventory, split over the gateways, taken locally until the share is spent',
  async (t) => {
    t.equal(poolSize(1_000), 3_000);
    t.equal(poolSize(7, 2.5), 18);
    fc.assert(
      fc.property(fc.nat(100_000), fc.integer({ min: 1, max: 64 }), (pool, gateways) => {
        const shares = distributeTokens(pool, gateways);
        if (shares.length !== gateways) throw new Error('a share per gateway');
        if (shares.reduce((a, b) => a + b, 0) !== pool) throw new Error('shares do not sum to the pool');
        if (Math.max(...shares) - Math.min(...shares) > 1) throw new Error('uneven shares');
      }),
      { seed: 21 },
    );
    const pool = new TokenPool(2);
    t.equal(pool.take(), 'admitted');
    t.equal(pool.take(), 'admitted');
    t.equal(pool.take(), 'sold_out');
    t.equal(pool.remaining, 0);
    t.throws(() => new TokenPool(-1), RangeError);
    // A spent share is re-issued at most once per refresh generation, and only when spent.
    t.notOk(new TokenPool(1).topUp(5, 1), 'a share not spent is not topped up');
    t.ok(pool.topUp(3, 100), 'spent: topped up for refresh 100');
    t.equal(pool.remaining, 3);
    for (let i = 0; i < 3; i++) pool.take();
    t.notOk(pool.topUp(3, 100), 'at most once per refresh generation');
    t.equal(pool.take(), 'sold_out');
    t.ok(pool.topUp(1, 200), 'the next refresh may top up again');
    t.notOk(new TokenPool(0).topUp(0, 1), 'nothing to re-issue');
    t.throws(() => pool.topUp(-1, 300), RangeError);
    t.ok(tokensValid(1_000, 1_000 + TOKEN_GRACE_MS - 1));
    t.notOk(tokensValid(1_000, 1_000 + TOKEN_GRACE_MS));
  },
);
