import type { Model } from '../model.js';
import { partitionByKey } from '../partition.js';

/** Porcupine's key-value operations. `value` is the put / append argument; unused by get. */
export interface KvInput {
  readonly op: 'get' | 'put' | 'append';
  readonly key: string;
  readonly value?: string;
}

/** A get's result (a missing key reads as ""). Ignored for put and append. A missing value means "not observed". */
export interface KvOutput {
  readonly value?: string;
}

/**
 * The map's contents. Keys holding "" are left out, since they read the same
 * as missing keys: equal-behaving states then get equal cache keys.
 */
export type KvState = ReadonlyMap<string, string>;

/**
 * A string-valued map with get / put / append (append concatenates),
 * partitioned by key. The state covers every key, so the model stays correct
 * even if the partitioning is removed; with it, each part only ever holds one
 * key and states stay tiny.
 */
export const kvModel: Model<KvState, KvInput, KvOutput> = {
  init: () => new Map(),
  step(state, input, output) {
    const current = state.get(input.key) ?? '';
    switch (input.op) {
      case 'get':
        return { ok: output?.value === undefined || output.value === current, state };
      case 'put':
        return { ok: true, state: withValue(state, input.key, input.value ?? '') };
      case 'append':
        return { ok: true, state: withValue(state, input.key, current + (input.value ?? '')) };
    }
  },
  key: stateKey,
  partition: partitionByKey<KvInput, KvOutput>((input) => input.key),
  describeOperation(input, output) {
    if (input.op === 'get')
      return `get(${JSON.stringify(input.key)}) -> ${output?.value === undefined ? '?' : JSON.stringify(output.value)}`;
    return `${input.op}(${JSON.stringify(input.key)}, ${JSON.stringify(input.value ?? '')})`;
  },
  describeState: (state) => JSON.stringify(Object.fromEntries(state)),
};

/**
 * Length-prefixed entries in key order: unambiguous without escaping. Keys
 * are memoised per state object because a get keeps the same state and the
 * checker asks for its key at every step; the same string object also lets
 * the checker's intern map reuse the string's cached hash.
 */
const stateKeys = new WeakMap<KvState, string>();

function stateKey(state: KvState): string {
  let key = stateKeys.get(state);
  if (key === undefined) {
    key = '';
    for (const name of [...state.keys()].sort()) {
      const value = state.get(name)!;
      key += `${name.length}:${name}${value.length}:${value}`;
    }
    stateKeys.set(state, key);
  }
  return key;
}

function withValue(state: KvState, key: string, value: string): KvState {
  const next = new Map(state);
  if (value === '') next.delete(key);
  else next.set(key, value);
  return next;
}
