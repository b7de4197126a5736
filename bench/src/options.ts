/** Checking a run's options against what the chosen benchmark accepts. Pure, so it is tested without running anything. */
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Benchmark, RunOptions } from './benchmark.js';
import { DEFAULT_NOISY_FOREIGN_CORES } from './machine-load.js';
import { BenchError } from './procs.js';

/** bench/results, wherever the command runs from. */
const DEFAULT_OUT = fileURLToPath(new URL('../../results/', import.meta.url));

/** Options as they arrive from the command line: strings, or undefined when absent. */
export interface RawOptions {
  vs?: string;
  duration?: string;
  warmup?: string;
  concurrency?: string;
  out?: string;
  routing?: string;
  size?: string;
  keys?: string;
  profile?: string;
  rounds?: string;
  snapshotEvery?: string;
  noisyCores?: string;
}

function number(
  text: string | undefined,
  flag: string,
  fallback: number,
  o: { min: number; max: number; integer?: boolean },
): number {
  if (text === undefined) return fallback;
  const n = Number(text);
  if (text.trim() === '' || !Number.isFinite(n) || (o.integer && !Number.isInteger(n)) || n < o.min || n > o.max) {
    throw new BenchError(
      `${flag} must be ${o.integer ? 'an integer' : 'a number'} from ${o.min} to ${o.max}, got ${JSON.stringify(text)}`,
    );
  }
  return n;
}

export function parseRunOptions(name: string, raw: RawOptions, benchmarks: Record<string, Benchmark>): RunOptions {
  const bench = benchmarks[name];
  if (bench === undefined) {
    throw new BenchError(
      `unknown benchmark ${JSON.stringify(name)}; known: ${Object.keys(benchmarks).join(', ')} (see: bench list)`,
    );
  }
  let vs: string | null = null;
  if (raw.vs !== undefined) {
    if (bench.peers.length === 0) {
      const target = bench.target
        ? ` (it is measured against a target of ${bench.target.ops_per_sec.toLocaleString('en-US')} ops/s instead)`
        : '';
      throw new BenchError(`benchmark ${name} has no peer to run --vs${target}`);
    }
    if (!bench.peers.includes(raw.vs))
      throw new BenchError(`benchmark ${name} runs --vs ${bench.peers.join(' or ')}, not ${JSON.stringify(raw.vs)}`);
    vs = raw.vs;
  }
  const routing = raw.routing ?? 'all';
  if (routing !== 'all' && routing !== 'leader')
    throw new BenchError(`--routing must be all or leader, got ${JSON.stringify(routing)}`);
  return {
    name,
    vs,
    durationS: number(raw.duration, '--duration', bench.defaults.durationS, { min: 1, max: 3600 }),
    warmupS: number(raw.warmup, '--warmup', bench.defaults.warmupS, { min: 0, max: 600 }),
    concurrency: number(raw.concurrency, '--concurrency', bench.defaults.concurrency, {
      min: 1,
      max: 10_000,
      integer: true,
    }),
    out: resolve(raw.out ?? DEFAULT_OUT),
    routing,
    size: number(raw.size, '--size', bench.defaults.size, { min: 1, max: 1 << 20, integer: true }),
    keys: number(raw.keys, '--keys', 100_000, { min: 1, max: 1e9, integer: true }),
    snapshotEvery:
      raw.snapshotEvery === undefined
        ? null
        : number(raw.snapshotEvery, '--snapshot-every', 0, { min: 1, max: 1e8, integer: true }),
    rounds: number(raw.rounds, '--rounds', 1, { min: 1, max: 9, integer: true }),
    profileDir: raw.profile === undefined ? null : resolve(raw.profile),
    noisyCores: number(raw.noisyCores, '--noisy-cores', DEFAULT_NOISY_FOREIGN_CORES, { min: 0, max: 1024 }),
  };
}
