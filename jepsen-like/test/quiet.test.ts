/**
 * The quiet nemesis's parts without a cluster: the traffic gate stops new operations, waits for those under way,
 * and opens again; a spell lasts at least QUIET_MIN_MS; the schedule and the command line know the nemesis.
 */
import t from 'tap';
import { makeSchedule, parseNemesisList } from '../src/index.js';
import { QUIET_MIN_MS, QUIET_SESSION_TIMEOUT_MS, quietNemesis } from '../src/nemesis/quiet.js';
import { TrafficGate } from '../src/nemesis/traffic.js';
import type { NemesisContext } from '../src/nemesis/context.js';

t.test('the gate: hold waits for operations under way, then nobody starts one until release', async (t) => {
  const gate = new TrafficGate();
  await gate.enter();
  let held = false;
  const holding = gate.hold(10_000).then(() => (held = true));
  await sleep(20);
  t.notOk(held, 'hold waits while an operation is under way');
  gate.leave();
  await holding;
  t.ok(gate.held, 'held once the operation finished');
  let entered = false;
  const entering = gate.enter().then(() => (entered = true));
  await sleep(20);
  t.notOk(entered, 'no operation starts while held');
  gate.release();
  await entering;
  t.ok(entered, 'operations start again after release');
  gate.leave();
});

t.test('the gate: hold gives up waiting after maxWaitMs; releaseAll opens it for good', async (t) => {
  const gate = new TrafficGate();
  await gate.enter(); // an operation stuck in a fault
  const started = Date.now();
  await gate.hold(50);
  t.ok(Date.now() - started >= 45, 'waited about maxWaitMs');
  await gate.hold(50);
  gate.release();
  t.ok(gate.held, 'two holds need two releases');
  const waiting = gate.enter();
  gate.releaseAll();
  await waiting;
  t.notOk(gate.held, 'open after releaseAll');
});

t.test('a quiet spell lasts at least QUIET_MIN_MS, longer than the members session timeout', async (t) => {
  t.ok(QUIET_MIN_MS > QUIET_SESSION_TIMEOUT_MS, `${QUIET_MIN_MS} > ${QUIET_SESSION_TIMEOUT_MS}`);
  const traffic = new TrafficGate();
  const ctx = { traffic } as unknown as NemesisContext;
  const started = Date.now();
  const active = await quietNemesis.start(1, { nemesis: 'quiet' }, ctx, []);
  t.ok(traffic.held, 'traffic held from the start');
  const stopped = await quietNemesis.stop(active, ctx, []);
  t.ok(Date.now() - started >= QUIET_MIN_MS - 5, `the stop waited out the spell (${Date.now() - started} ms)`);
  t.ok((stopped.quietMs as number) >= QUIET_MIN_MS - 5, 'the history records its length');
  t.notOk(traffic.held, 'traffic flows again');
});

t.test('the command line and the schedule take quiet', async (t) => {
  const nemeses = parseNemesisList('kill,quiet');
  t.same(
    nemeses.map((n) => n.name),
    ['kill', 'quiet'],
  );
  t.throws(() => parseNemesisList('quiet:one'), /no variant/, 'quiet has no variants');
  const schedule = makeSchedule({ seed: 3, durationMs: 60_000, nemeses, intervalMs: 3_000 });
  t.ok(
    schedule.some((a) => a.action === 'start' && a.fault.nemesis === 'quiet'),
    'quiet spells are scheduled',
  );
  t.ok(
    parseNemesisList('all').some((n) => n.name === 'quiet'),
    '"all" includes quiet',
  );
});

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
