/**
 * The simulator's command line.
 *
 *   node packages/lib/raft/dist/sim/run.js --seeds N --from S [--jobs J] [--verbose] [--trace]
 *
 * runs seeds S .. S+N-1 and ends with the line "P passed, F failed" (exit 1 on any failure). Each failing seed
 * is named with the invariant it broke and is replayed once more with tracing to show how it got there.
 * A seed replays exactly: `--seeds 1 --from S --trace` prints the whole run.
 *   --config FILE   run the SimConfig in a JSON file (what the property test prints when it finds a failure)
 *   --jobs J        run seeds in J worker threads (output stays in seed order)
 *   --mutation NAME plant one of the mutations of mutation-list.ts (to replay what mutations.js found)
 *   --set FIELD=JSON override one SimConfig field in every seed (e.g. --set maxInflightMessages=64)
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { configFromSeed, describeConfig, type SimConfig } from './config.js';
import { loadHistoryChecker } from './linearizability.js';
import { findMutation, mutationPatch } from './mutation-list.js';
import { explainFailure, runSeed, summarize, type SeedOutcome } from './report.js';
import { runSimulation } from './simulation.js';

interface Args {
  seeds: number;
  from: number;
  jobs: number;
  verbose: boolean;
  trace: boolean;
  config: string | null;
  patch: Partial<SimConfig>;
}

function parseArgs(argv: string[]): Args {
  const args: Args = { seeds: 100, from: 1, jobs: 1, verbose: false, trace: false, config: null, patch: {} };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    const value = (): string => {
      const v = argv[++i];
      if (v === undefined) throw new Error(`${a} needs a value`);
      return v;
    };
    if (a === '--seeds') args.seeds = Number(value());
    else if (a === '--from') args.from = Number(value());
    else if (a === '--jobs') args.jobs = Number(value());
    else if (a === '--verbose' || a === '-v') args.verbose = true;
    else if (a === '--trace') args.trace = true;
    else if (a === '--config') args.config = value();
    else if (a === '--mutation') args.patch = { ...args.patch, ...mutationPatch(findMutation(value())) };
    else if (a === '--set') {
      const [field, json] = value().split(/=(.*)/s);
      args.patch = { ...args.patch, [field!]: JSON.parse(json ?? '') };
    } else throw new Error(`unknown argument ${a}`);
  }
  if (!Number.isInteger(args.seeds) || args.seeds < 1) throw new Error('--seeds must be a positive integer');
  if (!Number.isInteger(args.from)) throw new Error('--from must be an integer');
  if (!Number.isInteger(args.jobs) || args.jobs < 1) throw new Error('--jobs must be a positive integer');
  return args;
}

const self = fileURLToPath(import.meta.url);

async function workerMain(): Promise<void> {
  const { seeds, patch } = workerData as { seeds: number[]; patch: Partial<SimConfig> };
  const checker = await loadHistoryChecker();
  for (const seed of seeds) parentPort!.postMessage(runSeed(seed, checker, patch));
}

async function runConfigFile(path: string, args: Args): Promise<number> {
  const config = JSON.parse(readFileSync(path, 'utf8')) as SimConfig;
  const checker = await loadHistoryChecker();
  const result = runSimulation(config, {
    checkHistory: checker,
    ...(args.trace ? { onTrace: (line: string) => console.log(line) } : {}),
  });
  console.log(`config ${path}: ${describeConfig(config)}`);
  console.log(`  ${summarize(result)}`);
  if (!result.ok) {
    console.log(`FAILED ${result.failure!.invariant}: ${result.failure!.message}`);
    if (!args.trace) console.log(explainFailure(config, checker));
  }
  console.log(result.ok ? '1 passed, 0 failed' : '0 passed, 1 failed');
  return result.ok ? 0 : 1;
}

async function main(): Promise<number> {
  const args = parseArgs(process.argv.slice(2));
  if (args.config !== null) return runConfigFile(args.config, args);
  const seeds = Array.from({ length: args.seeds }, (_, i) => args.from + i);
  const checker = await loadHistoryChecker();
  if (checker === null) console.log('note: @raftkit/linearizability is not built; client histories are not checked');
  const started = performance.now();
  const outcomes = new Map<number, SeedOutcome>();
  let next = 0; // next seed (position) to print
  const printReady = (): void => {
    while (next < seeds.length && outcomes.has(seeds[next]!)) {
      const o = outcomes.get(seeds[next]!)!;
      next++;
      if (!o.ok) console.log(`seed ${o.seed} FAILED [${o.invariant}] ${o.message?.split('\n')[0]}`);
      else if (args.verbose) console.log(`seed ${o.seed} ok (${o.ms.toFixed(0)}ms): ${o.summary}`);
    }
  };

  if (args.trace) {
    for (const seed of seeds) {
      const config = { ...configFromSeed(seed), ...args.patch };
      console.log(`seed ${seed}: ${describeConfig(config)}`);
      const t0 = performance.now();
      const r = runSimulation(config, { checkHistory: checker, onTrace: (line) => console.log(line) });
      outcomes.set(seed, {
        seed,
        ok: r.ok,
        summary: summarize(r),
        ms: performance.now() - t0,
        unchecked: false,
        ...(r.failure ? { invariant: r.failure.invariant, message: r.failure.message } : {}),
      });
      printReady();
    }
  } else if (args.jobs === 1) {
    for (const seed of seeds) {
      outcomes.set(seed, runSeed(seed, checker, args.patch));
      printReady();
    }
  } else {
    const groups: number[][] = Array.from({ length: Math.min(args.jobs, seeds.length) }, () => []);
    seeds.forEach((seed, i) => groups[i % groups.length]!.push(seed));
    await Promise.all(
      groups.map(
        (group) =>
          new Promise<void>((resolve, reject) => {
            const worker = new Worker(self, { workerData: { seeds: group, patch: args.patch } });
            worker.on('message', (o: SeedOutcome) => {
              outcomes.set(o.seed, o);
              printReady();
            });
            worker.on('error', reject);
            worker.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`worker exited with ${code}`))));
          }),
      ),
    );
  }
  const wall = (performance.now() - started) / 1000;
  const failed = [...outcomes.values()].filter((o) => !o.ok).sort((a, b) => a.seed - b.seed);
  const cpu = [...outcomes.values()].reduce((s, o) => s + o.ms, 0) / 1000;
  const unchecked = [...outcomes.values()].filter((o) => o.ok && o.unchecked).length;
  console.log(
    `${seeds.length} seeds in ${wall.toFixed(1)}s wall, ${cpu.toFixed(1)}s of runs (${((cpu / seeds.length) * 1000).toFixed(0)}ms per seed)` +
      (unchecked > 0 ? `; ${unchecked} histories not fully checked` : ''),
  );
  const mutationArg = process.argv
    .map((a, i, all) => (a === '--mutation' || a === '--set' ? ` ${a} ${all[i + 1]}` : ''))
    .join('');
  for (const o of failed) {
    console.log(
      `\nseed ${o.seed} broke ${o.invariant}. Replay: node packages/lib/raft/dist/sim/run.js --seeds 1 --from ${o.seed} --trace${mutationArg}`,
    );
    if (failed.indexOf(o) < 5) console.log(explainFailure({ ...configFromSeed(o.seed), ...args.patch }, checker));
  }
  console.log(`${seeds.length - failed.length} passed, ${failed.length} failed`);
  return failed.length > 0 ? 1 : 0;
}

if (isMainThread) {
  main().then(
    (code) => process.exit(code),
    (err: Error) => {
      console.error(err.stack ?? String(err));
      process.exit(2);
    },
  );
} else {
  void workerMain();
}
