import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import t from 'tap';
import {
  adaptEvents,
  casRegisterAdapter,
  casRegisterModel,
  check,
  checkEvents,
  keyedModel,
  lockAdapter,
  parseJepsenEdnHistory,
  prepareHistory,
  type CasRegisterInput,
  type CasRegisterOutput,
  type GenericEvent,
  type Operation,
} from '../src/index.js';
import { bruteForceLinearizable } from './support/brute-force.js';
import { casRegisterHistories } from './support/generators.js';
import { listKvHistories, requirePorcupineHistories } from './support/shared-data.js';

t.test('generic Jepsen EDN reader + kv adapter reproduce the Porcupine kv verdicts', async (t) => {
  const dir = requirePorcupineHistories();
  for (const { file, linearizable } of listKvHistories(dir)) {
    const generic = parseJepsenEdnHistory(readFileSync(join(dir, 'kv', file), 'utf8'));
    const { model, events } = prepareHistory('kv', generic);
    t.equal(checkEvents(model, events, { timeoutMs: 60_000 }).result, linearizable ? 'ok' : 'illegal', file);
  }
});

t.test('EDN reader: keywords, vectors, nemesis events, time', async (t) => {
  const events = parseJepsenEdnHistory(
    [
      '{:type :invoke, :f :cas, :value [1 2], :process 3, :time 100, :index 0}',
      '{:process :nemesis, :type :info, :f :start, :value nil, :time 150}',
      '{:type :fail, :f :cas, :value [1 2], :process 3, :time 200, :error :mismatch}',
    ].join('\n'),
  );
  t.same(events[0], { process: 3, type: 'invoke', f: 'cas', value: [1, 2], time: 100 });
  t.same(events[1], { process: 'nemesis', type: 'info', f: 'start', value: null, time: 150 });
  t.equal(events[2]!.error, 'mismatch');
  const adapted = adaptEvents(events, casRegisterAdapter());
  t.same(
    adapted.map((e) => e.type),
    ['invoke', 'fail'],
    'nemesis skipped; a failed cas did not happen',
  );
  t.same(
    adaptEvents(events, casRegisterAdapter({ casFailIsObservation: true })).map((e) => e.type),
    ['invoke', 'ok'],
    'or observed a mismatch',
  );
});

t.test('our history shape: keyed cas registers, cas_mismatch is an observation', async (t) => {
  const h: GenericEvent[] = [
    { process: 0, type: 'invoke', f: 'write', key: 'a', value: 1, time: 0 },
    { process: 0, type: 'ok', f: 'write', key: 'a', value: 1, time: 10 },
    { process: 1, type: 'invoke', f: 'cas', key: 'b', value: [null, 5], time: 20 },
    { process: 1, type: 'ok', f: 'cas', key: 'b', value: [null, 5], time: 30 },
    { process: 0, type: 'invoke', f: 'cas', key: 'a', value: [1, 2], time: 40 },
    { process: 0, type: 'fail', f: 'cas', key: 'a', value: [1, 2], error: 'cas_mismatch', time: 50 },
  ];
  const { model, events } = prepareHistory('cas-register', h);
  const result = checkEvents(model, events);
  t.equal(result.result, 'illegal', 'the value of a was 1, so the cas could not mismatch');
  t.equal(result.partitions.length, 2, 'one partition per key');
  const relaxed = h.map((e) => (e.type === 'fail' ? { ...e, error: 'unavailable' } : e));
  const again = prepareHistory('cas-register', relaxed);
  t.equal(checkEvents(again.model, again.events).result, 'ok', 'any other failure did not happen');
});

t.test('lock adapter: resource writes skipped, refusals observed, unknown_session dropped', async (t) => {
  const h: GenericEvent[] = [
    { process: 0, type: 'invoke', f: 'acquire', key: 'L', value: { session: 'a' } },
    { process: 0, type: 'ok', f: 'acquire', key: 'L', value: { session: 'a', granted: true, token: 1 } },
    { process: 0, type: 'invoke', f: 'write', key: 'resource', value: { token: 1 } },
    { process: 0, type: 'ok', f: 'write', key: 'resource', value: { token: 1, accepted: true } },
    { process: 0, type: 'invoke', f: 'release', key: 'L', value: { session: 'a', token: 1 } },
    { process: 0, type: 'fail', f: 'release', key: 'L', value: { session: 'a', token: 1 }, error: 'stale_token' },
    { process: 1, type: 'invoke', f: 'acquire', key: 'L', value: { session: 'b' } },
    { process: 1, type: 'fail', f: 'acquire', key: 'L', value: { session: 'b' }, error: 'unknown_session' },
  ];
  const events = adaptEvents(h, lockAdapter());
  t.same(
    events.map((e) => e.type),
    ['invoke', 'ok', 'invoke', 'ok', 'invoke', 'fail'],
  );
  const { model, events: prepared } = prepareHistory('lock', h);
  t.equal(
    checkEvents(model, prepared).result,
    'illegal',
    'a holds L under token 1, so its release cannot be refused as stale (an ended session would answer unknown_session)',
  );
  const expired = h.map((e) => (e.type === 'fail' && e.f === 'release' ? { ...e, error: 'unknown_session' } : e));
  const again = prepareHistory('lock', expired);
  t.equal(
    checkEvents(again.model, again.events).result,
    'ok',
    "unknown_session: a's session ended, the release did not happen",
  );
});

t.test('keyed cas register agrees with brute force (two independent registers interleaved)', async (t) => {
  const inner = casRegisterModel<number>(0);
  type In = CasRegisterInput<number> & { key: string };
  const keyed = keyedModel<number, In, CasRegisterOutput<number>>(inner as never, (input) => input.key);
  const { partition: _p, ...whole } = keyed;
  const gen = casRegisterHistories();
  const pair = fc
    .tuple(gen.corrupted, gen.simulated)
    .map(
      ([a, b]) =>
        [
          ...a.map((op) => ({ ...op, input: { ...op.input, key: 'x' } })),
          ...b.map((op) => ({ ...op, clientId: op.clientId + 10, input: { ...op.input, key: 'y' } })),
        ] as Operation<In, CasRegisterOutput<number>>[],
    );
  fc.assert(
    fc.property(pair, (ops) => {
      if (ops.length > 10) return;
      const expected = bruteForceLinearizable(whole, ops);
      const got = check(keyed, ops).result;
      if (got !== (expected ? 'ok' : 'illegal')) throw new Error(`checker ${got}, brute force ${expected}`);
    }),
    { numRuns: 1500 },
  );
  t.pass('1500 histories');
});
