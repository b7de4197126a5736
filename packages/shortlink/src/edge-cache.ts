/**
 * The application server's edge cache: code -> link (or "no such code" for a short while). An entry lives at
 * most the edge TTL (so deletes made elsewhere are seen within it) and always ends before the link expires.
 */
import { LRUCache } from 'lru-cache';
import type { LinkRecord } from './api.js';
import { EXPIRY_MARGIN_MS } from './shared-cache.js';

/** What a lookup found: the link, or MISSING for a code with no live link. */
export const MISSING = Object.freeze({ missing: true as const });
export type Lookup = LinkRecord | typeof MISSING;

export class EdgeCache {
  private readonly entries: LRUCache<string, Lookup>;

  constructor(private readonly options: { ttlMs: number; negativeTtlMs: number; max: number }) {
    this.entries = new LRUCache<string, Lookup>({ max: options.max, ttl: Math.max(1, options.ttlMs) });
  }

  get(code: string): Lookup | undefined {
    return this.entries.get(code);
  }

  set(code: string, found: Lookup, now: number): void {
    const ttl = found === MISSING ? this.options.negativeTtlMs : Math.min(this.options.ttlMs, (found as LinkRecord).expires_at - now - EXPIRY_MARGIN_MS);
    if (ttl >= 1) this.entries.set(code, found, { ttl });
    else this.entries.delete(code);
  }

  /**
   * A delete made through this server: remember the code as missing for a full edge TTL, so a member that has not
   * applied the delete yet cannot bring the link back here. Deletes are final, so this is never wrong.
   */
  deleted(code: string): void {
    this.entries.set(code, MISSING, { ttl: Math.max(1, this.options.ttlMs, this.options.negativeTtlMs) });
  }
}
