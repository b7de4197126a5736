import fc from 'fast-check';
import t from 'tap';
import { decodeUpdate, Doc, encodeUpdate, type Op } from '../src/index.js';
import { replay, shuffle, view } from './support.js';

const svKey = (d: Doc): string => JSON.stringify(Object.entries(d.stateVector()).sort());

/**
 * A session: 2-4 replicas edit (insert, delete, format at arbitrary places) and now and then one pulls another's
 * ops (opsSince its state vector), so the op set mixes causal chains and concurrency. Positions are fractions
 * of the current length so every action is valid whatever the state.
 */
type Action =
  | { kind: 'insert'; r: number; at: number; text: string; bold: boolean }
  | { kind: 'delete'; r: number; at: number; len: number }
  | { kind: 'format'; r: number; at: number; len: number; key: 'bold' | 'italic'; on: boolean }
  | { kind: 'sync'; r: number; from: number };

const action = (n: number): fc.Arbitrary<Action> =>
  fc.oneof(
    {
      weight: 5,
      arbitrary: fc.record({
        kind: fc.constant('insert' as const),
        r: fc.nat(n - 1),
        at: fc.double({ min: 0, max: 1, noNaN: true }),
        text: fc.string({ unit: fc.constantFrom('a', 'b', 'c', 'é', ' ', '\n'), minLength: 1, maxLength: 4 }),
        bold: fc.boolean(),
      }),
    },
    {
      weight: 2,
      arbitrary: fc.record({
        kind: fc.constant('delete' as const),
        r: fc.nat(n - 1),
        at: fc.double({ min: 0, max: 1, noNaN: true }),
        len: fc.integer({ min: 1, max: 4 }),
      }),
    },
    {
      weight: 2,
      arbitrary: fc.record({
        kind: fc.constant('format' as const),
        r: fc.nat(n - 1),
        at: fc.double({ min: 0, max: 1, noNaN: true }),
        len: fc.integer({ min: 1, max: 6 }),
        key: fc.constantFrom('bold' as const, 'italic' as const),
        on: fc.boolean(),
      }),
    },
    { weight: 2, arbitrary: fc.record({ kind: fc.constant('sync' as const), r: fc.nat(n - 1), from: fc.nat(n - 1) }) },
  );

const session = fc
  .integer({ min: 2, max: 4 })
  .chain((n) => fc.tuple(fc.constant(n), fc.array(action(n), { minLength: 1, maxLength: 40 })));

function run(n: number, actions: readonly Action[]): { replicas: Doc[]; ops: Op[] } {
  // Tiny chunks (2-4 runs) so the chunked run list splits chunks constantly.
  const replicas = Array.from({ length: n }, (_, i) => new Doc(`r${i}`, { chunkSize: 2 + i }));
  const ops: Op[] = [];
  for (const a of actions) {
    const d = replicas[a.r]!;
    const len = d.length;
    if (a.kind === 'insert')
      ops.push(...d.localInsert(Math.floor(a.at * (len + 1)) % (len + 1), a.text, a.bold ? { bold: true } : undefined));
    else if (a.kind === 'sync') d.apply(replicas[a.from]!.opsSince(d.stateVector()));
    else if (len > 0) {
      const at = Math.floor(a.at * len) % len;
      const k = Math.min(a.len, len - at);
      if (a.kind === 'delete') ops.push(...d.localDelete(at, k));
      else ops.push(...d.localFormat(at, k, { [a.key]: a.on ? true : null }));
    }
  }
  return { replicas, ops };
}

t.test('every delivery order of every op set converges (text and formatting)', async (t) => {
  fc.assert(
    fc.property(session, fc.array(fc.integer(), { minLength: 2, maxLength: 4 }), ([n, actions], seeds) => {
      const { replicas, ops } = run(n, actions);
      // The replicas themselves, after a full exchange, and fresh replicas fed shuffled orders.
      for (const d of replicas) for (const e of replicas) d.apply(e.opsSince(d.stateVector()));
      const expected = view(replicas[0]!);
      for (const d of replicas) if (view(d) !== expected) return false;
      for (const seed of seeds) {
        const d = replay(shuffle(ops, seed));
        if (d.pendingCount !== 0 || view(d) !== expected) return false;
      }
      return true;
    }),
    { numRuns: 300 },
  );
  t.pass('300 sessions of 2-4 replicas, each delivered in 2-4 random orders');
});

t.test('re-delivery is idempotent', async (t) => {
  fc.assert(
    fc.property(session, fc.integer(), fc.integer(), ([n, actions], s1, s2) => {
      const { ops } = run(n, actions);
      const once = view(replay(shuffle(ops, s1)));
      const d = replay(shuffle([...ops, ...ops, ...ops.slice(0, ops.length >> 1)], s2));
      d.apply(ops);
      return view(d) === once;
    }),
    { numRuns: 200 },
  );
  t.pass('each op delivered two or three times, in any order');
});

t.test('encode/decode round trips: documents, updates, updates since a state vector', async (t) => {
  fc.assert(
    fc.property(session, fc.nat(), ([n, actions], cut) => {
      const { replicas, ops } = run(n, actions);
      const full = replay(ops);
      const back = Doc.decode(full.encode(), 'other');
      if (view(back) !== view(full) || svKey(back) !== svKey(full)) return false;
      if (JSON.stringify(decodeUpdate(encodeUpdate(ops))) !== JSON.stringify(ops)) return false;
      // A replica catches up from a binary update of what it lacks.
      const lagging = replicas[cut % n]!;
      lagging.apply(decodeUpdate(encodeUpdate(full.opsSince(lagging.stateVector()))));
      return view(lagging) === view(full) && svKey(lagging) === svKey(full);
    }),
    { numRuns: 200 },
  );
  t.pass('200 sessions');
});

t.test('runs typed concurrently at one place never interleave', async (t) => {
  const letters = ['a', 'b', 'c', 'd'];
  fc.assert(
    fc.property(
      fc.string({ unit: fc.constantFrom('.', '-'), maxLength: 8 }),
      fc
        .integer({ min: 2, max: 4 })
        .chain((n) =>
          fc.tuple(
            fc.array(fc.integer({ min: 1, max: 6 }), { minLength: n, maxLength: n }),
            fc.array(fc.boolean(), { minLength: n, maxLength: n }),
          ),
        ),
      fc.double({ min: 0, max: 1, noNaN: true }),
      fc.integer(),
      (base, [lens, backwards], where, seed) => {
        const origin = new Doc('base');
        origin.localInsert(0, base);
        const at = Math.floor(where * (base.length + 1)) % (base.length + 1);
        const runs: string[] = [];
        const ops: Op[] = [...origin.opsSince()];
        lens.forEach((len, i) => {
          const d = replay(origin.opsSince(), `w${i}`);
          const run = letters[i]!.repeat(len)
            .split('')
            .map((c, j) => (j === 0 ? c.toUpperCase() : c))
            .join('');
          // Typed one keystroke at a time, forwards (ordinary typing) or each character before the previous one.
          for (let j = 0; j < len; j++)
            ops.push(...(backwards[i] ? d.localInsert(at, run[len - 1 - j]!) : d.localInsert(at + j, run[j]!)));
          runs.push(run);
        });
        const text = replay(shuffle(ops, seed)).text();
        const middle = text.slice(at, text.length - (base.length - at));
        if (text.slice(0, at) !== base.slice(0, at) || text.slice(at + middle.length) !== base.slice(at)) return false;
        // The middle is the runs one after another, each whole.
        let rest = middle;
        const left = new Set(runs);
        while (rest.length > 0) {
          const r = [...left].find((x) => rest.startsWith(x));
          if (r === undefined) return false;
          left.delete(r);
          rest = rest.slice(r.length);
        }
        return left.size === 0;
      },
    ),
    { numRuns: 300 },
  );
  t.pass('2-4 writers, forwards and backwards typing, any delivery order');
});

t.test('a format covers text inserted concurrently inside its range, never outside', async (t) => {
  fc.assert(
    fc.property(fc.integer({ min: 2, max: 12 }), fc.nat(), fc.nat(), fc.nat(), fc.integer(), (n, a, b, p, seed) => {
      const origin = new Doc('o');
      origin.localInsert(0, '0123456789ab'.slice(0, n));
      const start = a % n;
      const len = 1 + (b % (n - start));
      const at = p % (n + 1);
      const f = replay(origin.opsSince(), 'formatter');
      const w = replay(origin.opsSince(), 'writer');
      const ops = [...origin.opsSince(), ...f.localFormat(start, len, { bold: true }), ...w.localInsert(at, 'XY')];
      const d = replay(shuffle(ops, seed));
      const inside = at > start && at < start + len;
      const spans = d.spans();
      const bolded = spans
        .filter((s) => s.attrs['bold'] === true)
        .map((s) => s.text)
        .join('');
      const expected = inside
        ? origin.text().slice(start, at) + 'XY' + origin.text().slice(at, start + len)
        : origin.text().slice(start, start + len);
      return bolded === expected;
    }),
    { numRuns: 500 },
  );
  t.pass('insert before, at the start, inside, at the end of, after the range');
});
