import { createBudget, type Budget } from './budget.js';
import { eventsToOperations, validateOperations, type HistoryEvent, type Operation } from './history.js';
import type { Model } from './model.js';
import { PartitionSearch, type Verdict } from './search.js';

export type { Verdict } from './search.js';

/** Search steps a partition runs before the next one gets its turn. */
const SLICE_STEPS = 4096;

export interface CheckOptions {
  /**
   * Wall-clock budget for the whole check, in the units of `now` (ms by
   * default). When it runs out the undecided partitions report 'unknown'.
   */
  readonly timeoutMs?: number;
  /** The clock used for `timeoutMs`. Defaults to `performance.now`. Only read when `timeoutMs` is set. */
  readonly now?: () => number;
  /**
   * Deterministic budget: the maximum number of search steps (model steps
   * plus backtracks) over all partitions. Use this in simulations, where the
   * verdict must not depend on machine speed.
   */
  readonly maxSteps?: number;
  /**
   * Stop as soon as one partition is illegal; the undecided ones report
   * 'unknown'. Default true: one illegal partition settles the verdict, and
   * other partitions of an illegal history can take exponentially long. Set
   * false to get every partition's own verdict (budget permitting).
   */
  readonly stopOnIllegal?: boolean;
}

export interface PartitionResult<I, O> {
  readonly result: Verdict;
  /** This partition's operations; every index below refers to this array. */
  readonly operations: readonly Operation<I, O>[];
  /**
   * For 'ok': the order in which the operations can be linearized. Pending
   * operations missing from it are those that need not have taken effect.
   */
  readonly linearization?: readonly number[];
  /**
   * For 'illegal' / 'unknown': for each operation, the longest linearizable
   * prefix found that contains it, deduplicated, longest first. For 'ok':
   * the single complete linearization.
   */
  readonly partialLinearizations: readonly (readonly number[])[];
  /** The longest linearizable prefix found (the whole linearization for 'ok'). */
  readonly longestPrefix: readonly number[];
  /**
   * For 'illegal': the operation whose return was reached, after the longest
   * prefix, without any way to linearize it: the first observation that
   * contradicts that prefix.
   */
  readonly blockedOperation?: number;
  /** Search steps spent here (0 if the partition was never searched). */
  readonly steps: number;
  /** Configurations memoised while searching (a proxy for memory use). */
  readonly cacheSize: number;
}

export interface CheckResult<I, O> {
  /** 'illegal' if any partition is; otherwise 'unknown' if any is; otherwise 'ok'. */
  readonly result: Verdict;
  readonly partitions: readonly PartitionResult<I, O>[];
  readonly steps: number;
}

/**
 * Checks a history of operations against a model. Pure and deterministic
 * except for the optional wall-clock budget: with `maxSteps` only (or no
 * budget) the same input always gives the same result.
 *
 * Never answers wrongly: 'ok' and 'illegal' are proofs; 'unknown' means the
 * budget ran out first.
 */
export function check<S, I, O>(
  model: Model<S, I, O>,
  history: readonly Operation<I, O>[],
  options: CheckOptions = {},
): CheckResult<I, O> {
  validateOperations(history);
  const partitions = model.partition ? model.partition(history) : [history.slice()];
  const budget = budgetFor(options);
  const stopOnIllegal = options.stopOnIllegal ?? true;
  const searches = partitions.map((operations) => new PartitionSearch(model, operations));
  // Round-robin in fixed slices, like Porcupine's goroutine per partition but
  // deterministic: an easy illegal partition is found without first
  // finishing a hard one that happens to come before it.
  let undecided = searches.filter((search) => !search.decided);
  let sawIllegal = false;
  while (undecided.length > 0 && !budget.exhausted && !(stopOnIllegal && sawIllegal)) {
    for (const search of undecided) {
      if (search.advance(budget, SLICE_STEPS) === 'illegal') sawIllegal = true;
      if (budget.exhausted || (stopOnIllegal && sawIllegal)) break;
    }
    undecided = undecided.filter((search) => !search.decided);
  }
  const results = searches.map((search, index): PartitionResult<I, O> => {
    const { verdict, ...details } = search.outcome();
    return { result: verdict, operations: partitions[index]!, ...details };
  });
  return { result: overallVerdict(results), partitions: results, steps: budget.stepsUsed };
}

/** {@link check} for a Jepsen-style event log (see {@link eventsToOperations}). */
export function checkEvents<S, I, O>(
  model: Model<S, I, O>,
  events: readonly HistoryEvent<I, O>[],
  options: CheckOptions = {},
): CheckResult<I, O> {
  return check(model, eventsToOperations(events), options);
}

function budgetFor(options: CheckOptions): Budget {
  const { timeoutMs, maxSteps } = options;
  if (timeoutMs === undefined) return createBudget(maxSteps === undefined ? {} : { maxSteps });
  const now = options.now ?? (() => performance.now());
  const deadline = now() + timeoutMs;
  return createBudget({ ...(maxSteps === undefined ? {} : { maxSteps }), deadlinePassed: () => now() >= deadline });
}

function overallVerdict(results: readonly PartitionResult<unknown, unknown>[]): Verdict {
  if (results.some((partition) => partition.result === 'illegal')) return 'illegal';
  if (results.some((partition) => partition.result === 'unknown')) return 'unknown';
  return 'ok';
}
