import type { Model } from '../model.js';

/** Values a register can hold: compared with ===, keyed with their type so 1 and "1" differ. */
export type RegisterValue = string | number | boolean | null;

export type RegisterInput<V extends RegisterValue> =
  | { readonly op: 'read' }
  | { readonly op: 'write'; readonly value: V };

/** A read's output carries `value`; a write's output is ignored. A missing value means "not observed". */
export interface RegisterOutput<V extends RegisterValue> {
  readonly value?: V;
}

export function registerValueKey(value: RegisterValue): string {
  return value === null ? 'null' : `${typeof value}:${String(value)}`;
}

/**
 * A read/write register starting at `initial`. `V` is not inferred from
 * `initial` (which would narrow it to a literal type): write
 * `registerModel<number | null>(null)`, or get `RegisterValue`.
 */
export function registerModel<V extends RegisterValue = RegisterValue>(
  initial: NoInfer<V>,
): Model<V, RegisterInput<V>, RegisterOutput<V>> {
  return {
    init: () => initial,
    step(state, input, output) {
      if (input.op === 'write') return { ok: true, state: input.value };
      return { ok: output?.value === undefined || output.value === state, state };
    },
    key: registerValueKey,
    describeOperation(input, output) {
      if (input.op === 'write') return `write(${JSON.stringify(input.value)})`;
      return `read() -> ${output?.value === undefined ? '?' : JSON.stringify(output.value)}`;
    },
    describeState: (state) => JSON.stringify(state),
  };
}
