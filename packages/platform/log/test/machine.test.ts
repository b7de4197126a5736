/**
 * PartitionMachine on its own: no sockets, no clocks (each command carries its time, as the leader stamps it).
 * Offsets, idempotent producers, consumer-group commits, retention, snapshots, and refusal of malformed commands.
 */
import fc from 'fast-check';
import t from 'tap';
import { checkCommandShapes } from '@raftkit/testkit';
import {
  PartitionMachine,
  PRODUCER_WINDOW,
  recordSize,
  type AppendInput,
  type PartitionCommand,
  type PartitionResult,
} from '../src/machine.js';

let index = 0;
function run(m: PartitionMachine, command: PartitionCommand, time = 1_000): PartitionResult {
  return m.apply(command, { index: ++index, term: 1, time });
}
const recs = (...values: string[]): AppendInput[] => values.map((value) => ({ key: null, value }));
const append = (
  m: PartitionMachine,
  values: string[],
  producer: string | null = null,
  seq: number | null = null,
  time = 1_000,
) => run(m, { op: 'append', records: recs(...values), producer, seq }, time);
const commit = (m: PartitionMachine, group: string, offset: number, expect: number | null = null) =>
  run(m, { op: 'commit', group, offset, expect });
const values = (m: PartitionMachine, from = 0) =>
  m.fetch(from, 1_000_000, Number.MAX_SAFE_INTEGER).records.map((r) => r.value);

t.test('appends get consecutive offsets from 0, whatever the batch sizes (property)', async (t) => {
  fc.assert(
    fc.property(
      fc.array(fc.array(fc.string({ maxLength: 8 }), { minLength: 1, maxLength: 6 }), { maxLength: 30 }),
      (batches) => {
        const m = new PartitionMachine();
        let expected = 0;
        for (const batch of batches) {
          const r = append(m, batch);
          if (!(r.op === 'append' && r.ok && r.base === expected && r.count === batch.length && !r.duplicate))
            return false;
          expected += batch.length;
        }
        const all = m.fetch(0, 1_000_000, Number.MAX_SAFE_INTEGER);
        return (
          m.end === expected &&
          all.records.every((r, i) => r.offset === i) &&
          all.records.map((r) => r.value).join('\u0000') === batches.flat().join('\u0000')
        );
      },
    ),
    { numRuns: 200, seed: 13 },
  );
  t.pass('200 runs');
});

t.test('a retried producer batch is stored once and answered duplicate with its original offsets', async (t) => {
  const m = new PartitionMachine();
  append(m, ['before']);
  t.same(append(m, ['a', 'b'], 'p1', 0), { op: 'append', ok: true, base: 1, count: 2, duplicate: false });
  append(m, ['between']);
  t.same(
    append(m, ['a', 'b'], 'p1', 0),
    { op: 'append', ok: true, base: 1, count: 2, duplicate: true },
    'retry: same offsets',
  );
  t.same(append(m, ['c'], 'p1', 1), { op: 'append', ok: true, base: 4, count: 1, duplicate: false });
  t.same(
    append(m, ['a', 'b'], 'p1', 0),
    { op: 'append', ok: true, base: 1, count: 2, duplicate: true },
    'an older batch in the window too',
  );
  t.same(
    append(m, ['x'], 'p2', 0),
    { op: 'append', ok: true, base: 5, count: 1, duplicate: false },
    'producers are independent',
  );
  t.same(values(m), ['before', 'a', 'b', 'between', 'c', 'x']);
  t.equal(m.producerCount(), 2);
});

t.test(
  `the window holds the last ${PRODUCER_WINDOW} batches; older or out-of-order sequences are refused with their own codes`,
  async (t) => {
    const m = new PartitionMachine();
    for (let seq = 0; seq < 8; seq++) append(m, [`v${seq}`], 'p', seq);
    const end = m.end;
    for (let seq = 8 - PRODUCER_WINDOW; seq < 8; seq++)
      t.match(append(m, ['retry'], 'p', seq), { ok: true, duplicate: true, base: seq }, `seq ${seq} in the window`);
    t.match(
      append(m, ['retry'], 'p', 2),
      { ok: false, code: 'old_sequence', expected: 8 },
      'stored but forgotten: old_sequence',
    );
    t.match(
      append(m, ['gap'], 'p', 10),
      { ok: false, code: 'out_of_order_sequence', expected: 8 },
      'a gap: out_of_order_sequence',
    );
    t.match(
      append(m, ['new'], 'q', 3),
      { ok: false, code: 'unknown_producer', expected: 0 },
      'a new producer starts at 0',
    );
    t.equal(m.end, end, 'no refused batch was stored');
    t.match(append(m, ['next'], 'p', 8), { ok: true, duplicate: false, base: end });
  },
);

t.test('a producer retrying in any order its in-flight batches stores each exactly once (property)', async (t) => {
  fc.assert(
    fc.property(fc.array(fc.nat({ max: 12 }), { maxLength: 60 }), (attempts) => {
      // The producer has sent batches 0..sent-1; an attempt is a retry of one of the last PRODUCER_WINDOW or the next one.
      const m = new PartitionMachine();
      let sent = 0;
      const offsets = new Map<number, number>();
      for (const a of attempts) {
        const seq = Math.max(0, sent - PRODUCER_WINDOW) + (a % (Math.min(sent, PRODUCER_WINDOW) + 1));
        const r = append(m, [`s${seq}`], 'p', seq);
        if (r.op !== 'append' || !r.ok) return false;
        if (seq === sent) {
          if (r.duplicate) return false;
          offsets.set(seq, r.base);
          sent++;
        } else if (!r.duplicate || r.base !== offsets.get(seq)) return false;
      }
      return values(m).join(',') === Array.from({ length: sent }, (_, i) => `s${i}`).join(',');
    }),
    { numRuns: 300, seed: 7 },
  );
  t.pass('300 runs');
});

t.test('consumer offsets: commit, compare-and-set, range', async (t) => {
  const m = new PartitionMachine();
  append(m, ['a', 'b', 'c']);
  t.equal(m.committed('g'), null);
  t.same(commit(m, 'g', 2, 0), { op: 'commit', ok: true, offset: 2 }, 'expect 0 matches a group that never committed');
  t.same(commit(m, 'g', 3, 1), {
    op: 'commit',
    ok: false,
    code: 'offset_conflict',
    message: 'the committed offset is 2, not 1',
    current: 2,
  });
  t.equal(m.committed('g'), 2, 'a conflict changes nothing');
  t.match(commit(m, 'g', 3, 2), { ok: true, offset: 3 });
  t.match(commit(m, 'g', 4), { ok: false, code: 'offset_out_of_range', current: 3 }, 'past the end');
  t.equal(m.committed('g'), 3);
  t.match(commit(m, 'g', 1), { ok: true, offset: 1 }, 'without expect a group may rewind');
  t.match(commit(m, 'h', 3), { ok: true });
  t.same(m.groups(), [
    ['g', 1],
    ['h', 3],
  ]);
});

t.test('two consumers racing with compare-and-set never both move one offset (property)', async (t) => {
  fc.assert(
    fc.property(fc.array(fc.tuple(fc.boolean(), fc.nat({ max: 5 })), { maxLength: 40 }), (steps) => {
      const m = new PartitionMachine();
      append(
        m,
        Array.from({ length: 200 }, (_, i) => `${i}`),
      );
      // Each consumer read the committed offset once and tries to move it forward from there.
      const seen = [0, 0];
      let moves = 0;
      for (const [who, step] of steps) {
        const i = who ? 1 : 0;
        const r = commit(m, 'g', seen[i]! + step + 1, seen[i]!);
        if (r.op !== 'commit') return false;
        if (r.ok) {
          seen[i] = r.offset;
          moves++;
        } else {
          if (r.code !== 'offset_conflict' || r.current !== m.committed('g')) return false;
          seen[i] = r.current ?? 0;
        }
      }
      // Every successful move started from the committed offset of that moment: offsets only grew.
      return moves === 0 || (m.committed('g') ?? 0) >= moves;
    }),
    { numRuns: 200, seed: 5 },
  );
  t.pass('200 runs');
});

t.test('retention by age uses the entry time, never a clock', async (t) => {
  const m = new PartitionMachine();
  run(m, { op: 'configure', retention: { maxAgeMs: 10_000, maxBytes: 1 << 20 } }, 0);
  append(m, ['old1', 'old2'], null, null, 1_000);
  append(m, ['mid'], null, null, 6_000);
  t.equal(m.oldestTime, 1_000);
  append(m, ['new'], null, null, 11_000);
  t.same(values(m), ['old1', 'old2', 'mid', 'new'], 'exactly max age old is kept');
  append(m, ['newer'], null, null, 11_001);
  t.same(values(m), ['mid', 'new', 'newer'], 'one ms later the first two go');
  t.equal(m.start, 2);
  t.same(run(m, { op: 'trim' }, 21_000), { op: 'trim', ok: true, start: 3 }, 'a trim entry trims an idle partition');
  t.same(values(m), ['new', 'newer'], 'a record exactly max age old stays');
  t.same(run(m, { op: 'trim' }, 21_001), { op: 'trim', ok: true, start: 4 });
  t.same(values(m), ['newer']);
  run(m, { op: 'trim' }, 30_000);
  t.equal(m.oldestTime, null);
  t.equal(m.start, 5, 'all gone');
  t.equal(m.end, 5, 'offsets are never reused');
  t.match(append(m, ['after']), { base: 5 });
  const f = m.fetch(0, 10, 1 << 20);
  t.same([f.start, f.records[0]?.offset, f.next], [5, 5, 6], 'a fetch before the start reads from the start');
});

t.test('retention by size keeps the newest records within max bytes', async (t) => {
  const m = new PartitionMachine();
  run(m, { op: 'configure', retention: { maxAgeMs: 1e12, maxBytes: 1024 } });
  const value = 'v'.repeat(100);
  for (let i = 0; i < 50; i++) append(m, [value]);
  const size = recordSize({ key: null, value });
  t.ok(m.heldBytes <= 1024, `${m.heldBytes} bytes held`);
  t.equal(m.end - m.start, Math.floor(1024 / size), 'as many as fit');
  t.equal(m.heldBytes, (m.end - m.start) * size);
  run(m, { op: 'configure', retention: { maxAgeMs: 1e12, maxBytes: size * 2 } });
  t.equal(m.end - m.start, 2, 'a smaller limit trims at once');
  t.same(m.config, { maxAgeMs: 1e12, maxBytes: size * 2 });
  // Enough appends to compact the array of records: offsets and contents stay right.
  for (let i = 0; i < 3000; i++) append(m, [`${i}`.padEnd(100, '.')]);
  t.same(
    m.fetch(0, 10, 1 << 20).records.map((r) => [r.offset, r.value.slice(0, 4)]),
    [
      [3048, '2998'],
      [3049, '2999'],
    ],
  );
});

t.test('fetch bounds: max records, about max bytes (at least one record), past the end', async (t) => {
  const m = new PartitionMachine();
  append(m, ['a'.repeat(100), 'b'.repeat(100), 'c'.repeat(100)]);
  t.same(m.fetch(0, 2, 1 << 20).records.length, 2);
  t.same(m.fetch(0, 10, 10).records.length, 1, 'one record even when over max bytes');
  t.same(m.fetch(0, 10, 2 * recordSize({ key: null, value: 'a'.repeat(100) })).records.length, 2);
  t.same(
    m.fetch(1, 10, 1 << 20).records.map((r) => r.offset),
    [1, 2],
  );
  t.same(m.fetch(7, 10, 1 << 20), { records: [], next: 7, end: 3, start: 0 }, 'past the end: the position stays');
});

t.test('snapshot and restore round trip every part of the state (property)', async (t) => {
  const command = fc.oneof(
    fc.record({
      op: fc.constant('append' as const),
      records: fc.array(
        fc.record({ key: fc.option(fc.string({ maxLength: 4 }), { nil: null }), value: fc.string({ maxLength: 50 }) }),
        { minLength: 1, maxLength: 4 },
      ),
      producer: fc.constant(null),
      seq: fc.constant(null),
    }),
    fc.record({
      op: fc.constant('append' as const),
      records: fc.constant(recs('p')),
      producer: fc.constantFrom('p1', 'p2'),
      seq: fc.nat({ max: 8 }),
    }),
    fc.record({
      op: fc.constant('commit' as const),
      group: fc.constantFrom('g1', 'g2'),
      offset: fc.nat({ max: 30 }),
      expect: fc.option(fc.nat({ max: 30 }), { nil: null }),
    }),
    fc.record({
      op: fc.constant('configure' as const),
      retention: fc.record({
        maxAgeMs: fc.integer({ min: 1, max: 5_000 }),
        maxBytes: fc.integer({ min: 40, max: 2_000 }),
      }),
    }),
    fc.constant({ op: 'trim' as const }),
  );
  fc.assert(
    fc.property(
      fc.array(fc.tuple(command, fc.nat({ max: 1_000 })), { maxLength: 40 }),
      fc.array(fc.tuple(command, fc.nat({ max: 1_000 })), { maxLength: 20 }),
      (before, after) => {
        const a = new PartitionMachine();
        let time = 0;
        for (const [c, dt] of before) run(a, c, (time += dt));
        const b = new PartitionMachine();
        b.restore(a.snapshot());
        if (!Buffer.from(b.snapshot()).equals(Buffer.from(a.snapshot()))) return false;
        if (a.start !== b.start || a.end !== b.end || a.heldBytes !== b.heldBytes || a.oldestTime !== b.oldestTime)
          return false;
        // The restored machine answers every later command as the original does.
        for (const [c, dt] of after) {
          time += dt;
          if (JSON.stringify(run(a, c, time)) !== JSON.stringify(run(b, c, time))) return false;
        }
        return (
          JSON.stringify(a.fetch(0, 1e6, 1e12)) === JSON.stringify(b.fetch(0, 1e6, 1e12)) &&
          JSON.stringify(a.groups()) === JSON.stringify(b.groups())
        );
      },
    ),
    { numRuns: 300, seed: 11 },
  );
  t.pass('300 runs');
});

t.test('malformed commands are refused with CommandShapeError before any change; valid ones apply', async (t) => {
  const make = (): PartitionMachine => {
    const m = new PartitionMachine();
    append(m, ['a', 'b'], 'p', 0);
    commit(m, 'g', 1);
    return m;
  };
  const outcome = checkCommandShapes({
    make,
    valid: [
      { op: 'append', records: [{ key: 'k', value: 'v' }], producer: 'p', seq: 1 },
      { op: 'append', records: [{ key: null, value: '' }], producer: null, seq: null },
      { op: 'commit', group: 'g', offset: 2, expect: 1 },
      { op: 'commit', group: 'h', offset: 0, expect: null },
      { op: 'configure', retention: { maxAgeMs: 1_000, maxBytes: 4_096 } },
      { op: 'trim' },
      { op: 'commit', group: 'g', offset: 1, expect: null, generation: 3 },
      { op: 'join', group: 'g', member: 'm-1', slots: 4, ttlMs: 5_000 },
      { op: 'leave', group: 'g', member: 'm-1' },
      { op: 'expire', group: 'g', members: ['m-1', 'm-2'] },
    ],
    malformed: [
      null,
      { op: 'commit', group: 'g', offset: 1, expect: null, generation: -1 },
      { op: 'join', group: 'g', member: 'm 1', slots: 4, ttlMs: 5_000 },
      { op: 'join', group: 'g', member: 'm', slots: 5_000, ttlMs: 5_000 },
      { op: 'join', group: 'g', member: 'm', slots: 4, ttlMs: 10 },
      { op: 'join', group: 'g', member: 'm', slots: 4 },
      { op: 'leave', group: 'g' },
      { op: 'expire', group: 'g', members: [] },
      { op: 'expire', group: 'g', members: ['m 1'] },
      { op: 'expire', group: 'g', members: 'm' },
      { op: 'expire', members: ['m'] },
      'append',
      [],
      { op: 'nope' },
      { op: 'append', records: [], producer: null, seq: null },
      { op: 'append', records: [{ value: 'v' }], producer: null, seq: null },
      { op: 'append', records: [{ key: null, value: 5 }], producer: null, seq: null },
      { op: 'append', records: [null], producer: null, seq: null },
      {
        op: 'append',
        records: Array.from({ length: 1001 }, () => ({ key: null, value: 'v' })),
        producer: null,
        seq: null,
      },
      { op: 'append', records: [{ key: 'k'.repeat(1025), value: 'v' }], producer: null, seq: null },
      { op: 'append', records: [{ key: null, value: 'v' }], producer: null, seq: 3 },
      { op: 'append', records: [{ key: null, value: 'v' }], producer: 'p', seq: null },
      { op: 'append', records: [{ key: null, value: 'v' }], producer: 'p', seq: -1 },
      { op: 'append', records: [{ key: null, value: 'v' }], producer: 'p', seq: 1.5 },
      { op: 'append', records: [{ key: null, value: 'v' }], producer: 'p q', seq: 1 },
      { op: 'append', records: [{ key: null, value: 'v' }], producer: '', seq: 1 },
      { op: 'append', records: [{ key: null, value: 'v' }] },
      { op: 'commit', group: 'g', offset: -1, expect: null },
      { op: 'commit', group: 'g', offset: Number.NaN, expect: null },
      { op: 'commit', group: 'g', offset: 1 },
      { op: 'commit', group: 'g g', offset: 1, expect: null },
      { op: 'commit', group: 'g', offset: 1, expect: '0' },
      { op: 'configure', retention: { maxAgeMs: 0, maxBytes: 4_096 } },
      { op: 'configure', retention: { maxAgeMs: 1_000, maxBytes: 1e12 } },
      { op: 'configure', retention: null },
      { op: 'configure' },
    ],
    runs: 1_000,
  });
  t.equal(outcome.violation, null, 'no other throw, no change before a refusal');
  t.ok(outcome.refused > 300, `${outcome.refused} refused, ${outcome.accepted} accepted`);
  // The same malformed command is refused the same way every time (every member, every replay).
  const a = make();
  const b = make();
  const bad = {
    op: 'append',
    records: [{ key: null, value: 'v' }],
    producer: 'p',
    seq: -1,
  } as unknown as PartitionCommand;
  const messages = [a, b].map((m) => {
    try {
      run(m, bad);
      return 'accepted';
    } catch (e) {
      return `${(e as Error).name}: ${(e as Error).message}`;
    }
  });
  t.equal(messages[0], messages[1]);
  t.match(messages[0], /^CommandShapeError: append\.seq/);
  t.match(run(make(), { op: 'append', records: recs('c'), producer: 'p', seq: 1 }), { ok: true, base: 2 });
});

t.test("an 'appends' entry answers and changes exactly as its appends would one entry each (property)", async (t) => {
  // Producers p0..p2 with sequences near their next one (some retries, some gaps, some new), anonymous appends too.
  const appendArb = fc.record({
    values: fc.array(fc.string({ maxLength: 4 }), { minLength: 1, maxLength: 3 }),
    producer: fc.option(fc.constantFrom('p0', 'p1', 'p2'), { nil: null }),
    seq: fc.integer({ min: 0, max: 4 }),
  });
  fc.assert(
    fc.property(
      fc.array(fc.array(appendArb, { minLength: 1, maxLength: 6 }), { minLength: 1, maxLength: 8 }),
      (entries) => {
        const one = new PartitionMachine();
        const batched = new PartitionMachine();
        for (const entry of entries) {
          const appends = entry.map((a) => ({
            records: recs(...a.values),
            producer: a.producer,
            seq: a.producer === null ? null : a.seq,
          }));
          const separate = appends.map((a) => run(one, { op: 'append', ...a }));
          const together = run(batched, { op: 'appends', appends });
          if (JSON.stringify(together) !== JSON.stringify({ op: 'appends', results: separate })) return false;
        }
        return Buffer.from(one.snapshot()).equals(Buffer.from(batched.snapshot()));
      },
    ),
    { numRuns: 300, seed: 21 },
  );
  t.pass('300 runs: same results, same state');
});

t.test("a malformed 'appends' entry is refused whole, changing nothing", async (t) => {
  const m = new PartitionMachine();
  append(m, ['kept']);
  const before = Buffer.from(m.snapshot());
  for (const bad of [
    { op: 'appends', appends: [] },
    { op: 'appends', appends: 'x' },
    {
      op: 'appends',
      appends: [
        { records: recs('a'), producer: null, seq: null },
        { records: [], producer: null, seq: null },
      ],
    },
    { op: 'appends', appends: [{ records: recs('a'), producer: null, seq: null }, null] },
    { op: 'appends', appends: [{ records: recs('a'), producer: 'p', seq: null }] },
  ]) {
    t.throws(
      () => run(m, bad as unknown as PartitionCommand),
      { name: 'CommandShapeError' },
      JSON.stringify(bad).slice(0, 80),
    );
  }
  t.ok(Buffer.from(m.snapshot()).equals(before), 'state unchanged');
});
