/**
 * The noise flag: parsing /proc, whose CPU counts as ours, the verdict's threshold, and on the real machine that a
 * CPU burner outside our process tree counts as foreign while one inside it counts as ours.
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import t from 'tap';
import {
  foreignCores,
  judgeRun,
  judgeSide,
  noiseVerdict,
  parseProcStat,
  sampleLoad,
  SideWatcher,
  treeTicks,
} from '../src/machine-load.js';

// Burns 0.8 s of CPU time (not wall time: on a busy machine it may take longer), at most 10 s.
const BURN = 'const end = Date.now() + 10000; while (process.cpuUsage().user < 800000 && Date.now() < end) {}';

function ticksOf(pid: number): number {
  return parseProcStat(readFileSync(`/proc/${pid}/stat`, 'utf8'))?.ticks ?? 0;
}

t.test('a stat line whose command holds spaces and parentheses', async (t) => {
  const line = '4242 (node (x) y) S 17 4242 4242 0 -1 4194304 100 0 0 0 250 50 7 3 20 0 11 0 1000 0 0';
  t.same(parseProcStat(line), { pid: 4242, ppid: 17, ticks: 250 + 50 + 7 + 3 });
  t.equal(parseProcStat('garbage'), null);
});

t.test('our tree is the root and every live descendant, nothing else', async (t) => {
  const table = [
    { pid: 1, ppid: 0, ticks: 1000 },
    { pid: 10, ppid: 1, ticks: 5 },
    { pid: 11, ppid: 10, ticks: 7 },
    { pid: 12, ppid: 11, ticks: 11 },
    { pid: 13, ppid: 1, ticks: 400 },
  ];
  t.equal(treeTicks(table, 10), 5 + 7 + 11);
  t.equal(treeTicks(table, 99), 0);
});

t.test('the threshold decides, and only a noisy side is named in the verdict', async (t) => {
  const a = { atMs: 0, machineBusyTicks: 0, ownTicks: 0 };
  t.equal(
    foreignCores(a, { atMs: 2_000, machineBusyTicks: 300, ownTicks: 100 }),
    1,
    '200 foreign ticks over 2 s is one core',
  );
  const quiet = judgeSide('ours', 1, [1.5, 2.5], 0.1, 0.3);
  const loud = judgeSide('etcd', 4, [5], 0.8, 0.3);
  t.match(quiet, { load_avg_1m_during_mean: 2, load_avg_1m_during_max: 2.5, noisy: false });
  t.equal(loud.noisy, true);
  t.equal(noiseVerdict(judgeRun([quiet], 0.3)), '');
  const run = judgeRun([quiet, loud], 0.3);
  t.equal(run.noisy, true);
  t.match(noiseVerdict(run), /NOISY RUN.*etcd 0\.8 cores/);
  t.equal(judgeSide('x', 1, [], null, 0.3).noisy, false, 'unknown foreign CPU is not called noisy');
});

t.test('on this machine: a burner outside our tree is foreign, a child of ours is not', async (t) => {
  // Outside: a shell starts the burner in the background and exits, so init adopts it.
  const start = sampleLoad();
  t.ok(start !== null, '/proc is readable');
  const shell = spawn('sh', ['-c', `${process.execPath} -e '${BURN}' >/dev/null 2>&1 & echo $!`], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  shell.stdout.on('data', (d: Buffer) => (out += d.toString()));
  await new Promise((r) => shell.once('exit', r));
  const orphan = Number(out.trim());
  t.ok(orphan > 0, 'the burner runs on its own');
  await new Promise((r) => setTimeout(r, 1_000));
  const orphanTicks = ticksOf(orphan);
  const mid = sampleLoad()!;
  await new Promise((r) => setTimeout(r, 700));
  t.ok(
    foreignCores(start!, mid) * ((mid.atMs - start!.atMs) / 1000) * 100 >= orphanTicks - 5,
    'the orphan burner counts as foreign',
  );

  const before = sampleLoad()!;
  const child = spawn(process.execPath, ['-e', BURN], { stdio: 'ignore' });
  await new Promise((r) => child.once('exit', r));
  const after = sampleLoad()!;
  t.ok(
    after.ownTicks - before.ownTicks >= 60,
    `our child's CPU counts as ours (${after.ownTicks - before.ownTicks} ticks)`,
  );
});

t.test(
  "a side's watcher counts the processes it started as its own, detached ones too (cluster up detaches members)",
  async (t) => {
    const watcher = new SideWatcher('probe');
    // Detached as `cluster up` does it: a shell starts the burner in the background and exits; init adopts it.
    const burn = 'const end = Date.now() + 10000; while (process.cpuUsage().user < 1500000 && Date.now() < end) {}';
    const shell = spawn('sh', ['-c', `${process.execPath} -e '${burn}' >/dev/null 2>&1 & echo $!`], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    shell.stdout.on('data', (d: Buffer) => (out += d.toString()));
    await new Promise((r) => shell.once('exit', r));
    const orphan = Number(out.trim());
    const deadline = Date.now() + 15_000;
    while (Date.now() < deadline) {
      try {
        process.kill(orphan, 0);
      } catch {
        break;
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    const own = watcher.ownTicks();
    const side = watcher.finish(0.3);
    t.ok(own >= 60, `the detached burner's CPU is the side's own (${own} ticks)`);
    t.ok(side.foreign_cpu_cores !== null, 'foreign CPU measured');
  },
);

t.test(
  'a side shorter than a second is not judged (10 ms CPU ticks over a few ms would read as whole cores)',
  async (t) => {
    const watcher = new SideWatcher('instant');
    const side = watcher.finish(0.3);
    t.equal(side.foreign_cpu_cores, null, 'no foreign figure');
    t.equal(side.noisy, false, 'and not noisy');
  },
);
