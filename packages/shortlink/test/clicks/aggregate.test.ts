import fc from 'fast-check';
import t from 'tap';
import { aggregate, dayOf, refererHost } from '../../src/clicks/aggregate.js';
import { decodeClick, encodeClick, MAX_TEXT, type StreamedClick } from '../../src/clicks/wire.js';

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
    [click({ seq: 0 }), click({ seq: 1, referer: null, country: null, timestamp: Date.UTC(2026, 10, 22) }), click({ seq: 2, short_code: 'other_alias' })],
    () => undefined,
  );
  t.same(Object.fromEntries(batch.counts), {
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

t.test('redelivered clicks (seq at or below the last counted for their producer) are not counted again', async (t) => {
  const batch = aggregate([click({ seq: 5 }), click({ seq: 6 }), click({ seq: 6 }), click({ seq: 4 }), click({ producer: 'p2', seq: 0 })], (p) => (p === 'p1' ? 5 : undefined));
  t.equal(batch.accepted, 2, 'p1 seq 6 once, p2 seq 0');
  t.equal(batch.duplicates, 3);
  t.same(Object.fromEntries(batch.seqs), { p1: 6, p2: 0 });
  t.equal(batch.counts.get('s!abcDEF1!t'), 2);
});

t.test('records that are not clicks are counted as invalid and skipped', async (t) => {
  const batch = aggregate([null, click({ short_code: 'bad!code' }), click({ short_code: '' }), click({ seq: 1 })], () => undefined);
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
    fc.property(fc.uuid(), fc.nat(), fc.stringMatching(/^[A-Za-z0-9_-]{7,64}$/), fc.integer({ min: 0, max: 4e12 }), text, fc.option(fc.constantFrom('DE', 'US'), { nil: null }), text, (producer, seq, code, ts, referer, country, ua) => {
      const back = decodeClick(encodeClick(producer, seq, { short_code: code, timestamp: ts, referer, country, user_agent: ua }));
      const cut = (s: string | null) => (s === null ? null : s.slice(0, MAX_TEXT));
      return JSON.stringify(back) === JSON.stringify({ producer, seq, short_code: code, timestamp: ts, referer: cut(referer), country, user_agent: cut(ua) });
    }),
  );
  t.pass('round-trip property held');
});
