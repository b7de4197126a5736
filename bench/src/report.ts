/** The results file of a run: both sides, their ratios, the verdict against the goal, and the machine it ran on. */
import { cpus, loadavg, release, totalmem, type } from 'node:os';
import type { Benchmark, Goal, RunOptions, SideResult } from './benchmark.js';
import type { RunNoise } from './machine-load.js';
import { round } from './stats.js';

export interface Report {
  benchmark: string;
  title: string;
  description: string;
  command: string;
  workload: Record<string, unknown>;
  ours: SideResult;
  peer_name: string | null;
  peer: SideResult | null;
  /** ours / peer throughput. */
  ratio: number | null;
  /** ours / peer p99 latency (below 1 is better for us). */
  p99_ratio: number | null;
  target: { ops_per_sec: number; note: string } | null;
  /** ours / target throughput. */
  target_ratio: number | null;
  /** The benchmark's own goals, each met or missed (absent when it has none). */
  goals?: Goal[];
  verdict: string;
  environment: Environment;
  /** How busy the rest of the machine was during each side; a noisy run says so in its verdict. */
  noise?: RunNoise;
}

interface Environment {
  date: string;
  cpus: number;
  cpu_model: string;
  memory_gb: number;
  os: string;
  node: string;
  duration_s: number;
  warmup_s: number;
  concurrency: number;
  load_avg_1m_at_start: number;
  note: string;
}

export function environment(o: RunOptions, date = new Date()): Environment {
  const c = cpus();
  return {
    date: date.toISOString(),
    cpus: c.length,
    cpu_model: c[0]?.model.trim() ?? 'unknown',
    memory_gb: round(totalmem() / 2 ** 30, 1),
    os: `${type()} ${release()}`,
    node: process.version,
    duration_s: o.durationS,
    warmup_s: o.warmupS,
    concurrency: o.concurrency,
    load_avg_1m_at_start: round(loadavg()[0] ?? 0, 2),
    note: 'servers, peer and load generator share this machine, one side after the other in one run',
  };
}

/** The command that reproduces a run (defaults left out, except the ones that matter for comparison). */
function commandLine(o: RunOptions, bench: Benchmark, argv: readonly string[] = process.argv.slice(2)): string {
  const parts = ['npx bench', o.name];
  if (o.vs !== null) parts.push('--vs', o.vs);
  parts.push('--duration', String(o.durationS), '--concurrency', String(o.concurrency));
  if (o.warmupS !== bench.defaults.warmupS) parts.push('--warmup', String(o.warmupS));
  if (o.size !== bench.defaults.size) parts.push('--size', String(o.size));
  if (o.routing !== 'all') parts.push('--routing', o.routing);
  if (o.keys !== 100_000) parts.push('--keys', String(o.keys));
  if (o.snapshotEvery !== null) parts.push('--snapshot-every', String(o.snapshotEvery));
  if (o.rounds !== 1) parts.push('--rounds', String(o.rounds));
  parts.push(...benchmarkFlags(argv));
  return parts.join(' ');
}

/** Flags one benchmark reads for itself (lock: --rate, --sweep; ratelimit: --rate, --pin, --layout), as given. */
const OWN_FLAGS = new Set(['--rate', '--sweep', '--pin', '--layout']);

/** Those flags of a command line, each with its value when one follows (a results file must say them to reproduce). */
export function benchmarkFlags(argv: readonly string[]): string[] {
  const out: string[] = [];
  argv.forEach((arg, i) => {
    if (!OWN_FLAGS.has(arg)) return;
    out.push(arg);
    const next = argv[i + 1];
    if (next !== undefined && !next.startsWith('--')) out.push(next);
  });
  return out;
}

export function buildReport(
  bench: Benchmark,
  o: RunOptions,
  ours: SideResult,
  peer: SideResult | null,
  env: Environment,
): Report {
  const ratio = peer !== null && peer.ops_per_sec > 0 ? round(ours.ops_per_sec / peer.ops_per_sec, 2) : null;
  const p99Ratio = peer !== null && peer.p99_ms > 0 ? round(ours.p99_ms / peer.p99_ms, 2) : null;
  const target = bench.target ?? null;
  const targetRatio = target !== null ? round(ours.ops_per_sec / target.ops_per_sec, 2) : null;
  const goals = bench.goals?.(ours, peer);
  const judged = verdict(ours, peer, o.vs, ratio, p99Ratio, target, targetRatio);
  return {
    benchmark: bench.name,
    title: bench.title(o),
    description: bench.description,
    command: commandLine(o, bench),
    workload: bench.workload(o),
    ours,
    peer_name: peer === null ? null : o.vs,
    peer,
    ratio,
    p99_ratio: p99Ratio,
    target,
    target_ratio: targetRatio,
    ...(goals !== undefined ? { goals } : {}),
    verdict: goals !== undefined ? [goalsVerdict(goals), judged].filter((v) => v !== '').join('; ') : judged,
    environment: env,
  };
}

function verdict(
  ours: SideResult,
  peer: SideResult | null,
  peerName: string | null,
  ratio: number | null,
  p99Ratio: number | null,
  target: Report['target'],
  targetRatio: number | null,
): string {
  const parts: string[] = [];
  if (peer !== null && ratio !== null && p99Ratio !== null) {
    const met = ratio >= 1 && p99Ratio <= 1;
    parts.push(
      `${met ? 'goal met' : 'goal missed'} against ${peerName}: ${pct(ratio)} of its throughput (goal >= 100%) at ${pct(p99Ratio)} of its p99 (goal <= 100%)`,
    );
  }
  // A benchmark may have both: beat the peer, and reach an absolute figure (say so separately, never one for both).
  if (target !== null && targetRatio !== null) {
    parts.push(
      `${targetRatio >= 1 ? 'target met' : 'target missed'}: ${pct(targetRatio)} of the ${target.ops_per_sec.toLocaleString('en-US')} ops/s target`,
    );
  }
  if (ours.errors > 0) parts.push(`ours had ${ours.errors} errors`);
  if (peer !== null && peer.errors > 0) parts.push(`${peerName} had ${peer.errors} errors`);
  return parts.join('; ');
}

/** "goal met: ...; goal missed: ..." */
function goalsVerdict(goals: Goal[]): string {
  return goals.map((g) => `${g.met ? 'goal met' : 'goal missed'}: ${g.goal} (${g.detail})`).join('; ');
}

function pct(r: number): string {
  return `${Math.round(r * 100)}%`;
}

/** A few lines for the terminal. */
export function formatReport(r: Report): string {
  const rows: string[][] = [
    ['', 'ops/s', 'p50 ms', 'p99 ms', 'max ms', 'errors', 'server CPU cores', 'server CPU us/op'],
  ];
  const row = (name: string, s: SideResult): string[] => [
    name,
    String(s.ops_per_sec),
    s.p50_ms.toFixed(2),
    s.p99_ms.toFixed(2),
    s.max_ms.toFixed(1),
    String(s.errors),
    s.server_cpu_cores === null ? '-' : s.server_cpu_cores.toFixed(2),
    s.server_cpu_us_per_op === null ? '-' : String(s.server_cpu_us_per_op),
  ];
  rows.push(row('ours', r.ours));
  if (r.peer !== null) rows.push(row(r.peer_name ?? 'peer', r.peer));
  if (r.target !== null) rows.push(['target', String(r.target.ops_per_sec), '', '', '', '', '', '']);
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((x) => x[i]!.length)));
  const table = rows
    .map((x) => x.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  '))
    .join('\n');
  const errorLines = [r.ours, r.peer]
    .filter((s): s is SideResult => s !== null && s.errors > 0)
    .map(
      (s) =>
        `errors (${s.system}): ${Object.entries(s.error_kinds)
          .map(([k, n]) => `${k} x${n}`)
          .join(', ')}`,
    );
  return [`${r.benchmark}: ${r.command}`, table, ...errorLines, r.verdict].filter((l) => l !== '').join('\n');
}
