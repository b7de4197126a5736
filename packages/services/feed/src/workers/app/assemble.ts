/**
 * The pure steps of the read path (spec rule 3), testable without processes: merge and de-duplicate candidates,
 * time order, applying a ranker's answer, the at-most-2-consecutive-posts-per-author assembly, and the opaque
 * continuation token.
 */
import { badRequest } from '@raftkit/http';
import { POST_ID } from '../../post-id.js';
import type { RankedPost } from '../../rank-wire.js';
import type { FeedEntry } from '../store/store.js';
import { newestFirst } from '../store/store.js';

/** At most this many posts of one author in a row (spec limits). */
export const MAX_CONSECUTIVE = 2;
/** Candidates looked at for the next position before the first allowed one is taken. */
const SEARCH = 256;

/** Merges candidate lists, keeping the first of each post_id (a pushed entry and a pulled one are the same post). */
export function mergeCandidates(lists: ReadonlyArray<readonly FeedEntry[]>, max: number): FeedEntry[] {
  const seen = new Set<string>();
  const out: FeedEntry[] = [];
  for (const list of lists) {
    for (const e of list) {
      if (seen.has(e.post_id)) continue;
      seen.add(e.post_id);
      out.push(e);
    }
  }
  return out.sort(newestFirst).slice(0, max);
}

/** The ranker's order over `candidates`: ranked ids first (unknown and repeated ids ignored), the rest in time order. */
export function applyRanking<T extends FeedEntry>(candidates: readonly T[], ranked: readonly RankedPost[]): T[] {
  const byId = new Map(candidates.map((c) => [c.post_id, c]));
  const out: T[] = [];
  for (const r of ranked) {
    const c = byId.get(r.post_id);
    if (c === undefined) continue;
    byId.delete(r.post_id);
    out.push(c);
  }
  const rest = [...byId.values()].sort(newestFirst);
  return out.concat(rest);
}

/**
 * Reorders a list so no author has more than `max` posts in a row, moving as little as it can: at each position it
 * takes the first remaining post that neither makes a run of max + 1 nor leaves the rest impossible to arrange (an
 * author with n posts left needs enough posts of others between them: n <= max * (others + 1)). When the rule cannot
 * hold (one author's posts are nearly all that is left) the tail keeps them in order: dropping them would leave gaps.
 */
export function limitConsecutive<T extends { author_id: string }>(list: readonly T[], max = MAX_CONSECUTIVE): T[] {
  const rest = [...list];
  const counts = new Map<string, number>();
  for (const p of rest) counts.set(p.author_id, (counts.get(p.author_id) ?? 0) + 1);
  const out: T[] = [];
  let last: string | null = null;
  let run = 0;
  // The two authors with the most posts left, found once per position: only they (and the author just taken) can
  // make the rest impossible to arrange, so each check below is O(1) and a 2,000-post list stays cheap.
  let top1: string | null = null;
  let top2: string | null = null;
  const findTop = (): void => {
    top1 = top2 = null;
    let c1 = 0;
    let c2 = 0;
    for (const [x, c] of counts) {
      if (c > c1) {
        top2 = top1;
        c2 = c1;
        top1 = x;
        c1 = c;
      } else if (c > c2) {
        top2 = x;
        c2 = c;
      }
    }
  };
  /** Can `x`'s posts still be separated, when `total` posts are left and `taken` was just taken? */
  const fits = (x: string, total: number, taken: string | null, nextRun: number): boolean => {
    const n = (counts.get(x) ?? 0) - (x === taken ? 1 : 0);
    if (n <= 0) return true;
    const others = total - n;
    return n <= (x === (taken ?? last) ? max * others + (max - nextRun) : max * (others + 1));
  };
  const feasibleNow = (x: string): boolean => fits(x, rest.length, null, run);
  /** Can the remaining posts still be arranged after taking one of `author`? */
  const feasibleAfter = (author: string): boolean => {
    const total = rest.length - 1;
    const nextRun = author === last ? run + 1 : 1;
    return (
      fits(author, total, author, nextRun) &&
      (top1 === null || fits(top1, total, author, nextRun)) &&
      (top2 === null || fits(top2, total, author, nextRun))
    );
  };
  while (rest.length > 0) {
    let pick = -1;
    let fallback = -1;
    findTop();
    const top: string | null = top1;
    if (top !== null && !feasibleNow(top)) {
      // Already impossible (one author is most of what is left): use its posts up as early as the rule allows, so
      // the unavoidable run at the tail is as short as it can be. Bounded: no feasibility search per candidate.
      for (let i = 0; i < rest.length && pick < 0; i++) {
        const author = rest[i]!.author_id;
        if (author === last && run >= max) continue;
        if (fallback < 0) fallback = i;
        if (author === top) pick = i;
      }
    } else {
      // The earliest post that keeps the rest arrangeable; the search is bounded (a ranked list rarely needs more).
      for (let i = 0; i < rest.length && i < SEARCH; i++) {
        const author = rest[i]!.author_id;
        if (author === last && run >= max) continue;
        if (fallback < 0) fallback = i;
        if (feasibleAfter(author)) {
          pick = i;
          break;
        }
      }
      if (pick < 0 && fallback < 0) fallback = rest.findIndex((p) => !(p.author_id === last && run >= max));
    }
    if (pick < 0) pick = fallback >= 0 ? fallback : 0;
    const [p] = rest.splice(pick, 1);
    const author = p!.author_id;
    counts.set(author, counts.get(author)! - 1);
    if (counts.get(author) === 0) counts.delete(author);
    run = author === last ? run + 1 : 1;
    last = author;
    out.push(p!);
  }
  return out;
}

/** What a next_token carries: whose feed, the ranked_at of the list it continues, and the last post shown. */
export interface FeedToken {
  user: string;
  ranked_at: number;
  post_id: string;
}

export function encodeToken(t: FeedToken): string {
  return Buffer.from(JSON.stringify([1, t.user, t.ranked_at, t.post_id])).toString('base64url');
}

/** 400 `invalid_token` for anything that is not a token this service made. */
export function decodeToken(text: string): FeedToken {
  const bad = () => badRequest('invalid_token', 'next_token is not a token from this feed', { field: 'next_token' });
  if (text.length > 300 || !/^[A-Za-z0-9_-]+$/.test(text)) throw bad();
  let v: unknown;
  try {
    v = JSON.parse(Buffer.from(text, 'base64url').toString('utf8'));
  } catch {
    throw bad();
  }
  if (
    !Array.isArray(v) ||
    v.length !== 4 ||
    v[0] !== 1 ||
    typeof v[1] !== 'string' ||
    typeof v[2] !== 'number' ||
    !Number.isSafeInteger(v[2]) ||
    typeof v[3] !== 'string' ||
    !POST_ID.test(v[3])
  )
    throw bad();
  return { user: v[1], ranked_at: v[2], post_id: v[3] };
}
