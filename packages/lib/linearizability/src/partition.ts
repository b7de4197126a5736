import type { Operation } from './history.js';

/**
 * Builds a `Model.partition` that groups operations by a key of their input
 * (e.g. the map key they touch). Parts come out sorted by key and keep the
 * history's order inside, so results are deterministic.
 */
export function partitionByKey<I, O>(
  keyOf: (input: I) => string,
): (ops: readonly Operation<I, O>[]) => Operation<I, O>[][] {
  return (ops) => {
    const byKey = new Map<string, Operation<I, O>[]>();
    for (const op of ops) {
      const key = keyOf(op.input);
      const part = byKey.get(key);
      if (part === undefined) byKey.set(key, [op]);
      else part.push(op);
    }
    return [...byKey.keys()].sort().map((key) => byKey.get(key)!);
  };
}
