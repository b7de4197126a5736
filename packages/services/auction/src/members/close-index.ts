/**
 * Open auctions by close time, so the leader's close timer finds the due ones without scanning every auction of
 * the group. A derived index (not in snapshots; rebuilt on restore): buckets of one second, their keys kept sorted.
 * close_at only grows, so an auction moves to a later bucket on extension and leaves at close.
 */
const BUCKET_MS = 1_000;

export class CloseIndex {
  /** Bucket key -> (auction id -> close time). */
  private buckets = new Map<number, Map<string, number>>();
  /** Bucket keys, ascending. */
  private order: number[] = [];

  add(id: string, closeAt: number): void {
    const key = Math.floor(closeAt / BUCKET_MS);
    let bucket = this.buckets.get(key);
    if (bucket === undefined) {
      bucket = new Map();
      this.buckets.set(key, bucket);
      this.order.splice(this.lowerBound(key), 0, key);
    }
    bucket.set(id, closeAt);
  }

  remove(id: string, closeAt: number): void {
    const key = Math.floor(closeAt / BUCKET_MS);
    const bucket = this.buckets.get(key);
    if (bucket === undefined || !bucket.delete(id) || bucket.size > 0) return;
    this.buckets.delete(key);
    this.order.splice(this.lowerBound(key), 1);
  }

  move(id: string, from: number, to: number): void {
    this.remove(id, from);
    this.add(id, to);
  }

  /**
   * Ids whose bucket may hold a due auction (the caller checks each exact close time), by close time then id:
   * the same order on every member and after a restore, whatever order the index was built in.
   */
  *candidates(now: number): Generator<string> {
    const last = Math.floor(now / BUCKET_MS);
    for (const key of this.order) {
      if (key > last) return;
      const entries = [...this.buckets.get(key)!].sort(([a, x], [b, y]) => x - y || (a < b ? -1 : a > b ? 1 : 0));
      for (const [id] of entries) yield id;
    }
  }

  /** A time at or before the earliest open auction's close (its bucket's start), or null with none open. */
  earliestCloseBound(): number | null {
    return this.order.length === 0 ? null : this.order[0]! * BUCKET_MS;
  }

  clear(): void {
    this.buckets.clear();
    this.order = [];
  }

  private lowerBound(key: number): number {
    let lo = 0;
    let hi = this.order.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.order[mid]! < key) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }
}
