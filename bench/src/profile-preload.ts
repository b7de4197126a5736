/**
 * Preloaded into our member and worker processes (NODE_OPTIONS=--import=...) when a benchmark runs with --profile: Node
 * refuses --cpu-prof in NODE_OPTIONS, and the cluster CLI launches the members itself, so this starts the V8
 * profiler from inside and writes DIR/member-<pid>.cpuprofile (the format of node --cpu-prof) as the process
 * exits. Other processes that inherit the variable (the CLI itself) are left alone. SIGUSR2 starts the profile
 * afresh, so a benchmark can leave its setup out (the profile then covers the measured window to the exit).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector';
import { join } from 'node:path';

const dir = process.env.BENCH_PROFILE_DIR;
if (dir !== undefined && dir.length > 0 && /(member|worker)\.js$/.test(process.argv[1] ?? '')) {
  const session = new Session();
  session.connect();
  session.post('Profiler.enable');
  session.post('Profiler.start');
  process.on('SIGUSR2', () => {
    session.post('Profiler.stop', () => session.post('Profiler.start'));
  });
  process.on('exit', () => {
    // An in-thread inspector session answers synchronously, so this completes inside the exit handler.
    session.post('Profiler.stop', (err, result) => {
      if (err !== null) return;
      mkdirSync(dir, { recursive: true });
      writeFileSync(join(dir, `member-${process.pid}.cpuprofile`), JSON.stringify(result.profile));
    });
  });
}
