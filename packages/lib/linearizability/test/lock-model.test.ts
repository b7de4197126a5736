import fc from 'fast-check';
import t from 'tap';
import {
  check,
  fromNondeterministic,
  lockModel,
  singleLockModel,
  type LockInput,
  type LockOutput,
  type Operation,
} from '../src/index.js';
import { bruteForceLinearizable, linearizationProblem } from './support/brute-force.js';

const model = lockModel();

t.test('single lock: grants, tokens, releases, refusals', async (t) => {
  const lock = fromNondeterministic(singleLockModel({ sessionsMayEnd: false }));
  const acquire = (session: string): LockInput => ({ op: 'acquire', lock: 'L', session });
  let state = lock.init();
  let r = lock.step(state, acquire('a'), { granted: true, token: 1 });
  t.ok(r.ok, 'first grant gets token 1');
  state = r.state;
  t.notOk(
    lock.step(state, acquire('b'), { granted: true, token: 2 }).ok,
    'a held lock is not granted to another session',
  );
  t.ok(lock.step(state, acquire('b'), { granted: false }).ok, 'refused while held');
  t.ok(
    lock.step(state, acquire('a'), { granted: true, token: 1 }).ok,
    're-acquire by the holder returns the same grant',
  );
  t.notOk(
    lock.step(state, { op: 'release', lock: 'L', session: 'a', token: 2 }, { released: true }).ok,
    'wrong token cannot release',
  );
  t.ok(lock.step(state, { op: 'release', lock: 'L', session: 'a', token: 2 }, { released: false }).ok);
  r = lock.step(state, { op: 'release', lock: 'L', session: 'a', token: 1 }, { released: true });
  t.ok(r.ok);
  state = r.state;
  t.ok(lock.step(state, { op: 'read', lock: 'L' }, { holder: null, token: 1 }).ok, 'free, keeps its token');
  t.notOk(lock.step(state, acquire('b'), { granted: true, token: 1 }).ok, 'a token is never granted twice');
  t.notOk(lock.step(state, acquire('b'), { granted: true, token: 3 }).ok, 'tokens go up by exactly one');
  t.ok(lock.step(state, acquire('b'), { granted: true, token: 2 }).ok);
});

t.test('sessions may end at any time, and then answer nothing', async (t) => {
  const lock = fromNondeterministic(singleLockModel());
  let state = lock.step(lock.init(), { op: 'acquire', lock: 'L', session: 'a' }, { granted: true, token: 1 }).state;
  const r = lock.step(state, { op: 'acquire', lock: 'L', session: 'b' }, { granted: true, token: 2 });
  t.ok(r.ok, "b may be granted: a's session may have expired");
  state = r.state;
  t.notOk(
    lock.step(state, { op: 'release', lock: 'L', session: 'a', token: 1 }, { released: true }).ok,
    'the expired holder cannot release',
  );
  t.notOk(
    lock.step(state, { op: 'acquire', lock: 'L', session: 'a' }, { granted: false }).ok,
    'an ended session answers nothing',
  );
  t.ok(
    lock.step(state, { op: 'acquire', lock: 'L', session: 'a' }, undefined).ok,
    'a pending operation of an ended session is fine',
  );
});

t.test('histories: double grant, stale release, token reuse', async (t) => {
  const op = (
    clientId: number,
    input: LockInput,
    output: LockOutput | undefined,
    call: number,
    ret: number,
  ): Operation<LockInput, LockOutput> => ({ clientId, input, output, call, return: ret });
  const ok = check(model, [
    op(0, { op: 'acquire', lock: 'L', session: 'a' }, { granted: true, token: 1 }, 0, 1),
    op(1, { op: 'acquire', lock: 'L', session: 'b' }, { granted: false }, 2, 3),
    op(0, { op: 'release', lock: 'L', session: 'a', token: 1 }, { released: true }, 4, 5),
    op(1, { op: 'acquire', lock: 'L', session: 'b' }, { granted: true, token: 2 }, 6, 7),
  ]);
  t.equal(ok.result, 'ok');
  const twoHolders = check(model, [
    op(0, { op: 'acquire', lock: 'L', session: 'a' }, { granted: true, token: 1 }, 0, 1),
    op(1, { op: 'acquire', lock: 'L', session: 'b' }, { granted: true, token: 2 }, 2, 3),
    op(0, { op: 'release', lock: 'L', session: 'a', token: 1 }, { released: true }, 4, 5),
  ]);
  t.equal(twoHolders.result, 'illegal', 'both holders cannot have held it: a released after b was granted');
  const reuse = check(model, [
    op(0, { op: 'acquire', lock: 'L', session: 'a' }, { granted: true, token: 1 }, 0, 1),
    op(1, { op: 'acquire', lock: 'L', session: 'b' }, { granted: true, token: 1 }, 2, 3),
  ]);
  t.equal(reuse.result, 'illegal', 'token 1 granted twice');
  const locks = check(model, [
    op(0, { op: 'acquire', lock: 'L', session: 'a' }, { granted: true, token: 1 }, 0, 1),
    op(1, { op: 'acquire', lock: 'M', session: 'b' }, { granted: true, token: 1 }, 0, 1),
  ]);
  t.equal(locks.result, 'ok', 'locks are independent');
  t.equal(locks.partitions.length, 2, 'one partition per lock');
});

// ---- Property tests against a real lock service and a literal brute force ---------------------------

interface Spec {
  readonly clientId: number;
  readonly call: number;
  readonly duration: number;
  readonly effect: number;
  readonly fate: 'completed' | 'pending-took-effect' | 'pending-no-effect';
  readonly action:
    | { kind: 'acquire'; lock: string; session: string }
    | { kind: 'release'; lock: string; session: string; token: number }
    | { kind: 'read'; lock: string }
    | { kind: 'end'; session: string };
}

const lockName = fc.constantFrom('L', 'M');
const session = fc.constantFrom('s1', 's2', 's3');
const action: fc.Arbitrary<Spec['action']> = fc.oneof(
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('acquire' as const), lock: lockName, session }) },
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant('release' as const),
      lock: lockName,
      session,
      token: fc.integer({ min: 1, max: 3 }),
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('read' as const), lock: lockName }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('end' as const), session }) },
);
const spec: fc.Arbitrary<Spec> = fc.record({
  clientId: fc.integer({ min: 0, max: 3 }),
  call: fc.integer({ min: 0, max: 12 }),
  duration: fc.integer({ min: 0, max: 5 }),
  effect: fc.integer({ min: 0, max: 50 }),
  fate: fc.constantFrom('completed', 'completed', 'completed', 'pending-took-effect', 'pending-no-effect'),
  action,
});

/**
 * A real lock service (written apart from the model): sessions end (expire) as invisible events that free
 * all their locks; an operation of an ended session fails (dropped from the history, as a `fail`).
 */
function simulate(specs: readonly Spec[]): Operation<LockInput, LockOutput>[] {
  const locks = new Map<string, { holder: string | null; token: number }>();
  const ended = new Set<string>();
  const times = specs.map((s) => s.call * 10 + Math.min(s.effect, s.fate === 'completed' ? s.duration * 10 : 100));
  const order = specs.map((_, i) => i).sort((a, b) => times[a]! - times[b]! || a - b);
  const outputs = new Map<number, LockOutput | 'failed'>();
  for (const i of order) {
    const { action: a, fate } = specs[i]!;
    if (fate === 'pending-no-effect') continue;
    if (a.kind === 'end') {
      ended.add(a.session);
      for (const lock of locks.values()) if (lock.holder === a.session) lock.holder = null;
      continue;
    }
    const lock = locks.get(a.lock) ?? { holder: null, token: 0 };
    locks.set(a.lock, lock);
    if (a.kind === 'read') outputs.set(i, { holder: lock.holder, token: lock.token });
    else if (ended.has(a.session)) outputs.set(i, 'failed');
    else if (a.kind === 'acquire') {
      if (lock.holder === null) {
        lock.holder = a.session;
        lock.token++;
      }
      outputs.set(i, lock.holder === a.session ? { granted: true, token: lock.token } : { granted: false });
    } else if (lock.holder === a.session && lock.token === a.token) {
      lock.holder = null;
      outputs.set(i, { released: true });
    } else outputs.set(i, { released: false });
  }
  return specs.flatMap((s, i): Operation<LockInput, LockOutput>[] => {
    const a = s.action;
    if (a.kind === 'end') return [];
    const input: LockInput =
      a.kind === 'read'
        ? { op: 'read', lock: a.lock }
        : a.kind === 'acquire'
          ? { op: 'acquire', lock: a.lock, session: a.session }
          : { op: 'release', lock: a.lock, session: a.session, token: a.token };
    if (s.fate !== 'completed')
      return [{ clientId: s.clientId, input, call: s.call, output: undefined, return: Infinity }];
    const output = outputs.get(i);
    if (output === 'failed' || output === undefined) return [];
    return [{ clientId: s.clientId, input, call: s.call, output, return: s.call + s.duration }];
  });
}

function corrupt(ops: Operation<LockInput, LockOutput>[], which: number): Operation<LockInput, LockOutput>[] {
  const done = ops.flatMap((op, i) => (op.return === Infinity ? [] : [i]));
  if (done.length === 0) return ops;
  const target = done[which % done.length]!;
  return ops.map((op, i) => {
    if (i !== target || op.output === undefined) return op;
    const o = op.output;
    if (op.input.op === 'acquire')
      return {
        ...op,
        output: o.granted
          ? which % 2 === 0
            ? { granted: false }
            : { granted: true, token: (o.token ?? 0) + 1 }
          : { granted: true, token: 1 + (which % 3) },
      };
    if (op.input.op === 'release') return { ...op, output: { released: !o.released } };
    return { ...op, output: { holder: o.holder === null ? 's1' : null, token: o.token ?? 0 } };
  });
}

const histories = fc.array(spec, { minLength: 0, maxLength: 8 }).map(simulate);
const { partition: _partition, ...unpartitioned } = model;

function agrees(ops: Operation<LockInput, LockOutput>[]): void {
  const fast = check(model, ops);
  const expected = bruteForceLinearizable(unpartitioned, ops);
  if (fast.result !== (expected ? 'ok' : 'illegal'))
    throw new Error(`checker says ${fast.result}, brute force says ${expected ? 'ok' : 'illegal'}`);
  for (const part of fast.partitions) {
    const complete = part.result === 'ok';
    const problem = linearizationProblem(
      unpartitioned,
      part.operations,
      complete ? (part.linearization ?? []) : part.longestPrefix,
      complete,
    );
    if (problem !== undefined) throw new Error(problem);
  }
}

t.test('lock: histories of a real lock service are linearizable; checker and brute force agree', async (t) => {
  fc.assert(
    fc.property(histories, (ops) => {
      const result = check(model, ops);
      if (result.result !== 'ok') throw new Error(`a real service's history judged ${result.result}`);
    }),
    { numRuns: 1500 },
  );
  fc.assert(fc.property(histories, agrees), { numRuns: 1500 });
  t.pass('3000 histories');
});

t.test('lock: corrupted histories get the brute-force verdict', async (t) => {
  let illegal = 0;
  fc.assert(
    fc.property(fc.tuple(histories, fc.nat()), ([ops, which]) => {
      const bad = corrupt(ops, which);
      agrees(bad);
      if (check(model, bad).result === 'illegal') illegal++;
    }),
    { numRuns: 3000 },
  );
  t.ok(illegal > 300, `a good share of corrupted histories are illegal (${illegal} of 3000)`);
});
