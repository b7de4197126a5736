/**
 * One run of one benchmark: ours, then the peer (if asked), back to back in one process so both see the same
 * machine; then <out>/<name>.json and <out>/<name>.svg. Everything started is stopped at the end, on failure,
 * and on Ctrl-C (then nothing is written and the exit status is 130).
 */
import { mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Benchmark, RunOptions, SideResult } from './benchmark.js';
import { cleanupAll, installSignalHandlers, interrupted } from './cleanup.js';
import { parseRunOptions, type RawOptions } from './options.js';
import { BenchError } from './procs.js';
import { judgeRun, noiseVerdict, SideWatcher, type SideNoise } from './machine-load.js';
import { buildReport, environment, formatReport, type Report } from './report.js';
import { renderSvg } from './svg.js';

class Interrupted extends Error {}

/** Runs one side, watching how busy the rest of the machine was meanwhile (see machine-load.ts). */
async function side(
  label: string,
  o: RunOptions,
  noise: SideNoise[],
  run: () => Promise<SideResult>,
): Promise<SideResult> {
  const watcher = new SideWatcher(label);
  process.stderr.write(`bench: -- ${label} -- (1-minute load average before: ${watcher.loadBefore.toFixed(2)})\n`);
  let judged: SideNoise;
  let result: SideResult;
  try {
    result = await run();
  } finally {
    judged = watcher.finish(o.noisyCores);
  }
  if (interrupted.aborted) throw new Interrupted();
  noise.push(judged);
  process.stderr.write(
    `bench: ${label}: load average during ${judged.load_avg_1m_during_mean} (max ${judged.load_avg_1m_during_max}), ` +
      `other processes ${judged.foreign_cpu_cores ?? '?'} cores${judged.noisy ? ' -- NOISY' : ''}\n`,
  );
  result.load_avg_1m_before = judged.load_avg_1m_before;
  result.load_avg_1m_during_mean = judged.load_avg_1m_during_mean;
  result.load_avg_1m_during_max = judged.load_avg_1m_during_max;
  result.foreign_cpu_cores = judged.foreign_cpu_cores;
  result.noisy = judged.noisy;
  return result;
}

async function runBenchmark(bench: Benchmark, o: RunOptions): Promise<Report> {
  const env = environment(o);
  process.stderr.write(
    `bench: ${bench.name}${o.vs !== null ? ` vs ${o.vs}` : ''}: ${o.warmupS} s warm-up + ${o.durationS} s measured per side, ` +
      `concurrency ${o.concurrency}, ${env.cpus} CPUs, Node ${env.node}\n`,
  );
  if (o.vs !== null && bench.runPeer === undefined) throw new BenchError(`benchmark ${bench.name} cannot run a peer`);
  const ours: SideResult[] = [];
  const peers: SideResult[] = [];
  const noise: SideNoise[] = [];
  for (let i = 1; i <= o.rounds; i++) {
    const of = o.rounds > 1 ? ` (round ${i} of ${o.rounds})` : '';
    ours.push(await side(`ours${of}`, o, noise, () => bench.runOurs(o)));
    if (o.vs !== null) {
      const vs = o.vs;
      peers.push(await side(`${vs}${of}`, o, noise, () => bench.runPeer!(vs, o)));
    }
  }
  const merge = (rounds: SideResult[]): SideResult | null => {
    const median = medianRound(rounds);
    return median !== null && rounds.length > 1 && bench.mergeRounds !== undefined
      ? bench.mergeRounds(median, rounds)
      : median;
  };
  const report = buildReport(bench, o, merge(ours)!, merge(peers), env);
  report.noise = judgeRun(noise, o.noisyCores);
  report.verdict = [report.verdict, noiseVerdict(report.noise)].filter((v) => v !== '').join('; ');
  return report;
}

/**
 * The round with the median throughput (the lower middle one for an even count), whole, so its figures stay
 * consistent with each other; every round's throughput and p99 are listed beside it.
 */
export function medianRound(rounds: SideResult[]): SideResult | null {
  if (rounds.length === 0) return null;
  if (rounds.length === 1) return rounds[0]!;
  const sorted = [...rounds].sort((a, b) => a.ops_per_sec - b.ops_per_sec);
  const median = sorted[Math.floor((sorted.length - 1) / 2)]!;
  return {
    ...median,
    rounds_ops_per_sec: rounds.map((r) => r.ops_per_sec),
    rounds_p99_ms: rounds.map((r) => r.p99_ms),
  };
}

function writeResults(out: string, report: Report): { json: string; svg: string } {
  mkdirSync(out, { recursive: true });
  const json = join(out, `${report.benchmark}.json`);
  const svg = join(out, `${report.benchmark}.svg`);
  // Write then rename, so a reader (or a commit) never sees half a file.
  writeFileSync(json + '.tmp', JSON.stringify(report, null, 2) + '\n');
  renameSync(json + '.tmp', json);
  writeFileSync(svg + '.tmp', renderSvg(report));
  renameSync(svg + '.tmp', svg);
  return { json, svg };
}

/** Run, write, print; returns the exit status (0 ok, 1 failed, 130 interrupted). */
export async function runAndReport(bench: Benchmark, o: RunOptions): Promise<number> {
  installSignalHandlers();
  try {
    const report = await runBenchmark(bench, o);
    await cleanupAll();
    const files = writeResults(o.out, report);
    console.log(formatReport(report));
    console.log(`wrote ${files.json} and ${files.svg}`);
    return 0;
  } catch (e) {
    await cleanupAll();
    if (e instanceof Interrupted || interrupted.aborted) {
      process.stderr.write('bench: interrupted; nothing written\n');
      return 130;
    }
    if (e instanceof BenchError) {
      process.stderr.write(`bench: ${e.message}\n`);
      return e.exitCode;
    }
    process.stderr.write(`bench: failed: ${(e as Error)?.stack ?? String(e)}\n`);
    return 1;
  }
}

/** For a benchmark file run on its own: `--flag value` pairs, the same flags as the CLI. */
export async function runStandalone(bench: Benchmark, argv: string[]): Promise<void> {
  const raw: Record<string, string> = {};
  for (let i = 0; i < argv.length; i++) {
    const m = /^--([a-z]+)$/.exec(argv[i]!);
    if (!m || argv[i + 1] === undefined) {
      process.stderr.write(`bench: expected --flag value pairs, got ${JSON.stringify(argv[i])}\n`);
      process.exit(2);
    }
    raw[m[1]!] = argv[++i]!;
  }
  let o: RunOptions;
  try {
    o = parseRunOptions(bench.name, raw as RawOptions, { [bench.name]: bench });
  } catch (e) {
    process.stderr.write(`bench: ${(e as Error).message}\n`);
    process.exit(2);
  }
  process.exit(await runAndReport(bench, o));
}
