import t from 'tap';
import { eventsToOperations, HistoryError, isPending, type HistoryEvent } from '../src/index.js';

type Event = HistoryEvent<string, number>;

t.test('events become operations in invocation order, timed by index', async (t) => {
  const events: Event[] = [
    { type: 'invoke', clientId: 1, input: 'a' },
    { type: 'invoke', clientId: 2, input: 'b' },
    { type: 'ok', clientId: 2, output: 20 },
    { type: 'ok', clientId: 1, output: 10 },
  ];
  t.same(eventsToOperations(events), [
    { clientId: 1, input: 'a', call: 0, output: 10, return: 3 },
    { clientId: 2, input: 'b', call: 1, output: 20, return: 2 },
  ]);
});

t.test('fail drops the operation, info and unfinished invocations become pending', async (t) => {
  const events: Event[] = [
    { type: 'invoke', clientId: 1, input: 'failed' },
    { type: 'invoke', clientId: 2, input: 'timed out' },
    { type: 'fail', clientId: 1 },
    { type: 'info', clientId: 2 },
    { type: 'invoke', clientId: 1, input: 'never answered' },
    { type: 'invoke', clientId: 2, input: 'after info' },
    { type: 'ok', clientId: 2, output: 7 },
  ];
  const ops = eventsToOperations(events);
  t.same(
    ops.map((op) => op.input),
    ['timed out', 'never answered', 'after info'],
  );
  t.same(ops.map(isPending), [true, true, false]);
  t.equal(ops[0]!.output, undefined);
  t.equal(ops[0]!.return, Infinity);
  t.equal(ops[1]!.call, 4);
});

t.test('explicit times are used when every event has one', async (t) => {
  const ops = eventsToOperations<string, number>([
    { type: 'invoke', clientId: 1, input: 'a', time: 100 },
    { type: 'ok', clientId: 1, output: 1, time: 250 },
  ]);
  t.same(ops, [{ clientId: 1, input: 'a', call: 100, output: 1, return: 250 }]);
  t.throws(
    () =>
      eventsToOperations<string, number>([
        { type: 'invoke', clientId: 1, input: 'a', time: 100 },
        { type: 'ok', clientId: 1, output: 1 },
      ]),
    HistoryError,
    'mixing timed and untimed events',
  );
  t.throws(
    () =>
      eventsToOperations<string, number>([
        { type: 'invoke', clientId: 1, input: 'a', time: 100 },
        { type: 'ok', clientId: 1, output: 1, time: 50 },
      ]),
    HistoryError,
    'returning before the call',
  );
});

t.test('malformed logs are rejected', async (t) => {
  t.throws(
    () => eventsToOperations<string, number>([{ type: 'ok', clientId: 1, output: 1 }]),
    HistoryError,
    'completion without invocation',
  );
  t.throws(
    () =>
      eventsToOperations<string, number>([
        { type: 'invoke', clientId: 1, input: 'a' },
        { type: 'invoke', clientId: 1, input: 'b' },
      ]),
    HistoryError,
    'two outstanding invocations on one client',
  );
});
