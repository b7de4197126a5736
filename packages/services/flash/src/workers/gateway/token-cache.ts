/**
 * A bounded least-recently-used map from a token string to what verifying it proved. The gateway's rejection path
 * checks the anti-bot token and the user's bearer token on every attempt; a crowd retries with the same tokens, so
 * a lookup by the exact token string replaces an HMAC. Only tokens that verified are stored, keyed by the whole
 * string: a token differing in any character misses and is verified (and refused) afresh. The bound keeps a flood
 * of distinct valid tokens from growing the process; the least recently used entry goes first (the clock
 * approximation: a hit only sets a mark), so the active crowd
 * stays cached.
 */
export class TokenCache<V> {
  /** Oldest first (a Map iterates in insertion order); `used` is the second-chance mark a hit sets. */
  private readonly entries = new Map<string, { value: V; used: boolean }>();

  constructor(readonly capacity: number) {
    if (!Number.isSafeInteger(capacity) || capacity < 1)
      throw new RangeError(`capacity must be a positive integer, got ${capacity}`);
  }

  get size(): number {
    return this.entries.size;
  }

  /**
   * What `token` proved when it was verified, or undefined. A hit only marks the entry used (a lookup and a store:
   * the hot path pays no reordering); eviction gives marked entries a second chance, so the least recently used
   * unmarked entry goes first (the clock approximation of LRU).
   */
  get(token: string): V | undefined {
    const entry = this.entries.get(token);
    if (entry === undefined) return undefined;
    entry.used = true;
    return entry.value;
  }

  /** Remembers a verified token, evicting when full: the oldest entry not used since it was last passed over. */
  set(token: string, value: V): void {
    const existing = this.entries.get(token);
    if (existing !== undefined) {
      existing.value = value;
      existing.used = true;
      return;
    }
    // At most one pass: each marked entry met is moved to the young end unmarked, so the loop ends.
    while (this.entries.size >= this.capacity) {
      const [oldest, entry] = this.entries.entries().next().value!;
      this.entries.delete(oldest);
      if (!entry.used) break;
      entry.used = false;
      this.entries.set(oldest, entry);
    }
    this.entries.set(token, { value, used: false });
  }

  has(token: string): boolean {
    return this.entries.has(token);
  }
}
