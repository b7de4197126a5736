/**
 * The cluster under test: five member processes of one service (cluster/dist/src/member.js), started, killed,
 * restarted on their data, paused and resumed by the harness. Members run detached in their own process group
 * (a Ctrl-C in the terminal reaches only the harness, which then stops them) and carry JEPSEN_LIKE_RUN in their
 * environment so `jepsen-like clean` can find strays.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createRequire } from 'node:module';
import { closeSync, existsSync, mkdirSync, openSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { request } from 'undici';
import { freePort } from '@raftkit/testkit';
import type { Network } from './net/network.js';
import type { StateFile } from './state.js';

export function memberScript(): string {
  const require = createRequire(import.meta.url);
  let root: string;
  try {
    root = dirname(require.resolve('@raftkit/cluster/package.json'));
  } catch {
    root = fileURLToPath(new URL('../../../cluster', import.meta.url));
  }
  const script = join(root, 'dist', 'src', 'member.js');
  if (!existsSync(script)) throw new Error(`${script} not found: build the repository first (npx tsc -b)`);
  return script;
}

export interface ClusterOptions {
  service: string;
  ids: readonly string[];
  network: Network;
  dataDir: string;
  token: string;
  tickMs: number;
  runId: string;
  state: StateFile;
  /** Load the clock-skew preload into every member. */
  clockSkew: boolean;
  /** The service's other processes (e.g. flash gateways), by role: started on the host, outside the faults. */
  workers?: Readonly<Record<string, number>>;
  /** Settings handed to the workers (as `cluster up --set`). */
  settings?: Readonly<Record<string, string>>;
  /** Started for the workers instead of cluster/dist/src/worker.js, with the same arguments (a test variant). */
  workerScript?: string;
  /** Added to every member's and worker's environment (e.g. RAFTKIT_SESSION_TIMEOUT_MS). */
  env?: Readonly<Record<string, string>>;
}

interface Member {
  id: string;
  child: ChildProcess | null;
  pid: number | null;
  paused: boolean;
  exited: Promise<void> | null;
  starts: number;
}

export interface MemberView {
  id: string;
  running: boolean;
  paused: boolean;
}

export class ClusterUnderTest {
  private readonly members = new Map<string, Member>();
  private readonly workerProcs: Array<{ id: string; url: string; child: ChildProcess; exited: Promise<void> }> = [];
  private readonly script = memberScript();
  private readonly tokenFile: string;

  constructor(private readonly options: ClusterOptions) {
    mkdirSync(options.dataDir, { recursive: true });
    this.tokenFile = join(options.dataDir, 'token');
    writeFileSync(this.tokenFile, options.token + '\n', { mode: 0o600 });
    for (const id of options.ids) {
      this.members.set(id, { id, child: null, pid: null, paused: false, exited: null, starts: 0 });
      if (options.clockSkew) writeFileSync(this.clockFile(id), JSON.stringify({ offsetMs: 0 }));
    }
  }

  get ids(): readonly string[] {
    return this.options.ids;
  }

  url(id: string): string {
    return this.options.network.addresses(id).httpUrl;
  }

  view(): MemberView[] {
    return [...this.members.values()].map((m) => ({ id: m.id, running: m.child !== null, paused: m.paused }));
  }

  running(id: string): boolean {
    return this.members.get(id)!.child !== null;
  }

  paused(id: string): boolean {
    return this.members.get(id)!.paused;
  }

  private clockFile(id: string): string {
    return join(this.options.dataDir, `${id}.clock.json`);
  }

  logFile(id: string): string {
    return join(this.options.dataDir, id, 'member.log');
  }

  start(id: string): void {
    const m = this.members.get(id)!;
    if (m.child !== null) return;
    const { network, service, tickMs, ids } = this.options;
    const dir = join(this.options.dataDir, id);
    mkdirSync(dir, { recursive: true });
    const a = network.addresses(id);
    const peers = ids.map((other) => `${other}=${network.addresses(other).raftAdvertised}`).join(',');
    const nodeArgs: string[] = [];
    if (this.options.clockSkew) nodeArgs.push('--import', new URL('./clock-preload.js', import.meta.url).href);
    const args = [
      ...nodeArgs,
      this.script,
      '--service',
      service,
      '--id',
      id,
      '--data',
      join(dir, 'db'),
      '--raft',
      a.raftListen,
      '--http',
      a.httpListen,
      '--peers',
      peers,
      '--token-file',
      this.tokenFile,
      '--tick-ms',
      String(tickMs),
    ];
    const wrapped = network.wrap(id, process.execPath, args);
    const out = openSync(this.logFile(id), 'a');
    const env: NodeJS.ProcessEnv = { ...process.env, ...this.options.env, JEPSEN_LIKE_RUN: this.options.runId };
    delete env.CLUSTER_AUTH_TOKEN;
    if (this.options.clockSkew) env.JEPSEN_CLOCK_FILE = this.clockFile(id);
    const child = spawn(wrapped.command, wrapped.args, { detached: true, stdio: ['ignore', out, out], env });
    closeSync(out);
    m.child = child;
    m.pid = child.pid ?? null;
    m.paused = false;
    m.starts++;
    m.exited = new Promise((resolve) => child.once('exit', () => resolve()));
    child.once('exit', () => {
      if (m.child === child) {
        m.child = null;
        m.pid = null;
        m.paused = false;
        this.record();
      }
    });
    this.record();
  }

  startAll(): void {
    for (const id of this.options.ids) this.start(id);
  }

  private record(): void {
    const state = this.options.state;
    state.state.members = Object.fromEntries([...this.members.values()].map((m) => [m.id, m.pid]));
    state.save();
  }

  /** SIGKILL, and wait until the process is gone. */
  async kill(id: string): Promise<void> {
    const m = this.members.get(id)!;
    if (m.child === null) return;
    const exited = m.exited;
    try {
      process.kill(m.child.pid!, 'SIGKILL');
    } catch {
      // already gone
    }
    await exited;
  }

  pause(id: string): boolean {
    const m = this.members.get(id)!;
    if (m.child === null || m.paused) return false;
    process.kill(m.child.pid!, 'SIGSTOP');
    m.paused = true;
    return true;
  }

  resume(id: string): boolean {
    const m = this.members.get(id)!;
    if (m.child === null || !m.paused) return false;
    process.kill(m.child.pid!, 'SIGCONT');
    m.paused = false;
    return true;
  }

  /** Shifts a member's wall clock (needs the run to have been started with clock skew). */
  setClockOffset(id: string, offsetMs: number): void {
    if (!this.options.clockSkew) throw new Error('clock skew was not enabled for this run');
    writeFileSync(this.clockFile(id), JSON.stringify({ offsetMs }));
    const m = this.members.get(id)!;
    if (m.child !== null) {
      try {
        process.kill(m.child.pid!, 'SIGUSR2');
      } catch {
        // gone: it reads the file when it restarts
      }
    }
  }

  /** The workers' URLs (e.g. the flash gateways), in start order; empty for services without workers. */
  workerUrls(): string[] {
    return this.workerProcs.map((w) => w.url);
  }

  /**
   * Starts the workers the workload asked for, the way `cluster up` does (cluster/dist/src/worker.js reading
   * DIR/cluster.json), on the host's loopback: they reach the members over their HTTP URLs. They are not fault
   * targets (the nemeses pick members only). Resolves when every worker answers GET /healthz.
   */
  async startWorkers(timeoutMs = 60_000): Promise<void> {
    const roles = Object.entries(this.options.workers ?? {});
    if (roles.length === 0) return;
    const { ids, network, dataDir } = this.options;
    const taken = new Set<number>();
    const fresh = async (): Promise<number> => {
      for (;;) {
        const port = await freePort();
        if (!taken.has(port)) {
          taken.add(port);
          return port;
        }
      }
    };
    const records: Array<{
      id: string;
      role: string;
      index: number;
      pid: null;
      httpAddress: string;
      tcpAddress: string;
    }> = [];
    for (const [role, count] of roles) {
      for (let index = 1; index <= count; index++)
        records.push({
          id: `${role}${index}`,
          role,
          index,
          pid: null,
          httpAddress: `127.0.0.1:${await fresh()}`,
          tcpAddress: `127.0.0.1:${await fresh()}`,
        });
    }
    const members = ids.map((id) => {
      const a = network.addresses(id);
      return { id, pid: null, raftAddress: a.raftAdvertised, httpAddress: a.httpUrl.replace(/^https?:\/\//, '') };
    });
    const state = {
      service: this.options.service,
      dataDir,
      basePort: 0,
      tickMs: this.options.tickMs,
      bootstrap: Object.fromEntries(members.map((m) => [m.id, m.raftAddress])),
      members,
      workers: records,
      settings: { ...(this.options.settings ?? {}) },
    };
    writeFileSync(join(dataDir, 'cluster.json'), JSON.stringify(state, null, 2) + '\n');
    const script = this.options.workerScript ?? join(dirname(this.script), 'worker.js');
    for (const w of records) {
      mkdirSync(join(dataDir, w.id), { recursive: true });
      const out = openSync(join(dataDir, w.id, 'worker.log'), 'a');
      const env: NodeJS.ProcessEnv = { ...process.env, ...this.options.env, JEPSEN_LIKE_RUN: this.options.runId };
      delete env.CLUSTER_AUTH_TOKEN;
      const child = spawn(process.execPath, [script, '--cluster', dataDir, '--id', w.id], {
        detached: true,
        stdio: ['ignore', out, out],
        env,
      });
      closeSync(out);
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      this.workerProcs.push({ id: w.id, url: `http://${w.httpAddress}`, child, exited });
      if (child.pid !== undefined) this.options.state.state.helpers.push(child.pid);
    }
    this.options.state.save();
    const deadline = Date.now() + timeoutMs;
    for (const w of this.workerProcs) {
      for (;;) {
        if (w.child.exitCode !== null || w.child.signalCode !== null)
          throw new Error(`worker ${w.id} exited at start; see ${join(dataDir, w.id, 'worker.log')}`);
        const ok = await request(`${w.url}/healthz`, { signal: AbortSignal.timeout(1_000) }).then(
          async (r) => (await r.body.dump(), r.statusCode === 200),
          () => false,
        );
        if (ok) break;
        if (Date.now() > deadline)
          throw new Error(
            `worker ${w.id} not healthy within ${timeoutMs / 1000} s; see ${join(dataDir, w.id, 'worker.log')}`,
          );
        await new Promise((r) => setTimeout(r, 200));
      }
    }
  }

  /** Stops every member and worker: SIGCONT (paused ones), SIGTERM, SIGKILL after `graceMs`. */
  async stopAll(graceMs = 3_000): Promise<void> {
    await Promise.all(
      this.workerProcs.splice(0).map(async (w) => {
        if (w.child.exitCode !== null || w.child.signalCode !== null) return;
        const timer = setTimeout(() => w.child.kill('SIGKILL'), graceMs);
        w.child.kill('SIGTERM');
        await w.exited;
        clearTimeout(timer);
      }),
    );
    await Promise.all(
      [...this.members.values()].map(async (m) => {
        if (m.child === null) return;
        const exited = m.exited!;
        const pid = m.child.pid!;
        try {
          process.kill(pid, 'SIGCONT');
          process.kill(pid, 'SIGTERM');
        } catch {
          return;
        }
        const timer = setTimeout(() => {
          try {
            process.kill(pid, 'SIGKILL');
          } catch {
            // gone
          }
        }, graceMs);
        await exited;
        clearTimeout(timer);
      }),
    );
  }

  /** Members' own view: the leader a majority of reachable members agree on at the highest term, or null. */
  async leader(timeoutMs = 1_000): Promise<string | null> {
    const answers = await Promise.all(
      this.options.ids.map(async (id) => {
        if (!this.running(id) || this.paused(id)) return null;
        try {
          const res = await request(`${this.url(id)}/v1/cluster/status`, {
            headers: { authorization: `Bearer ${this.options.token}` },
            signal: AbortSignal.timeout(timeoutMs),
          });
          const body = (await res.body.json()) as { role?: string; term?: number; leader_id?: string | null };
          return res.statusCode === 200 ? body : null;
        } catch {
          return null;
        }
      }),
    );
    let best: { id: string; term: number } | null = null;
    answers.forEach((a, i) => {
      if (a?.role === 'leader' && typeof a.term === 'number' && (best === null || a.term > best.term))
        best = { id: this.options.ids[i]!, term: a.term };
    });
    return (best as { id: string } | null)?.id ?? null;
  }

  async waitForLeader(timeoutMs: number): Promise<string | null> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      const leader = await this.leader();
      if (leader !== null) return leader;
      await new Promise((r) => setTimeout(r, 200));
    }
    return null;
  }
}
