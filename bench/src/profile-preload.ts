/**
 * Preloaded into our member and worker processes (NODE_OPTIONS=--import=...) when a benchmark runs with --profile: Node
 * refuses --cpu-prof in NODE_OPTIONS, and the cluster CLI launches the members itself, so this starts the V8
 * profiler from inside and writes DIR/member-<pid>.cpuprofile (the format of node --cpu-prof) as the process
 * exits. Other processes that inherit the variable (the CLI itself) are left alone.
 *
 * A benchmark profiles one phase of a run with SIGUSR2: by default a SIGUSR2 drops what was sampled so far and
 * starts again (the profile covers the signal to the exit); with BENCH_PROFILE_ON_SIGNAL=1 the profiler waits for
 * a first SIGUSR2, and the next one writes the profile and stops it (the profile covers the two signals).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector';
import { join } from 'node:path';

const dir = process.env.BENCH_PROFILE_DIR;
if (dir !== undefined && dir.length > 0 && /(member|worker)\.js$/.test(process.argv[1] ?? '')) {
  const session = new Session();
  session.connect();
  session.post('Profiler.enable');
  let running = false;
  const start = (): void => {
    session.post('Profiler.start');
    running = true;
  };
  const write = (): void => {
    if (!running) return;
    running = false;
    // An in-thread inspector session answers synchronously, so this completes inside an exit handler too.
    session.post('Profiler.stop', (err, result) => {
      if (err !== null) return;
      mkdirSync(dir, { recursive: true });
      writeFileSync(join(dir, `member-${process.pid}.cpuprofile`), JSON.stringify(result.profile));
    });
  };
  if (process.env.BENCH_PROFILE_ON_SIGNAL === '1') process.on('SIGUSR2', () => (running ? write() : start()));
  else {
    start();
    process.on('SIGUSR2', () => session.post('Profiler.stop', () => session.post('Profiler.start')));
  }
  process.on('exit', write);
}
