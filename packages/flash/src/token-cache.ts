/**
 * A bounded least-recently-used map from a token string to what verifying it proved. The gateway's rejection path
 * checks the anti-bot token and the user's bearer token on every attempt; a crowd retries with the same tokens, so
 * a lookup by the exact token string replaces an HMAC. Only tokens that verified are stored, keyed by the whole
 * string: a token differing in any character misses and is verified (and refused) afresh. The bound keeps a flood
 * of distinct valid tokens from growing the process; the least recently used entry goes first, so the active crowd
 * stays cached.
 */
export class TokenCache<V> {
  private readonly entries = new Map<string, V>();

  constructor(readonly capacity: number) {
    if (!Number.isSafeInteger(capacity) || capacity < 1) throw new RangeError(`capacity must be a positive integer, got ${capacity}`);
  }

  get size(): number {
    return this.entries.size;
  }

  /** What `token` proved when it was verified, or undefined; a hit becomes the most recently used. */
  get(token: string): V | undefined {
    const value = this.entries.get(token);
    if (value === undefined) return undefined;
    // A Map iterates in insertion order: re-inserting moves the entry to the young end.
    this.entries.delete(token);
    this.entries.set(token, value);
    return value;
  }

  /** Remembers a verified token, evicting the least recently used entry when full. */
  set(token: string, value: V): void {
    if (this.entries.has(token)) this.entries.delete(token);
    else if (this.entries.size >= this.capacity) this.entries.delete(this.entries.keys().next().value!);
    this.entries.set(token, value);
  }

  has(token: string): boolean {
    return this.entries.has(token);
  }
}
