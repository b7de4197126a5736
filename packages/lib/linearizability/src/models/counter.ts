import type { Model } from '../model.js';

export type CounterInput = { readonly op: 'add'; readonly delta: number } | { readonly op: 'read' };

/** A read's output carries `value`; an add's output is ignored. A missing value means "not observed". */
export interface CounterOutput {
  readonly value?: number;
}

/** An integer counter starting at 0 with add(delta) and read. */
export const counterModel: Model<number, CounterInput, CounterOutput> = {
  init: () => 0,
  step(state, input, output) {
    if (input.op === 'add') return { ok: true, state: state + input.delta };
    return { ok: output?.value === undefined || output.value === state, state };
  },
  key: (state) => String(state),
  describeOperation(input, output) {
    if (input.op === 'add') return `add(${input.delta})`;
    return `read() -> ${output?.value === undefined ? '?' : output.value}`;
  },
  describeState: (state) => String(state),
};
