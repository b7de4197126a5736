import type { CheckResult, PartitionResult } from './checker.js';
import type { Operation } from './history.js';
import type { Model } from './model.js';

/**
 * A human-readable account of a check, for test failures and logs: the
 * verdict of each non-ok partition, its longest linearizable prefix with the
 * model state after each step, and the operation that could not follow it.
 */
export function describeResult<S, I, O>(model: Model<S, I, O>, result: CheckResult<I, O>): string {
  const lines = [`result: ${result.result} (${result.partitions.length} partition(s), ${result.steps} steps)`];
  result.partitions.forEach((partition, index) => {
    if (partition.result === 'ok') return;
    lines.push(`partition ${index}: ${partition.result}, ${partition.operations.length} operation(s)`);
    lines.push(...describePartition(model, partition).map((line) => `  ${line}`));
  });
  return lines.join('\n');
}

function describePartition<S, I, O>(model: Model<S, I, O>, partition: PartitionResult<I, O>): string[] {
  const lines: string[] = [];
  if (partition.steps === 0) return ['not searched (budget spent or stopped early)'];
  lines.push(`longest linearizable prefix (${partition.longestPrefix.length} operation(s)):`);
  let state = model.init();
  for (const index of partition.longestPrefix) {
    const op = partition.operations[index]!;
    state = model.step(state, op.input, op.return === Infinity ? undefined : op.output).state;
    lines.push(`  ${describeOperation(model, op)}  => ${describeState(model, state)}`);
  }
  if (partition.blockedOperation !== undefined) {
    const op = partition.operations[partition.blockedOperation]!;
    lines.push(`then cannot linearize: ${describeOperation(model, op)}`);
  }
  return lines;
}

function describeOperation<S, I, O>(model: Model<S, I, O>, op: Operation<I, O>): string {
  const output = op.return === Infinity ? undefined : op.output;
  const text = model.describeOperation
    ? model.describeOperation(op.input, output)
    : JSON.stringify({ input: op.input, output });
  const end = op.return === Infinity ? '∞' : String(op.return);
  return `[client ${op.clientId}, ${op.call}..${end}] ${text}`;
}

function describeState<S, I, O>(model: Model<S, I, O>, state: S): string {
  return model.describeState ? model.describeState(state) : model.key(state);
}
