/**
 * Acquires and releases batched per turn: the machine applies a `batch` exactly as the same commands in consecutive
 * entries (results, tokens, holders, queues), refuses a malformed batch whole, and the batcher never puts two
 * commands on one lock name into one entry (a lock's revision must name one change).
 */
import t from 'tap';
import { CommandShapeError } from '@raftkit/http';
import { LockBatcher } from '../src/members/batch.js';
import { LockMachine, type BatchableCommand, type LockCommand, type LockResult } from '../src/machine.js';
import { Prng } from '@raftkit/raft';

const SESSIONS = [
  '11111111-1111-4111-8111-111111111111',
  '22222222-2222-4222-8222-222222222222',
  '33333333-3333-4333-8333-333333333333',
];
const NAMES = ['a', 'b', 'c', 'd'];

function opened(): LockMachine {
  const m = new LockMachine();
  SESSIONS.forEach((id, i) =>
    m.apply({ op: 'openSession', id, timeoutMs: 10_000, owner: 'o' }, { index: i + 1, term: 1, time: 1_000 }),
  );
  return m;
}

/** A deterministic pseudo-random stream, so a failure names its seed. */
function rng(seed: number): () => number {
  const prng = new Prng(seed);
  return () => prng.next();
}

function randomCommand(r: () => number, tokens: Map<string, number>): BatchableCommand {
  const session = SESSIONS[Math.floor(r() * SESSIONS.length)]!;
  const name = NAMES[Math.floor(r() * NAMES.length)]!;
  const owner = r() < 0.05 ? 'intruder' : 'o';
  if (r() < 0.5) return { op: 'acquire', name, session, owner, wait: r() < 0.5 };
  const known = Math.max(1, tokens.get(name) ?? 1);
  const token = r() < 0.2 ? null : r() < 0.8 ? known : Math.max(1, known - 1);
  return { op: 'release', name, session, owner, token };
}

function state(m: LockMachine): unknown {
  return {
    locks: NAMES.map((n) => ({ ...m.getLock(n), revision: 0 })),
    sessions: SESSIONS.map((s) => m.getSession(s)),
  };
}

t.test('a batch applies as the same commands in consecutive entries, for 200 random sequences', async (t) => {
  let results = 0;
  for (let seed = 1; seed <= 200; seed++) {
    const r = rng(seed);
    const single = opened();
    const batched = opened();
    const tokens = new Map<string, number>();
    let index = 10;
    for (let round = 0; round < 20; round++) {
      const commands = Array.from({ length: 1 + Math.floor(r() * 6) }, () => randomCommand(r, tokens));
      const one = commands.map((c) => single.apply(c, { index: index++, term: 1, time: 2_000 }));
      const many = batched.apply({ op: 'batch', commands }, { index: index++, term: 1, time: 2_000 });
      if (!many.ok || many.op !== 'batch') throw new Error(`seed ${seed}: batch answered ${JSON.stringify(many)}`);
      if (JSON.stringify(many.results) !== JSON.stringify(one))
        t.same(many.results, one, `seed ${seed} round ${round}: same results`);
      else results++;
      for (const n of NAMES) tokens.set(n, single.getLock(n).token);
    }
    if (JSON.stringify(state(batched)) !== JSON.stringify(state(single)))
      t.same(state(batched), state(single), `seed ${seed}: same holders, tokens, queues and sessions`);
  }
  t.equal(results, 200 * 20, 'every batch answered what its commands answered one by one, and the states matched');
});

t.test('a malformed batch is refused whole, before anything changes', async (t) => {
  const m = opened();
  const good: BatchableCommand = { op: 'acquire', name: 'a', session: SESSIONS[0]!, owner: 'o', wait: false };
  const ctx = { index: 50, term: 1, time: 2_000 };
  const bad: unknown[] = [
    { op: 'batch' },
    { op: 'batch', commands: [] },
    { op: 'batch', commands: 'x' },
    { op: 'batch', commands: [good, { op: 'openSession', id: 'x', timeoutMs: 5_000, owner: 'o' }] },
    { op: 'batch', commands: [good, { op: 'batch', commands: [good] }] },
    { op: 'batch', commands: [good, { ...good, name: 7 }] },
    { op: 'batch', commands: Array.from({ length: 1_001 }, () => good) },
  ];
  for (const command of bad)
    t.throws(() => m.apply(command as LockCommand, ctx), CommandShapeError, JSON.stringify(command).slice(0, 80));
  t.equal(m.getLock('a').holder, null, 'the good command of a refused batch did not apply');
});

t.test(
  'the batcher: one entry per turn for distinct names, a second entry for a name already in the turn',
  async (t) => {
    const machine = opened();
    const entries: LockCommand[] = [];
    let index = 100;
    const propose = async (command: LockCommand): Promise<LockResult> => {
      entries.push(command);
      return machine.apply(command, { index: index++, term: 1, time: 2_000 });
    };
    const batcher = new LockBatcher();
    const acquire = (name: string, session: string): Promise<LockResult> =>
      batcher.submit(propose, { op: 'acquire', name, session, owner: 'o', wait: true });
    const turn = await Promise.all([
      acquire('a', SESSIONS[0]!),
      acquire('b', SESSIONS[0]!),
      acquire('a', SESSIONS[1]!),
      acquire('c', SESSIONS[1]!),
      acquire('a', SESSIONS[2]!),
    ]);
    t.same(
      turn,
      [
        { ok: true, op: 'acquire', granted: true, token: 1 },
        { ok: true, op: 'acquire', granted: true, token: 1 },
        { ok: true, op: 'acquire', granted: false, position: 1 },
        { ok: true, op: 'acquire', granted: true, token: 1 },
        { ok: true, op: 'acquire', granted: false, position: 2 },
      ],
      'each request gets its own answer, in arrival order per name',
    );
    t.same(
      entries.map((e) => (e.op === 'batch' ? e.commands.map((c) => c.name) : [e.op === 'acquire' ? e.name : '?'])),
      [['a', 'b', 'c'], ['a'], ['a']],
      'distinct names share an entry; the same name goes to the next entry',
    );
    t.equal(batcher.entries, 3);
    t.equal(batcher.commands, 5);
    // The next turn starts counting again: a lone command goes as itself.
    await acquire('d', SESSIONS[0]!);
    t.same(entries[entries.length - 1], { op: 'acquire', name: 'd', session: SESSIONS[0], owner: 'o', wait: true });
    t.equal(machine.getLock('b').revision, 100, "b changed in the turn's first entry");
    t.equal(
      machine.getLock('a').revision,
      102,
      "a changed in each of the turn's three entries, each under its own revision",
    );
  },
);

t.test('a failed entry fails every request it carried, and only those', async (t) => {
  const batcher = new LockBatcher();
  let calls = 0;
  const propose = async (command: LockCommand): Promise<LockResult> => {
    calls++;
    if (command.op === 'batch') throw new Error('no quorum');
    return { ok: true, op: 'acquire', granted: true, token: 1 };
  };
  const a = batcher.submit(propose, { op: 'acquire', name: 'x', session: SESSIONS[0]!, owner: 'o', wait: false });
  const b = batcher.submit(propose, { op: 'acquire', name: 'y', session: SESSIONS[0]!, owner: 'o', wait: false });
  const c = batcher.submit(propose, { op: 'acquire', name: 'x', session: SESSIONS[1]!, owner: 'o', wait: false });
  await t.rejects(a, /no quorum/);
  await t.rejects(b, /no quorum/);
  t.same(await c, { ok: true, op: 'acquire', granted: true, token: 1 }, 'the second entry of the turn went on its own');
  t.equal(calls, 2);
});
