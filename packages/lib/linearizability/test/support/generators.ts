import fc from 'fast-check';
import type {
  CasRegisterInput,
  CasRegisterOutput,
  CounterInput,
  CounterOutput,
  KvInput,
  KvOutput,
  Operation,
} from '../../src/index.js';

/**
 * History generators for the property tests. Timestamps are small integers
 * so that equal call/return times (the tie rule) come up often.
 */

/** What happens to an operation's outcome in a simulated run. */
type Fate = 'completed' | 'pending-took-effect' | 'pending-no-effect';

interface Timing {
  readonly clientId: number;
  readonly call: number;
  readonly duration: number;
  /** Where in [call, return] it takes effect, in tenths of a time unit. */
  readonly effectOffset: number;
  readonly fate: Fate;
}

const timingArbitrary: fc.Arbitrary<Timing> = fc.record({
  clientId: fc.integer({ min: 0, max: 3 }),
  call: fc.integer({ min: 0, max: 12 }),
  duration: fc.integer({ min: 0, max: 5 }),
  effectOffset: fc.integer({ min: 0, max: 50 }),
  fate: fc.constantFrom<Fate>(
    'completed',
    'completed',
    'completed',
    'completed',
    'pending-took-effect',
    'pending-no-effect',
  ),
});

/**
 * A real sequential object, written independently of the models under test:
 * applies one input and says what the client observes.
 */
type Apply<S, I, O> = (state: S, input: I) => readonly [S, O];

/**
 * Runs the operations against a real sequential object, each taking effect
 * at one instant inside its interval (pending ones at any instant after
 * their call, or never), and records what clients would observe. The result
 * is linearizable by construction.
 */
export function simulate<S, I, O>(
  initial: S,
  specs: readonly { readonly timing: Timing; readonly input: I }[],
  apply: Apply<S, I, O>,
): Operation<I, O>[] {
  const effectTimes = specs.map(({ timing }) => {
    const span = timing.fate === 'completed' ? timing.duration * 10 : 100;
    return timing.call * 10 + Math.min(timing.effectOffset, span);
  });
  const order = specs.map((_, index) => index).sort((a, b) => effectTimes[a]! - effectTimes[b]! || a - b);
  const outputs: (O | undefined)[] = specs.map(() => undefined);
  let state = initial;
  for (const index of order) {
    const { timing, input } = specs[index]!;
    if (timing.fate === 'pending-no-effect') continue;
    [state, outputs[index]] = apply(state, input);
  }
  return specs.map(({ timing, input }, index) => ({
    clientId: timing.clientId,
    input,
    call: timing.call,
    output: timing.fate === 'completed' ? outputs[index] : undefined,
    return: timing.fate === 'completed' ? timing.call + timing.duration : Infinity,
  }));
}

/**
 * Changes what one completed operation observed (`perturb` returns
 * undefined for operations whose output carries nothing, like writes). The
 * result may or may not still be linearizable.
 */
function corrupt<I, O>(
  ops: Operation<I, O>[],
  which: number,
  perturb: (op: Operation<I, O>) => O | undefined,
): Operation<I, O>[] {
  const candidates = ops.flatMap((op, index) => (op.return !== Infinity && perturb(op) !== undefined ? [index] : []));
  if (candidates.length === 0) return ops;
  const target = candidates[which % candidates.length]!;
  return ops.map((op, index) => (index === target ? { ...op, output: perturb(op) } : op));
}

const maxOps = 8;
const minCorruptedOps = 3;

// ---- CAS register over {0, 1, 2} --------------------------------------------

const registerValue = fc.integer({ min: 0, max: 2 });

const casInput: fc.Arbitrary<CasRegisterInput<number>> = fc.oneof(
  fc.constant({ op: 'read' as const }),
  registerValue.map((value) => ({ op: 'write' as const, value })),
  fc.record({ from: registerValue, to: registerValue }).map(({ from, to }) => ({ op: 'cas' as const, from, to })),
);

/** Garbage outputs: a read value, a cas result, or nothing observed. */
const casOutput: fc.Arbitrary<CasRegisterOutput<number>> = fc.oneof(
  registerValue.map((value) => ({ value })),
  fc.boolean().map((ok) => ({ ok })),
  fc.constant({}),
);

const applyCas: Apply<number, CasRegisterInput<number>, CasRegisterOutput<number>> = (state, input) => {
  if (input.op === 'read') return [state, { value: state }];
  if (input.op === 'write') return [input.value, {}];
  return state === input.from ? [input.to, { ok: true }] : [state, { ok: false }];
};

export function casRegisterHistories() {
  const simulatedOf = (minLength: number) =>
    fc
      .array(fc.record({ timing: timingArbitrary, input: casInput }), { minLength, maxLength: maxOps })
      .map((specs) => simulate(0, specs, applyCas));
  const perturb = (shift: number) => (op: Operation<CasRegisterInput<number>, CasRegisterOutput<number>>) =>
    op.input.op === 'read'
      ? { value: ((op.output?.value ?? 0) + shift) % 3 }
      : op.input.op === 'cas'
        ? { ok: !op.output?.ok }
        : undefined;
  return {
    simulated: simulatedOf(0),
    /** Simulated, then one observation changed: a mix of linearizable and not. */
    corrupted: fc
      .tuple(simulatedOf(minCorruptedOps), fc.nat(), fc.integer({ min: 1, max: 2 }))
      .map(([ops, which, shift]) => corrupt(ops, which, perturb(shift))),
    garbage: garbage(casInput, casOutput),
  };
}

// ---- Counter -------------------------------------------------------------------

const counterInput: fc.Arbitrary<CounterInput> = fc.oneof(
  fc.constant({ op: 'read' as const }),
  fc.integer({ min: -1, max: 2 }).map((delta) => ({ op: 'add' as const, delta })),
);

const applyCounter: Apply<number, CounterInput, CounterOutput> = (state, input) =>
  input.op === 'read' ? [state, { value: state }] : [state + input.delta, {}];

export function counterHistories() {
  const simulatedOf = (minLength: number) =>
    fc
      .array(fc.record({ timing: timingArbitrary, input: counterInput }), { minLength, maxLength: maxOps })
      .map((specs) => simulate(0, specs, applyCounter));
  const perturb = (shift: number) => (op: Operation<CounterInput, CounterOutput>) =>
    op.input.op === 'read' ? { value: (op.output?.value ?? 0) + shift } : undefined;
  return {
    simulated: simulatedOf(0),
    corrupted: fc
      .tuple(simulatedOf(minCorruptedOps), fc.nat(), fc.constantFrom(-2, -1, 1, 2))
      .map(([ops, which, shift]) => corrupt(ops, which, perturb(shift))),
  };
}

// ---- Key-value map over keys {a, b} ---------------------------------------

const kvKey = fc.constantFrom('a', 'b');
const kvArgument = fc.constantFrom('x', 'y', '');

const kvInput: fc.Arbitrary<KvInput> = fc.oneof(
  kvKey.map((key) => ({ op: 'get' as const, key })),
  fc.record({ key: kvKey, value: kvArgument }).map(({ key, value }) => ({ op: 'put' as const, key, value })),
  fc.record({ key: kvKey, value: kvArgument }).map(({ key, value }) => ({ op: 'append' as const, key, value })),
);

const kvOutput: fc.Arbitrary<KvOutput> = fc.constantFrom('', 'x', 'y', 'xy', 'yx', 'xx').map((value) => ({ value }));

/** The real store: a plain object of strings (not the model's Map), copied on write. */
const applyKv: Apply<Readonly<Record<string, string>>, KvInput, KvOutput> = (state, input) => {
  const current = state[input.key] ?? '';
  if (input.op === 'get') return [state, { value: current }];
  const next = input.op === 'put' ? (input.value ?? '') : current + (input.value ?? '');
  return [{ ...state, [input.key]: next }, {}];
};

export function kvHistories() {
  const simulatedOf = (minLength: number) =>
    fc
      .array(fc.record({ timing: timingArbitrary, input: kvInput }), { minLength, maxLength: maxOps })
      .map((specs) => simulate({}, specs, applyKv));
  const perturb = (replacement: KvOutput) => (op: Operation<KvInput, KvOutput>) =>
    op.input.op === 'get' && op.output?.value !== replacement.value ? replacement : undefined;
  return {
    simulated: simulatedOf(0),
    corrupted: fc
      .tuple(simulatedOf(minCorruptedOps), fc.nat(), kvOutput)
      .map(([ops, which, replacement]) => corrupt(ops, which, perturb(replacement))),
    garbage: garbage(kvInput, kvOutput),
  };
}

// ---- Garbage: random everything ----------------------------------------------

/** Random inputs, outputs and intervals, some pending: almost never linearizable beyond a few ops. */
function garbage<I, O>(input: fc.Arbitrary<I>, output: fc.Arbitrary<O>): fc.Arbitrary<Operation<I, O>[]> {
  const op = fc
    .record({
      clientId: fc.integer({ min: 0, max: 3 }),
      input,
      output,
      call: fc.integer({ min: 0, max: 10 }),
      duration: fc.integer({ min: 0, max: 6 }),
      pending: fc.integer({ min: 0, max: 3 }).map((roll) => roll === 0),
    })
    .map(
      ({ clientId, input, output, call, duration, pending }): Operation<I, O> => ({
        clientId,
        input,
        call,
        output: pending ? undefined : output,
        return: pending ? Infinity : call + duration,
      }),
    );
  return fc.array(op, { maxLength: maxOps - 1 });
}
