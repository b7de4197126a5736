/**
 * Checking a history: linearizability against the workload's model (P-compositional WGL search from
 * @raftkit/linearizability, with a time budget that answers "unknown" rather than guess), plus the workload's
 * own checks. For a history that is not linearizable, the failing window: the earliest point of the history
 * at which it can no longer be linearized (found by bisecting on truncated histories), the operations that
 * cannot be placed there, and the model's state before them.
 */
import {
  check,
  checkEvents,
  describeResult,
  eventsToOperations,
  prepareHistory,
  type GenericEvent,
  type Model,
  type ModelName,
  type Operation,
  type PartitionResult,
} from '@raftkit/linearizability';
import type { Anomaly, CheckResult } from './workloads/workload.js';

interface WindowOp {
  process: number;
  /** ns; call of the operation. */
  call: number;
  /** ns; null when its outcome is unknown (or unknown as of the failure point). */
  return: number | null;
  description: string;
  /** in the window (cannot be linearized) or just before it (linearized, concurrent with it) */
  role: 'window' | 'context';
}

export interface FailureWindow {
  /** The partition (e.g. the key) that failed, as the model describes it. */
  partition: number;
  start: number;
  end: number;
  /** The model's state after the longest linearizable prefix: the state before the window. */
  stateBefore: string;
  prefixLength: number;
  blocked: string | null;
  ops: WindowOp[];
}

export interface LinearizabilityResult extends CheckResult {
  model: ModelName;
  ms: number;
  steps: number;
  partitions: number;
  /** Partitions per verdict. */
  verdicts: Record<string, number>;
  window?: FailureWindow;
  /** describeResult() of the checker, for non-ok results. */
  explanation?: string;
}

interface LinearizabilityOptions {
  timeoutMs: number;
  /** Budget for the window search (after an illegal verdict). */
  windowTimeoutMs?: number;
  casFailIsObservation?: boolean;
}

export function checkLinearizability(
  model: ModelName,
  events: readonly GenericEvent[],
  options: LinearizabilityOptions,
): LinearizabilityResult {
  const prepared = prepareHistory(model, events, {
    ...(options.casFailIsObservation ? { casFailIsObservation: true } : {}),
  });
  const started = performance.now();
  const result = checkEvents(prepared.model, prepared.events, { timeoutMs: options.timeoutMs });
  const ms = performance.now() - started;
  const verdicts: Record<string, number> = {};
  for (const p of result.partitions) verdicts[p.result] = (verdicts[p.result] ?? 0) + 1;
  const valid = result.result === 'ok' ? true : result.result === 'illegal' ? false : 'unknown';
  const base: LinearizabilityResult = {
    name: 'linearizable',
    valid,
    anomalies: [],
    model,
    ms,
    steps: result.steps,
    partitions: result.partitions.length,
    verdicts,
  };
  if (result.result === 'ok') return base;
  base.explanation = describeResult(prepared.model, result);
  if (result.result === 'unknown') {
    base.anomalies.push({
      check: 'linearizable',
      type: 'unknown',
      description: `the checker's budget (${options.timeoutMs} ms) ran out before ${verdicts.unknown ?? 0} partition(s) were decided`,
    });
    return base;
  }
  const index = result.partitions.findIndex((p) => p.result === 'illegal');
  const window = findWindow(prepared.model, result.partitions[index]!, index, options.windowTimeoutMs ?? 20_000);
  base.window = window;
  base.anomalies.push({
    check: 'linearizable',
    type: 'not-linearizable',
    description: `partition ${index}: after ${window.prefixLength} linearized operation(s), in state ${window.stateBefore}, ${window.blocked ?? 'the operations in the window'} cannot be linearized`,
    times: [window.start, window.end],
  });
  return base;
}

/** The history cut at `t`: operations invoked after it dropped, those returning after it unknown. */
function truncate<I, O>(ops: readonly Operation<I, O>[], t: number): Operation<I, O>[] {
  return ops
    .filter((op) => op.call <= t)
    .map((op) => (op.return <= t ? op : { ...op, output: undefined, return: Infinity }));
}

/** Linearized operations shown before the window (the last ones of the prefix). */
const CONTEXT_BEFORE = 4;

export function findWindow<S, I, O>(
  model: Model<S, I, O>,
  partition: PartitionResult<I, O>,
  partitionIndex: number,
  budgetMs: number,
): FailureWindow {
  const { partition: _ignored, ...whole } = model;
  const ops = partition.operations;
  const deadline = performance.now() + budgetMs;
  const returns = [...new Set(ops.filter((op) => op.return !== Infinity).map((op) => op.return))].sort((a, b) => a - b);
  // Smallest return time t such that the history truncated at t is already illegal (monotone in t).
  let lo = 0;
  let hi = returns.length - 1;
  let best: { t: number; result: PartitionResult<I, O>; ops: Operation<I, O>[] } | null = null;
  while (lo <= hi && performance.now() < deadline) {
    const mid = (lo + hi) >> 1;
    const cut = truncate(ops, returns[mid]!);
    const verdict = check(whole, cut, { timeoutMs: Math.max(1, deadline - performance.now()) });
    if (verdict.result === 'illegal') {
      best = { t: returns[mid]!, result: verdict.partitions[0]!, ops: cut };
      hi = mid - 1;
    } else lo = mid + 1;
  }
  const chosen = best ?? { t: returns[returns.length - 1] ?? 0, result: partition, ops: [...ops] };
  const { result, ops: cutOps, t } = chosen;
  const inPrefix = new Set(result.longestPrefix);
  let state = model.init();
  for (const i of result.longestPrefix) {
    const op = cutOps[i]!;
    state = model.step(state, op.input, op.return === Infinity ? undefined : op.output).state;
  }
  const describe = (op: Operation<I, O>): string => {
    const output = op.return === Infinity ? undefined : op.output;
    return model.describeOperation
      ? model.describeOperation(op.input, output)
      : JSON.stringify({ input: op.input, output });
  };
  const stuck = cutOps.map((op, i) => ({ op, i })).filter(({ op, i }) => !inPrefix.has(i) && op.return !== Infinity);
  const start = stuck.length > 0 ? Math.min(...stuck.map(({ op }) => op.call)) : t;
  const windowOps: WindowOp[] = [];
  // The last few linearized operations explain the state; the rest of the context overlaps the window.
  const lastLinearized = new Set(result.longestPrefix.slice(-CONTEXT_BEFORE));
  cutOps.forEach((op, i) => {
    const overlaps = op.call <= t && (op.return === Infinity || op.return >= start);
    if (!overlaps && !lastLinearized.has(i)) return;
    const role = inPrefix.has(i) ? 'context' : 'window';
    if (role === 'window' && op.return === Infinity && op.call < start) return;
    windowOps.push({
      process: op.clientId,
      call: op.call,
      return: op.return === Infinity ? null : op.return,
      description: describe(op),
      role,
    });
  });
  windowOps.sort((a, b) => a.call - b.call);
  const blockedIndex = result.blockedOperation;
  return {
    partition: partitionIndex,
    start,
    end: t,
    stateBefore: model.describeState ? model.describeState(state) : model.key(state),
    prefixLength: result.longestPrefix.length,
    blocked: blockedIndex === undefined ? null : describe(cutOps[blockedIndex]!),
    ops: windowOps,
  };
}

/** The overall verdict of several checks: false if any failed, else unknown if any is, else true. */
export function overall(checks: readonly { valid: boolean | 'unknown' }[]): boolean | 'unknown' {
  if (checks.some((c) => c.valid === false)) return false;
  if (checks.some((c) => c.valid === 'unknown')) return 'unknown';
  return true;
}

export function allAnomalies(checks: readonly CheckResult[]): Anomaly[] {
  return checks.flatMap((c) => c.anomalies);
}

export { eventsToOperations };
