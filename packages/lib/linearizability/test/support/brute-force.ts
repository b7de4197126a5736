import type { Model, Operation } from '../../src/index.js';

/**
 * The definition of linearizability, executed literally: try every order of
 * the operations that respects real time (a before b when a returns strictly
 * before b is called), letting each pending operation (return = Infinity)
 * either take effect somewhere after its call or not at all. No caching, no
 * entry lists, no partitioning: independent of the checker it validates.
 * Exponential; keep histories to a handful of operations.
 */
export function bruteForceLinearizable<S, I, O>(model: Model<S, I, O>, ops: readonly Operation<I, O>[]): boolean {
  const placed = ops.map(() => false);
  const pending = ops.map((op) => op.return === Infinity);
  const canGoNext = (candidate: number): boolean =>
    ops.every((other, index) => index === candidate || placed[index] || !(other.return < ops[candidate]!.call));
  const search = (state: S, definiteLeft: number): boolean => {
    if (definiteLeft === 0) return true; // any pending operation left over simply did not happen
    for (let index = 0; index < ops.length; index++) {
      if (placed[index] || !canGoNext(index)) continue;
      const op = ops[index]!;
      const result = model.step(state, op.input, pending[index] ? undefined : op.output);
      if (!result.ok) continue;
      placed[index] = true;
      const found = search(result.state, definiteLeft - (pending[index] ? 0 : 1));
      placed[index] = false;
      if (found) return true;
    }
    return false;
  };
  return search(model.init(), pending.filter((isPending) => !isPending).length);
}

/**
 * Checks that `order` (indexes into `ops`) is a valid linearization: every
 * non-pending operation exactly once, real-time order respected, every step
 * accepted by the model. Returns a reason when it is not.
 */
export function linearizationProblem<S, I, O>(
  model: Model<S, I, O>,
  ops: readonly Operation<I, O>[],
  order: readonly number[],
  complete: boolean,
): string | undefined {
  if (new Set(order).size !== order.length) return 'an operation appears twice';
  const inOrder = new Set(order);
  if (complete) {
    const missing = ops.findIndex((op, index) => op.return !== Infinity && !inOrder.has(index));
    if (missing >= 0) return `operation ${missing} is missing`;
  }
  let state = model.init();
  for (let position = 0; position < order.length; position++) {
    const index = order[position]!;
    const op = ops[index]!;
    // Nothing placed later may have returned before this one was called.
    for (const later of order.slice(position + 1)) {
      if (ops[later]!.return < op.call)
        return `operation ${later} returned before ${index} was called but comes after it`;
    }
    // Nothing left out (for a prefix) may have returned before this one was called either.
    if (!complete) {
      const skipped = ops.findIndex((other, otherIndex) => !inOrder.has(otherIndex) && other.return < op.call);
      if (skipped >= 0) return `operation ${skipped} returned before ${index} was called but is not in the prefix`;
    }
    const result = model.step(state, op.input, op.return === Infinity ? undefined : op.output);
    if (!result.ok) return `the model rejects operation ${index} at position ${position}`;
    state = result.state;
  }
  return undefined;
}
