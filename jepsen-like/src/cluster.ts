/**
 * The cluster under test: five member processes of one service (cluster/dist/src/member.js), started, killed,
 * restarted on their data, paused and resumed by the harness. Members run detached in their own process group
 * (a Ctrl-C in the terminal reaches only the harness, which then stops them) and carry JEPSEN_LIKE_RUN in their
 * environment so `jepsen-like clean` can find strays.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createRequire } from 'node:module';
import { closeSync, existsSync, mkdirSync, openSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
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
  /** The worker role (e.g. `store`) whose processes the kill, pause and wipe nemeses hit besides members. */
  faultWorkers?: string | readonly string[];
  /** Whether the wipe nemesis wipes members (default) or only a `faultWorkers` process (Workload.wipeMembers). */
  wipeMembers?: boolean;
  /**
   * Worker partitions (Workload.partitionWorkers): the client role's processes lose their links to one process of
   * the server role during a partition. The workers then get network namespaces of their own (namespace mode).
   */
  partitionWorkers?: { readonly clients: string; readonly servers: string };
  /** Added to every member's and worker's environment (e.g. RAFTKIT_SESSION_TIMEOUT_MS). */
  env?: Readonly<Record<string, string>>;
}

interface WorkerProc {
  id: string;
  url: string;
  child: ChildProcess;
  exited: Promise<void>;
  paused: boolean;
}

interface Member {
  id: string;
  child: ChildProcess | null;
  pid: number | null;
  paused: boolean;
  exited: Promise<void> | null;
  starts: number;
  /**
   * Started empty and added by a membership change (after a wipe): it starts with --join, never --peers, so it
   * never founds a configuration of its own and votes only once the leader has added it.
   */
  joined: boolean;
  /** Wiped and still a voter in the configuration: start() leaves it down (nemesis/wipe.ts says why). */
  held: boolean;
}

export interface MemberView {
  id: string;
  running: boolean;
  paused: boolean;
}

export class ClusterUnderTest {
  private readonly members = new Map<string, Member>();
  private readonly workerProcs: WorkerProc[] = [];
  /** Whether the workers run in namespaces of their own (so partitions can cut links between them). */
  private workersIsolated = false;
  private readonly script = memberScript();
  private readonly tokenFile: string;

  constructor(private readonly options: ClusterOptions) {
    mkdirSync(options.dataDir, { recursive: true });
    this.tokenFile = join(options.dataDir, 'token');
    writeFileSync(this.tokenFile, options.token + '\n', { mode: 0o600 });
    for (const id of options.ids) {
      this.members.set(id, {
        id,
        child: null,
        pid: null,
        paused: false,
        exited: null,
        starts: 0,
        joined: false,
        held: false,
      });
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
    if (m.child !== null || m.held) return;
    const { network, service, tickMs, ids } = this.options;
    const dir = join(this.options.dataDir, id);
    mkdirSync(dir, { recursive: true });
    const a = network.addresses(id);
    const peers = (m.joined ? ids.filter((other) => other !== id) : ids)
      .map((other) => `${other}=${network.addresses(other).raftAdvertised}`)
      .join(',');
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
      m.joined ? '--join' : '--peers',
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

  /** Deletes a stopped member's database (its log, hard state, snapshots); its log file stays. */
  wipe(id: string): void {
    if (this.running(id)) throw new Error(`${id} is running: kill it before wiping its data`);
    rmSync(join(this.options.dataDir, id, 'db'), { recursive: true, force: true });
    const m = this.members.get(id)!;
    m.joined = true;
    m.held = true;
  }

  /** A wiped member is out of the configuration: start() may start it again. */
  release(id: string): void {
    this.members.get(id)!.held = false;
  }

  /**
   * A membership change on the leader: DELETE /v1/cluster/members/ID (`remove`) or POST /v1/cluster/members with
   * the member's advertised Raft address (`add`), retried on another leader until `deadline` (Date.now()).
   * Answers whether it was done, and the last refusal.
   */
  async changeMembership(
    change: 'add' | 'remove',
    id: string,
    deadline: number,
  ): Promise<{ done: boolean; last: string }> {
    let last = 'no leader';
    while (Date.now() < deadline) {
      const leader = await this.leader();
      if (leader !== null) {
        try {
          const address = this.options.network.addresses(id).raftAdvertised;
          const res = await request(
            change === 'remove'
              ? `${this.url(leader)}/v1/cluster/members/${encodeURIComponent(id)}`
              : `${this.url(leader)}/v1/cluster/members`,
            {
              method: change === 'remove' ? 'DELETE' : 'POST',
              headers: { authorization: `Bearer ${this.options.token}`, 'content-type': 'application/json' },
              body: change === 'add' ? JSON.stringify({ id, address }) : undefined,
              signal: AbortSignal.timeout(Math.max(1_000, Math.min(30_000, deadline - Date.now()))),
            },
          );
          const text = await res.body.text();
          if (res.statusCode === 200) return { done: true, last: text };
          last = `${res.statusCode} ${text.slice(0, 200)}`;
          // Removing a member that is no longer in the configuration is done already.
          if (change === 'remove' && /not a member|unknown member|not_found/i.test(text)) return { done: true, last };
        } catch (e) {
          last = (e as Error).message;
        }
      }
      await new Promise((r) => setTimeout(r, 300));
    }
    return { done: false, last };
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

  private spawnWorker(id: string, url: string): WorkerProc {
    const { dataDir } = this.options;
    const script = this.options.workerScript ?? join(dirname(this.script), 'worker.js');
    const out = openSync(join(dataDir, id, 'worker.log'), 'a');
    const env: NodeJS.ProcessEnv = { ...process.env, ...this.options.env, JEPSEN_LIKE_RUN: this.options.runId };
    delete env.CLUSTER_AUTH_TOKEN;
    const start = this.options.network.wrapWorker(id, process.execPath, [script, '--cluster', dataDir, '--id', id]);
    const child = spawn(start.command, start.args, {
      detached: true,
      stdio: ['ignore', out, out],
      env,
    });
    closeSync(out);
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    if (child.pid !== undefined) this.options.state.state.helpers.push(child.pid);
    return { id, url, child, exited, paused: false };
  }

  /** Ids of the workers the process nemeses may hit (the workload's `faultWorkers` role), in start order. */
  faultWorkerIds(): string[] {
    const roles = this.options.faultWorkers;
    if (roles === undefined) return [];
    const wanted = typeof roles === 'string' ? [roles] : roles;
    return this.workerProcs.filter((w) => wanted.includes(w.id.replace(/[0-9]+$/, ''))).map((w) => w.id);
  }

  /**
   * The workers a partition may cut apart (Workload.partitionWorkers): null unless the workload asks for it and the
   * network gave the workers namespaces of their own.
   */
  workerPartition(): { clients: string[]; servers: string[] } | null {
    const roles = this.options.partitionWorkers;
    if (roles === undefined || !this.workersIsolated) return null;
    const of = (role: string) => this.workerProcs.filter((w) => w.id.replace(/[0-9]+$/, '') === role).map((w) => w.id);
    return { clients: of(roles.clients), servers: of(roles.servers) };
  }

  /** Whether the wipe nemesis wipes members besides a fault-target worker (Workload.wipeMembers). */
  wipesMembers(): boolean {
    return this.options.wipeMembers ?? true;
  }

  workerRunning(id: string): boolean {
    const w = this.workerProcs.find((p) => p.id === id);
    return w !== undefined && w.child.exitCode === null && w.child.signalCode === null;
  }

  /** SIGKILL a worker and wait until it is gone. */
  async killWorker(id: string): Promise<void> {
    const w = this.workerProcs.find((p) => p.id === id);
    if (w === undefined || !this.workerRunning(id)) return;
    w.child.kill('SIGKILL');
    await w.exited;
  }

  /**
   * Deletes what a killed worker keeps on disk (its data folder but its log: a feed or video store's LevelDB and
   * objects), so its restart is empty. A worker whose state is in memory (a counter store) has nothing there.
   */
  wipeWorker(id: string): void {
    if (this.workerRunning(id)) throw new Error(`worker ${id} is running: kill it before wiping it`);
    const dir = join(this.options.dataDir, id);
    for (const entry of readdirSync(dir))
      if (entry !== 'worker.log') rmSync(join(dir, entry), { recursive: true, force: true });
  }

  /** Starts a killed worker again with its arguments (same ports, from DIR/cluster.json). */
  restartWorker(id: string): void {
    const i = this.workerProcs.findIndex((p) => p.id === id);
    if (i < 0 || this.workerRunning(id)) return;
    this.workerProcs[i] = this.spawnWorker(id, this.workerProcs[i]!.url);
    this.options.state.save();
  }

  pauseWorker(id: string): boolean {
    const w = this.workerProcs.find((p) => p.id === id);
    if (w === undefined || w.paused || !this.workerRunning(id)) return false;
    w.child.kill('SIGSTOP');
    w.paused = true;
    return true;
  }

  resumeWorker(id: string): boolean {
    const w = this.workerProcs.find((p) => p.id === id);
    if (w === undefined || !w.paused) return false;
    if (this.workerRunning(id)) w.child.kill('SIGCONT');
    w.paused = false;
    return true;
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
    const { ids: memberIds, network, dataDir } = this.options;
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
    const ids = roles.flatMap(([role, count]) => Array.from({ length: count }, (_, i) => `${role}${i + 1}`));
    if (this.options.partitionWorkers !== undefined) this.workersIsolated = await network.isolateWorkers(ids);
    for (const [role, count] of roles) {
      for (let index = 1; index <= count; index++) {
        const id = `${role}${index}`;
        const isolated = network.workerAddresses(id);
        records.push({
          id,
          role,
          index,
          pid: null,
          httpAddress: isolated?.http ?? `127.0.0.1:${await fresh()}`,
          tcpAddress: isolated?.tcp ?? `127.0.0.1:${await fresh()}`,
        });
      }
    }
    const members = memberIds.map((id) => {
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
    for (const w of records) {
      mkdirSync(join(dataDir, w.id), { recursive: true });
      this.workerProcs.push(this.spawnWorker(w.id, `http://${w.httpAddress}`));
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
        if (w.paused) w.child.kill('SIGCONT');
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

  /** A member's GET /v1/cluster/status, or null when it does not answer. */
  async status(id: string, timeoutMs = 1_000): Promise<Record<string, unknown> | null> {
    try {
      const res = await request(`${this.url(id)}/v1/cluster/status`, {
        headers: { authorization: `Bearer ${this.options.token}` },
        signal: AbortSignal.timeout(timeoutMs),
      });
      const body = (await res.body.json()) as Record<string, unknown>;
      return res.statusCode === 200 ? body : null;
    } catch {
      return null;
    }
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
