/**
 * Our side of a service benchmark: a real 5-member cluster started with the `cluster` CLI in a temporary data
 * directory (LevelDB on disk, TCP between members, one process per member), exactly as a user would start it,
 * and stopped with `cluster down --wipe` at the end, on failure, and on Ctrl-C.
 */
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { onCleanup, removeLater, trackPid, untrackPid } from './cleanup.js';
import { fetchJson, scrapeCounters } from './http.js';
import { BenchError, cpuSeconds, freePortBlock, runCommand, sleep } from './procs.js';
import { round } from './stats.js';

const repoRoot = fileURLToPath(new URL('../../../', import.meta.url));
const clusterCli = join(repoRoot, 'cluster', 'bin', 'cluster.js');

interface OurMember {
  id: string;
  pid: number;
  url: string;
}

/** A process of the service that is not a Raft member (app server, counter store...), as cluster.json lists it. */
interface OurWorker {
  id: string;
  role: string;
  pid: number;
  url: string;
  /** host:port of its binary-protocol listener. */
  tcpAddress: string;
}

export interface OurCluster {
  service: string;
  dataDir: string;
  token: string;
  members: OurMember[];
  /** In start order; empty for services without workers. */
  workers: OurWorker[];
  /** The id of the member that leads now. */
  leader(): Promise<string>;
  stop(): Promise<void>;
}

interface StartOptions {
  service: string;
  nodes: number;
  /** Extra environment for the members (e.g. NODE_OPTIONS=--cpu-prof). */
  env?: NodeJS.ProcessEnv;
  tickMs?: number;
  /** Applied entries between snapshots; the CLI's default when absent. */
  snapshotEvery?: number;
  /** `--workers role=N,...`; the service's default counts when absent. */
  workers?: Record<string, number>;
  /** `--set key=value` for each entry (settings the service's workers read). */
  settings?: Record<string, string>;
}

export async function startOurCluster(o: StartOptions): Promise<OurCluster> {
  if (!existsSync(join(repoRoot, 'cluster', 'dist', 'src', 'cli.js'))) {
    throw new BenchError('the cluster CLI is not built: run `npx tsc -b` at the repository root first');
  }
  const parent = mkdtempSync(join(tmpdir(), `raftkit-bench-${o.service}-`));
  const removeParent = removeLater(parent);
  const dataDir = join(parent, 'data');
  // The CLI uses raft ports base+1..base+n and HTTP ports base+101..base+100+n; worker k (of at most 20) HTTP
  // base+40+k and binary base+160+k.
  const offsets = Array.from({ length: o.nodes }, (_, i) => [1 + i, 101 + i]).flat();
  for (let k = 1; k <= 20; k++) offsets.push(40 + k, 160 + k);
  const env = { ...process.env, ...o.env };
  delete env.CLUSTER_AUTH_TOKEN;
  delete env.CLUSTER_DATA;
  const down = async (): Promise<void> => {
    if (!existsSync(join(dataDir, 'cluster.json'))) return;
    process.stderr.write(`bench: stopping our ${o.service} cluster (cluster down --wipe)\n`);
    const r = await runCommand(process.execPath, [clusterCli, 'down', '--data', dataDir, '--wipe'], {
      timeoutMs: 60_000,
      env,
      echo: '  [cluster] ',
    });
    if (r.code !== 0) process.stderr.write(`bench: cluster down exited with ${r.code}\n`);
  };
  let members: OurMember[] = [];
  let workers: OurWorker[] = [];
  const stopCluster = onCleanup(`stop our ${o.service} cluster`, async () => {
    await down();
    for (const p of [...members, ...workers]) untrackPid(p.pid);
    await removeParent();
  });

  let lastError = '';
  for (let attempt = 1; attempt <= 3; attempt++) {
    const base = await freePortBlock(offsets);
    const args = [
      clusterCli,
      'up',
      '--service',
      o.service,
      '--nodes',
      String(o.nodes),
      '--data',
      dataDir,
      '--base-port',
      String(base),
    ];
    if (o.tickMs !== undefined) args.push('--tick-ms', String(o.tickMs));
    if (o.snapshotEvery !== undefined) args.push('--snapshot-every', String(o.snapshotEvery));
    if (o.workers !== undefined)
      args.push(
        '--workers',
        Object.entries(o.workers)
          .map(([role, n]) => `${role}=${n}`)
          .join(','),
      );
    for (const [key, value] of Object.entries(o.settings ?? {})) args.push('--set', `${key}=${value}`);
    process.stderr.write(
      `bench: starting our ${o.nodes}-member ${o.service} cluster: cluster ${args.slice(1).join(' ')}\n`,
    );
    const r = await runCommand(process.execPath, args, { timeoutMs: 90_000, env, echo: '  [cluster] ' });
    if (r.code === 0) break;
    lastError = r.output.trim().split('\n').pop() ?? `exit ${r.code}`;
    await down();
    if (!/port in use/.test(lastError) || attempt === 3) {
      await stopCluster();
      throw new BenchError(`our cluster did not start: ${lastError}`);
    }
  }
  const state = JSON.parse(readFileSync(join(dataDir, 'cluster.json'), 'utf8')) as {
    members: { id: string; pid: number; httpAddress: string }[];
    workers?: { id: string; role: string; pid: number; httpAddress: string; tcpAddress: string }[];
  };
  const token = readFileSync(join(dataDir, 'token'), 'utf8').trim();
  members = state.members.map((m) => ({ id: m.id, pid: m.pid, url: `http://${m.httpAddress}` }));
  workers = (state.workers ?? []).map((w) => ({
    id: w.id,
    role: w.role,
    pid: w.pid,
    url: `http://${w.httpAddress}`,
    tcpAddress: w.tcpAddress,
  }));
  for (const p of [...members, ...workers]) trackPid(p.pid);

  const leader = async (): Promise<string> => {
    const deadline = Date.now() + 15_000;
    while (Date.now() < deadline) {
      const answers = await Promise.all(
        members.map((m) => fetchJson(`${m.url}/v1/cluster/status`, { headers: { authorization: `Bearer ${token}` } })),
      );
      let best: { id: string; term: number } | null = null;
      for (const a of answers) {
        const s = a.body as { id?: string; role?: string; term?: number } | null;
        if (
          a.status === 200 &&
          s?.role === 'leader' &&
          typeof s.id === 'string' &&
          (best === null || (s.term ?? 0) > best.term)
        )
          best = { id: s.id, term: s.term ?? 0 };
      }
      if (best !== null) return best.id;
      await sleep(100);
    }
    throw new BenchError('our cluster has no leader');
  };
  return { service: o.service, dataDir, token, members, workers, leader, stop: stopCluster };
}

/** A member's Prometheus counters, summed over their labels; empty when it does not answer. */
export function memberCounters(member: OurMember): Promise<Record<string, number>> {
  return scrapeCounters(`${member.url}/metrics`);
}

/** The process_gc_* counters among a process's counters (for a probe that returns only what it needs). */
export function gcCounters(counters: Record<string, number>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [k, v] of Object.entries(counters)) if (k.startsWith('process_gc_')) out[k] = v;
  return out;
}

/**
 * One process's GC pauses over a window, from the change of its process_gc_* counters (every process of ours
 * serves them: @raftkit/http's gc-pauses.ts), as `<prefix>_gc_*` figures: whether a tail is that process's pauses.
 */
export function gcPauseFigures(d: Record<string, number>, prefix: string): Record<string, number> {
  return {
    [`${prefix}_gc_pauses`]: d.process_gc_pauses_total ?? 0,
    [`${prefix}_gc_scavenges`]: d.process_gc_scavenges_total ?? 0,
    [`${prefix}_gc_pause_ms`]: Math.round((d.process_gc_pause_seconds_total ?? 0) * 10_000) / 10,
    [`${prefix}_gc_pauses_over_1ms`]: d.process_gc_pauses_over_1ms_total ?? 0,
    [`${prefix}_gc_pauses_over_5ms`]: d.process_gc_pauses_over_5ms_total ?? 0,
  };
}

/**
 * CPU seconds used so far by each group of our processes (e.g. members, app servers), as `<group>_cpu_s`: a
 * benchmark's probe reads them as the window opens and closes, and groupCpuPerOp turns the change into figures.
 */
export function groupCpuSeconds(groups: Record<string, number[]>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [name, pids] of Object.entries(groups))
    out[`${name}_cpu_s`] = pids.reduce((sum, pid) => sum + (cpuSeconds(pid) ?? 0), 0);
  return out;
}

/** CPU microseconds per operation of each group over a window, as `<group>_cpu_us_per_op`, from the change in groupCpuSeconds. */
export function groupCpuPerOp(
  delta: Record<string, number>,
  groups: string[],
  ops: number,
): Record<string, number | null> {
  const out: Record<string, number | null> = {};
  for (const g of groups)
    out[`${g}_cpu_us_per_op`] = ops === 0 ? null : round(((delta[`${g}_cpu_s`] ?? 0) * 1e6) / ops, 1);
  return out;
}
