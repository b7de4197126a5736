/**
 * `idle`: what the whole `make up` stack costs with nothing sent (issue 39, part 3), beside a 5-member etcd at
 * rest. Ours: the stack `make up` starts, by its own script (scripts/up-all.sh: every service's 5-member cluster
 * with its default workers and its own token, on the service's default ports, and the dashboard on its default
 * port with no page open) with DATA_ROOT in a temporary folder; stopped by scripts/down-all.sh --wipe. The default
 * ports are those of `make up`: run it while no other stack is up (on a shared machine, under the stack lock).
 * The peer: Debian's etcd 3.4, five members on loopback (bench/src/peers/etcd.ts), at rest after its start check.
 *
 * Each side waits `--warmup` seconds for its processes to settle (elections, JIT, the first reconciliations),
 * then counts each process's CPU (utime + stime from /proc) over `--duration` seconds and reads its resident
 * memory at the end. Goals (verdict and `goals` in results/idle.json): the whole stack under 0.3 of one core, and
 * every one of our processes under etcd's idle CPU per member (its total over its five members), both measured
 * in the same run.
 */
import { existsSync, mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Benchmark, Goal, RunOptions, SideResult } from '../benchmark.js';
import { interrupted, onCleanup, removeLater, trackPid, untrackPid } from '../cleanup.js';
import { startEtcd } from '../peers/etcd.js';
import { BenchError, cpuSeconds, runCommand, sleep } from '../procs.js';
import { round } from '../stats.js';

const repoRoot = fileURLToPath(new URL('../../../../', import.meta.url));
const MEMBERS = 5;

/** Issue 39, part 3: the whole stack at rest under this many cores. */
export const STACK_CORES_GOAL = 0.3;

/** One process at rest: which service it belongs to, which process of it, what it used. */
export interface IdleProcess {
  service: string;
  /** Member id (n1..n5), worker id (app1, delivery1...), or "dashboard". */
  id: string;
  role: string;
  pid: number;
  cores: number;
  rss_mb: number;
}

/** A service's processes added up. */
interface IdleService {
  service: string;
  processes: number;
  cores: number;
  busiest_process_cores: number;
  rss_mb: number;
}

/** Per service, busiest first. */
export function byService(processes: readonly IdleProcess[]): IdleService[] {
  const out = new Map<string, IdleService>();
  for (const p of processes) {
    const s = out.get(p.service) ?? { service: p.service, processes: 0, cores: 0, busiest_process_cores: 0, rss_mb: 0 };
    s.processes++;
    s.cores += p.cores;
    s.busiest_process_cores = Math.max(s.busiest_process_cores, p.cores);
    s.rss_mb += p.rss_mb;
    out.set(p.service, s);
  }
  return [...out.values()]
    .map((s) => ({
      ...s,
      cores: round(s.cores, 4),
      busiest_process_cores: round(s.busiest_process_cores, 4),
      rss_mb: round(s.rss_mb, 0),
    }))
    .sort((a, b) => b.cores - a.cores);
}

/**
 * The two goals, judged from what each side measured: our total against 0.3 cores, and our busiest process
 * against etcd's CPU per member (its total over its members). Without an etcd side the second is not judged.
 */
export function idleGoals(
  ours: { total_cores: number; processes: readonly IdleProcess[] },
  etcd: { total_cores: number; members: number } | null,
): Goal[] {
  const goals: Goal[] = [
    {
      goal: `the whole stack at rest under ${STACK_CORES_GOAL} of one core (issue 39)`,
      met: ours.total_cores < STACK_CORES_GOAL,
      detail: `${round(ours.total_cores, 3)} cores over ${ours.processes.length} processes`,
    },
  ];
  if (etcd === null || etcd.members <= 0) return goals;
  const perMember = etcd.total_cores / etcd.members;
  const over = ours.processes.filter((p) => p.cores >= perMember).sort((a, b) => b.cores - a.cores);
  const busiest = [...ours.processes].sort((a, b) => b.cores - a.cores)[0];
  const name = (p: IdleProcess): string => `${p.service} ${p.id} ${round(p.cores, 4)}`;
  goals.push({
    goal: "every process of ours under etcd's idle CPU per member (issue 39)",
    met: over.length === 0 && ours.processes.length > 0,
    detail:
      `etcd ${round(perMember, 4)} cores per member; ` +
      (over.length === 0
        ? `our busiest process ${busiest === undefined ? '-' : name(busiest)}`
        : `${over.length} of ${ours.processes.length} processes at or over it, busiest ${over.slice(0, 5).map(name).join(', ')}`),
  });
  return goals;
}

/** Resident memory of a process in MiB (/proc/PID/statm); 0 when it is gone. */
function rssMb(pid: number): number {
  try {
    const pages = Number(readFileSync(`/proc/${pid}/statm`, 'utf8').split(' ')[1]);
    return Number.isFinite(pages) ? (pages * 4096) / 2 ** 20 : 0;
  } catch {
    return 0;
  }
}

type Tracked = Omit<IdleProcess, 'cores' | 'rss_mb'>;

/** Waits, then counts each process's CPU over the window; reports progress every 10 s. */
async function measureAtRest(
  processes: readonly Tracked[],
  o: RunOptions,
  label: string,
): Promise<{ processes: IdleProcess[]; duration_s: number }> {
  process.stderr.write(
    `bench: ${label}: ${processes.length} processes; settling ${o.warmupS} s, then measuring ${o.durationS} s\n`,
  );
  await sleepUnlessInterrupted(o.warmupS * 1000);
  const before = new Map(processes.map((p) => [p.pid, cpuSeconds(p.pid)]));
  const started = performance.now();
  for (let left = o.durationS; left > 0 && !interrupted.aborted; left -= 10) {
    await sleepUnlessInterrupted(Math.min(10, left) * 1000);
    if (left > 10) process.stderr.write(`bench: ${label}: ${left - 10} s left\n`);
  }
  const seconds = (performance.now() - started) / 1000;
  const out: IdleProcess[] = [];
  for (const p of processes) {
    const a = before.get(p.pid);
    const b = cpuSeconds(p.pid);
    if (a === null || a === undefined || b === null)
      throw new BenchError(`${label}: ${p.service} ${p.id} (pid ${p.pid}) exited while at rest`);
    out.push({ ...p, cores: round((b - a) / seconds, 5), rss_mb: round(rssMb(p.pid), 1) });
  }
  return { processes: out, duration_s: round(seconds, 1) };
}

async function sleepUnlessInterrupted(ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline && !interrupted.aborted) await sleep(Math.min(500, deadline - Date.now()));
}

/** The figures every side carries; an idle side has no operations. */
function restingSide(
  system: string,
  members: number,
  measured: { processes: IdleProcess[]; duration_s: number },
  o: RunOptions,
  extra: Record<string, unknown>,
): SideResult {
  const total = measured.processes.reduce((sum, p) => sum + p.cores, 0);
  return {
    system,
    members,
    ops_per_sec: 0,
    ops: 0,
    errors: 0,
    error_kinds: {},
    duration_s: measured.duration_s,
    warmup_s: o.warmupS,
    concurrency: 0,
    interrupted: interrupted.aborted,
    p50_ms: 0,
    p90_ms: 0,
    p99_ms: 0,
    p999_ms: 0,
    max_ms: 0,
    mean_ms: 0,
    server_cpu_s: round(total * measured.duration_s, 2),
    server_cpu_cores: round(total, 4),
    server_cpu_us_per_op: null,
    client_cpu_cores: 0,
    total_cores: round(total, 4),
    rss_mb_total: round(
      measured.processes.reduce((sum, p) => sum + p.rss_mb, 0),
      0,
    ),
    ...extra,
  } as SideResult;
}

interface ClusterFile {
  service: string;
  members: { id: string; pid: number | null }[];
  workers?: { id: string; role: string; pid: number | null }[];
}

async function runOurs(o: RunOptions): Promise<SideResult> {
  if (!existsSync(join(repoRoot, 'cluster', 'dist', 'src', 'cli.js')))
    throw new BenchError('the cluster CLI is not built: run `npx tsc -b` at the repository root first');
  const root = mkdtempSync(join(tmpdir(), 'raftkit-bench-idle-'));
  const removeRoot = removeLater(root);
  // The stack as `make up` starts it (scripts/up-all.sh: every cluster with its own token, the dashboard with its
  // own secret), in a folder of its own; `make up`'s default ports.
  const env: NodeJS.ProcessEnv = { ...process.env, DATA_ROOT: root };
  delete env.CLUSTER_DATA;
  delete env.CLUSTER_AUTH_TOKEN;
  delete env.SERVICES;
  delete env.PORT_OFFSET;
  const tracked: Tracked[] = [];
  const stopStack = onCleanup('stop our stack', async () => {
    process.stderr.write('bench: stopping our stack (scripts/down-all.sh --wipe)\n');
    await runCommand(join(repoRoot, 'scripts', 'down-all.sh'), ['--wipe'], { timeoutMs: 300_000, env, cwd: repoRoot });
    for (const p of tracked) untrackPid(p.pid);
  });
  try {
    process.stderr.write(`bench: starting the stack: scripts/up-all.sh with DATA_ROOT=${root}\n`);
    const up = await runCommand(join(repoRoot, 'scripts', 'up-all.sh'), [], { timeoutMs: 900_000, env, cwd: repoRoot });
    if (interrupted.aborted) throw new BenchError('interrupted');
    if (up.code !== 0)
      throw new BenchError(
        `the stack did not start (is another stack up on the default ports?): ${up.output.trim().split('\n').slice(-3).join(' / ')}`,
      );
    for (const name of readdirSync(root).sort()) {
      const stateFile = join(root, name, 'cluster.json');
      if (!existsSync(stateFile)) continue;
      const state = JSON.parse(readFileSync(stateFile, 'utf8')) as ClusterFile;
      for (const m of state.members)
        if (m.pid !== null) tracked.push({ service: state.service, id: m.id, role: 'member', pid: m.pid });
      for (const w of state.workers ?? [])
        if (w.pid !== null) tracked.push({ service: state.service, id: w.id, role: w.role, pid: w.pid });
    }
    tracked.push({
      service: 'dashboard',
      id: 'dashboard',
      role: 'dashboard',
      pid: Number(readFileSync(join(root, 'dashboard.pid'), 'utf8')),
    });
    for (const p of tracked) trackPid(p.pid);

    const measured = await measureAtRest(tracked, o, 'ours');
    const services = byService(measured.processes);
    printServices(services, measured.processes);
    return restingSide(
      `raftkit, make up's ${services.length - 1} clusters and the dashboard`,
      measured.processes.length,
      measured,
      o,
      {
        services,
        processes: [...measured.processes].sort((a, b) => b.cores - a.cores),
      },
    );
  } finally {
    await stopStack();
    await removeRoot();
  }
}

function printServices(services: readonly IdleService[], processes: readonly IdleProcess[]): void {
  const lines = services.map(
    (s) =>
      `  ${s.service.padEnd(10)} ${s.cores.toFixed(4)} cores  ${String(s.processes).padStart(2)} processes  busiest ${s.busiest_process_cores.toFixed(4)}  ${s.rss_mb} MiB`,
  );
  const busiest = [...processes].sort((a, b) => b.cores - a.cores).slice(0, 8);
  process.stderr.write(
    `bench: ours at rest, per service:\n${lines.join('\n')}\nbench: busiest processes: ${busiest.map((p) => `${p.service}/${p.id} ${p.cores.toFixed(4)}`).join(', ')}\n`,
  );
}

async function runEtcd(o: RunOptions): Promise<SideResult> {
  const etcd = await startEtcd(MEMBERS);
  try {
    const leader = await etcd.leader();
    const measured = await measureAtRest(
      etcd.members.map((m) => ({
        service: 'etcd',
        id: m.name,
        role: m.name === leader ? 'leader' : 'follower',
        pid: m.pid,
      })),
      o,
      'etcd',
    );
    const total = measured.processes.reduce((sum, p) => sum + p.cores, 0);
    process.stderr.write(
      `bench: etcd at rest: ${measured.processes.map((p) => `${p.id} (${p.role}) ${p.cores.toFixed(4)}`).join(', ')}\n`,
    );
    return restingSide(`etcd ${etcd.version}, ${MEMBERS} members (Debian etcd-server)`, MEMBERS, measured, o, {
      leader,
      version: etcd.version,
      per_member_cores: round(total / MEMBERS, 5),
      processes: measured.processes,
    });
  } finally {
    await etcd.stop();
  }
}

export const idleBenchmark: Benchmark = {
  name: 'idle',
  description:
    'the whole `make up` stack at rest: CPU per service and per process, resident memory (vs a 5-member etcd at rest)',
  title: (o) => `idle: make up's stack at rest, ${o.durationS} s${o.vs !== null ? `, ours vs ${o.vs}` : ''}`,
  peers: ['etcd'],
  defaults: { durationS: 60, concurrency: 1, size: 0, warmupS: 60 },
  workload: (o) => ({
    operation: 'nothing sent: every process at rest',
    ours: `every service's ${MEMBERS}-member cluster with its default workers and its own token (scripts/up-all.sh, as make up) and the dashboard with no page open`,
    peer: `etcd, ${MEMBERS} members on loopback, at rest after its start check`,
    settle_s: o.warmupS,
    measured_s: o.durationS,
    cpu: 'utime + stime of each process over the window (/proc/PID/stat); resident memory at its end (/proc/PID/statm)',
  }),
  goals: (ours, peer) =>
    idleGoals(
      { total_cores: ours.server_cpu_cores ?? 0, processes: (ours.processes as IdleProcess[] | undefined) ?? [] },
      peer === null ? null : { total_cores: peer.server_cpu_cores ?? 0, members: peer.members ?? 0 },
    ),
  runOurs,
  runPeer: (peer, o) => {
    if (peer !== 'etcd') throw new Error(`idle has no peer ${peer}`);
    return runEtcd(o);
  },
};
