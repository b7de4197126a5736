/**
 * The Redis peer's Lua token bucket against a real redis-server: the same arithmetic as the service's
 * packages/services/ratelimit bucket.ts (replayed from the state redis stored), counters start full, one token admits
 * exactly one of two concurrent checks from two connections, the retry_after formula, the expiry, and several
 * rules in one call.
 */
import t from 'tap';
import { take, type Counter } from '@raftkit/ratelimit';
import { cleanupAll } from '../src/cleanup.js';
import { RedisBuckets, startRedis } from '../src/peers/redis.js';

const server = await startRedis();
const buckets = await RedisBuckets.open(server.port, 2);
t.teardown(async () => {
  buckets.close();
  await cleanupAll();
});

async function stored(key: string): Promise<Counter> {
  const [tokens, last] = await buckets.client.hmget(key, 'tokens', 'last_refill');
  return { tokens: Number(tokens), lastRefill: Number(last) };
}

t.test('the server is a redis 7 with no persistence', async (t) => {
  t.match(server.version, /^7\./);
  t.same(await buckets.client.config('GET', 'save'), ['save', '']);
  t.same(await buckets.client.config('GET', 'appendonly'), ['appendonly', 'no']);
});

t.test('a missing counter starts full', async (t) => {
  const r = await buckets.check(['t:start'], [{ capacity: 5, refillRate: 1 }]);
  t.same(r, { allowed: true, remaining: 4, resetMs: 1000 });
});

t.test('every step equals bucket.ts take() on the state redis stored', async (t) => {
  // A slow refill, so the burst empties the bucket however slowly a loaded machine runs the steps.
  const limits = { capacity: 3, refillRate: 5 };
  let before: Counter | null = null;
  let emptied = false;
  for (let i = 0; i < 12; i++) {
    const r = await buckets.check(['t:replay'], [limits]);
    const after = await stored('t:replay');
    const expected = take(
      before ?? { tokens: limits.capacity, lastRefill: after.lastRefill },
      limits,
      after.lastRefill,
    );
    t.equal(r.allowed, expected.allowed, `step ${i}: allowed`);
    t.equal(r.remaining, expected.remaining, `step ${i}: remaining`);
    t.equal(r.retryAfterMs, expected.retryAfterMs, `step ${i}: retry_after_ms`);
    t.equal(r.resetMs, expected.resetMs, `step ${i}: reset_ms`);
    before = after;
    if (after.tokens < 1) emptied = true;
    if (i % 4 === 3) await new Promise((res) => setTimeout(res, 15));
  }
  t.ok(emptied, 'the burst emptied the bucket at least once');
});

t.test('one token admits exactly one of two concurrent checks from two connections', async (t) => {
  for (let round = 0; round < 20; round++) {
    const key = `t:one:${round}`;
    const limits = [{ capacity: 1, refillRate: 0.001 }];
    const [a, b] = await Promise.all([buckets.check([key], limits), buckets.check([key], limits)]);
    t.equal(Number(a.allowed) + Number(b.allowed), 1, `round ${round}`);
  }
});

t.test('a denial: remaining 0 and retry_after_ms = ceil((1 - tokens) / refill_rate * 1000)', async (t) => {
  const limits = [{ capacity: 1, refillRate: 2 }];
  t.equal((await buckets.check(['t:retry'], limits)).allowed, true);
  const r = await buckets.check(['t:retry'], limits);
  const s = await stored('t:retry');
  t.equal(r.allowed, false);
  t.equal(r.remaining, 0);
  t.equal(r.retryAfterMs, Math.ceil(((1 - s.tokens) / 2) * 1000));
  t.ok(r.retryAfterMs! > 0 && r.retryAfterMs! <= 500);
});

t.test('a counter expires capacity / refill_rate * 1000 + 1000 ms after its last update', async (t) => {
  await buckets.check(['t:ttl'], [{ capacity: 10, refillRate: 5 }]);
  const ttl = await buckets.client.pttl('t:ttl');
  t.ok(ttl > 2_900 && ttl <= 3_000, `pttl ${ttl}`);
});

t.test('several rules in one call: any deny denies, remaining is the smallest, all or nothing', async (t) => {
  const limits = [
    { capacity: 10, refillRate: 0.01 },
    { capacity: 2, refillRate: 0.01 },
  ];
  const keys = ['t:multi:ip', 't:multi:user'];
  t.same(await buckets.check(keys, limits), { allowed: true, remaining: 1, resetMs: 100_000 });
  t.match(await buckets.check(keys, limits), { allowed: true, remaining: 0 });
  const denied = await buckets.check(keys, limits);
  t.match(denied, { allowed: false, remaining: 0 });
  t.ok(denied.retryAfterMs! > 99_000, `retry ${denied.retryAfterMs}`);
  t.equal(
    Math.floor((await stored('t:multi:ip')).tokens),
    8,
    'a denied check takes nothing, also from the rule that had tokens',
  );
});
