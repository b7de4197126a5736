/**
 * `bench`: run a benchmark against our cluster and, with --vs, against a real peer on the same machine, one after
 * the other in one run. Writes <out>/<name>.json and <out>/<name>.svg, shows progress on stderr every second.
 *
 *   npx bench list
 *   npx bench kv --vs etcd [--duration 20] [--concurrency 64]
 *   npx bench raft [--duration 10]
 */
import { Command, Option } from 'commander';
import { DEFAULT_NOISY_FOREIGN_CORES } from './machine-load.js';
import { parseRunOptions, type RawOptions } from './options.js';
import { BenchError } from './procs.js';
import { benchmarks } from './registry.js';
import { runAndReport } from './runner.js';

function list(): void {
  const width = Math.max(...Object.keys(benchmarks).map((n) => n.length));
  for (const b of Object.values(benchmarks)) {
    const vs = b.peers.length > 0 ? `--vs ${b.peers.join('|')}` : 'no peer';
    const d = b.defaults;
    console.log(`${b.name.padEnd(width)}  ${b.description}`);
    console.log(
      `${''.padEnd(width)}  ${vs}; defaults: --duration ${d.durationS} --concurrency ${d.concurrency} --size ${d.size} --warmup ${d.warmupS}`,
    );
  }
}

export async function main(argv: string[]): Promise<number> {
  let status = 0;
  const program = new Command()
    .name('bench')
    .description('Benchmarks of our services, each beside a real peer on the same machine (or a target).')
    .argument('<name>', `a benchmark (${Object.keys(benchmarks).join(', ')}), or "list"`)
    .option('--vs <peer>', 'also run the same workload against this peer (e.g. etcd), after ours')
    .option('--duration <s>', 'seconds measured per side (default: per benchmark)')
    .option('--concurrency <n>', 'concurrent closed-loop clients (default: per benchmark)')
    .option('--warmup <s>', 'seconds of load before measuring, not counted (default: per benchmark)')
    .option('--out <dir>', 'where <name>.json and <name>.svg go (default: bench/results)')
    .addOption(
      new Option(
        '--routing <where>',
        'send requests to every member (followers forward) or to the leader only',
      ).choices(['all', 'leader']),
    )
    .option('--size <bytes>', 'payload bytes per operation (default: per benchmark)')
    .option('--keys <n>', 'number of distinct keys written (uniformly at random)')
    .option('--rounds <n>', 'alternate ours and the peer n times; each side reports its median round (default 1)')
    .option(
      '--rate <ops>',
      'lock: lock operations per second to aim at (default 10000); ratelimit: the open-loop rate (default half the saturation); feed: reads per second (default 2000)',
    )
    .option(
      '--sweep [rates]',
      'lock: run each rate (default 500,...,10000) side by side; report the highest rate with acquire p99 under 50 ms',
    )
    .option('--pin', 'ratelimit: load generator on core 0, the measured servers on core 1 (taskset)')
    .option(
      '--layout <where>',
      'ratelimit: embedded (counters in the check instance, default) or separate (store processes)',
    )
    .option(
      '--generators <n>',
      'ratelimit: generator threads for the open loop (default 1; 0: the bench process itself)',
    )
    .option(
      '--generator-gc <kind>',
      'ratelimit: parallel (V8 scavenge helper threads, default) or single (--no-parallel-scavenge) in the generator threads',
    )
    .option(
      '--pacer <kind>',
      'ratelimit, with --generators 0: tick (one timer releases what is due, default) or per-check (a timer per check)',
    )
    .option(
      '--scheduling <kind>',
      "ratelimit: realtime (the open loop's generator and measured servers at SCHED_FIFO 1 via chrt, default; ours also once shared, to compare) or shared",
    )
    .option('--snapshot-every <n>', "our members' entries between snapshots (diagnostic; default: the cluster's)")
    .option(
      '--noisy-cores <n>',
      `flag a side noisy when other processes used more than n cores meanwhile (default ${DEFAULT_NOISY_FOREIGN_CORES})`,
    )
    .option('--profile <dir>', 'CPU-profile our member processes; writes .cpuprofile files and a summary there')
    .showHelpAfterError()
    .action(async (name: string, raw: RawOptions) => {
      if (name === 'list') {
        list();
        return;
      }
      const o = parseRunOptions(name, raw, benchmarks);
      status = await runAndReport(benchmarks[name]!, o);
    });
  try {
    await program.parseAsync(argv);
  } catch (e) {
    if (e instanceof BenchError) {
      process.stderr.write(`bench: ${e.message}\n`);
      return 2;
    }
    throw e;
  }
  return status;
}
