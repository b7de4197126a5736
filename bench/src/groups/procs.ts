/**
 * The five GroupHost processes of `npx bench groups` (host-process.ts), each a real OS process with its own LevelDB
 * (synced writes) in a temporary directory, talking TCP on 127.0.0.1; driven over stdin/stdout JSON lines.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { onCleanup, removeLater, trackPid, untrackPid } from '../cleanup.js';
import { BenchError, freePortBlock, sleep, stopPid } from '../procs.js';
import { groupsWithoutLeader, type GroupView, type Placement } from './figures.js';

const script = fileURLToPath(new URL('./host-process.js', import.meta.url));

class HostProc {
  private readonly waiting = new Map<
    number,
    { resolve: (a: Record<string, unknown>) => void; reject: (e: Error) => void }
  >();
  private next = 1;
  exited = false;

  constructor(
    readonly id: string,
    readonly child: ChildProcess,
  ) {
    child.once('exit', () => this.gone(`group process ${id} exited`));
    // A call written between a SIGKILL and the 'exit' event meets a closed pipe: EPIPE arrives as an 'error' event
    // on stdin, which unhandled would crash the harness (a clean-clone test run did). The call fails instead.
    child.stdin!.on('error', (error) => this.gone(`group process ${id}: ${String(error.message)}`));
  }

  /** The process is gone (or going): no more calls, and those waiting fail. */
  gone(why: string): void {
    this.exited = true;
    for (const w of this.waiting.values()) w.reject(new BenchError(why));
    this.waiting.clear();
  }

  get pid(): number {
    return this.child.pid!;
  }

  call(request: object, timeoutMs = 120_000): Promise<Record<string, unknown>> {
    if (this.exited) return Promise.reject(new BenchError(`group process ${this.id} has exited`));
    return new Promise((resolve, reject) => {
      const id = this.next++;
      const timer = setTimeout(() => {
        this.waiting.delete(id);
        reject(
          new BenchError(
            `group process ${this.id}: no answer to ${JSON.stringify(request).slice(0, 60)} in ${timeoutMs} ms`,
          ),
        );
      }, timeoutMs);
      this.waiting.set(id, {
        resolve: (a) => {
          clearTimeout(timer);
          if (typeof a.error === 'string') reject(new BenchError(`group process ${this.id}: ${a.error}`));
          else resolve(a);
        },
        reject: (e) => {
          clearTimeout(timer);
          reject(e);
        },
      });
      this.child.stdin!.write(`${JSON.stringify({ ...request, id })}\n`);
    });
  }

  answered(line: string, ready: () => void): void {
    let answer: Record<string, unknown>;
    try {
      answer = JSON.parse(line) as Record<string, unknown>;
    } catch {
      return;
    }
    if (answer.ready === true) return ready();
    const w = this.waiting.get(answer.id as number);
    this.waiting.delete(answer.id as number);
    w?.resolve(answer);
  }

  async status(timeoutMs = 30_000): Promise<GroupView[]> {
    return (await this.call({ op: 'status' }, timeoutMs)).groups as GroupView[];
  }
}

export interface GroupCluster {
  procs: HostProc[];
  tickMs: number;
  quiesceTicks: number;
  /** Views of every live process. */
  views(timeoutMs?: number): Promise<Map<string, GroupView[]>>;
  kill(id: string): void;
  /** Starts a killed process again on its data directory, with its groups from disk. */
  restart(id: string): Promise<void>;
  stop(): Promise<void>;
}

export async function startGroupCluster(o: {
  ids: string[];
  groups: Placement[];
  tickMs: number;
  quiesceTicks: number;
  label: string;
  /** Preferred leaders (GroupHostOptions.leaderPreference) with this delay; off when absent. */
  preferenceDelayMs?: number;
  /** GroupHostOptions.pingTicks. Default 1. */
  pingTicks?: number;
}): Promise<GroupCluster> {
  const dir = mkdtempSync(join(tmpdir(), 'raftkit-bench-groups-'));
  const removeDir = removeLater(dir);
  const procs: HostProc[] = [];
  const stop = onCleanup(`stop the group processes (${o.label})`, async () => {
    for (const p of procs) p.child.stdin?.end();
    await Promise.all(procs.map((p) => stopPid(p.pid, 10_000)));
    for (const p of procs) untrackPid(p.pid);
    await removeDir();
  });
  let list = '';
  let secret = '';
  /** Starts process `id` on its data directory (again, after a kill); resolves once it says it is ready. */
  const spawnOne = (id: string): Promise<void> => {
    const child = spawn(
      process.execPath,
      [
        script,
        id,
        join(dir, id),
        secret,
        list,
        String(o.tickMs),
        String(o.quiesceTicks),
        String(o.preferenceDelayMs ?? -1),
        String(o.pingTicks ?? 1),
      ],
      { stdio: ['pipe', 'pipe', 'pipe'] },
    );
    if (child.pid === undefined) throw new BenchError(`could not start group process ${id}`);
    trackPid(child.pid);
    const proc = new HostProc(id, child);
    const at = procs.findIndex((p) => p.id === id);
    if (at >= 0) procs[at] = proc;
    else procs.push(proc);
    let stderr = '';
    child.stderr!.on('data', (chunk: Buffer) => {
      stderr = (stderr + chunk.toString('utf8')).slice(-4000);
    });
    return new Promise<void>((resolve, reject) => {
      createInterface({ input: child.stdout! }).on('line', (line) => proc.answered(line, resolve));
      child.once('exit', (code) =>
        reject(
          new BenchError(
            `group process ${id} exited (${code}) at start: ${stderr.trim().split('\n').slice(-3).join(' | ')}`,
          ),
        ),
      );
    });
  };
  try {
    const base = await freePortBlock(o.ids.map((_, i) => i + 1));
    list = o.ids.map((id, i) => `${id}=127.0.0.1:${base + i + 1}`).join(',');
    secret = randomBytes(16).toString('hex');
    process.stderr.write(
      `bench: starting ${o.ids.length} group processes (${o.label}): tick ${o.tickMs} ms, quiesce after ${o.quiesceTicks} ticks, ports ${base + 1}-${base + o.ids.length}, data in ${dir}\n`,
    );
    const readies = o.ids.map(spawnOne);
    await Promise.all(readies);
    const t0 = Date.now();
    await Promise.all(
      procs.map((p) => p.call({ op: 'create', groups: o.groups.filter((g) => g.members.includes(p.id)) }, 300_000)),
    );
    process.stderr.write(`bench: ${o.groups.length} groups created in ${((Date.now() - t0) / 1000).toFixed(1)} s\n`);
  } catch (e) {
    await stop();
    throw e;
  }
  const views = async (timeoutMs = 30_000): Promise<Map<string, GroupView[]>> => {
    const live = procs.filter((p) => !p.exited);
    const answers = await Promise.all(live.map(async (p) => [p.id, await p.status(timeoutMs)] as const));
    return new Map(answers);
  };
  return {
    procs,
    tickMs: o.tickMs,
    quiesceTicks: o.quiesceTicks,
    views,
    kill: (id) => {
      const p = procs.find((x) => x.id === id);
      if (p === undefined) throw new BenchError(`no group process ${id}`);
      p.child.kill('SIGKILL');
      // Known dead from now on, not from the 'exit' event a moment later: views() must not ask it in between.
      p.gone(`group process ${id} was killed`);
    },
    restart: async (id) => {
      const old = procs.find((x) => x.id === id);
      if (old === undefined) throw new BenchError(`no group process ${id}`);
      await stopPid(old.pid, 10_000);
      untrackPid(old.pid);
      await spawnOne(id);
      const proc = procs.find((x) => x.id === id)!;
      await proc.call({ op: 'create', groups: o.groups.filter((g) => g.members.includes(id)) }, 300_000);
    },
    stop,
  };
}

/** Waits until every group has a leader; returns the seconds since `since` (default: now) it took, or null after `timeoutS`. */
export async function waitAllLed(
  cluster: GroupCluster,
  names: string[],
  timeoutS: number,
  o: { pollMs?: number; since?: number } = {},
): Promise<{ seconds: number | null; missing: string[]; polls: number }> {
  const t0 = o.since ?? performance.now();
  const pollMs = o.pollMs ?? 100;
  let missing = names;
  let polls = 0;
  while ((performance.now() - t0) / 1000 < timeoutS) {
    try {
      missing = groupsWithoutLeader(await cluster.views(10_000), names);
      polls++;
    } catch {
      // a process that is going away; look again
    }
    if (missing.length === 0) return { seconds: (performance.now() - t0) / 1000, missing, polls };
    await sleep(pollMs);
  }
  return { seconds: null, missing, polls };
}
