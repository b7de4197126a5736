import fc from 'fast-check';
import t from 'tap';
import { casRegisterModel, check, counterModel, kvModel, type Model, type Operation } from '../src/index.js';
import { bruteForceLinearizable, linearizationProblem } from './support/brute-force.js';
import { casRegisterHistories, counterHistories, kvHistories } from './support/generators.js';

/**
 * The fast checker must agree with the literal definition (brute force over
 * all real-time-respecting orders) on thousands of small histories, and its
 * evidence must hold up: an 'ok' comes with a valid linearization, an
 * 'illegal' with a valid linearizable prefix.
 */
function agreesWithBruteForce<S, I, O>(model: Model<S, I, O>) {
  const { partition: _partition, ...unpartitioned } = model;
  return (ops: Operation<I, O>[]): void => {
    const fast = check(model, ops);
    // Brute force sees the whole history at once: partitioning is checked too.
    const expected = bruteForceLinearizable(unpartitioned, ops);
    if (fast.result !== (expected ? 'ok' : 'illegal')) {
      throw new Error(`checker says ${fast.result}, brute force says ${expected ? 'ok' : 'illegal'}`);
    }
    for (const part of fast.partitions) {
      const complete = part.result === 'ok';
      const order = complete ? (part.linearization ?? []) : part.longestPrefix;
      const problem = linearizationProblem(unpartitioned, part.operations, order, complete);
      if (problem !== undefined)
        throw new Error(`bad ${complete ? 'linearization' : 'prefix'} ${JSON.stringify(order)}: ${problem}`);
    }
  };
}

const mustBeLinearizable =
  <S, I, O>(model: Model<S, I, O>) =>
  (ops: Operation<I, O>[]): void => {
    const fast = check(model, ops);
    if (fast.result !== 'ok') throw new Error(`simulated history judged ${fast.result}`);
  };

const cas = casRegisterModel<number>(0);
const casGen = casRegisterHistories();
const counterGen = counterHistories();
const kvGen = kvHistories();

t.test('cas-register: simulated histories are linearizable and both checkers agree', async (t) => {
  fc.assert(fc.property(casGen.simulated, mustBeLinearizable(cas)), { numRuns: 1000 });
  fc.assert(fc.property(casGen.simulated, agreesWithBruteForce(cas)), { numRuns: 2000 });
  t.pass('3000 histories');
});

t.test('cas-register: corrupted and garbage histories get the brute-force verdict', async (t) => {
  fc.assert(fc.property(casGen.corrupted, agreesWithBruteForce(cas)), { numRuns: 4000 });
  fc.assert(fc.property(casGen.garbage, agreesWithBruteForce(cas)), { numRuns: 2000 });
  t.pass('6000 histories');
});

t.test('counter: simulated and corrupted histories', async (t) => {
  fc.assert(fc.property(counterGen.simulated, agreesWithBruteForce(counterModel)), { numRuns: 1000 });
  fc.assert(fc.property(counterGen.corrupted, agreesWithBruteForce(counterModel)), { numRuns: 2000 });
  t.pass('3000 histories');
});

t.test('kv: partitioned checker agrees with unpartitioned brute force', async (t) => {
  fc.assert(fc.property(kvGen.simulated, agreesWithBruteForce(kvModel)), { numRuns: 1000 });
  fc.assert(fc.property(kvGen.corrupted, agreesWithBruteForce(kvModel)), { numRuns: 3000 });
  fc.assert(fc.property(kvGen.garbage, agreesWithBruteForce(kvModel)), { numRuns: 1000 });
  t.pass('5000 histories');
});

t.test('the generators produce both verdicts (so the agreement above means something)', async (t) => {
  const verdicts = { ok: 0, illegal: 0 };
  const pendingOps = { count: 0 };
  for (const ops of fc.sample(casGen.corrupted, { numRuns: 1000, seed: 42 })) {
    verdicts[bruteForceLinearizable(cas, ops) ? 'ok' : 'illegal']++;
    pendingOps.count += ops.filter((op) => op.return === Infinity).length;
  }
  t.ok(verdicts.ok > 100, `linearizable: ${verdicts.ok}`);
  t.ok(verdicts.illegal > 100, `not linearizable: ${verdicts.illegal}`);
  t.ok(pendingOps.count > 100, `pending operations: ${pendingOps.count}`);
});
