/**
 * The member's shared read cache: rendered answers of GET /internal/links/:code, filled on a miss, with a TTL of
 * hours that always ends before the link expires. A delete applied on this member evicts the code; a snapshot
 * restore clears everything (the restored state may have deleted any link).
 */
import { LRUCache } from 'lru-cache';
import type { LinkChange } from '../machine.js';

const SHARED_CACHE_TTL_MS = 3 * 60 * 60 * 1000;
const SHARED_CACHE_ENTRIES = 200_000;
/** Cache entries end this long before the link expires (the spec: "slightly before expires_at"). */
export const EXPIRY_MARGIN_MS = 1000;

export class SharedCache {
  private readonly entries: LRUCache<string, string>;

  constructor(options: { ttlMs?: number; max?: number } = {}) {
    this.entries = new LRUCache<string, string>({
      max: options.max ?? SHARED_CACHE_ENTRIES,
      ttl: options.ttlMs ?? SHARED_CACHE_TTL_MS,
    });
  }

  get(code: string): string | undefined {
    return this.entries.get(code);
  }

  set(code: string, body: string, expiresAt: number, now: number): void {
    const ttl = Math.min(this.entries.ttl, expiresAt - now - EXPIRY_MARGIN_MS);
    if (ttl > 0) this.entries.set(code, body, { ttl });
  }

  readonly onChange = (change: LinkChange): void => {
    if (change.kind === 'deleted') this.entries.delete(change.code);
    else this.entries.clear();
  };

  get size(): number {
    return this.entries.size;
  }
}
