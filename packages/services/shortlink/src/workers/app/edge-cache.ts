/**
 * The application server's edge cache: code -> link (or "no such code" for a short while). An entry lives at
 * most the edge TTL (so deletes made elsewhere are seen within it) and always ends before the link expires.
 *
 * Two generations of Maps instead of an LRU list: a hit in the young one is one Map lookup and a clock compare; a
 * hit in the old one moves the entry to the young one; once the young one holds half the capacity it becomes the
 * old one and the previous old one is dropped. So the codes used within the last half-capacity of distinct codes
 * stay, at most `max` entries are held, and a redirect does no list bookkeeping (an LRU list's get showed in an app
 * server's profile under redirect load). Lifetimes are on the monotonic clock: a wall-clock step cannot stretch them.
 */
import type { LinkRecord } from '../../members/api.js';
import { EXPIRY_MARGIN_MS } from '../../members/shared-cache.js';

/** What a lookup found: the link, or MISSING for a code with no live link. */
export const MISSING = Object.freeze({ missing: true as const });
export type Lookup = LinkRecord | typeof MISSING;

interface Entry {
  found: Lookup;
  /** The clock's reading after which the entry is gone. */
  until: number;
}

export class EdgeCache {
  private young = new Map<string, Entry>();
  private old = new Map<string, Entry>();
  private readonly youngMax: number;
  /** False only for a capacity of 1, which has no room for an old generation. */
  private readonly keepsOld: boolean;

  /** Monotonic milliseconds (performance.now unless a test drives time itself). */
  private readonly clock: () => number;

  constructor(private readonly options: { ttlMs: number; negativeTtlMs: number; max: number; clock?: () => number }) {
    this.clock = options.clock ?? (() => performance.now());
    this.youngMax = Math.max(1, Math.floor(options.max / 2));
    this.keepsOld = 2 * this.youngMax <= options.max;
  }

  get(code: string): Lookup | undefined {
    const young = this.young.get(code);
    const clock = this.clock();
    if (young !== undefined) {
      if (clock <= young.until) return young.found;
      this.young.delete(code);
      return undefined;
    }
    const old = this.old.get(code);
    if (old === undefined) return undefined;
    this.old.delete(code);
    if (clock > old.until) return undefined;
    this.add(code, old);
    return old.found;
  }

  set(code: string, found: Lookup, now: number): void {
    const ttl =
      found === MISSING
        ? this.options.negativeTtlMs
        : Math.min(this.options.ttlMs, (found as LinkRecord).expires_at - now - EXPIRY_MARGIN_MS);
    if (ttl >= 1) this.put(code, { found, until: this.clock() + ttl });
    else this.remove(code);
  }

  /**
   * A delete made through this server: remember the code as missing for a full edge TTL, so a member that has not
   * applied the delete yet cannot bring the link back here. Deletes are final, so this is never wrong.
   */
  deleted(code: string): void {
    this.put(code, {
      found: MISSING,
      until: this.clock() + Math.max(1, this.options.ttlMs, this.options.negativeTtlMs),
    });
  }

  /** Entries held (some may be past their lifetime until looked up or rotated out). */
  get size(): number {
    return this.young.size + this.old.size;
  }

  private put(code: string, entry: Entry): void {
    if (this.young.has(code)) {
      this.young.set(code, entry);
      return;
    }
    this.old.delete(code);
    this.add(code, entry);
  }

  private remove(code: string): void {
    this.young.delete(code);
    this.old.delete(code);
  }

  private add(code: string, entry: Entry): void {
    if (this.young.size >= this.youngMax) {
      this.old = this.keepsOld ? this.young : new Map();
      this.young = new Map();
    }
    this.young.set(code, entry);
  }
}
