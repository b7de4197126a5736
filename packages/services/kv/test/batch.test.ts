/**
 * Writes batched per turn: the machine applies a `batch` exactly as the same commands in consecutive entries
 * (results, values), except that they share the entry's index as revision; it refuses a malformed batch whole;
 * the batcher never puts two commands on one key into one entry (a key's revision must name one change).
 */
import t from 'tap';
import { CommandShapeError } from '@raftkit/http';
import { KvBatcher, MAX_BATCH_BYTES } from '../src/members/batch.js';
import { KvMachine, type KvCommand, type KvKeyCommand, type KvKeyResult, type KvResult } from '../src/machine.js';
import { Prng } from '@raftkit/raft';

const KEYS = ['a', 'b', 'c', 'd'];
const VALUES = [null, '0', '1', '2'];

/** A deterministic pseudo-random stream, so a failure names its seed. */
function rng(seed: number): () => number {
  const prng = new Prng(seed);
  return () => prng.next();
}

function randomCommand(r: () => number, key: string): KvKeyCommand {
  const pick = (): string | null => VALUES[Math.floor(r() * VALUES.length)]!;
  const roll = r();
  if (roll < 0.4) return { op: 'put', key, value: pick() ?? '' };
  if (roll < 0.6) return { op: 'delete', key };
  return { op: 'cas', key, from: pick(), to: pick() };
}

/** A result with its revision replaced by whether it is the entry's own index (batch mates share one). */
function shape(result: KvKeyResult, index: number): unknown {
  return { ...result, revision: result.revision === index ? 'this entry' : result.revision === 0 ? 0 : 'earlier' };
}

function contents(m: KvMachine): unknown {
  return KEYS.map((k) => m.get(k)?.value ?? null);
}

t.test('a batch applies as the same commands in consecutive entries, for 200 random sequences', async (t) => {
  let matched = 0;
  for (let seed = 1; seed <= 200; seed++) {
    const r = rng(seed);
    const single = new KvMachine();
    const batched = new KvMachine();
    let index = 10;
    for (let round = 0; round < 20; round++) {
      // Distinct keys in one batch, as the batcher makes them.
      const keys = KEYS.filter(() => r() < 0.7);
      if (keys.length === 0) keys.push('a');
      const commands = keys.map((k) => randomCommand(r, k));
      const one = commands.map((c) => {
        const at = index++;
        return shape(single.apply(c, { index: at, term: 1, time: 0 }) as KvKeyResult, at);
      });
      const at = index++;
      const many = batched.apply({ op: 'batch', commands }, { index: at, term: 1, time: 0 });
      if (many.op !== 'batch') throw new Error(`seed ${seed}: batch answered ${JSON.stringify(many)}`);
      const got = many.results.map((x) => shape(x, at));
      if (JSON.stringify(got) !== JSON.stringify(one)) t.same(got, one, `seed ${seed} round ${round}: same results`);
      else matched++;
      if (JSON.stringify(contents(batched)) !== JSON.stringify(contents(single)))
        t.same(contents(batched), contents(single), `seed ${seed} round ${round}: same values`);
    }
  }
  t.equal(matched, 200 * 20, 'every batch answered what its commands answered one by one');
});

t.test('a batch stamps every key it changes with the entry index', async (t) => {
  const m = new KvMachine();
  const out = m.apply(
    {
      op: 'batch',
      commands: [
        { op: 'put', key: 'x', value: '1' },
        { op: 'cas', key: 'y', from: null, to: '2' },
      ],
    },
    { index: 42, term: 1, time: 0 },
  );
  t.same(out, {
    op: 'batch',
    results: [
      { op: 'put', revision: 42 },
      { op: 'cas', ok: true, revision: 42 },
    ],
  });
  t.same(
    [m.get('x'), m.get('y')],
    [
      { value: '1', revision: 42 },
      { value: '2', revision: 42 },
    ],
  );
});

t.test('a malformed batch is refused whole, before anything changes', async (t) => {
  const m = new KvMachine();
  const good: KvKeyCommand = { op: 'put', key: 'a', value: 'v' };
  const ctx = { index: 50, term: 1, time: 0 };
  const bad: unknown[] = [
    { op: 'batch' },
    { op: 'batch', commands: [] },
    { op: 'batch', commands: 'x' },
    { op: 'batch', commands: [good, { op: 'get', key: 'b' }] },
    { op: 'batch', commands: [good, { op: 'batch', commands: [good] }] },
    { op: 'batch', commands: [good, { op: 'put', key: 7, value: 'v' }] },
    { op: 'batch', commands: [good, { op: 'cas', key: 'b', from: 1, to: null }] },
    { op: 'batch', commands: Array.from({ length: 1_001 }, () => good) },
  ];
  for (const command of bad)
    t.throws(() => m.apply(command as KvCommand, ctx), CommandShapeError, JSON.stringify(command).slice(0, 80));
  t.equal(m.get('a'), undefined, 'the good command of a refused batch did not apply');
});

t.test('the batcher: one entry per turn for distinct keys, a second entry for a key already in the turn', async (t) => {
  const machine = new KvMachine();
  const entries: KvCommand[] = [];
  let index = 100;
  const propose = async (command: KvCommand): Promise<KvResult> => {
    entries.push(command);
    return machine.apply(command, { index: index++, term: 1, time: 0 });
  };
  const batcher = new KvBatcher();
  const put = (key: string, value: string): Promise<KvKeyResult> =>
    batcher.submit(propose, { op: 'put', key, value }, key.length + value.length);
  const turn = await Promise.all([
    put('a', '1'),
    put('b', '1'),
    batcher.submit(propose, { op: 'cas', key: 'a', from: '1', to: '2' }, 3),
    put('c', '1'),
    put('a', '3'),
  ]);
  t.same(
    turn,
    [
      { op: 'put', revision: 100 },
      { op: 'put', revision: 100 },
      { op: 'cas', ok: true, revision: 101 },
      { op: 'put', revision: 100 },
      { op: 'put', revision: 102 },
    ],
    'each request gets its own answer, in arrival order per key, a later revision for each change of one key',
  );
  t.same(
    entries.map((e) => (e.op === 'batch' ? e.commands.map((c) => c.key) : [e.key])),
    [['a', 'b', 'c'], ['a'], ['a']],
    'distinct keys share an entry; the same key goes to the next entry',
  );
  t.same([batcher.entries, batcher.commands], [3, 5]);
  t.equal(machine.get('a')?.value, '3');
  // The next turn starts counting again: a lone command goes as itself.
  await put('d', '1');
  t.same(entries[entries.length - 1], { op: 'put', key: 'd', value: '1' });
});

t.test('a batch is cut by bytes: a write larger than the limit goes alone, as itself', async (t) => {
  const entries: KvCommand[] = [];
  const machine = new KvMachine();
  let index = 1;
  const propose = async (command: KvCommand): Promise<KvResult> => {
    entries.push(command);
    return machine.apply(command, { index: index++, term: 1, time: 0 });
  };
  const batcher = new KvBatcher();
  const big = 'x'.repeat(MAX_BATCH_BYTES);
  await Promise.all([
    batcher.submit(propose, { op: 'put', key: 'a', value: 'small' }, 6),
    batcher.submit(propose, { op: 'put', key: 'b', value: big }, 1 + big.length),
    batcher.submit(propose, { op: 'put', key: 'c', value: 'small' }, 6),
  ]);
  t.same(
    entries.map((e) => (e.op === 'batch' ? e.commands.map((c) => c.key) : e.key)),
    ['a', 'b', 'c'],
    'the batch ends before the large write, which goes alone; each went as itself',
  );
});

t.test('a failed entry fails every request it carried, and only those', async (t) => {
  const batcher = new KvBatcher();
  let calls = 0;
  const propose = async (command: KvCommand): Promise<KvResult> => {
    calls++;
    if (command.op === 'batch') throw new Error('no quorum');
    return { op: 'put', revision: 1 };
  };
  const a = batcher.submit(propose, { op: 'put', key: 'x', value: '1' }, 2);
  const b = batcher.submit(propose, { op: 'delete', key: 'y' }, 1);
  const c = batcher.submit(propose, { op: 'put', key: 'x', value: '2' }, 2);
  await t.rejects(a, /no quorum/);
  await t.rejects(b, /no quorum/);
  t.same(await c, { op: 'put', revision: 1 }, 'the second entry of the turn went on its own');
  t.equal(calls, 2);
});
