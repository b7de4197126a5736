/** Real-time priority for a measurement's processes: raised all or none, every thread, and put back after. */
import t from 'tap';
import { spawn, type ChildProcess } from 'node:child_process';
import { POLICY, raiseToRealtime, realtimeThreads, restoreScheduling, threadPolicy } from '../src/scheduling.js';

/** A node process that idles (with its V8 and libuv threads) until killed, 30 s at most. */
function idler(): ChildProcess {
  return spawn(process.execPath, ['-e', 'setTimeout(() => {}, 30_000)'], { stdio: 'ignore' });
}

function exited(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve();
    else child.once('exit', () => resolve());
  });
}

t.test('a process is raised to SCHED_FIFO in every thread, then put back', async (t) => {
  const child = idler();
  t.teardown(() => child.kill('SIGKILL'));
  const pid = child.pid!;
  await new Promise((r) => setTimeout(r, 300));
  t.equal(threadPolicy(pid), POLICY.other, 'starts under ordinary scheduling');
  const grant = await raiseToRealtime([pid]);
  if (!grant.applied) {
    // Without root or CAP_SYS_NICE: the grant says why, and nothing changed.
    t.match(grant.reason, /chrt/, `not permitted here: ${grant.reason}`);
    t.equal(realtimeThreads(pid).realtime, 0, 'no thread was left raised');
    return;
  }
  const raised = realtimeThreads(pid);
  t.ok(raised.threads > 1, `node runs several threads (${raised.threads})`);
  t.equal(raised.realtime, raised.threads, 'every thread is SCHED_FIFO');
  await restoreScheduling([pid]);
  t.equal(realtimeThreads(pid).realtime, 0, 'every thread is back to ordinary scheduling');
  t.equal(threadPolicy(pid), POLICY.other);
});

t.test('all or none: when one process cannot be raised, the ones raised before it go back', async (t) => {
  const live = idler();
  const gone = idler();
  t.teardown(() => live.kill('SIGKILL'));
  const gonePid = gone.pid!;
  gone.kill('SIGKILL');
  await exited(gone);
  await new Promise((r) => setTimeout(r, 300));
  const grant = await raiseToRealtime([live.pid!, gonePid]);
  t.equal(grant.applied, false);
  t.match(grant.reason, /chrt/);
  t.equal(realtimeThreads(live.pid!).realtime, 0, 'the live process is not left raised');
});

t.test('a thread that is gone has no policy', async (t) => {
  t.equal(threadPolicy(0x3fffffff), null);
  t.same(realtimeThreads(0x3fffffff), { realtime: 0, threads: 0 });
});
