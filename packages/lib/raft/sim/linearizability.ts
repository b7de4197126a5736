/**
 * Thin adapter from the simulator's client history to packages/lib/linearizability: a key-value model with
 * put / get / compare-and-set, partitioned by key, checked with a deterministic step budget (the verdict must
 * not depend on machine speed).
 *
 * The package is loaded at run time so the simulator also builds where it is absent or not yet built; the
 * runner reports histories it could not check. (Once packages/lib/raft's tsconfig references ../linearizability,
 * this can become a static import.)
 */
import type { HistoryOp, KvInput, KvOutput } from './client.js';

export type HistoryVerdict = { result: 'ok' | 'illegal' | 'unknown'; steps: number; detail: string };
export type HistoryChecker = (history: readonly HistoryOp[]) => HistoryVerdict;

type KvState = ReadonlyMap<string, string | null>;

interface LinearizabilityModule {
  check(
    model: unknown,
    history: readonly HistoryOp[],
    options: { maxSteps?: number },
  ): { result: HistoryVerdict['result']; steps: number };
  describeResult(model: unknown, result: unknown): string;
  partitionByKey(keyOf: (input: KvInput) => string): (ops: readonly HistoryOp[]) => HistoryOp[][];
}

const PACKAGE = '@raftkit/linearizability';

function kvCasModel(lin: LinearizabilityModule) {
  const withValue = (state: KvState, key: string, value: string | null): KvState => new Map(state).set(key, value);
  return {
    init: (): KvState => new Map(),
    step(state: KvState, input: KvInput, output: KvOutput | undefined) {
      const current = state.get(input.key) ?? null;
      switch (input.f) {
        case 'get':
          return { ok: output === undefined || (output.f === 'get' && output.value === current), state };
        case 'put':
          return { ok: true, state: withValue(state, input.key, input.value) };
        case 'cas': {
          const matches = current === input.from;
          const ok = output === undefined || (output.f === 'cas' && output.ok === matches);
          return { ok, state: matches ? withValue(state, input.key, input.to) : state };
        }
      }
    },
    key: (state: KvState): string => JSON.stringify([...state].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))),
    partition: lin.partitionByKey((input) => input.key),
    describeOperation(input: KvInput, output: KvOutput | undefined): string {
      const out = output === undefined ? '?' : JSON.stringify(output);
      if (input.f === 'get') return `get(${input.key}) -> ${out}`;
      if (input.f === 'put') return `put(${input.key}, ${input.value})`;
      return `cas(${input.key}, ${JSON.stringify(input.from)} -> ${input.to}) -> ${out}`;
    },
    describeState: (state: KvState): string => JSON.stringify(Object.fromEntries(state)),
  };
}

/** The head and the tail of the checker's account: the verdict, and the last steps before the contradiction. */
function abridge(text: string, head = 3, tail = 14): string {
  const lines = text.split('\n');
  if (lines.length <= head + tail + 1) return text;
  return [...lines.slice(0, head), `        ... (${lines.length - head - tail} lines)`, ...lines.slice(-tail)].join(
    '\n',
  );
}

/** The checker, or null when packages/lib/linearizability cannot be loaded. */
export async function loadHistoryChecker(maxSteps = 5_000_000): Promise<HistoryChecker | null> {
  let lin: LinearizabilityModule;
  try {
    const specifier: string = PACKAGE;
    lin = (await import(specifier)) as LinearizabilityModule;
  } catch {
    return null;
  }
  const model = kvCasModel(lin);
  return (history) => {
    const result = lin.check(model, history, { maxSteps });
    return {
      result: result.result,
      steps: result.steps,
      detail: result.result === 'ok' ? '' : abridge(lin.describeResult(model, result)),
    };
  };
}
