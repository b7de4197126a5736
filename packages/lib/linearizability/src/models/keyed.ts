import type { Model } from '../model.js';
import { partitionByKey } from '../partition.js';

/** The state of a {@link keyedModel}: one inner state per key that has left its initial state. */
export type KeyedState<S> = ReadonlyMap<string, S>;

/**
 * Many independent copies of `inner`, one per key (Jepsen's "independent"
 * keys): each operation names its key through `keyOf` and acts on that key's
 * copy only. Partitioned by key (P-compositionality), so each part is checked
 * on its own; the state still covers every key, so the model stays correct
 * if the partitioning is removed.
 *
 * Keys whose state equals the initial one (by `inner.key`) are left out of
 * the map, so equivalent states get equal cache keys.
 */
export function keyedModel<S, I, O>(inner: Model<S, I, O>, keyOf: (input: I) => string): Model<KeyedState<S>, I, O> {
  const initialKey = inner.key(inner.init());
  const stateKeys = new WeakMap<KeyedState<S>, string>();
  const model: Model<KeyedState<S>, I, O> = {
    init: () => new Map(),
    step(state, input, output) {
      const key = keyOf(input);
      const current = state.has(key) ? state.get(key)! : inner.init();
      const result = inner.step(current, input, output);
      if (!result.ok) return { ok: false, state };
      if (result.state === current) return { ok: true, state };
      const next = new Map(state);
      if (inner.key(result.state) === initialKey) next.delete(key);
      else next.set(key, result.state);
      return { ok: true, state: next };
    },
    key(state) {
      let text = stateKeys.get(state);
      if (text === undefined) {
        text = '';
        for (const name of [...state.keys()].sort()) {
          const inside = inner.key(state.get(name)!);
          text += `${name.length}:${name}${inside.length}:${inside}`;
        }
        stateKeys.set(state, text);
      }
      return text;
    },
    partition: partitionByKey<I, O>(keyOf),
    describeOperation(input, output) {
      const text = inner.describeOperation ? inner.describeOperation(input, output) : JSON.stringify({ input, output });
      return `[${keyOf(input)}] ${text}`;
    },
    describeState(state) {
      const parts = [...state.keys()].sort().map((name) => {
        const inside = state.get(name)!;
        return `${JSON.stringify(name)}: ${inner.describeState ? inner.describeState(inside) : inner.key(inside)}`;
      });
      return `{${parts.join(', ')}}`;
    },
  };
  return model;
}
