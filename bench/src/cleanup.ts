/**
 * Whatever a benchmark starts (clusters, peer processes, temporary directories) registers how to undo it here.
 * The undo steps run, newest first, when the benchmark ends, when it fails, and on Ctrl-C or SIGTERM; a second
 * Ctrl-C stops waiting. Child processes registered with `trackPid` are also SIGKILLed synchronously as the
 * harness exits, as a last resort.
 */
import { rmSync } from 'node:fs';

interface Step {
  name: string;
  run: () => Promise<void> | void;
}

const steps: Step[] = [];
const pids = new Set<number>();
const controller = new AbortController();
let installed = false;

/** Aborted on Ctrl-C or SIGTERM; benchmarks stop their loops when it fires. */
export const interrupted: AbortSignal = controller.signal;

/** Register an undo step; returns a function that runs it now (once) and unregisters it. */
export function onCleanup(name: string, run: () => Promise<void> | void): () => Promise<void> {
  const step: Step = { name, run };
  steps.push(step);
  return async () => {
    const i = steps.indexOf(step);
    if (i < 0) return;
    steps.splice(i, 1);
    await runStep(step);
  };
}

export function trackPid(pid: number): void {
  pids.add(pid);
}

export function untrackPid(pid: number): void {
  pids.delete(pid);
}

/** A temporary directory removed at cleanup. */
export function removeLater(dir: string): () => Promise<void> {
  return onCleanup(`remove ${dir}`, () => rmSync(dir, { recursive: true, force: true }));
}

async function runStep(step: Step): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      Promise.resolve().then(step.run),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error('timed out after 60 s')), 60_000);
      }),
    ]);
  } catch (e) {
    process.stderr.write(`bench: cleanup "${step.name}" failed: ${(e as Error).message}\n`);
  } finally {
    clearTimeout(timer);
  }
}

let running: Promise<void> | null = null;

/** Run every registered step, newest first. Concurrent callers share one pass. */
export function cleanupAll(): Promise<void> {
  running ??= (async () => {
    while (steps.length > 0) await runStep(steps.pop()!);
  })().finally(() => {
    running = null;
  });
  return running;
}

export function installSignalHandlers(): void {
  if (installed) return;
  installed = true;
  let signals = 0;
  const onSignal = (sig: NodeJS.Signals): void => {
    signals++;
    if (signals > 1) {
      process.stderr.write('bench: second interrupt: exiting without waiting for cleanup\n');
      process.exit(130);
    }
    process.stderr.write(`bench: ${sig}: stopping and cleaning up (press Ctrl-C again to force)\n`);
    controller.abort();
    void cleanupAll().then(() => process.exit(130));
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  process.on('SIGHUP', onSignal);
  process.on('exit', () => {
    for (const pid of pids) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  });
}
