/**
 * AppendBatcher against a PartitionMachine behind a fake proposer (no Raft, no sockets): what arrives in one turn of
 * the event loop goes as one entry, every caller gets its own append's result, and a failed entry fails each of its
 * appends (the HTTP layer answers each request from that).
 */
import t from 'tap';
import { AppendBatcher } from '../src/members/append-batcher.js';
import { PartitionMachine, type PartitionCommand, type PartitionResult } from '../src/machine.js';

function proposer(machine: PartitionMachine, log: PartitionCommand[], fail: Error | null = null) {
  let index = 0;
  return async (command: PartitionCommand): Promise<PartitionResult> => {
    log.push(command);
    await new Promise((resolve) => setTimeout(resolve, 1));
    if (fail !== null) throw fail;
    return machine.apply(command, { index: ++index, term: 1, time: 1_000 });
  };
}

const one = (value: string, producer: string | null = null, seq: number | null = null) => ({
  records: [{ key: null, value }],
  producer,
  seq,
});

t.test('appends of one turn become one entry; each caller gets its own result', async (t) => {
  const machine = new PartitionMachine();
  const log: PartitionCommand[] = [];
  const batcher = new AppendBatcher();
  const propose = proposer(machine, log);
  const results = await Promise.all([
    batcher.submit('g', propose, one('a'), 1),
    batcher.submit('g', propose, one('b', 'p', 0), 1),
    batcher.submit('g', propose, one('c', 'p', 0), 1),
    batcher.submit('g', propose, one('d', 'p', 5), 1),
  ]);
  t.equal(log.length, 1, 'one entry');
  t.equal(log[0]!.op, 'appends');
  t.same(results, [
    { op: 'append', ok: true, base: 0, count: 1, duplicate: false },
    { op: 'append', ok: true, base: 1, count: 1, duplicate: false },
    { op: 'append', ok: true, base: 1, count: 1, duplicate: true },
    { op: 'append', ok: false, code: 'out_of_order_sequence', message: 'expected sequence 1, got 5', expected: 1 },
  ]);
  t.same(
    machine.fetch(0, 10, 1e9).records.map((r) => r.value),
    ['a', 'b'],
  );
  t.same({ entries: batcher.entries, appends: batcher.appends }, { entries: 1, appends: 4 });
});

t.test(
  'plain appends of one turn go as one append, idempotent ones whole between them; each gets its offsets',
  async (t) => {
    const machine = new PartitionMachine();
    const log: PartitionCommand[] = [];
    const batcher = new AppendBatcher();
    const propose = proposer(machine, log);
    const two = {
      records: [
        { key: 'k', value: 'b1' },
        { key: null, value: 'b2' },
      ],
      producer: null,
      seq: null,
    };
    const results = await Promise.all([
      batcher.submit('g', propose, one('a'), 1),
      batcher.submit('g', propose, two, 2),
      batcher.submit('g', propose, one('c', 'p', 0), 1),
      batcher.submit('g', propose, one('d'), 1),
      batcher.submit('g', propose, one('e'), 1),
    ]);
    t.equal(log.length, 1, 'one entry');
    const entry = log[0]!;
    t.equal(entry.op, 'appends');
    if (entry.op === 'appends') {
      t.same(
        entry.appends.map((a) => [a.records.map((r) => r.value), a.producer]),
        [
          [['a', 'b1', 'b2'], null],
          [['c'], 'p'],
          [['d', 'e'], null],
        ],
      );
    }
    t.same(
      results.map((r) => (r.ok ? [r.base, r.count, r.duplicate] : r.code)),
      [
        [0, 1, false],
        [1, 2, false],
        [3, 1, false],
        [4, 1, false],
        [5, 1, false],
      ],
    );
    t.same(
      machine.fetch(0, 10, 1e9).records.map((r) => [r.offset, r.key, r.value]),
      [
        [0, null, 'a'],
        [1, 'k', 'b1'],
        [2, null, 'b2'],
        [3, null, 'c'],
        [4, null, 'd'],
        [5, null, 'e'],
      ],
    );
    t.same(two.records.length, 2, "a caller's records are not changed");
    // A merged append stays within the machine's records per append: the next plain append starts another.
    const many = Array.from({ length: 600 }, (_, i) => ({ key: null, value: `m${i}` }));
    const log2: PartitionCommand[] = [];
    const big = await Promise.all([
      batcher.submit('h', proposer(new PartitionMachine(), log2), { records: many, producer: null, seq: null }, 600),
      batcher.submit('h', proposer(new PartitionMachine(), log2), { records: many, producer: null, seq: null }, 600),
    ]);
    const bigEntry = log2[0]!;
    t.same(bigEntry.op === 'appends' ? bigEntry.appends.map((a) => a.records.length) : null, [600, 600]);
    t.same(
      big.map((r) => (r.ok ? r.base : -1)),
      [0, 600],
    );
  },
);

t.test('a lone append goes as a plain append; later turns make later entries; partitions never mix', async (t) => {
  const m1 = new PartitionMachine();
  const m2 = new PartitionMachine();
  const log1: PartitionCommand[] = [];
  const log2: PartitionCommand[] = [];
  const batcher = new AppendBatcher();
  const first = await batcher.submit('g1', proposer(m1, log1), one('x'), 1);
  t.same(first, { op: 'append', ok: true, base: 0, count: 1, duplicate: false });
  t.same(
    log1.map((c) => c.op),
    ['append'],
  );
  await Promise.all([
    batcher.submit('g1', proposer(m1, log1), one('y'), 1),
    batcher.submit('g2', proposer(m2, log2), one('z'), 1),
  ]);
  t.same(
    log1.map((c) => c.op),
    ['append', 'append'],
    'g1 had one append in that turn',
  );
  t.same(
    log2.map((c) => c.op),
    ['append'],
  );
  t.same(
    m2.fetch(0, 10, 1e9).records.map((r) => r.value),
    ['z'],
  );
});

t.test('an entry is split at 1,000 appends or 4 MiB', async (t) => {
  const machine = new PartitionMachine();
  const log: PartitionCommand[] = [];
  const batcher = new AppendBatcher();
  const propose = proposer(machine, log);
  await Promise.all(Array.from({ length: 2_500 }, (_, i) => batcher.submit('g', propose, one(`v${i}`), 10)));
  // Plain appends of an entry are merged into one append (the test above): count their records.
  const records = (c: PartitionCommand): number =>
    c.op === 'appends' ? c.appends.reduce((n, a) => n + a.records.length, 0) : c.op === 'append' ? c.records.length : 0;
  t.same(log.map(records), [1000, 1000, 500]);
  log.length = 0;
  await Promise.all(Array.from({ length: 5 }, (_, i) => batcher.submit('g', propose, one(`w${i}`), 1024 * 1024)));
  t.same(log.map(records), [4, 1], 'at most 4 MiB an entry');
  t.equal(machine.end, 2_505, 'every append stored, in order');
  t.same(
    machine.fetch(2_500, 10, 1e9).records.map((r) => r.value),
    ['w0', 'w1', 'w2', 'w3', 'w4'],
  );
});

t.test('a failed entry fails every append in it', async (t) => {
  const batcher = new AppendBatcher();
  const propose = proposer(new PartitionMachine(), [], new Error('not the leader'));
  const outcomes = await Promise.allSettled([
    batcher.submit('g', propose, one('a'), 1),
    batcher.submit('g', propose, one('b'), 1),
  ]);
  t.same(
    outcomes.map((o) => o.status),
    ['rejected', 'rejected'],
  );
  t.match((outcomes[0] as PromiseRejectedResult).reason, { message: 'not the leader' });
});
