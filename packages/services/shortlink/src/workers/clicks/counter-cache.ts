/**
 * The analytics store's cache of counter values, in two generations of Maps: a read looks in the young one, then
 * in the old one (moving the entry to the young one); once the young one holds half the capacity it becomes the
 * old one and the previous old one is dropped. Counters used within the last half-capacity of distinct keys stay,
 * as with an LRU, at the price of a Map lookup per access: lru-cache's list bookkeeping, with a get and a set per
 * counter of every batch, was about a quarter of the consumer's CPU. Holds at most `capacity` values.
 */
export class CounterCache {
  private young = new Map<string, number>();
  private old = new Map<string, number>();
  /** Most values in the young generation; the old one holds what the young one held at its last rotation. */
  private readonly youngMax: number;
  /** False only for a capacity of 1, which has no room for an old generation. */
  private readonly keepsOld: boolean;

  constructor(capacity: number) {
    this.youngMax = Math.max(1, Math.floor(capacity / 2));
    this.keepsOld = 2 * this.youngMax <= capacity;
  }

  get(key: string): number | undefined {
    const value = this.young.get(key);
    if (value !== undefined) return value;
    const aged = this.old.get(key);
    if (aged !== undefined) {
      this.old.delete(key);
      this.add(key, aged);
    }
    return aged;
  }

  /** Adds `inc` to a cached value and returns the sum, or undefined (nothing changed) when `key` is not cached. */
  increment(key: string, inc: number): number | undefined {
    const value = this.young.get(key);
    if (value !== undefined) {
      this.young.set(key, value + inc);
      return value + inc;
    }
    const aged = this.old.get(key);
    if (aged === undefined) return undefined;
    this.old.delete(key);
    this.add(key, aged + inc);
    return aged + inc;
  }

  set(key: string, value: number): void {
    if (this.young.has(key)) {
      this.young.set(key, value);
      return;
    }
    this.old.delete(key);
    this.add(key, value);
  }

  clear(): void {
    this.young = new Map();
    this.old = new Map();
  }

  private add(key: string, value: number): void {
    if (this.young.size >= this.youngMax) {
      this.old = this.keepsOld ? this.young : new Map();
      this.young = new Map();
    }
    this.young.set(key, value);
  }
}
