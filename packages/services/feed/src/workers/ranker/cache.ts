/**
 * Recent rankings per viewer (the spec: a repeat visit within 60 s may get the recent ranking again). An entry is
 * reused only for the same candidate set, told by a fingerprint of its post ids, so a feed with a new post in it
 * is ranked afresh. Bounded: the least recently used viewer goes first.
 */
import { createHash } from 'node:crypto';
import type { Candidate, RankedPost } from './types.js';

export const RECENT_RANKING_TTL_MS = 60_000;

interface Entry {
  fingerprint: string;
  /** When it was ranked (the process clock). */
  rankedAt: number;
  ranked: RankedPost[];
}

/** The candidate set's identity: the post ids in sorted order, hashed (order of arrival does not matter). */
export function fingerprint(candidates: readonly Candidate[]): string {
  const ids = candidates.map((c) => c.post_id).sort();
  const hash = createHash('sha256');
  for (const id of ids) hash.update(`${id.length}:${id}`);
  return hash.digest('base64url');
}

export class RecentRankings {
  private readonly entries = new Map<string, Entry>();
  hits = 0;
  misses = 0;

  constructor(
    private readonly maxViewers = 20_000,
    private readonly ttlMs = RECENT_RANKING_TTL_MS,
  ) {}

  get size(): number {
    return this.entries.size;
  }

  /** The viewer's recent ranking of exactly this candidate set, if one is younger than the TTL. */
  get(viewer: string, print: string, now: number): { ranked: RankedPost[]; rankedAt: number } | undefined {
    const entry = this.entries.get(viewer);
    if (
      entry === undefined ||
      entry.fingerprint !== print ||
      now - entry.rankedAt >= this.ttlMs ||
      now < entry.rankedAt
    ) {
      this.misses++;
      return undefined;
    }
    this.hits++;
    return { ranked: entry.ranked, rankedAt: entry.rankedAt };
  }

  put(viewer: string, print: string, ranked: RankedPost[], now: number): void {
    this.entries.delete(viewer);
    this.entries.set(viewer, { fingerprint: print, rankedAt: now, ranked });
    if (this.entries.size > this.maxViewers) this.entries.delete(this.entries.keys().next().value!);
  }
}
