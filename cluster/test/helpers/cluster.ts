/**
 * Real clusters for the CLI's integration tests: every cluster is started, broken and stopped through the
 * `cluster` CLI (node cluster/bin/cluster.js) from its own temporary directory, and always torn down.
 *
 * Ports: each test file owns one slot of 1,000 ports above the kernel's ephemeral range (61000-64999), so
 * files running side by side never pick the same ports, and outgoing connections never sit on them.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { request } from 'undici';

export const CLI = fileURLToPath(new URL('../../../bin/cluster.js', import.meta.url));

export interface CliResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** The environment every CLI call gets: nothing that would point it at another cluster or token. */
function cleanEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  delete env.CLUSTER_AUTH_TOKEN;
  delete env.CLUSTER_DATA;
  return env;
}

/** Start the CLI; the caller waits for it (see `finish`) and may signal it meanwhile. */
export function spawnCli(args: string[], cwd: string): ChildProcess {
  return spawn(process.execPath, [CLI, ...args], { cwd, env: cleanEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
}

export function finish(child: ChildProcess, timeoutMs = 60_000): Promise<CliResult> {
  return new Promise((resolve) => {
    let stdout = '';
    let stderr = '';
    child.stdout?.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
  });
}

/** Run the CLI to the end (killed after `timeoutMs`). */
export function runCli(args: string[], cwd: string, timeoutMs = 60_000): Promise<CliResult> {
  return finish(spawnCli(args, cwd), timeoutMs);
}

export function isPortFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createServer();
    s.once('error', () => resolve(false));
    s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });
}

/**
 * Free base ports of a file's slot (0..3): raft ports base+1..base+10, worker ports base+41..base+60 and
 * base+161..base+180, and HTTP ports base+101..base+110 are all free right now. Bases are 200 apart, so `count` of
 * them never overlap. `fromTop` searches the slot downwards, so a second file can share a slot with one that takes
 * its first bases.
 */
export async function freeBases(slot: number, count: number, options: { fromTop?: boolean } = {}): Promise<number[]> {
  if (slot < 0 || slot > 3) throw new RangeError('slot must be 0 to 3');
  const candidates = Array.from({ length: 5 }, (_, i) => 61_000 + slot * 1_000 + i * 200);
  if (options.fromTop) candidates.reverse();
  const bases: number[] = [];
  for (const base of candidates) {
    if (bases.length === count) break;
    const offsets = [...range(1, 10), ...range(41, 60), ...range(101, 110), ...range(161, 180)];
    if ((await Promise.all(offsets.map((o) => isPortFree(base + o)))).every(Boolean)) bases.push(base);
  }
  if (bases.length < count) throw new Error(`only ${bases.length} free port ranges in slot ${slot}, needed ${count}`);
  return bases;
}

function range(from: number, to: number): number[] {
  return Array.from({ length: to - from + 1 }, (_, i) => from + i);
}

/** The CLI's own liveness check (it treats exited-but-unreaped members as dead). */
export { isAlive } from '../../src/state.js';
import { isAlive } from '../../src/state.js';

/** True when `pid` is a member process of the cluster in `dataDir` (guards the safety kill against pid reuse). */
function isOurMember(pid: number, dataDir: string): boolean {
  try {
    const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    return (cmdline.includes('member.js') || cmdline.includes('worker.js')) && cmdline.includes(dataDir);
  } catch {
    return false;
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

import { until } from '@raftkit/testkit';

export { until };

export interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  /** The parsed JSON body, or undefined when the body is not JSON. */
  json: any;
}

export interface CallOptions {
  body?: string | Buffer | object;
  /** The bearer token; null sends no Authorization header. Default: the cluster token. */
  token?: string | null;
  headers?: Record<string, string>;
  timeoutMs?: number;
}

import type { MemberStatus as StatusBody } from '../../src/processes.js';

export type { StatusBody };

/** Every cluster a test file started, so process exit can kill what a teardown could not. */
const everyCluster = new Set<TestCluster>();
const killEveryCluster = (): void => {
  for (const c of everyCluster) {
    c.killRecorded();
    try {
      rmSync(c.root, { recursive: true, force: true });
    } catch {
      // a member still dying may hold it for a moment; it is in the system's temporary directory
    }
  }
};
// Members are detached (their own process group), so nothing else stops them when this process dies early.
process.on('exit', killEveryCluster);
for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
  process.prependOnceListener(sig, () => {
    killEveryCluster();
    // Die of the signal as before, unless another listener (tap's) takes care of that.
    if (process.listenerCount(sig) === 0) process.kill(process.pid, sig);
  });
}

export interface ClusterOptions {
  nodes?: number;
  tickMs?: number;
  snapshotEvery?: number;
  service?: string;
}

/**
 * One cluster in a fresh temporary directory: `root/data` is its data directory (passed as --data) and `root/cwd`
 * the directory every CLI call runs in (empty, so nothing there is found by accident).
 */
export class TestCluster {
  readonly root: string;
  readonly dataDir: string;
  readonly cwd: string;
  /** Every member pid ever seen in cluster.json, for the safety kill. */
  readonly pids = new Set<number>();

  constructor(
    readonly base: number,
    readonly options: ClusterOptions = {},
  ) {
    this.root = mkdtempSync(join(tmpdir(), 'cluster-it-'));
    this.dataDir = join(this.root, 'data');
    this.cwd = join(this.root, 'cwd');
    mkdirSync(this.cwd);
    everyCluster.add(this);
  }

  get nodes(): number {
    return this.options.nodes ?? 5;
  }

  /** `cluster up` with this cluster's options; throws with the CLI's stderr when it fails. */
  async up(...extra: string[]): Promise<CliResult> {
    const args = [
      'up',
      '--service',
      this.options.service ?? 'kv',
      '--nodes',
      String(this.nodes),
      '--data',
      this.dataDir,
      '--base-port',
      String(this.base),
      '--tick-ms',
      String(this.options.tickMs ?? 50),
      ...extra,
    ];
    if (this.options.snapshotEvery !== undefined) args.push('--snapshot-every', String(this.options.snapshotEvery));
    const r = await runCli(args, this.cwd, 60_000);
    this.recordPids();
    if (r.code !== 0) throw new Error(`cluster up failed (${r.code}): ${r.stderr}`);
    return r;
  }

  /** Run a CLI command against this cluster (`--data` appended). */
  async cli(...args: string[]): Promise<CliResult> {
    const r = await runCli([...args, '--data', this.dataDir], this.cwd);
    this.recordPids();
    return r;
  }

  /** The cluster token, from DIR/token (read each time: a later `up --auth-token` may change it). */
  get token(): string {
    return readFileSync(join(this.dataDir, 'token'), 'utf8').trim();
  }

  /** The cluster.json the CLI keeps. */
  state(): {
    members: Array<{ id: string; pid: number | null; httpAddress: string; raftAddress: string; removed?: boolean }>;
    workers?: Array<{ id: string; role: string; pid: number | null; httpAddress: string; tcpAddress: string }>;
    snapshotEvery?: number;
    memberNodeFlags?: string[];
  } {
    return JSON.parse(readFileSync(join(this.dataDir, 'cluster.json'), 'utf8'));
  }

  recordPids(): void {
    if (!existsSync(join(this.dataDir, 'cluster.json'))) return;
    try {
      const state = this.state();
      for (const m of [...state.members, ...(state.workers ?? [])]) if (m.pid !== null) this.pids.add(m.pid);
    } catch {
      // half-written: the next call records them
    }
  }

  pid(id: string): number | null {
    return this.state().members.find((m) => m.id === id)?.pid ?? null;
  }

  /** Member ids n1..nN (plus any added later, minus removed ones). */
  ids(): string[] {
    if (!existsSync(join(this.dataDir, 'cluster.json')))
      return Array.from({ length: this.nodes }, (_, i) => `n${i + 1}`);
    return this.state()
      .members.filter((m) => !m.removed)
      .map((m) => m.id);
  }

  url(id: string): string {
    return `http://127.0.0.1:${this.base + 100 + Number(id.slice(1))}`;
  }

  async call(id: string, method: string, path: string, options: CallOptions = {}): Promise<Answer> {
    const token = options.token === undefined ? this.token : options.token;
    const headers: Record<string, string> = { ...options.headers };
    if (token !== null) headers.authorization = `Bearer ${token}`;
    let body: string | Buffer | undefined;
    if (options.body === undefined || typeof options.body === 'string' || Buffer.isBuffer(options.body))
      body = options.body;
    else {
      body = JSON.stringify(options.body);
      headers['content-type'] ??= 'application/json';
    }
    const timeout = options.timeoutMs ?? 15_000;
    const res = await request(this.url(id) + path, {
      method: method as 'GET',
      headers,
      body,
      headersTimeout: timeout,
      bodyTimeout: timeout,
    });
    const text = await res.body.text();
    let json: unknown;
    try {
      json = text.length > 0 ? JSON.parse(text) : undefined;
    } catch {
      json = undefined;
    }
    return { status: res.statusCode, headers: res.headers, text, json };
  }

  /** A member's /v1/cluster/status, or null when it does not answer. */
  async status(id: string, timeoutMs = 2_000): Promise<StatusBody | null> {
    try {
      const a = await this.call(id, 'GET', '/v1/cluster/status', { timeoutMs });
      return a.status === 200 ? (a.json as StatusBody) : null;
    } catch {
      return null;
    }
  }

  /** Statuses of the given members (default: all that are not removed), null for the silent ones. */
  async statuses(ids = this.ids()): Promise<Map<string, StatusBody | null>> {
    const all = await Promise.all(ids.map(async (id) => [id, await this.status(id)] as const));
    return new Map(all);
  }

  /**
   * The leader a majority of `ids` agrees on (same leader_id and term, and that member says it leads), waiting up
   * to `timeoutMs`. `not` excludes a leader (e.g. the one just killed).
   */
  async leader(
    options: { ids?: string[]; not?: string; timeoutMs?: number; quorumOf?: number } = {},
  ): Promise<{ id: string; term: number }> {
    return until(
      'a leader',
      async () => {
        const ids = options.ids ?? this.ids();
        const quorum = Math.floor((options.quorumOf ?? ids.length) / 2) + 1;
        const st = await this.statuses(ids);
        for (const s of st.values()) {
          if (s === null || s.role !== 'leader' || s.id === options.not) continue;
          const agree = [...st.values()].filter((o) => o !== null && o.leader_id === s.id && o.term === s.term).length;
          if (agree >= quorum) return { id: s.id, term: s.term };
        }
        return null;
      },
      options.timeoutMs ?? 20_000,
    );
  }

  /** `cluster down --wipe`, then SIGKILL whatever member is still alive, then remove the temporary directory. */
  async teardown(): Promise<void> {
    this.recordPids();
    if (existsSync(join(this.dataDir, 'cluster.json')))
      await runCli(['down', '--wipe', '--data', this.dataDir], this.cwd, 30_000).catch(() => undefined);
    this.killRecorded();
    for (const pid of this.pids)
      await until(`pid ${pid} to exit`, () => !isAlive(pid) || !isOurMember(pid, this.dataDir), 5_000).catch(
        () => undefined,
      );
    rmSync(this.root, { recursive: true, force: true });
    everyCluster.delete(this);
  }

  /** SIGKILL every recorded member pid that is still one of ours (synchronous: safe in an exit handler). */
  killRecorded(): void {
    for (const pid of this.pids) {
      if (!isAlive(pid) || !isOurMember(pid, this.dataDir)) continue;
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  }
}

/** The process is listed as a member of the cluster in `dataDir` and still runs. */
export function memberRunning(pid: number | null, dataDir: string): boolean {
  return pid !== null && isAlive(pid) && isOurMember(pid, dataDir);
}
