/** Processes and ports: free port blocks on loopback, bounded child commands, stopping pids, CPU time from /proc. */
import { spawn, type SpawnOptions } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';

export class BenchError extends Error {
  override name = 'BenchError';
  constructor(
    message: string,
    readonly exitCode = 1,
  ) {
    super(message);
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

export function portFree(port: number, host = '127.0.0.1'): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, host, () => server.close(() => resolve(true)));
  });
}

/**
 * A base port b in [min, max) such that b + every offset is free on 127.0.0.1. Tries random bases (other
 * developers' clusters use the low defaults), so two harnesses rarely pick the same one.
 */
/**
 * Ports for the benchmarks' own clusters and their peers: below the kernel's ephemeral range (32768+, where outgoing
 * connections of every process on the machine take their local ports, so a port found free there can be taken before
 * a daemon binds it) and below the test clusters' reserved bases (packages/lib/testkit: 20000+).
 */
const BENCH_PORTS_MIN = 10_000;
const BENCH_PORTS_MAX = 19_900;

export async function freePortBlock(offsets: number[], min = BENCH_PORTS_MIN, max = BENCH_PORTS_MAX): Promise<number> {
  const span = Math.max(...offsets);
  for (let attempt = 0; attempt < 50; attempt++) {
    const base = min + 10 * Math.floor((Math.random() * (max - min - span)) / 10);
    let ok = true;
    for (const off of offsets) {
      if (!(await portFree(base + off))) {
        ok = false;
        break;
      }
    }
    if (ok) return base;
  }
  throw new BenchError(`no free block of ports found between ${min} and ${max}`);
}

interface CommandResult {
  code: number | null;
  output: string;
}

/**
 * Run a command to its end, bounded by `timeoutMs` (then SIGTERM, SIGKILL). Its output is kept and, when `echo`
 * is given, also copied line by line to stderr with that prefix.
 */
export function runCommand(
  cmd: string,
  args: string[],
  o: { timeoutMs: number; echo?: string; env?: NodeJS.ProcessEnv; cwd?: string },
): Promise<CommandResult> {
  return new Promise((resolve, reject) => {
    const options: SpawnOptions = { stdio: ['ignore', 'pipe', 'pipe'], env: o.env ?? process.env, cwd: o.cwd };
    const child = spawn(cmd, args, options);
    let output = '';
    let partial = '';
    const onData = (chunk: Buffer): void => {
      const text = chunk.toString('utf8');
      output += text;
      if (o.echo === undefined) return;
      partial += text;
      const lines = partial.split('\n');
      partial = lines.pop()!;
      for (const line of lines) process.stderr.write(`${o.echo}${line}\n`);
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    const timer = setTimeout(() => {
      child.kill('SIGTERM');
      setTimeout(() => child.kill('SIGKILL'), 5_000).unref();
    }, o.timeoutMs);
    child.once('error', (e) => {
      clearTimeout(timer);
      reject(new BenchError(`could not run ${cmd}: ${e.message}`));
    });
    child.once('close', (code) => {
      clearTimeout(timer);
      if (o.echo !== undefined && partial.length > 0) process.stderr.write(`${o.echo}${partial}\n`);
      resolve({ code, output });
    });
  });
}

export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** SIGTERM, wait up to `graceMs`, then SIGKILL and wait until it is gone (bounded). */
export async function stopPid(pid: number, graceMs = 5_000): Promise<void> {
  if (!isAlive(pid)) return;
  try {
    process.kill(pid, 'SIGTERM');
  } catch {
    return;
  }
  const deadline = Date.now() + graceMs;
  while (Date.now() < deadline && isAlive(pid)) await sleep(50);
  if (!isAlive(pid)) return;
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    return;
  }
  const hard = Date.now() + 5_000;
  while (Date.now() < hard && isAlive(pid)) await sleep(20);
}

const TICKS_PER_SECOND = 100; // USER_HZ on Linux

/** User + system CPU seconds a process has used so far (Linux /proc); null when unknown. */
export function cpuSeconds(pid: number): number | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name, which is in parentheses and may hold spaces.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const utime = Number(fields[11]);
    const stime = Number(fields[12]);
    return Number.isFinite(utime + stime) ? (utime + stime) / TICKS_PER_SECOND : null;
  } catch {
    return null;
  }
}

/** CPU seconds used by a set of processes between `start()` and `stop()`. */
export class CpuMeter {
  private before = new Map<number, number>();
  used: number | null = null;

  constructor(private readonly pids: () => number[]) {}

  start(): void {
    this.before = new Map();
    for (const pid of this.pids()) {
      const s = cpuSeconds(pid);
      if (s !== null) this.before.set(pid, s);
    }
  }

  stop(): void {
    let total = 0;
    for (const [pid, s0] of this.before) {
      const s1 = cpuSeconds(pid);
      if (s1 !== null) total += s1 - s0;
    }
    this.used = this.before.size === 0 ? null : total;
  }
}
