import type { Model } from '../model.js';
import { registerValueKey, type RegisterValue } from './register.js';

export type CasRegisterInput<V extends RegisterValue> =
  | { readonly op: 'read' }
  | { readonly op: 'write'; readonly value: V }
  | { readonly op: 'cas'; readonly from: V; readonly to: V };

/**
 * `value` is a read's result; `ok` is a cas's result (true: swapped, false:
 * the current value was not `from`). A missing field means "not observed".
 */
export interface CasRegisterOutput<V extends RegisterValue> {
  readonly value?: V;
  readonly ok?: boolean;
}

/**
 * A register with compare-and-set, starting at `initial` (etcd's and
 * Jepsen's cas-register). `V` is not inferred from `initial` (which would
 * narrow it to a literal type): write `casRegisterModel<number | null>(null)`,
 * or get `RegisterValue`.
 */
export function casRegisterModel<V extends RegisterValue = RegisterValue>(
  initial: NoInfer<V>,
): Model<V, CasRegisterInput<V>, CasRegisterOutput<V>> {
  return {
    init: () => initial,
    step(state, input, output) {
      switch (input.op) {
        case 'read':
          return { ok: output?.value === undefined || output.value === state, state };
        case 'write':
          return { ok: true, state: input.value };
        case 'cas': {
          const matches = state === input.from;
          const ok = output?.ok === undefined || output.ok === matches;
          return { ok, state: matches ? input.to : state };
        }
      }
    },
    key: registerValueKey,
    describeOperation(input, output) {
      switch (input.op) {
        case 'read':
          return `read() -> ${output?.value === undefined ? '?' : JSON.stringify(output.value)}`;
        case 'write':
          return `write(${JSON.stringify(input.value)})`;
        case 'cas': {
          const result = output?.ok === undefined ? '?' : output.ok ? 'ok' : 'fail';
          return `cas(${JSON.stringify(input.from)}, ${JSON.stringify(input.to)}) -> ${result}`;
        }
      }
    },
    describeState: (state) => JSON.stringify(state),
  };
}
