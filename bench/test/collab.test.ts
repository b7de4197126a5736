/**
 * The collab benchmark's y-websocket side on real processes: the reference server starts, providers sync, a
 * keystroke is seen by the other editors under the key its author gave it, and a short phase yields figures (so a
 * run that measures nothing fails here, not in a report). And the goals.
 */
import t from 'tap';
import type { SideResult } from '../src/benchmark.js';
import { collabGoals, runPhase, ywebsocketSide, type PhaseFigures } from '../src/benchmarks/collab.js';
import { cleanupAll } from '../src/cleanup.js';
import { isAlive } from '../src/procs.js';
import type { RunOptions } from '../src/benchmark.js';

t.teardown(cleanupAll);

const options: RunOptions = {
  name: 'collab',
  vs: 'y-websocket',
  durationS: 1.5,
  warmupS: 0.5,
  concurrency: 3,
  out: '/tmp',
  routing: 'all',
  size: 50,
  keys: 1,
  snapshotEvery: null,
  rounds: 1,
  profileDir: null,
  noisyCores: 0.3,
};

t.test('y-websocket: a keystroke reaches the other editors; a phase measures', async (t) => {
  const side = await ywebsocketSide();
  try {
    t.ok(isAlive(side.serverPids[0]!), 'the server runs');
    const editors = await side.editors(3, 'probe');
    const seen: string[][] = [[], [], []];
    editors.forEach((e, i) => (e.onRemote = (key) => seen[i]!.push(key)));
    const key = editors[0]!.type();
    for (let i = 0; i < 100 && (seen[1]!.length === 0 || seen[2]!.length === 0); i++)
      await new Promise((r) => setTimeout(r, 50));
    t.same(seen[1], [key], 'editor 1 saw the keystroke by its key');
    t.same(seen[2], [key], 'editor 2 too');
    t.same(seen[0], [], 'the author is not told of its own keystroke');
    for (const e of editors) e.close();
    const f = await runPhase(side, { editors: 3, thinkMs: 50 }, options, 'phase');
    t.ok(f.keystrokes > 5, `keystrokes were measured (${f.keystrokes})`);
    t.ok(f.next_p50_ms > 0 && f.next_p99_ms >= f.next_p50_ms, `latencies (${f.next_p50_ms} / ${f.next_p99_ms} ms)`);
    t.equal(f.timeouts, 0);
    t.equal(f.ack_p50_ms, null, 'y-websocket has no acknowledgements');
  } finally {
    await side.stop();
  }
});

t.test('goals: p99 under 100 ms at 50 editors in every round, 200 editors reported', async (t) => {
  const phase = (editors: number, p99: number, keystrokes = 1): PhaseFigures => ({
    editors,
    think_ms: 100,
    keystrokes,
    keystrokes_per_s: 1,
    next_p50_ms: 1,
    next_p99_ms: p99,
    next_max_ms: p99,
    all_p50_ms: 1,
    all_p99_ms: p99,
    ack_p50_ms: null,
    ack_p99_ms: null,
    timeouts: 0,
    server_cpu_cores: null,
    client_cpu_cores: 0,
  });
  const round = (p99At50: number, at200: PhaseFigures | null = phase(200, 400)): PhaseFigures[] => [
    phase(5, 1),
    phase(50, p99At50),
    ...(at200 === null ? [] : [at200]),
  ];
  const side = (rounds: PhaseFigures[][]): SideResult => ({
    system: 's',
    members: 1,
    ops_per_sec: 1,
    ops: 1,
    errors: 0,
    error_kinds: {},
    mean_ms: 1,
    p50_ms: 1,
    p90_ms: 1,
    p99_ms: 1,
    p999_ms: 1,
    max_ms: 1,
    duration_s: 1,
    warmup_s: 0,
    concurrency: 50,
    interrupted: false,
    server_cpu_s: null,
    server_cpu_cores: null,
    server_cpu_us_per_op: null,
    client_cpu_cores: 0,
    phases: rounds[0],
    rounds_phases: rounds,
  });
  const met = (ours: SideResult, peer: SideResult | null = null): boolean[] =>
    collabGoals(ours, peer).map((g) => g.met);
  t.same(met(side([round(80), round(95), round(60)]), side([round(300)])), [true, true], 'every round under 100 ms');
  t.same(met(side([round(80), round(104.6), round(60)])), [false, true], 'one round over 100 ms misses the goal');
  t.same(met(side([round(80, null)])), [true, false], 'no 200-editor phase: not reported');
  t.same(met(side([round(80, phase(200, 400, 0))])), [true, false], 'a 200-editor phase that measured nothing');
  const peerSaid = collabGoals(side([round(80)]), side([round(300)]))[0]!.detail;
  t.match(peerSaid, /y-websocket p99 300 ms/, "the peer's figure is reported beside ours");
});
