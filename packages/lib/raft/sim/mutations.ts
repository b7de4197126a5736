/**
 * The mutation check: proves the simulator catches real Raft bugs. For each deliberate bug (a core mutation
 * flag from CoreOptions.mutations, or a sim-side one from SimMutations), run seeds until one fails, and report
 * which invariant caught it. A mutation no seed catches within the budget "survives": exit 1.
 *
 *   node packages/lib/raft/dist/sim/mutations.js [--max-seeds 300] [--from 1] [--only name,name] [--min-groups 2]
 *
 * `--min-groups N` tries only seeds with at least N groups per process (e.g. to show that a quiescence bug is
 * caught in multi-group runs too).
 *
 * A failure reported as "exception" is one of the core's own assertions firing; the search goes on for a
 * simulator invariant to catch it too, and settles for the assertion if none does within the budget.
 * A seed that also fails without the mutation proves nothing about the mutation and is skipped.
 */
import { configFromSeed, type SimConfig } from './config.js';
import { loadHistoryChecker } from './linearizability.js';
import { MUTATIONS, mutationPatch } from './mutation-list.js';
import { runSeed } from './report.js';

interface Args {
  maxSeeds: number;
  from: number;
  only: string[] | null;
  minGroups: number;
}

function parseArgs(argv: string[]): Args {
  const args: Args = { maxSeeds: 300, from: 1, only: null, minGroups: 1 };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    const v = argv[++i];
    if (v === undefined) throw new Error(`${a} needs a value`);
    if (a === '--max-seeds') args.maxSeeds = Number(v);
    else if (a === '--from') args.from = Number(v);
    else if (a === '--only') args.only = v.split(',');
    else if (a === '--min-groups') args.minGroups = Number(v);
    else throw new Error(`unknown argument ${a}`);
  }
  return args;
}

async function main(): Promise<number> {
  const args = parseArgs(process.argv.slice(2));
  const checker = await loadHistoryChecker();
  if (checker === null) console.log('note: @raftkit/linearizability is not built; linearizability is not checked');
  const survivors: string[] = [];
  const baseline = new Map<number, boolean>();
  const passesUnmutated = (seed: number): boolean => {
    let ok = baseline.get(seed);
    if (ok === undefined) {
      ok = runSeed(seed, checker).ok;
      baseline.set(seed, ok);
    }
    return ok;
  };
  for (const m of MUTATIONS) {
    if (args.only !== null && !args.only.includes(m.name)) continue;
    const patch: Partial<SimConfig> = mutationPatch(m);
    const started = performance.now();
    let assertion: { seed: number; message: string } | null = null;
    let caught: { seed: number; invariant: string; message: string } | null = null;
    let tried = 0;
    let masked = 0;
    for (let seed = args.from; seed < args.from + args.maxSeeds; seed++) {
      if ((configFromSeed(seed).groups ?? 1) < args.minGroups) continue;
      tried++;
      const o = runSeed(seed, checker, patch);
      if (o.ok) continue;
      if (!passesUnmutated(seed)) {
        masked++;
        continue;
      }
      if (o.invariant === 'exception') {
        assertion ??= { seed, message: o.message ?? '' };
        continue;
      }
      caught = { seed, invariant: o.invariant!, message: o.message ?? '' };
      break;
    }
    const secs = `${((performance.now() - started) / 1000).toFixed(1)}s${masked > 0 ? `, ${masked} seeds skipped: they fail unmutated too` : ''}`;
    if (caught !== null) {
      console.log(
        `${m.name.padEnd(26)} CAUGHT by ${caught.invariant} at seed ${caught.seed} (${tried} seeds, ${secs}): ${caught.message.split('\n')[0]}`,
      );
    } else if (assertion !== null) {
      console.log(
        `${m.name.padEnd(26)} CAUGHT by a core assertion at seed ${assertion.seed} (${tried} seeds, ${secs}): ${assertion.message.split('\n')[0]}`,
      );
    } else {
      console.log(`${m.name.padEnd(26)} SURVIVED ${tried} seeds (${secs}): ${m.what}`);
      survivors.push(m.name);
    }
  }
  if (survivors.length > 0) {
    console.log(`\n${survivors.length} mutation(s) survived: ${survivors.join(', ')}`);
    return 1;
  }
  console.log('\nevery mutation was caught');
  return 0;
}

main().then(
  (code) => process.exit(code),
  (err: Error) => {
    console.error(err.stack ?? String(err));
    process.exit(2);
  },
);
