/**
 * Real-time priority for the processes a latency measurement runs through (the load generator and the measured
 * servers), so that the other processes sharing the machine's cores (idle cluster members, other instances, the
 * bench's own samplers) do not sit between a wake-up and its run.
 *
 * Why: on the 2-core machines these benchmarks run on, an ordinary (SCHED_OTHER) task woken by a packet may wait
 * for the task running on its core to use up its slice; the ratelimit open loop's checks over 1 ms were mostly
 * such waits (RESULTS.md, ratelimit, findings). SCHED_FIFO at priority 1, the lowest real-time level,
 * runs a woken task at once ahead of every ordinary one, and below the kernel's own real-time threads; the
 * kernel's real-time throttling (sched_rt_runtime_us, 95% by default) still leaves ordinary tasks their share if
 * a measured process spins. Needs root or CAP_SYS_NICE; without it the grant says why and nothing changes.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { runCommand } from './procs.js';

/** The lowest real-time priority: above every ordinary task, below the kernel's real-time threads. */
const REALTIME_PRIORITY = 1;
/** sched(7) policy numbers, as /proc/PID/task/TID/stat field 41 gives them. */
const SCHED_OTHER = 0;
const SCHED_FIFO = 1;

interface RealtimeGrant {
  /** Every thread of every process runs SCHED_FIFO (new threads of theirs inherit it). */
  applied: boolean;
  pids: number[];
  /** Why it was not applied (chrt missing, not permitted, a process gone). */
  reason?: string;
}

/**
 * Moves every thread of each process to SCHED_FIFO priority 1 (util-linux `chrt -f -a -p`). All or none: when one
 * process cannot be raised, the ones already raised go back to ordinary scheduling.
 */
export async function raiseToRealtime(pids: readonly number[]): Promise<RealtimeGrant> {
  const raised: number[] = [];
  for (const pid of pids) {
    const reason = await chrt(['-f', '-a', '-p', String(REALTIME_PRIORITY), String(pid)]);
    if (reason !== null) {
      await restoreScheduling(raised);
      return { applied: false, pids: [...pids], reason };
    }
    raised.push(pid);
  }
  return { applied: true, pids: [...pids] };
}

/** Back to ordinary scheduling (SCHED_OTHER) for every thread; a process that has exited is skipped. */
export async function restoreScheduling(pids: readonly number[]): Promise<void> {
  for (const pid of pids) await chrt(['-o', '-a', '-p', '0', String(pid)]);
}

/** A thread's scheduling policy (sched(7) number), from /proc; null when it is gone. */
export function threadPolicy(pid: number, tid: number = pid): number | null {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
  } catch {
    return null;
  }
  // Fields after the command name (which may hold spaces and parentheses): state is field 3, policy field 41.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const policy = Number(fields[41 - 3]);
  return Number.isInteger(policy) ? policy : null;
}

/** How many of a process's threads run real-time (SCHED_FIFO), of how many. */
export function realtimeThreads(pid: number): { realtime: number; threads: number } {
  let tids: string[];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return { realtime: 0, threads: 0 };
  }
  let realtime = 0;
  for (const tid of tids) if (threadPolicy(pid, Number(tid)) === SCHED_FIFO) realtime++;
  return { realtime, threads: tids.length };
}

export const POLICY = { other: SCHED_OTHER, fifo: SCHED_FIFO } as const;

/** Runs chrt; null when it succeeded, else the reason. */
async function chrt(args: string[]): Promise<string | null> {
  try {
    const r = await runCommand('chrt', args, { timeoutMs: 10_000 });
    return r.code === 0 ? null : `chrt ${args.join(' ')}: ${r.output.trim().slice(0, 200) || `exit ${r.code}`}`;
  } catch (error) {
    return `chrt could not run: ${String((error as Error).message ?? error)}`;
  }
}
