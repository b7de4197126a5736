import t, { type Test } from 'tap';
import { makeSchedule, NemesisSpecError, parseNemesisList, type ScheduledAction } from '../src/index.js';

const all = parseNemesisList('partition,kill,pause,packet,clock');

t.test('the schedule is a function of the seed and options', async (t) => {
  const options = { seed: 42, durationMs: 60_000, nemeses: all, intervalMs: 4_000 };
  const a = makeSchedule(options);
  const b = makeSchedule({ ...options });
  t.same(a, b, 'same seed, same schedule');
  t.ok(a.length >= 4, `several actions (${a.length})`);
  t.notSame(makeSchedule({ ...options, seed: 43 }), a, 'another seed, another schedule');
  for (let seed = 0; seed < 50; seed++) t.same(makeSchedule({ ...options, seed }), makeSchedule({ ...options, seed }));
});

function checkShape(t: Test, actions: ScheduledAction[], durationMs: number, maxActive: number): void {
  const open = new Map<number, ScheduledAction>();
  let last = -1;
  let peak = 0;
  for (const a of actions) {
    t.ok(a.at >= last, 'in time order');
    last = a.at;
    t.ok(a.at <= durationMs, 'within the run');
    if (a.action === 'start') {
      t.notOk(
        [...open.values()].some((o) => o.fault.nemesis === a.fault.nemesis),
        'one fault per nemesis at a time',
      );
      open.set(a.id, a);
      peak = Math.max(peak, open.size);
    } else {
      t.ok(open.has(a.id), 'a stop follows its start');
      t.same(open.get(a.id)!.fault, a.fault);
      open.delete(a.id);
    }
  }
  t.equal(open.size, 0, 'everything stopped by the end (final heal)');
  t.ok(peak <= maxActive, `at most ${maxActive} faults at once (saw ${peak})`);
}

t.test('start/stop pairs, mixed, bounded overlap, all healed at the end', async (t) => {
  for (let seed = 1; seed <= 30; seed++) {
    const actions = makeSchedule({ seed, durationMs: 45_000, nemeses: all, intervalMs: 3_000 });
    checkShape(t, actions, 45_000, 2);
  }
  const three = makeSchedule({ seed: 9, durationMs: 120_000, nemeses: all, intervalMs: 3_000, maxActive: 3 });
  checkShape(t, three, 120_000, 3);
  const kinds = new Set(
    makeSchedule({ seed: 5, durationMs: 600_000, nemeses: all, intervalMs: 3_000 }).map((a) => a.fault.nemesis),
  );
  t.same(
    [...kinds].sort(),
    ['clock', 'kill', 'packet', 'partition', 'pause'],
    'every chosen nemesis shows up in a long run',
  );
});

t.test('variants restrict the faults drawn', async (t) => {
  const actions = makeSchedule({
    seed: 3,
    durationMs: 300_000,
    nemeses: parseNemesisList('partition:majority-ring+bridge,kill:leader'),
    intervalMs: 2_000,
  });
  for (const a of actions) {
    if (a.fault.nemesis === 'partition') t.ok(['majority-ring', 'bridge'].includes(a.fault.shape));
    else if (a.fault.nemesis === 'kill') t.equal(a.fault.target, 'leader');
    else t.fail(`unexpected ${a.fault.nemesis}`);
  }
  t.same(makeSchedule({ seed: 1, durationMs: 10_000, nemeses: [], intervalMs: 1_000 }), [], 'no nemesis, no faults');
});

t.test('nemesis lists', async (t) => {
  t.same(parseNemesisList('none'), []);
  t.same(
    parseNemesisList('all').map((n) => n.name),
    ['partition', 'kill', 'pause', 'packet', 'clock', 'quiet'],
  );
  t.same(parseNemesisList('kill:leader+minority, pause'), [
    { name: 'kill', variants: ['leader', 'minority'] },
    { name: 'pause', variants: [] },
  ]);
  t.throws(() => parseNemesisList('explode'), NemesisSpecError);
  t.throws(() => parseNemesisList('partition:triangle'), /no variant/);
});
