/**
 * The two shapes a history can take, and the conversion between them.
 *
 * - An {@link Operation} is one completed (or possibly completed) call with its
 *   call and return timestamps: the shape the checker works on.
 * - A {@link HistoryEvent} list is what a client harness logs as it runs
 *   (Jepsen style: invoke, then ok / fail / info from the same process).
 */

/**
 * One operation of a history.
 *
 * `call` and `return` are timestamps on one shared clock (any unit). An
 * operation whose outcome is unknown (Jepsen's `info`: a timeout, a crash) has
 * `return === Infinity` and `output === undefined`: it may or may not have
 * taken effect, and if it did, at any time after `call`. We call those
 * *pending* operations.
 *
 * A finite `return` means the operation definitely took effect between `call`
 * and `return`. Its `output` may still be `undefined` (or have missing fields)
 * when that part of the result was not observed; the models treat a missing
 * output as "matches anything".
 */
export interface Operation<I, O> {
  readonly clientId: number;
  readonly input: I;
  readonly call: number;
  readonly output: O | undefined;
  readonly return: number;
}

/** True when the operation's outcome is unknown (it may never have happened). */
export function isPending(op: Operation<unknown, unknown>): boolean {
  return op.return === Infinity;
}

/**
 * One line of a Jepsen-style client log. Events are matched by `clientId`
 * (Jepsen's process): a client has at most one outstanding invocation, and its
 * next `ok` / `fail` / `info` event completes it.
 *
 * - `ok`: the operation happened, with this output.
 * - `fail`: the operation definitely did not happen; it is dropped.
 * - `info`: the outcome is unknown; the operation becomes pending
 *   (`return = Infinity`). An invocation never completed by the end of the log
 *   is treated the same way.
 *
 * `time` is optional: give it on every event or on none. Without it, an
 * event's index in the list is its timestamp.
 */
export type HistoryEvent<I, O> =
  | { readonly type: 'invoke'; readonly clientId: number; readonly input: I; readonly time?: number }
  | { readonly type: 'ok'; readonly clientId: number; readonly output: O; readonly time?: number }
  | { readonly type: 'fail'; readonly clientId: number; readonly time?: number }
  | { readonly type: 'info'; readonly clientId: number; readonly time?: number };

/** Thrown for histories that cannot be interpreted (not for non-linearizable ones). */
export class HistoryError extends Error {
  override readonly name = 'HistoryError';
}

interface OpenInvocation<I> {
  readonly input: I;
  readonly call: number;
  /** Position in invocation order, so the output keeps the log's order. */
  readonly slot: number;
}

/**
 * Converts an event log into operations, in invocation order. Failed
 * operations are dropped; `info` and never-completed ones get
 * `return = Infinity` and `output = undefined`.
 */
export function eventsToOperations<I, O>(events: readonly HistoryEvent<I, O>[]): Operation<I, O>[] {
  const timed = events.filter((event) => event.time !== undefined).length;
  if (timed !== 0 && timed !== events.length) {
    throw new HistoryError('either every event must have a time or none may');
  }
  const slots: (Operation<I, O> | undefined)[] = [];
  const open = new Map<number, OpenInvocation<I>>();
  events.forEach((event, index) => {
    const time = event.time ?? index;
    if (Number.isNaN(time)) throw new HistoryError(`event ${index} has a NaN time`);
    if (event.type === 'invoke') {
      if (open.has(event.clientId)) {
        throw new HistoryError(
          `event ${index}: client ${event.clientId} invoked while its previous operation is outstanding`,
        );
      }
      open.set(event.clientId, { input: event.input, call: time, slot: slots.length });
      slots.push(undefined);
      return;
    }
    const invocation = open.get(event.clientId);
    if (invocation === undefined) {
      throw new HistoryError(
        `event ${index}: ${event.type} from client ${event.clientId} with no outstanding invocation`,
      );
    }
    open.delete(event.clientId);
    if (event.type === 'fail') return; // did not happen: leave the slot empty
    if (event.type === 'ok' && time < invocation.call) {
      throw new HistoryError(`event ${index}: client ${event.clientId} returns before it was invoked`);
    }
    slots[invocation.slot] =
      event.type === 'ok'
        ? {
            clientId: event.clientId,
            input: invocation.input,
            call: invocation.call,
            output: event.output,
            return: time,
          }
        : pendingOperation(event.clientId, invocation);
  });
  for (const [clientId, invocation] of open) slots[invocation.slot] = pendingOperation(clientId, invocation);
  return slots.filter((op): op is Operation<I, O> => op !== undefined);
}

function pendingOperation<I, O>(clientId: number, invocation: OpenInvocation<I>): Operation<I, O> {
  return { clientId, input: invocation.input, call: invocation.call, output: undefined, return: Infinity };
}

/** Throws a {@link HistoryError} unless every operation has usable timestamps. */
export function validateOperations(ops: readonly Operation<unknown, unknown>[]): void {
  ops.forEach((op, index) => {
    if (!Number.isFinite(op.call)) throw new HistoryError(`operation ${index} has a non-finite call time ${op.call}`);
    if (Number.isNaN(op.return) || op.return < op.call) {
      throw new HistoryError(`operation ${index} returns (${op.return}) before its call (${op.call})`);
    }
  });
}
