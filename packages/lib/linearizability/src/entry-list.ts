import type { Operation } from './history.js';

/** End-of-list marker for {@link EntryList} links. */
const NONE = -1;

/**
 * The call and return entries of one partition, sorted by time, as a doubly
 * linked list over typed arrays.
 *
 * Node numbering: 0 is the head sentinel; operation `i` has its call entry at
 * `2i + 1` and its return entry at `2i + 2`.
 *
 * Ordering at equal timestamps: calls come before returns. An operation that
 * returns at t and one that is called at t are therefore *concurrent*: with
 * coarse clocks the two may really have overlapped, and treating them as
 * ordered could reject a linearizable history. (This is also Porcupine's
 * choice.) Remaining ties are broken by operation index so the search order,
 * and thus every result, is deterministic.
 *
 * `lift` / `unlift` remove and restore an operation's two entries in O(1)
 * (Knuth's dancing links); they must be undone in LIFO order, which the
 * checker's backtracking stack guarantees.
 */
export class EntryList {
  readonly next: Int32Array;
  readonly prev: Int32Array;

  constructor(ops: readonly Operation<unknown, unknown>[]) {
    const nodeCount = 2 * ops.length + 1;
    this.next = new Int32Array(nodeCount).fill(NONE);
    this.prev = new Int32Array(nodeCount).fill(NONE);
    const order = sortedEntries(ops);
    let last = 0;
    for (const node of order) {
      this.next[last] = node;
      this.prev[node] = last;
      last = node;
    }
  }

  first(): number {
    return this.next[0]!;
  }

  lift(op: number): void {
    const call = callNode(op);
    const ret = call + 1;
    const { next, prev } = this;
    // A call always has a successor: at least its own return.
    next[prev[call]!] = next[call]!;
    prev[next[call]!] = prev[call]!;
    next[prev[ret]!] = next[ret]!;
    if (next[ret] !== NONE) prev[next[ret]!] = prev[ret]!;
  }

  unlift(op: number): void {
    const call = callNode(op);
    const ret = call + 1;
    const { next, prev } = this;
    next[prev[ret]!] = ret;
    if (next[ret] !== NONE) prev[next[ret]!] = ret;
    next[prev[call]!] = call;
    prev[next[call]!] = call;
  }
}

export function callNode(op: number): number {
  return 2 * op + 1;
}

export function isCallNode(node: number): boolean {
  return (node & 1) === 1;
}

/** The operation a (call or return) node belongs to. */
export function opOfNode(node: number): number {
  return (node - 1) >> 1;
}

function sortedEntries(ops: readonly Operation<unknown, unknown>[]): number[] {
  const nodes: number[] = [];
  const times: number[] = [];
  ops.forEach((op, index) => {
    nodes.push(callNode(index), callNode(index) + 1);
    times[callNode(index)] = op.call;
    times[callNode(index) + 1] = op.return;
  });
  return nodes.sort((a, b) => {
    const byTime = times[a]! - times[b]!;
    if (byTime !== 0 && !Number.isNaN(byTime)) return byTime;
    // Same time (Infinity - Infinity is NaN: also a tie). Calls first.
    const callFirst = (isCallNode(b) ? 1 : 0) - (isCallNode(a) ? 1 : 0);
    if (callFirst !== 0) return callFirst;
    return a - b;
  });
}
