/**
 * fast-check drives the simulator: it generates whole fault schedules (cluster shape, network and disk
 * behaviour, flow control, and a list of timed faults), runs each one, and on a failure shrinks the schedule to
 * a small one that still fails. A failing schedule is printed as JSON and saved, to replay with
 * `node packages/lib/raft/dist/sim/run.js --config FILE --trace`.
 *
 * SIM_PROPERTY_RUNS (default 30) and SIM_PROPERTY_SEED (default fixed) tune the search.
 */
import fc from 'fast-check';
import { writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import type { Fault, PartitionShape, SimConfig } from '../sim/config.js';
import { loadHistoryChecker } from '../sim/linearizability.js';
import { runSimulation } from '../sim/simulation.js';

const FAULT_WINDOW = 3000;
const at = fc.integer({ min: 0, max: FAULT_WINDOW });
const pick = fc.double({ min: 0, max: 0.999, noNaN: true });
const shapes: PartitionShape[] = ['halves', 'oneway', 'bridge', 'isolateLeader'];

const fault: fc.Arbitrary<Fault> = fc.oneof(
  fc.record({
    kind: fc.constant('partition' as const),
    at,
    shape: fc.constantFrom(...shapes),
    duration: fc.integer({ min: 20, max: 1500 }),
    pick,
  }),
  fc.record({
    kind: fc.constant('crash' as const),
    at,
    target: fc.constantFrom('leader' as const, 'any' as const),
    downtime: fc.integer({ min: 1, max: 1000 }),
    pick,
  }),
  fc.record({
    kind: fc.constant('slowDisk' as const),
    at,
    duration: fc.integer({ min: 10, max: 1500 }),
    latency: fc.integer({ min: 1, max: 100 }),
    pick,
  }),
  fc.record({
    kind: fc.constant('netStorm' as const),
    at,
    duration: fc.integer({ min: 10, max: 1000 }),
    drop: fc.double({ min: 0, max: 0.6, noNaN: true }),
    duplicate: fc.double({ min: 0, max: 0.3, noNaN: true }),
    maxDelay: fc.integer({ min: 1, max: 80 }),
  }),
  fc.record({ kind: fc.constant('transfer' as const), at, pick }),
  fc.record({
    kind: fc.constant('churn' as const),
    at,
    duration: fc.integer({ min: 50, max: 2000 }),
    maxLife: fc.integer({ min: 0, max: 40 }),
    downtime: fc.integer({ min: 10, max: 500 }),
  }),
  fc.record({
    kind: fc.constant('powerLoss' as const),
    at,
    duration: fc.integer({ min: 50, max: 2000 }),
    every: fc.integer({ min: 5, max: 300 }),
    downtime: fc.integer({ min: 1, max: 500 }),
  }),
  fc.record({ kind: fc.constant('addMember' as const), at }),
  fc.record({ kind: fc.constant('removeMember' as const), at, pick }),
  fc.record({ kind: fc.constant('readdMember' as const), at, pick }),
);

const configFields = {
  seed: fc.nat(),
  clusterSize: fc.constantFrom(3, 5),
  clients: fc.integer({ min: 1, max: 5 }),
  keys: fc.integer({ min: 1, max: 4 }),
  snapshotEvery: fc.integer({ min: 5, max: 100 }),
  tickSkew: fc.double({ min: 0, max: 0.25, noNaN: true }),
  heartbeatTicks: fc.integer({ min: 1, max: 4 }),
  preVote: fc.boolean(),
  checkQuorum: fc.boolean(),
  maxMessageBytes: fc.constantFrom(1, 256, 4096, 1 << 20),
  maxInflightMessages: fc.constantFrom(1, 2, 8, 64),
  drop: fc.double({ min: 0, max: 0.1, noNaN: true }),
  duplicate: fc.double({ min: 0, max: 0.05, noNaN: true }),
  maxDelay: fc.integer({ min: 1, max: 20 }),
  syncMax: fc.double({ min: 0.3, max: 5, noNaN: true }),
  snapshotChunk: fc.constantFrom(64, 1024, 8192),
  faults: fc.array(fault, { maxLength: 10 }),
  quiesceTicks: fc.constantFrom(0, 0, 2, 5),
  // Several groups per process in a quarter of the schedules (membership faults are then skipped).
  groups: fc.constantFrom(1, 1, 1, 3),
};

/**
 * The schedule arbitrary. With `scheduleOnly`, only the fault list shrinks: the scalar settings stay as generated,
 * which keeps shrinking a planted bug's counterexample to some hundred runs instead of a few thousand (it is the
 * fault list the assertion is about).
 */
function configArbitrary(scheduleOnly: boolean): fc.Arbitrary<SimConfig> {
  const fields = scheduleOnly
    ? (Object.fromEntries(
        Object.entries(configFields).map(([k, a]) => [k, k === 'faults' ? a : fc.noShrink(a as fc.Arbitrary<unknown>)]),
      ) as unknown as typeof configFields)
    : configFields;
  return fc.record(fields).map(
    (r): SimConfig => ({
      ...r,
      faults: [...r.faults].sort((a, b) => a.at - b.at),
      faultMs: FAULT_WINDOW,
      livenessMs: 6000,
      tickMs: 10,
      electionTicks: 10,
      leaseReads: false,
      minDelay: Math.min(0.5, r.maxDelay),
      syncMin: 0.2,
      clientTimeoutMs: 250,
      clientMaxAttempts: 4,
      thinkMs: 10,
    }),
  );
}

const config = configArbitrary(false);

const runs = Number(process.env['SIM_PROPERTY_RUNS'] ?? 30);
const seed = Number(process.env['SIM_PROPERTY_SEED'] ?? 20251121);

t.test('every generated fault schedule keeps the invariants, stays live and linearizable', async (t) => {
  const checker = await loadHistoryChecker();
  const result = fc.check(
    fc.property(config, (c) => {
      const r = runSimulation(c, { checkHistory: checker });
      if (!r.ok) throw new Error(`${r.failure!.invariant}: ${r.failure!.message}`);
    }),
    { numRuns: runs, seed, endOnFailure: false },
  );
  if (result.failed) {
    const file = join(tmpdir(), `sim-counterexample-${seed}.json`);
    const counterexample = result.counterexample![0];
    writeFileSync(file, JSON.stringify(counterexample, null, 2));
    t.fail(
      `fast-check found a failing schedule (shrunk ${result.numShrinks} times): ${String(result.errorInstance)}\n` +
        `saved to ${file}; replay: node packages/lib/raft/dist/sim/run.js --config ${file} --trace\n${JSON.stringify(counterexample)}`,
    );
  } else {
    t.pass(`${result.numRuns} schedules passed`);
  }
});

t.test('fast-check finds a planted bug and shrinks its schedule', async (t) => {
  // The sim-side mutation noSessionDedup applies a retried command twice: a schedule that makes a client retry
  // a write catches it; shrinking should strip the schedule down to a few faults.
  const mutated = configArbitrary(true).map((c) => ({ ...c, simMutations: { noSessionDedup: true } }));
  const result = fc.check(
    fc.property(mutated, (c) => runSimulation(c).ok),
    { numRuns: 200, seed },
  );
  t.ok(result.failed, 'the planted bug is found');
  if (result.failed) {
    const shrunk = result.counterexample![0];
    t.ok(shrunk.faults.length <= 3, `shrunk to ${shrunk.faults.length} fault(s) after ${result.numShrinks} shrinks`);
    const again = runSimulation(shrunk);
    t.equal(again.failure?.invariant, 'exactly-once', 'and the shrunk schedule fails the same way when replayed');
  }
});
