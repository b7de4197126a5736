import fc from 'fast-check';
import t from 'tap';
import { CounterTable, splitKey } from '../../src/workers/store/counters.js';
import type { SyncEntry, WireOp, WireResult } from '../../src/workers/store/protocol.js';

const op = (key: string, capacity: number, refillRate: number, cost = 1, budget: 0 | 1 = 0): WireOp => [
  key,
  capacity,
  refillRate,
  cost,
  budget,
];
const table = (regions = 1) => new CounterTable({ regions, syncMs: 1000 });
const takeOne = (c: CounterTable, key: string, capacity: number, rate: number, now: number): WireResult =>
  c.take([op(key, capacity, rate)], now)[0]!;

t.test('a counter that does not exist starts full (tokens = capacity, last_refill = now)', async (t) => {
  const c = table();
  t.same(takeOne(c, 'k', 5, 1, 1000), [1, 4, -1, 1000]);
  t.equal(c.peek('k')!.lastRefill, 1000);
});

t.test('rule 3: tokens >= 1 after refill: subtract 1, last_refill = now, remaining = floor(tokens)', async (t) => {
  const c = table();
  for (let i = 0; i < 5; i++) t.equal(takeOne(c, 'k', 5, 1, 0)[1], 4 - i);
  // 1.5 s later: 0 + 1.5 tokens -> allowed, 0.5 left (remaining floor = 0)
  const r = takeOne(c, 'k', 5, 1, 1500);
  t.same(r, [1, 0.5, -1, 4500]);
  t.equal(c.peek('k')!.lastRefill, 1500);
});

t.test(
  'rule 4: tokens < 1: denied, nothing taken, retry_after_ms = ceil((1 - tokens) / refill_rate * 1000)',
  async (t) => {
    const c = table();
    takeOne(c, 'k', 2, 3, 0);
    takeOne(c, 'k', 2, 3, 0);
    const r = takeOne(c, 'k', 2, 3, 100); // 0 + 0.1 * 3 = 0.3 tokens
    t.equal(r[0], 0);
    t.ok(Math.abs(r[1] - 0.3) < 1e-9);
    t.equal(r[2], Math.ceil(((1 - 0.3) / 3) * 1000)); // 234
    t.ok(Math.abs(c.peek('k')!.tokens - 0.3) < 1e-9, 'a denial takes nothing');
    t.equal(c.peek('k')!.lastRefill, 100, 'the refill moved last_refill, so elapsed time is not counted twice');
  },
);

t.test('rule 2: lazy refill caps at capacity, on the store clock passed in', async (t) => {
  const c = table();
  takeOne(c, 'k', 3, 1, 0);
  takeOne(c, 'k', 3, 1, 0);
  t.equal(takeOne(c, 'k', 3, 1, 60_000)[1], 2, 'a minute of refill still stops at capacity');
  t.equal(takeOne(c, 'k', 3, 1, 59_000)[1], 1, 'a clock reading behind last_refill adds nothing');
});

t.test('property: the table agrees with a reference bucket over random take sequences', async (t) => {
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: 20 }),
      fc.double({ min: 0.1, max: 50, noNaN: true }),
      fc.array(fc.integer({ min: 0, max: 700 }), { minLength: 1, maxLength: 60 }),
      (capacity, rate, gaps) => {
        const c = table();
        let tokens = capacity;
        let now = 0;
        for (const gap of gaps) {
          now += gap;
          tokens = Math.min(capacity, tokens + (gap / 1000) * rate);
          const r = takeOne(c, 'k', capacity, rate, now);
          if (tokens >= 1) {
            tokens -= 1;
            if (r[0] !== 1 || Math.abs(r[1] - tokens) > 1e-6) return false;
          } else if (r[0] !== 0 || r[2] !== Math.ceil(((1 - r[1]) / rate) * 1000) || Math.abs(r[1] - tokens) > 1e-6)
            return false;
        }
        return true;
      },
    ),
    { numRuns: 300 },
  );
  t.pass('300 random sequences agree');
});

t.test('one request: all ops are taken, or none when any is short', async (t) => {
  const c = table();
  takeOne(c, 'user', 1, 1, 0); // user bucket now empty
  const denied = c.take([op('ip', 10, 1), op('user', 1, 1)], 0);
  t.same(denied[0], [1, 10, -1, 0], 'the ip op had tokens, but nothing was taken from it');
  t.equal(denied[1]![0], 0);
  t.equal(c.peek('ip')!.tokens, 10);
  const allowed = c.take([op('ip', 10, 1), op('user', 1, 1)], 1000);
  t.same(
    allowed.map((r) => r[0]),
    [1, 1],
  );
  t.equal(c.peek('ip')!.tokens, 9);
  t.equal(c.peek('user')!.tokens, 0);
});

t.test('the same key twice in one request takes twice and is judged on the sum', async (t) => {
  const c = table();
  t.same(
    c.take([op('k', 2, 1), op('k', 2, 1)], 0).map((r) => r[0]),
    [1, 1],
  );
  t.equal(c.peek('k')!.tokens, 0);
  const r = c.take([op('j', 1, 1), op('j', 1, 1)], 0);
  t.equal(c.peek('j')!.tokens, 1, 'two ops of cost 1 on one token: none taken');
  t.ok(r.some((x) => x[0] === 0));
});

t.test('cost above one', async (t) => {
  const c = table();
  t.same(c.take([op('k', 10, 2, 4)], 0)[0], [1, 6, -1, 2000]);
  t.same(c.take([op('k', 10, 2, 7)], 0)[0], [0, 6, 500, 2000]);
});

t.test('idle expiry: capacity / refill_rate * 1000 + 1000 ms after the last update', async (t) => {
  const c = table();
  takeOne(c, 'k', 4, 2, 10_000); // expiry 4 / 2 * 1000 + 1000 = 3000 ms
  t.equal(c.sweep(12_999), 0, 'still alive 1 ms before expiry');
  t.equal(c.size, 1);
  t.equal(c.sweep(13_000), 1, 'gone at expiry');
  t.equal(c.size, 0);
  t.equal(takeOne(c, 'k', 4, 2, 13_000)[1], 3, 'comes back full');
});

t.test('idle expiry is refreshed by every take, and a denial', async (t) => {
  const c = table();
  takeOne(c, 'k', 1, 1, 0); // expires at 2000
  takeOne(c, 'k', 1, 1, 500); // denied; expires at 2500
  t.equal(c.sweep(2_400), 0);
  t.equal(c.sweep(2_500), 1);
});

t.test('an expired counter not yet swept behaves as a new, full one', async (t) => {
  const c = table();
  // Only a changed rule tells the two apart (an idle counter is full anyway): capacity 2 -> 100 at the same rate.
  takeOne(c, 'k', 2, 0.001, 0); // idle expiry 2 / 0.001 * 1000 + 1000 = 2_001_000 ms
  takeOne(c, 'k', 2, 0.001, 0);
  const d = table();
  takeOne(d, 'k', 2, 0.001, 0);
  takeOne(d, 'k', 2, 0.001, 0);
  t.ok(Math.abs(takeOne(d, 'k', 100, 0.001, 2_000_999)[1] - 1.000999) < 1e-9, 'alive: refilled from 0, not full');
  t.equal(takeOne(c, 'k', 100, 0.001, 2_001_000)[1], 99, 'expired: recreated full under the new capacity');
});

t.test('the sweep works through a bounded slice per call and finds every expired counter', async (t) => {
  const c = table();
  for (let i = 0; i < 100; i++) takeOne(c, `k${i}`, 1, 1, i % 2 === 0 ? 0 : 10_000);
  let expired = 0;
  for (let i = 0; i < 10; i++) expired += c.sweep(5_000, 10);
  t.equal(expired, 50, 'ten slices of ten cover all 100 counters; the 50 idle ones are gone');
  t.equal(c.size, 50);
});

t.test(
  'keys split after their third ":" (prefix + value is the key), so values with ":" and short keys stay apart',
  async (t) => {
    t.same(
      splitKey('shop:/api/*:ip:2001:db8::1'),
      ['shop:/api/*:ip:', '2001:db8::1'],
      'an IPv6 value keeps its colons',
    );
    t.same(splitKey('shop:*:user_id:'), ['shop:*:user_id:', ''], 'an empty value');
    t.same(splitKey('k7'), ['', 'k7'], 'fewer than three ":": all value');
    t.same(splitKey('a:b'), ['', 'a:b']);
    fc.assert(
      fc.property(fc.string({ unit: fc.constantFrom('a', ':', 'é', '/', '*'), maxLength: 12 }), (key) => {
        const [prefix, value] = splitKey(key);
        return prefix + value === key && (prefix === '' || prefix.split(':').length === 4);
      }),
      { numRuns: 500 },
    );
    const c = table();
    const keys = ['shop:/a:ip:1:2', 'shop:/a:ip:1', 'shop:/a:ip::1:2', 'shop:/a:user_id:1:2', 'a:b', 'a:b:c:d'];
    for (const k of keys) takeOne(c, k, 5, 1, 0);
    takeOne(c, 'shop:/a:ip:1:2', 5, 1, 0);
    t.equal(c.size, keys.length, 'six keys, six counters');
    t.equal(c.peek('shop:/a:ip:1:2')?.tokens, 3, 'the key taken twice');
    t.equal(c.peek('shop:/a:ip:1')?.tokens, 4, 'its neighbours taken once');
    t.equal(c.peek('a:b:c:d')?.tokens, 4);
  },
);

t.test('the sweep walks every key prefix and forgets the expired counters of each', async (t) => {
  const c = table();
  for (let i = 0; i < 60; i++)
    takeOne(c, `tenant${i % 3}:/api/*:${i % 2 === 0 ? 'ip' : 'user_id'}:v${i}`, 1, 1, i % 4 === 0 ? 0 : 10_000);
  let expired = 0;
  for (let i = 0; i < 20; i++) expired += c.sweep(5_000, 10);
  t.equal(expired, 15, 'the 15 idle counters are gone, across the six prefixes');
  t.equal(c.size, 45);
  // A call ends its slice at the end of a pass: the next one starts the next pass.
  let later = 0;
  for (let i = 0; i < 2; i++) later += c.sweep(1_000_000, 1_000);
  t.equal(later, 45, 'much later every counter has expired');
  t.equal(c.size, 0);
  takeOne(c, 'tenant0:/api/*:ip:v0', 1, 1, 1_000_000);
  t.equal(c.size, 1, 'a prefix whose counters all went is used again');
});

t.test('debit: subtracts a count admitted elsewhere, down to -capacity at most', async (t) => {
  const c = table();
  t.equal(c.debit('k', { capacity: 10, refillRate: 1 }, 4, 0), 6);
  t.equal(c.debit('k', { capacity: 10, refillRate: 1 }, 100, 0), -10);
  const r = takeOne(c, 'k', 10, 1, 1000);
  t.equal(r[0], 0);
  t.equal(r[2], 10_000, 'the debt is paid back before the next admission: ceil((1 - -9) / 1 * 1000)');
});

t.test('single region: no change tracking, nothing to sync', async (t) => {
  const c = table(1);
  takeOne(c, 'k', 5, 1, 0);
  t.same(c.snapshot(0), []);
});

t.test('snapshot: changed counters with their taken delta, once', async (t) => {
  const c = table(2);
  takeOne(c, 'k', 5, 1, 0);
  takeOne(c, 'k', 5, 1, 0);
  c.debit('k', { capacity: 5, refillRate: 1 }, 1, 0);
  t.same(c.snapshot(10), [['k', 2, 0, 5, 1, 3, 0, 0]]);
  t.same(c.snapshot(20), [], 'nothing changed since');
});

t.test(
  "merge: subtract the other region's taken, then min(tokens), max(last_refill), both refilled to now",
  async (t) => {
    const a = table(2);
    const b = table(2);
    for (let i = 0; i < 3; i++) takeOne(a, 'k', 10, 1, 0); // a: 7
    for (let i = 0; i < 2; i++) takeOne(b, 'k', 10, 1, 0); // b: 8
    b.merge(1, a.snapshot(0), 0);
    t.equal(b.peek('k')!.tokens, 5, 'b knows both regions took: 10 - 3 - 2');
    a.merge(2, b.snapshot(0), 0);
    t.equal(a.peek('k')!.tokens, 5, 'and so does a: min(7 - 2, 5)');
    t.same(a.snapshot(0), [], 'merged changes are not echoed back');
  },
);

t.test('merge: min(tokens) and max(last_refill) on a counter the receiver never saw', async (t) => {
  const b = table(2);
  const entry: SyncEntry = ['k', 4, 500, 10, 1, 0, 0, 0];
  b.merge(1, [entry], 1500);
  t.equal(b.peek('k')!.tokens, 5, "the sender's 4 tokens refilled 1 s to now: min(10 full, 5)");
  t.equal(b.peek('k')!.lastRefill, 1500);
  b.merge(1, [['k', 9, 2000, 10, 1, 0, 0, 0]], 1500);
  t.equal(b.peek('k')!.tokens, 5, 'min keeps the lower tokens');
  t.equal(b.peek('k')!.lastRefill, 2000, 'max keeps the later last_refill');
});

t.test(
  'property: with deltas exchanged every step, two saturated regions admit no more than one bucket plus one step each',
  async (t) => {
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.nat(5), fc.nat(5)), { minLength: 1, maxLength: 40 }), (steps) => {
        const a = table(2);
        const b = table(2);
        let admitted = 0;
        let now = 0;
        let bound = 10 + 5 * 2; // capacity plus one step's worth of takes in each region (the sync lag)
        for (const [na, nb] of steps) {
          now += 100; // 0.1 s: 1 token of refill at rate 10
          bound += 1;
          for (let i = 0; i < na; i++) admitted += takeOne(a, 'k', 10, 10, now)[0];
          for (let i = 0; i < nb; i++) admitted += takeOne(b, 'k', 10, 10, now)[0];
          const fromA = a.snapshot(now);
          const fromB = b.snapshot(now);
          b.merge(1, fromA, now);
          a.merge(2, fromB, now);
        }
        return admitted <= bound;
      }),
      { numRuns: 300 },
    );
    t.pass('300 random traffic patterns stay within the bound');
  },
);

t.test('budget: equal shares until demand is known, then shares in proportion to traffic', async (t) => {
  const a = table(2);
  // Unknown demand: capacity 10 scaled by 1/2 -> 5 tokens in this region.
  const first = a.take([op('k', 10, 10, 1, 1)], 0)[0]!;
  t.equal(first[1], 4);
  // Window 0 (0..999 ms): 3 requests here; the other region reports 27 per window.
  a.take([op('k', 10, 10, 1, 1)], 10);
  a.take([op('k', 10, 10, 1, 1)], 20);
  a.merge(2, [['k', 0, 0, 10, 10, 0, 27, 1]], 1000);
  t.equal(a.share('k', 1000), (3 + 1) / (3 + 27 + 2), 'share = (mine + 1) / (all + regions)');
  t.ok(a.share('k', 3999) < 0.5);
  t.equal(a.share('k', 5000), 1 / 2, 'demand older than three windows is forgotten (equal shares again)');
});

t.test('budget: the take uses the scaled capacity and refill rate', async (t) => {
  const a = table(4);
  const r = a.take([op('k', 8, 4, 1, 1)], 0)[0]!; // share 1/4 -> capacity 2, rate 1
  t.same(r, [1, 1, -1, 1000]);
  t.equal(a.take([op('k', 8, 4, 1, 1)], 0)[0]![0], 1);
  const denied = a.take([op('k', 8, 4, 1, 1)], 0)[0]!;
  t.equal(denied[0], 0);
  t.ok(denied[2] >= 1000, `at a quarter of the rate one token takes about a second (${denied[2]} ms)`);
});
