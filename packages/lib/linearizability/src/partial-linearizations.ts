/**
 * Diagnostics for a failed (or unfinished) search, in the spirit of
 * Porcupine's "partial linearizations": for every operation, the longest
 * linearizable prefix found that contains it; plus the overall longest
 * prefix and the operation whose return the search could not get past after
 * it.
 *
 * Recorded at each dead end of the search. To keep that cheap, each stack
 * slot remembers the longest dead end recorded since it was pushed: if a slot
 * already saw a dead end at least this deep, so did every slot below it
 * (they were pushed earlier), and the scan can stop.
 */
export class PartialLinearizations {
  private readonly longestLength: Int32Array;
  private readonly longestFor: (readonly number[] | undefined)[];
  private readonly deepestSincePush: Int32Array;
  private best: readonly number[] | undefined;
  private bestBlockedBy = -1;

  constructor(opCount: number) {
    this.longestLength = new Int32Array(opCount);
    this.longestFor = new Array<readonly number[] | undefined>(opCount);
    this.deepestSincePush = new Int32Array(opCount);
  }

  /** Call when `op` is pushed on the search stack. */
  pushed(op: number): void {
    this.deepestSincePush[op] = 0;
  }

  /**
   * Records a dead end: `stack[0..depth)` is linearizable, but the return of
   * `blockedOp` was reached without being able to linearize it.
   */
  deadEnd(stack: Int32Array, depth: number, blockedOp: number): void {
    let prefix: readonly number[] | undefined;
    for (let slot = depth - 1; slot >= 0; slot--) {
      const op = stack[slot]!;
      if (this.deepestSincePush[op]! >= depth) break;
      this.deepestSincePush[op] = depth;
      if (depth > this.longestLength[op]!) {
        prefix ??= Array.from(stack.subarray(0, depth));
        this.longestLength[op] = depth;
        this.longestFor[op] = prefix;
      }
    }
    if (this.best === undefined || depth > this.best.length) {
      this.best = prefix ?? Array.from(stack.subarray(0, depth));
      this.bestBlockedBy = blockedOp;
    }
  }

  /** The distinct per-operation longest prefixes, longest first. */
  distinct(): number[][] {
    const unique = new Set<readonly number[]>();
    for (const prefix of this.longestFor) if (prefix !== undefined) unique.add(prefix);
    if (this.best !== undefined && this.best.length > 0) unique.add(this.best);
    return [...unique].map((prefix) => [...prefix]).sort((a, b) => b.length - a.length || compareLex(a, b));
  }

  longestPrefix(): number[] {
    return this.best === undefined ? [] : [...this.best];
  }

  /** The operation that could not be linearized after {@link longestPrefix}; undefined if no dead end was seen. */
  blockedOperation(): number | undefined {
    return this.bestBlockedBy < 0 ? undefined : this.bestBlockedBy;
  }
}

function compareLex(a: readonly number[], b: readonly number[]): number {
  for (let i = 0; i < a.length && i < b.length; i++) if (a[i] !== b[i]) return a[i]! - b[i]!;
  return a.length - b.length;
}
