import type { Budget } from './budget.js';
import { EntryList, callNode, isCallNode, opOfNode } from './entry-list.js';
import type { Operation } from './history.js';
import { LinearizedSet } from './linearized-set.js';
import type { Model } from './model.js';
import { PartialLinearizations } from './partial-linearizations.js';
import { VisitedCache } from './visited-cache.js';

export type Verdict = 'ok' | 'illegal' | 'unknown';

interface SearchOutcome {
  readonly verdict: Verdict;
  /** For 'ok': a witness order of operation indexes (pending ones left out did not take effect). */
  readonly linearization?: number[];
  readonly partialLinearizations: number[][];
  readonly longestPrefix: number[];
  readonly blockedOperation?: number;
  /** Search steps (model steps plus backtracks) spent on this partition. */
  readonly steps: number;
  /** Configurations memoised. */
  readonly cacheSize: number;
}

/**
 * Decides whether one partition is linearizable: the Wing & Gong search with
 * Lowe's memoisation, as in Porcupine.
 *
 * Walk the time-sorted entry list from the front. At a call entry, try to
 * linearize that operation now: if the model accepts it and the resulting
 * (linearized set, state) is new, lift its entries out of the list, push it
 * and restart from the front. At a return entry, the operation it belongs to
 * should already have been linearized (everything that could still go before
 * it has been tried), so undo the most recent choice and try the next call
 * after it instead. Success when every non-pending operation is linearized;
 * failure when there is nothing left to undo.
 *
 * Pending operations (return = Infinity) have their returns at the end of the
 * list, so they are never forced; stopping once only they remain is the same
 * as letting them "not happen".
 *
 * The search is resumable: {@link advance} runs it for a bounded number of
 * steps, so the checker can interleave partitions and stop at the first
 * illegal one without threads, deterministically.
 */
export class PartitionSearch<S, I, O> {
  private readonly inputs: readonly I[];
  private readonly outputs: readonly (O | undefined)[];
  private readonly pending: readonly boolean[];
  private definiteLeft: number;

  private readonly list: EntryList;
  private readonly linearized: LinearizedSet;
  private readonly cache: VisitedCache;
  private readonly partials: PartialLinearizations;
  private readonly stackOps: Int32Array;
  private readonly stackStates: S[] = [];
  private depth = 0;
  private state: S;
  private node: number;
  private steps = 0;
  private verdict: Verdict = 'unknown';

  constructor(
    private readonly model: Model<S, I, O>,
    ops: readonly Operation<I, O>[],
  ) {
    this.inputs = ops.map((op) => op.input);
    this.pending = ops.map((op) => op.return === Infinity);
    this.outputs = ops.map((op, i) => (this.pending[i] ? undefined : op.output));
    this.definiteLeft = this.pending.filter((isPending) => !isPending).length;
    this.list = new EntryList(ops);
    this.linearized = new LinearizedSet(ops.length);
    this.cache = new VisitedCache(this.linearized.words.length);
    this.partials = new PartialLinearizations(ops.length);
    this.stackOps = new Int32Array(ops.length);
    this.state = model.init();
    this.node = this.list.first();
    if (this.definiteLeft === 0) this.verdict = 'ok';
  }

  get decided(): boolean {
    return this.verdict !== 'unknown';
  }

  /**
   * Runs up to `maxSteps` steps (fewer if `budget` runs out). Returns the
   * verdict so far: 'unknown' while undecided.
   */
  advance(budget: Budget, maxSteps: number): Verdict {
    const { model, inputs, outputs, pending, list, linearized, cache, partials, stackOps, stackStates } = this;
    let { depth, state, node, definiteLeft } = this;
    let stepsLeft = maxSteps;
    while (this.verdict === 'unknown' && stepsLeft-- > 0 && budget.spend()) {
      this.steps++;
      if (isCallNode(node)) {
        const op = opOfNode(node);
        const result = model.step(state, inputs[op]!, outputs[op]);
        if (result.ok) {
          linearized.toggle(op);
          if (cache.add(linearized, model.key(result.state))) {
            stackOps[depth] = op;
            stackStates[depth] = state;
            depth++;
            partials.pushed(op);
            state = result.state;
            list.lift(op);
            if (!pending[op] && --definiteLeft === 0) this.verdict = 'ok';
            node = list.first();
            continue;
          }
          linearized.toggle(op);
        }
        node = list.next[node]!;
      } else {
        partials.deadEnd(stackOps, depth, opOfNode(node));
        if (depth === 0) {
          this.verdict = 'illegal';
          break;
        }
        depth--;
        const undone = stackOps[depth]!;
        state = stackStates[depth]!;
        linearized.toggle(undone);
        list.unlift(undone);
        if (!pending[undone]) definiteLeft++;
        node = list.next[callNode(undone)]!;
      }
    }
    this.depth = depth;
    this.state = state;
    this.node = node;
    this.definiteLeft = definiteLeft;
    return this.verdict;
  }

  outcome(): SearchOutcome {
    const common = { steps: this.steps, cacheSize: this.cache.size };
    if (this.verdict === 'ok') {
      const linearization = Array.from(this.stackOps.subarray(0, this.depth));
      return {
        verdict: 'ok',
        linearization,
        partialLinearizations: [linearization],
        longestPrefix: linearization,
        ...common,
      };
    }
    const partialLinearizations = this.partials.distinct();
    let longestPrefix = this.partials.longestPrefix();
    let blockedOperation = this.partials.blockedOperation();
    if (this.verdict === 'unknown' && this.depth > longestPrefix.length) {
      // Interrupted: the current stack is a longer linearizable prefix than any dead end's.
      longestPrefix = Array.from(this.stackOps.subarray(0, this.depth));
      partialLinearizations.unshift(longestPrefix);
      blockedOperation = undefined;
    }
    return {
      verdict: this.verdict,
      partialLinearizations,
      longestPrefix,
      ...(blockedOperation === undefined ? {} : { blockedOperation }),
      ...common,
    };
  }
}
