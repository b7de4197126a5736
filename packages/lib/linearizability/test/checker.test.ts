import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import {
  check,
  checkEvents,
  describeResult,
  HistoryError,
  kvModel,
  parseJepsenEtcdLog,
  casRegisterModel,
  registerModel,
  type EtcdValue,
  type KvInput,
  type KvOutput,
  type Operation,
  type RegisterInput,
  type RegisterOutput,
} from '../src/index.js';
import { requirePorcupineHistories } from './support/shared-data.js';

type RegisterOp = Operation<RegisterInput<number>, RegisterOutput<number>>;
const register = registerModel<number>(0);
const write = (value: number, call: number, ret: number, clientId = 0): RegisterOp => ({
  clientId,
  input: { op: 'write', value },
  call,
  output: {},
  return: ret,
});
const read = (value: number, call: number, ret: number, clientId = 1): RegisterOp => ({
  clientId,
  input: { op: 'read' },
  call,
  output: { value },
  return: ret,
});
const pendingWrite = (value: number, call: number, clientId = 2): RegisterOp => ({
  clientId,
  input: { op: 'write', value },
  call,
  output: undefined,
  return: Infinity,
});

t.test('basic register histories', async (t) => {
  t.equal(check(register, []).result, 'ok', 'the empty history');
  t.equal(
    check(register, [write(1, 0, 10), read(1, 2, 3), read(0, 4, 5)]).result,
    'illegal',
    'reads during a write cannot go back in time',
  );
  t.equal(
    check(register, [write(1, 0, 10), read(0, 2, 3), read(1, 4, 5)]).result,
    'ok',
    'the write can take effect between the reads',
  );
  t.equal(
    check(register, [write(1, 0, 10), read(1, 2, 3), read(1, 4, 5), read(0, 11, 12)]).result,
    'illegal',
    'a read after the write returned must see it',
  );
  t.equal(
    check(register, [read(0, 0, 0), write(3, 0, 0), read(3, 0, 0)]).result,
    'ok',
    'zero-length operations at the same instant are concurrent',
  );
});

t.test('an operation returning at t and one called at t are concurrent', async (t) => {
  // The read is called exactly when the write returns: it may be ordered first.
  t.equal(check(register, [write(1, 0, 5), read(0, 5, 8)]).result, 'ok', 'touching intervals overlap');
  t.equal(check(register, [write(1, 0, 5), read(0, 6, 8)]).result, 'illegal', 'disjoint intervals are ordered');
});

t.test('pending (info) operations may take effect at any time after their call, or never', async (t) => {
  t.equal(check(register, [pendingWrite(1, 0), read(0, 1, 2)]).result, 'ok', 'never happened (so far)');
  t.equal(
    check(register, [pendingWrite(1, 0), read(1, 100, 101)]).result,
    'ok',
    'took effect long after the caller gave up',
  );
  t.equal(
    check(register, [pendingWrite(1, 0), read(1, 1, 2), read(0, 3, 4)]).result,
    'illegal',
    'it cannot be undone once seen',
  );
  t.equal(
    check(register, [read(1, 0, 1), pendingWrite(1, 2)]).result,
    'illegal',
    'it cannot take effect before its call',
  );
  t.equal(
    check(register, [pendingWrite(1, 0, 2), pendingWrite(2, 0, 3), read(2, 5, 6), read(1, 7, 8)]).result,
    'ok',
    'pending operations order freely among themselves',
  );
  const result = check(register, [pendingWrite(1, 0), read(0, 1, 2)]);
  t.same(result.partitions[0]?.linearization, [1], 'the witness leaves out the write that need not have happened');
});

t.test('invalid timestamps are rejected, not judged', async (t) => {
  t.throws(() => check(register, [read(0, 5, 4)]), HistoryError);
  t.throws(() => check(register, [read(0, NaN, 4)]), HistoryError);
  t.throws(() => check(register, [read(0, -Infinity, 4)]), HistoryError);
});

t.test('an illegal history explains itself', async (t) => {
  const ops = [write(1, 0, 1), read(1, 2, 3), write(2, 4, 5), read(1, 6, 7)];
  const result = check(register, ops);
  t.equal(result.result, 'illegal');
  const partition = result.partitions[0]!;
  t.same(partition.longestPrefix, [0, 1, 2], 'the longest linearizable prefix');
  t.equal(partition.blockedOperation, 3, 'the stale read is the operation that cannot follow it');
  t.ok(partition.partialLinearizations.length > 0);
  t.same(partition.partialLinearizations[0], [0, 1, 2], 'longest first');
  const text = describeResult(register, result);
  t.match(text, /result: illegal/);
  t.match(text, /cannot linearize: \[client 1, 6\.\.7\] read\(\) -> 1/);
});

t.test('partitions are checked independently and reported separately', async (t) => {
  const put = (key: string, value: string, call: number, ret: number): Operation<KvInput, KvOutput> => ({
    clientId: 0,
    input: { op: 'put', key, value },
    call,
    output: {},
    return: ret,
  });
  const get = (key: string, value: string, call: number, ret: number): Operation<KvInput, KvOutput> => ({
    clientId: 1,
    input: { op: 'get', key },
    call,
    output: { value },
    return: ret,
  });
  const history = [
    put('a', 'x', 0, 1),
    get('b', 'y', 2, 3),
    put('b', 'y', 0, 1),
    get('a', '', 2, 3),
    get('c', '', 0, 9),
  ];
  const all = check(kvModel, history, { stopOnIllegal: false });
  t.equal(all.result, 'illegal');
  t.same(
    all.partitions.map((partition) => partition.result),
    ['illegal', 'ok', 'ok'],
    'keys a, b, c in order',
  );
  t.same(
    all.partitions.map((partition) => partition.operations.length),
    [2, 2, 1],
  );
  t.equal(all.partitions[0]!.operations[all.partitions[0]!.blockedOperation!]!.input.key, 'a');
  const stopped = check(kvModel, history);
  t.equal(stopped.result, 'illegal', 'by default the first illegal partition ends the check');
});

t.test('results are deterministic', async (t) => {
  const ops = [write(1, 0, 10), write(2, 1, 9), read(2, 2, 3), read(1, 4, 5), read(2, 6, 7)];
  t.same(check(register, ops), check(register, ops));
});

const etcdModel = casRegisterModel<EtcdValue>(null);
const hardEtcdHistory = () =>
  parseJepsenEtcdLog(readFileSync(join(requirePorcupineHistories(), 'jepsen', 'etcd_002.log'), 'utf8'));

t.test('a spent time budget gives unknown, never a guess', async (t) => {
  const events = hardEtcdHistory();
  t.equal(checkEvents(etcdModel, events).result, 'ok', 'decidable without a budget');

  // An injected clock that jumps past the deadline on its second reading.
  let readings = 0;
  const jumpingClock = () => (readings++ === 0 ? 0 : 1_000);
  const timedOut = checkEvents(etcdModel, events, { timeoutMs: 500, now: jumpingClock });
  t.equal(timedOut.result, 'unknown', 'deadline passed');
  t.equal(timedOut.partitions[0]?.result, 'unknown');

  t.equal(checkEvents(etcdModel, events, { timeoutMs: 0 }).result, 'unknown', 'zero budget on the real clock');

  const stepLimited = checkEvents(etcdModel, events, { maxSteps: 10_000 });
  t.equal(stepLimited.result, 'unknown', 'step budget spent');
  t.equal(stepLimited.steps, 10_000);
  t.ok(stepLimited.partitions[0]!.longestPrefix.length > 0, 'an unfinished search still reports how far it got');
  t.same(checkEvents(etcdModel, events, { maxSteps: 10_000 }), stepLimited, 'a step budget is deterministic');

  const frozenClock = () => 0;
  t.equal(
    checkEvents(etcdModel, events, { timeoutMs: 1, now: frozenClock }).result,
    'ok',
    'a clock that never reaches the deadline does not interfere',
  );
});

t.test('a budget that runs out after one partition is found illegal still gives illegal', async (t) => {
  const put = (key: string, value: string, call: number, ret: number): Operation<KvInput, KvOutput> => ({
    clientId: 0,
    input: { op: 'put', key, value },
    call,
    output: {},
    return: ret,
  });
  const get = (key: string, value: string, call: number, ret: number): Operation<KvInput, KvOutput> => ({
    clientId: 1,
    input: { op: 'get', key },
    call,
    output: { value },
    return: ret,
  });
  const result = check(kvModel, [put('a', 'x', 0, 1), get('a', '', 2, 3), put('b', 'y', 0, 1), get('b', 'y', 2, 3)], {
    maxSteps: 4,
    stopOnIllegal: false,
  });
  t.equal(result.partitions[0]!.result, 'illegal');
  t.equal(result.partitions[1]!.result, 'unknown');
  t.equal(result.result, 'illegal');
});
