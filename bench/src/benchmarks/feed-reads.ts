/**
 * The feed benchmark's read phase: an open loop of GET /api/feed at a fixed rate (`--rate`, default 2,000 reads/s),
 * so a service that falls behind shows it in the latency from each read's scheduled start instead of silently
 * lowering the rate (no coordinated omission). A read answered in time order (the ranker's 50 ms deadline passed,
 * or no ranker) is a miss, counted apart from the ranked reads and never in their latencies; the p99 that judges
 * the goal counts misses and failures as slower than any ranked read. Plus --profile for the service's processes.
 */
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { OpError, runOpenLoopShare } from '../load.js';
import { formatSummary, summarize as summarizeProfile, type CpuProfile } from '../profile.js';
import { CpuMeter, BenchError } from '../procs.js';
import { scrapeCounters } from '../http.js';
import type { RunOptions, SideResult } from '../benchmark.js';
import { round, summarize } from '../stats.js';

/** The error kind of a read answered in time order. */
export const TIME_ORDER = 'time order (ranker missed its 50 ms)';
const DEFAULT_RATE = 2_000;

/** `--rate N`: feed reads offered per second. */
export function readRate(): number {
  const i = process.argv.indexOf('--rate');
  const rate = i >= 0 ? Number(process.argv[i + 1]) : DEFAULT_RATE;
  if (!Number.isFinite(rate) || rate <= 0) throw new BenchError('--rate must be a positive number of reads per second');
  return rate;
}

export interface ReadSide {
  label: string;
  system: string;
  /** The service's processes, by role (member, store, fanout, ranker, app): CPU in the window per role. */
  processes: Array<{ pid: number; role: string }>;
  /** The rankers' /metrics URLs: their own time per rank call over the window. */
  rankers: string[];
  /** The i-th read: resolves with the answer's `ranking` and how many posts it had. */
  read: (i: number) => Promise<{ ids: string[]; ranking: string }>;
}

export interface ReadResult extends SideResult {
  offered_per_sec: number;
  p50_from_schedule_ms: number;
  p99_from_schedule_ms: number;
  /** p99 from schedule with every time-order answer and failure counted as a miss (slower than any ranked read). */
  p99_with_misses_ms: number | null;
  server_cpu_us_per_read_by_role: Record<string, number | null>;
}

async function rankerCounters(urls: string[]): Promise<Record<string, number>> {
  const all = await Promise.all(
    urls.map((u) => scrapeCounters(`${u}/metrics`).catch(() => ({}) as Record<string, number>)),
  );
  const sum = (k: string): number => all.reduce((n, m) => n + (m[k] ?? 0), 0);
  return {
    rank_s: sum('feed_ranker_rank_seconds_sum'),
    ranks: sum('feed_ranker_rank_seconds_count'),
    hits: sum('feed_ranker_cache_hits'),
    misses: sum('feed_ranker_cache_misses'),
  };
}

export async function openLoopReads(side: ReadSide, o: RunOptions): Promise<ReadResult> {
  const rate = readRate();
  const server = new CpuMeter(() => side.processes.map((p) => p.pid));
  const roles = [...new Set(side.processes.map((p) => p.role))];
  const byRole = new Map(
    roles.map((role) => [role, new CpuMeter(() => side.processes.filter((p) => p.role === role).map((p) => p.pid))]),
  );
  let turn = 0;
  const startAt = performance.timeOrigin + performance.now() + 50;
  let rank0: Promise<Record<string, number>> = Promise.resolve({});
  let client0 = process.cpuUsage();
  const opener = setTimeout(
    () => {
      server.start();
      for (const m of byRole.values()) m.start();
      if (o.profileDir !== null) signalAll(side.processes, 'SIGUSR2');
      rank0 = rankerCounters(side.rankers);
      client0 = process.cpuUsage();
    },
    50 + o.warmupS * 1000,
  );
  const progress = setInterval(() => process.stderr.write(`bench: ${side.label}: reads started ${turn}\n`), 5_000);
  let r;
  try {
    r = await runOpenLoopShare(
      { rate, concurrency: o.concurrency, startAt, warmupS: o.warmupS, durationS: o.durationS },
      () => side.read(turn++),
      () => ({}),
      (answer) => {
        if (answer.ids.length === 0) throw new OpError('empty feed');
        if (answer.ranking !== 'ranked') throw new OpError(TIME_ORDER);
      },
    );
  } finally {
    clearTimeout(opener);
    clearInterval(progress);
  }
  // The window ends when the last read scheduled in it is answered: a side that fell behind took longer.
  const elapsedS = Math.max(o.durationS, (performance.now() - (startAt - performance.timeOrigin)) / 1000 - o.warmupS);
  server.stop();
  for (const m of byRole.values()) m.stop();
  if (o.profileDir !== null) signalAll(side.processes, 'SIGUSR2');
  const c = process.cpuUsage(client0);
  const [a, b] = await Promise.all([rank0, rankerCounters(side.rankers)]);
  const ranks = (b.ranks ?? 0) - (a.ranks ?? 0);
  const latency = summarize(r.latencies);
  const late = summarize(r.fromSchedule);
  // Misses sort after every ranked read: the p99 exists only while they are under 1% of the reads.
  const total = r.fromSchedule.length + r.errors;
  const sorted = Float64Array.from(r.fromSchedule).sort();
  const at = Math.max(0, Math.ceil(total * 0.99) - 1);
  const p99WithMisses = total === 0 || at >= sorted.length ? null : round(sorted[at]!, 1);
  const cpu = server.used;
  const { count: _count, ...lat } = latency;
  return {
    system: side.system,
    members: null,
    ...lat,
    ops_per_sec: round(r.latencies.length / elapsedS, 0),
    offered_per_sec: rate,
    ops: r.latencies.length,
    errors: r.errors,
    error_kinds: r.error_kinds,
    duration_s: round(elapsedS, 2),
    warmup_s: o.warmupS,
    concurrency: o.concurrency,
    interrupted: false,
    p50_from_schedule_ms: late.p50_ms,
    p99_from_schedule_ms: late.p99_ms,
    p99_with_misses_ms: p99WithMisses,
    server_cpu_s: cpu === null ? null : round(cpu, 2),
    server_cpu_cores: cpu === null ? null : round(cpu / elapsedS, 2),
    server_cpu_us_per_read_by_role: Object.fromEntries(
      [...byRole].map(([role, m]) => [role, m.used === null || total === 0 ? null : round((m.used * 1e6) / total, 0)]),
    ),
    server_cpu_us_per_op: cpu === null || total === 0 ? null : round((cpu * 1e6) / total, 0),
    client_cpu_cores: round((c.user + c.system) / 1e6 / elapsedS, 2),
    generator: r.pauses,
    ranker_in_process: {
      calls: ranks,
      mean_ms: ranks > 0 ? round((((b.rank_s ?? 0) - (a.rank_s ?? 0)) * 1000) / ranks, 2) : null,
      recent_ranking_hits: (b.hits ?? 0) - (a.hits ?? 0),
      fresh_rankings: (b.misses ?? 0) - (a.misses ?? 0),
    },
  };
}

/** --profile: starts (then stops and writes) each process's CPU profile. */
function signalAll(processes: Array<{ pid: number }>, signal: NodeJS.Signals): void {
  for (const p of processes) {
    try {
      process.kill(p.pid, signal);
    } catch {
      // Gone: no profile from it.
    }
  }
}

/** --profile: every member and worker preloads the profiler (bench/src/profile-preload.ts). */
export function profileEnv(o: RunOptions): NodeJS.ProcessEnv {
  if (o.profileDir === null) return {};
  return {
    NODE_OPTIONS:
      `${process.env.NODE_OPTIONS ?? ''} --import=${new URL('../profile-preload.js', import.meta.url).href}`.trim(),
    BENCH_PROFILE_DIR: o.profileDir,
    // Only the read window is profiled (openLoopReads signals the processes as it opens and closes).
    BENCH_PROFILE_ON_SIGNAL: '1',
  };
}

/** --profile: the processes' profiles of the read window, summarized by role into <dir>/<label>-<role>.txt. */
export function profileSummary(o: RunOptions, label: string, processes: Array<{ pid: number; role: string }>): void {
  if (o.profileDir === null) return;
  const files = new Set(readdirSync(o.profileDir));
  const byRole = new Map<string, CpuProfile[]>();
  for (const p of processes) {
    const f = `member-${p.pid}.cpuprofile`;
    if (!files.has(f)) continue;
    const list = byRole.get(p.role) ?? [];
    list.push(JSON.parse(readFileSync(join(o.profileDir, f), 'utf8')) as CpuProfile);
    byRole.set(p.role, list);
  }
  for (const [role, profiles] of byRole) {
    const text = formatSummary(summarizeProfile(profiles, 25), `${label} ${role}: ${profiles.length} processes`);
    process.stderr.write(`${text}\n`);
    writeFileSync(join(o.profileDir, `${label}-${role}.txt`), `${text}\n`);
  }
}
