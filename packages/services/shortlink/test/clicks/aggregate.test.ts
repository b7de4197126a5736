import fc from 'fast-check';
import t from 'tap';
import { aggregate, counterIncrements, dayOf, refererHost, Tally } from '../../src/workers/clicks/aggregate.js';
import { pack } from 'msgpackr';
import { partitionOf, ownedPartitions } from '../../src/workers/clicks/partition.js';
import {
  decodeClick,
  decodeRecord,
  encodeClick,
  encodeClicks,
  MAX_TEXT,
  type StreamedClick,
} from '../../src/workers/clicks/wire.js';

const click = (over: Partial<StreamedClick> = {}): StreamedClick => ({
  producer: 'p1',
  seq: 0,
  short_code: 'abcDEF1',
  timestamp: Date.UTC(2026, 10, 21, 23, 59, 59),
  referer: 'https://News.example.com/a?b=c',
  country: 'DE',
  user_agent: 'curl/8',
  ...over,
});

t.test('a batch becomes per-link increments: total, UTC day, country, referer host', async (t) => {
  const batch = aggregate(
    [
      click({ seq: 0 }),
      click({ seq: 1, referer: null, country: null, timestamp: Date.UTC(2026, 10, 22) }),
      click({ seq: 2, short_code: 'other_alias' }),
    ],
    () => undefined,
  );
  t.same(Object.fromEntries(counterIncrements(batch.links)), {
    's!abcDEF1!t': 2,
    's!abcDEF1!d!2026-11-21': 1,
    's!abcDEF1!d!2026-11-22': 1,
    's!abcDEF1!c!DE': 1,
    's!abcDEF1!c!unknown': 1,
    's!abcDEF1!r!news.example.com': 1,
    's!abcDEF1!r!direct': 1,
    's!other_alias!t': 1,
    's!other_alias!d!2026-11-21': 1,
    's!other_alias!c!DE': 1,
    's!other_alias!r!news.example.com': 1,
  });
  t.same(Object.fromEntries(batch.seqs), { p1: 2 });
  t.equal(batch.accepted, 3);
});

t.test('a tally counts like a Map, keys in the order they first arrived', async (t) => {
  fc.assert(
    fc.property(fc.array(fc.tuple(fc.constantFrom('a', 'b', 'c', 'd'), fc.integer({ min: 1, max: 5 }))), (adds) => {
      const tally = new Tally();
      const model = new Map<string, number>();
      for (const [key, n] of adds) {
        // A fresh string of the same text must count as the same key.
        tally.add(`${key}`.slice(0), n);
        model.set(key, (model.get(key) ?? 0) + n);
      }
      const seen: Array<[string, number]> = [];
      tally.forEach((key, n) => seen.push([key, n]));
      t.same(seen, [...model], 'tally = model', { diagnostic: false });
    }),
  );
});

t.test('redelivered clicks (seq at or below the last counted for their producer) are not counted again', async (t) => {
  const batch = aggregate(
    [click({ seq: 5 }), click({ seq: 6 }), click({ seq: 6 }), click({ seq: 4 }), click({ producer: 'p2', seq: 0 })],
    (p) => (p === 'p1' ? 5 : undefined),
  );
  t.equal(batch.accepted, 2, 'p1 seq 6 once, p2 seq 0');
  t.equal(batch.duplicates, 3);
  t.same(Object.fromEntries(batch.seqs), { p1: 6, p2: 0 });
  t.equal(counterIncrements(batch.links).get('s!abcDEF1!t'), 2);
});

t.test('records that are not clicks are counted as invalid and skipped', async (t) => {
  const batch = aggregate(
    [null, click({ short_code: 'bad!code' }), click({ short_code: '' }), click({ seq: 1 })],
    () => undefined,
  );
  t.equal(batch.invalid, 3);
  t.equal(batch.accepted, 1);
  t.equal(decodeClick(Buffer.from('not msgpack at all')), null);
  t.equal(decodeClick(encodeClick('p', 1, click()).subarray(0, 5)), null);
});

t.test('referer hosts and days', async (t) => {
  t.equal(refererHost(null), 'direct');
  t.equal(refererHost(''), 'direct');
  t.equal(refererHost('not a url'), 'invalid');
  t.equal(refererHost('HTTPS://WWW.Example.COM:8443/x'), 'www.example.com');
  t.equal(dayOf(0), '1970-01-01');
  t.equal(dayOf(8.64e15 + 1), 'unknown');
});

t.test('the wire format round-trips every click; long headers are cut', async (t) => {
  const text = fc.option(fc.string({ maxLength: 600 }), { nil: null });
  fc.assert(
    fc.property(
      fc.uuid(),
      fc.nat(),
      fc.stringMatching(/^[A-Za-z0-9_-]{7,64}$/),
      fc.integer({ min: 0, max: 4e12 }),
      text,
      fc.option(fc.constantFrom('DE', 'US'), { nil: null }),
      text,
      (producer, seq, code, ts, referer, country, ua) => {
        const back = decodeClick(
          encodeClick(producer, seq, { short_code: code, timestamp: ts, referer, country, user_agent: ua }),
        );
        const cut = (s: string | null) => (s === null ? null : s.slice(0, MAX_TEXT));
        return (
          JSON.stringify(back) ===
          JSON.stringify({
            producer,
            seq,
            short_code: code,
            timestamp: ts,
            referer: cut(referer),
            country,
            user_agent: cut(ua),
          })
        );
      },
    ),
  );
  t.pass('round-trip property held');
});

t.test(
  'a block of clicks round-trips, the i-th with seq firstSeq + i; a malformed row is one invalid click',
  async (t) => {
    const rows = fc.array(
      fc.record({
        short_code: fc.stringMatching(/^[A-Za-z0-9_-]{7,64}$/),
        timestamp: fc.integer({ min: 0, max: 4e12 }),
        referer: fc.option(fc.string({ maxLength: 600 }), { nil: null }),
        country: fc.option(fc.constantFrom('DE', 'US'), { nil: null }),
        user_agent: fc.option(fc.string({ maxLength: 600 }), { nil: null }),
      }),
      { minLength: 1, maxLength: 50 },
    );
    fc.assert(
      fc.property(fc.uuid(), fc.nat(), rows, (producer, firstSeq, records) => {
        const back = decodeRecord(encodeClicks(producer, firstSeq, records));
        const cut = (s: string | null) => (s === null ? null : s.slice(0, MAX_TEXT));
        const want = records.map((r, i) => ({
          producer,
          seq: firstSeq + i,
          short_code: r.short_code,
          timestamp: r.timestamp,
          referer: cut(r.referer),
          country: r.country,
          user_agent: cut(r.user_agent),
        }));
        return JSON.stringify(back) === JSON.stringify(want);
      }),
    );
    t.equal(decodeClick(encodeClicks('p', 0, [click()])), null, 'a block is not a single click');
    const mixed = decodeRecord(
      pack(['p', 10, [['abcDEF1', 1, null, null, null], ['short', 'not a time', null, null, null], 7]]),
    );
    t.equal(mixed.length, 3);
    t.match(mixed[0], { producer: 'p', seq: 10, short_code: 'abcDEF1' });
    t.equal(mixed[1], null);
    t.equal(mixed[2], null);
    t.same(decodeRecord(pack(['p', 10, []])), [null], 'an empty block is one invalid record');
    t.same(decodeRecord(Buffer.from('junk')), [null]);
    const batch = aggregate(mixed, () => undefined);
    t.equal(batch.accepted, 1);
    t.equal(batch.invalid, 2);
  },
);

t.test('partitions: stable per code, spread over partitions, each owned by exactly one analytics worker', async (t) => {
  t.equal(partitionOf('abcDEF1', 1), 0);
  const counts = [0, 0, 0, 0];
  for (let i = 0; i < 4_000; i++) counts[partitionOf(`code${i}x`, 4)]!++;
  for (const c of counts) t.ok(c > 800 && c < 1_200, `roughly even: ${counts.join(', ')}`);
  t.equal(partitionOf('bulk_clicks', 2), partitionOf('bulk_clicks', 2));
  for (const [owners, partitions] of [
    [1, 1],
    [2, 2],
    [2, 5],
    [3, 2],
    [4, 8],
  ] as const) {
    const all = Array.from({ length: owners }, (_, i) => ownedPartitions(i + 1, owners, partitions))
      .flat()
      .sort((a, b) => a - b);
    t.same(
      all,
      Array.from({ length: partitions }, (_, p) => p),
      `${owners} owners of ${partitions} partitions`,
    );
    // Two copies: each partition counted by two distinct workers (one when there is only one), the first owner the same.
    const copies = Math.min(2, owners);
    const twice = Array.from({ length: owners }, (_, i) => ownedPartitions(i + 1, owners, partitions, 2));
    for (let p = 0; p < partitions; p++) {
      const holders = twice.flatMap((mine, i) => (mine.includes(p) ? [i] : []));
      t.equal(holders.length, copies, `${owners} owners, 2 replicas: partition ${p} counted by ${copies}`);
      t.ok(holders.includes(p % owners), `partition ${p}: its first owner still counts it`);
    }
  }
});
