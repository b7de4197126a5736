import t from 'tap';
import {
  casRegisterModel,
  check,
  counterModel,
  fromNondeterministic,
  kvModel,
  partitionByKey,
  registerModel,
  registerValueKey,
  type KvState,
  type NondeterministicModel,
  type Operation,
} from '../src/index.js';

t.test('register', async (t) => {
  const model = registerModel<number | null>(null);
  t.equal(model.init(), null);
  t.same(model.step(null, { op: 'write', value: 3 }, {}), { ok: true, state: 3 });
  t.same(model.step(3, { op: 'read' }, { value: 3 }), { ok: true, state: 3 });
  t.equal(model.step(3, { op: 'read' }, { value: 4 }).ok, false);
  t.equal(model.step(3, { op: 'read' }, { value: null }).ok, false);
  t.equal(model.step(3, { op: 'read' }, undefined).ok, true, 'a pending read matches anything');
  t.equal(model.step(3, { op: 'read' }, {}).ok, true, 'an unobserved value matches anything');
  t.not(registerValueKey(1), registerValueKey('1'), 'keys keep types apart');
  t.not(registerValueKey(null), registerValueKey('null'));
  t.equal(model.describeOperation?.({ op: 'read' }, { value: 3 }), 'read() -> 3');
  t.equal(model.describeOperation?.({ op: 'write', value: 3 }, {}), 'write(3)');
});

t.test('cas-register', async (t) => {
  const model = casRegisterModel<number | null>(null);
  t.same(model.step(1, { op: 'cas', from: 1, to: 2 }, { ok: true }), { ok: true, state: 2 });
  t.equal(model.step(1, { op: 'cas', from: 1, to: 2 }, { ok: false }).ok, false, 'claims failure although it matched');
  t.same(model.step(1, { op: 'cas', from: 0, to: 2 }, { ok: false }), { ok: true, state: 1 });
  t.equal(
    model.step(1, { op: 'cas', from: 0, to: 2 }, { ok: true }).ok,
    false,
    'claims success although it did not match',
  );
  t.same(
    model.step(1, { op: 'cas', from: 1, to: 2 }, undefined),
    { ok: true, state: 2 },
    'pending cas: applied as if it happened',
  );
  t.same(
    model.step(null, { op: 'cas', from: null, to: 5 }, { ok: true }),
    { ok: true, state: 5 },
    'null compares like any value',
  );
  t.same(model.step(1, { op: 'write', value: 4 }, {}), { ok: true, state: 4 });
  t.equal(model.step(1, { op: 'read' }, { value: 1 }).ok, true);
  t.equal(model.step(1, { op: 'read' }, { value: 2 }).ok, false);
  t.equal(model.describeOperation?.({ op: 'cas', from: 1, to: 2 }, { ok: false }), 'cas(1, 2) -> fail');
  t.equal(model.describeOperation?.({ op: 'cas', from: 1, to: 2 }, undefined), 'cas(1, 2) -> ?');
});

t.test('counter', async (t) => {
  t.equal(counterModel.init(), 0);
  t.same(counterModel.step(2, { op: 'add', delta: 3 }, {}), { ok: true, state: 5 });
  t.same(counterModel.step(2, { op: 'add', delta: -5 }, undefined), { ok: true, state: -3 });
  t.equal(counterModel.step(5, { op: 'read' }, { value: 5 }).ok, true);
  t.equal(counterModel.step(5, { op: 'read' }, { value: 4 }).ok, false);
  t.equal(counterModel.key(5), '5');
});

t.test('kv', async (t) => {
  const empty = kvModel.init();
  t.equal(kvModel.step(empty, { op: 'get', key: 'k' }, { value: '' }).ok, true, 'a missing key reads as ""');
  t.equal(kvModel.step(empty, { op: 'get', key: 'k' }, { value: 'x' }).ok, false);
  const put = kvModel.step(empty, { op: 'put', key: 'k', value: 'ab' }, {}).state;
  const appended = kvModel.step(put, { op: 'append', key: 'k', value: 'c' }, {}).state;
  t.same([...appended], [['k', 'abc']]);
  t.same([...put], [['k', 'ab']], 'states are never mutated');
  t.equal(kvModel.step(appended, { op: 'get', key: 'k' }, { value: 'abc' }).ok, true);
  t.equal(kvModel.step(appended, { op: 'get', key: 'other' }, { value: '' }).ok, true, 'keys are independent');

  const state = (entries: [string, string][]): KvState => new Map(entries);
  t.equal(
    kvModel.key(
      state([
        ['a', '1'],
        ['b', '2'],
      ]),
    ),
    kvModel.key(
      state([
        ['b', '2'],
        ['a', '1'],
      ]),
    ),
    'key ignores insertion order',
  );
  t.not(
    kvModel.key(state([['a', '1:b']])),
    kvModel.key(
      state([
        ['a', '1'],
        ['b', ''],
      ]),
    ),
    'key is unambiguous',
  );
  t.not(kvModel.key(state([['ab', 'c']])), kvModel.key(state([['a', 'bc']])));
  const cleared = kvModel.step(put, { op: 'put', key: 'k', value: '' }, {}).state;
  t.equal(kvModel.key(cleared), kvModel.key(empty), 'putting "" is the same state as never writing');

  const ops: Operation<{ op: 'get' | 'put' | 'append'; key: string; value?: string }, { value?: string }>[] = [
    { clientId: 0, input: { op: 'put', key: 'b', value: 'x' }, call: 0, output: {}, return: 1 },
    { clientId: 0, input: { op: 'get', key: 'a' }, call: 2, output: { value: '' }, return: 3 },
    { clientId: 1, input: { op: 'append', key: 'b', value: 'y' }, call: 0, output: {}, return: 4 },
  ];
  const parts = kvModel.partition!(ops);
  t.same(
    parts.map((part) => part.map((op) => op.input.key)),
    [['a'], ['b', 'b']],
    'partitioned by key, sorted, order kept',
  );
  t.equal(kvModel.describeOperation?.({ op: 'append', key: 'k', value: 'v' }, {}), 'append("k", "v")');
});

t.test('partitionByKey keeps history order within each part', async (t) => {
  const partition = partitionByKey<string, null>((input) => input[0]!);
  const op = (input: string, call: number): Operation<string, null> => ({
    clientId: 0,
    input,
    call,
    output: null,
    return: call,
  });
  const parts = partition([op('b1', 0), op('a1', 1), op('b2', 2), op('a2', 3)]);
  t.same(
    parts.map((part) => part.map((o) => o.input)),
    [
      ['a1', 'a2'],
      ['b1', 'b2'],
    ],
  );
});

t.test('fromNondeterministic: a register whose writes may be lost', async (t) => {
  // A lossy register: a write either replaces the value or is silently dropped.
  const lossy: NondeterministicModel<number, { op: 'read' } | { op: 'write'; value: number }, { value?: number }> = {
    init: () => [0],
    step: (state, input, output) => {
      if (input.op === 'write') return [state, input.value];
      return output?.value === undefined || output.value === state ? [state] : [];
    },
    key: String,
  };
  const model = fromNondeterministic(lossy);
  t.same(model.init(), [0]);
  const afterWrite = model.step([0], { op: 'write', value: 1 }, {});
  t.same(afterWrite, { ok: true, state: [0, 1] });
  t.same(model.step(afterWrite.state, { op: 'read' }, { value: 1 }), { ok: true, state: [1] });
  t.same(model.step(afterWrite.state, { op: 'read' }, { value: 2 }), { ok: false, state: [] });
  t.equal(model.key([1, 0].sort()), model.key([0, 1]), 'set keys are canonical');

  type LossyOp = Operation<{ op: 'read' } | { op: 'write'; value: number }, { value?: number }>;
  const writeOp: LossyOp = { clientId: 0, input: { op: 'write', value: 1 }, call: 0, output: {}, return: 1 };
  const readOld: LossyOp = { clientId: 1, input: { op: 'read' }, call: 2, output: { value: 0 }, return: 3 };
  const readNew: LossyOp = { clientId: 1, input: { op: 'read' }, call: 4, output: { value: 1 }, return: 5 };
  t.equal(check(model, [writeOp, readOld]).result, 'ok', 'a lost write is allowed');
  t.equal(check(model, [writeOp, readOld, readNew]).result, 'illegal', 'but not lost and then found');
  t.equal(
    check(registerModel<number>(0), [writeOp, readOld]).result,
    'illegal',
    'a plain register forbids the lost write',
  );
});
