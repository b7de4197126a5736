import type { Operation } from './history.js';
import type { Model, StepResult } from './model.js';

/**
 * A specification whose step may lead to several states (or none, meaning
 * the output is illegal).
 */
export interface NondeterministicModel<S, I, O> {
  init(): readonly S[];
  step(state: S, input: I, output: O | undefined): readonly S[];
  key(state: S): string;
  partition?(ops: readonly Operation<I, O>[]): Operation<I, O>[][];
  describeOperation?(input: I, output: O | undefined): string;
  describeState?(state: S): string;
}

/**
 * The powerset construction: a deterministic model whose state is the set of
 * states the nondeterministic one could be in, deduplicated and sorted by key
 * so that equal sets get equal keys.
 */
export function fromNondeterministic<S, I, O>(model: NondeterministicModel<S, I, O>): Model<readonly S[], I, O> {
  const canonical = (states: Iterable<S>): readonly S[] => {
    const byKey = new Map<string, S>();
    for (const state of states) {
      const key = model.key(state);
      if (!byKey.has(key)) byKey.set(key, state);
    }
    return [...byKey.keys()].sort().map((key) => byKey.get(key) as S);
  };
  const deterministic: Model<readonly S[], I, O> = {
    init: () => canonical(model.init()),
    step(states, input, output): StepResult<readonly S[]> {
      const next = canonical(states.flatMap((state) => model.step(state, input, output)));
      return { ok: next.length > 0, state: next };
    },
    key: (states) => JSON.stringify(states.map((state) => model.key(state))),
    describeState: (states) =>
      `{${states.map((state) => (model.describeState ? model.describeState(state) : model.key(state))).join(', ')}}`,
  };
  if (model.partition) deterministic.partition = (ops) => model.partition!(ops);
  if (model.describeOperation)
    deterministic.describeOperation = (input, output) => model.describeOperation!(input, output);
  return deterministic;
}
