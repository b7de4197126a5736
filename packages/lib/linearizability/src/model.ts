import type { Operation } from './history.js';

/** What applying one operation to a state produced. */
export interface StepResult<S> {
  /** False when the observed output is impossible from this state. */
  readonly ok: boolean;
  /** The state after the operation (ignored when `ok` is false). */
  readonly state: S;
}

/**
 * A sequential specification: a small pure object, never mutated by the
 * checker and expected never to mutate its states.
 *
 * Design choice: `step` is deterministic (one next state). A
 * nondeterministic specification is a deterministic one over *sets* of
 * states; {@link fromNondeterministic} in `nondeterministic.ts` builds that
 * for you. Keeping the core deterministic keeps the cache key a single state.
 */
export interface Model<S, I, O> {
  init(): S;
  /**
   * Applies `input` to `state` and says whether `output` is a legal result.
   * `output` is `undefined` for a pending operation (outcome unknown): accept
   * it and return the state as if it had taken effect.
   */
  step(state: S, input: I, output: O | undefined): StepResult<S>;
  /**
   * A string that is equal for two states exactly when they are equivalent.
   * The checker memoises (linearized set, key(state)) pairs, so a key that
   * merges different states would give wrong answers, and one that splits
   * equal states only costs speed.
   */
  key(state: S): string;
  /**
   * Splits a history into independent sub-histories (P-compositionality:
   * e.g. one per key of a map). Each part is checked on its own, from
   * `init()`. Omit it to check the history as one part.
   */
  partition?(ops: readonly Operation<I, O>[]): Operation<I, O>[][];
  describeOperation?(input: I, output: O | undefined): string;
  describeState?(state: S): string;
}
