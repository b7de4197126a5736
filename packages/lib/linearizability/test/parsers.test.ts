import t from 'tap';
import {
  casRegisterModel,
  checkEvents,
  eventsToOperations,
  ParseError,
  parseJepsenEtcdLog,
  parsePorcupineKvLog,
  type EtcdValue,
} from '../src/index.js';

t.test('jepsen etcd log: every line shape, tabs or spaces', async (t) => {
  const log = [
    'INFO  jepsen.util - 0\t:invoke\t:read\tnil',
    'INFO  jepsen.util - 1   :invoke :write  3',
    'INFO  jepsen.util - 2\t:invoke\t:cas\t[3 4]',
    'INFO  jepsen.util - 0\t:ok\t:read\tnil',
    'INFO  jepsen.util - 1   :ok     :write  3',
    'INFO  jepsen.util - 2\t:fail\t:cas\t[3 4]',
    'INFO  jepsen.util - 0\t:invoke\t:read\tnil',
    'INFO  jepsen.util - 0\t:fail\t:read\t:timed-out',
    'INFO  jepsen.util - 1\t:invoke\t:cas\t[3 0]',
    'INFO  jepsen.util - 1\t:info\t:cas\t:timed-out',
    'INFO  jepsen.util - 6\t:invoke\t:read\tnil',
    'INFO  jepsen.util - 6\t:ok\t:read\t0',
    '',
  ].join('\n');
  const events = parseJepsenEtcdLog(log);
  t.equal(events.length, 12);
  t.same(events[2], { type: 'invoke', clientId: 2, time: 2, input: { op: 'cas', from: 3, to: 4 } });
  t.same(events[3], { type: 'ok', clientId: 0, time: 3, output: { value: null } });
  t.same(
    events[5],
    { type: 'ok', clientId: 2, time: 5, output: { ok: false } },
    ':fail :cas is an observed compare failure',
  );
  t.same(events[7], { type: 'fail', clientId: 0, time: 7 }, 'a timed-out read is dropped');
  t.same(events[9], { type: 'info', clientId: 1, time: 9 });
  const ops = eventsToOperations(events);
  t.same(
    ops.map((op) => op.input.op),
    ['read', 'write', 'cas', 'cas', 'read'],
  );
  t.equal(ops[3]!.return, Infinity, 'the timed-out cas is pending');
  // The pending cas [3 0] explains reading 0 at the end.
  t.equal(checkEvents(casRegisterModel<EtcdValue>(null), events).result, 'ok');
});

t.test('jepsen etcd log: unknown lines are errors with line numbers', async (t) => {
  const error = t.throws(() => parseJepsenEtcdLog('INFO  jepsen.util - 0\t:invoke\t:read\tnil\nsomething else'));
  t.ok(error instanceof ParseError);
  t.equal((error as ParseError).lineNumber, 2);
  t.throws(() => parseJepsenEtcdLog('INFO  jepsen.util - 0\t:invoke\t:cas\t[1]'), ParseError, 'bad cas argument');
  t.throws(
    () => parseJepsenEtcdLog('INFO  jepsen.util - 0\t:fail\t:write\t1'),
    ParseError,
    'a write cannot fail this way',
  );
});

t.test('porcupine kv log', async (t) => {
  const log = [
    '{:process 0, :type :invoke, :f :put, :key "k", :value "a \\"quoted\\" b"}',
    '{:process 1, :type :invoke, :f :get, :key "k", :value nil}',
    '{:process 0, :type :ok, :f :put, :key "k", :value "a \\"quoted\\" b"}',
    '{:process 1, :type :ok, :f :get, :key "k", :value ""}',
    '{:process 2, :type :invoke, :f :append, :key "j", :value "x"}',
    '{:process 2, :type :info, :f :append, :key "j", :value "x"}',
  ].join('\n');
  const events = parsePorcupineKvLog(log);
  t.same(events[0], { type: 'invoke', clientId: 0, time: 0, input: { op: 'put', key: 'k', value: 'a "quoted" b' } });
  t.same(events[1], { type: 'invoke', clientId: 1, time: 1, input: { op: 'get', key: 'k' } });
  t.same(events[2], { type: 'ok', clientId: 0, time: 2, output: {} }, 'put results carry nothing');
  t.same(events[3], { type: 'ok', clientId: 1, time: 3, output: { value: '' } });
  t.same(events[5], { type: 'info', clientId: 2, time: 5 });
  t.throws(
    () => parsePorcupineKvLog('{:process 0, :type :invoke, :f :cas, :key "k", :value nil}'),
    ParseError,
    'unknown :f',
  );
  t.throws(() => parsePorcupineKvLog('{:process 0, :type :invoke, :f :get, :key "k"'), ParseError, 'unterminated map');
  t.throws(
    () => parsePorcupineKvLog('{:process "0", :type :invoke, :f :get, :key "k", :value nil}'),
    ParseError,
    'process must be a number',
  );
});
