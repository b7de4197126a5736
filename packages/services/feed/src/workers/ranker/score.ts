/**
 * Pure scoring: a candidate's score from the spec's signals, in the spec's rough order of importance (recency,
 * author-viewer affinity, engagement velocity, content type), then a diversity pass that spreads authors. No clock,
 * no I/O, no randomness: the same candidates, features and `now` always give the same ranking.
 *
 * Scores are natural logarithms of a multiplicative relevance (relevance = recency x affinity x velocity x type),
 * so an old post's tiny recency never underflows to 0 and every signal keeps its strict order however old the post.
 */
import type { Affinity, Candidate, ContentType, FeatureView, RankedPost, Velocity } from './types.js';

export interface ScoreWeights {
  /** Relevance halves every this many ms of post age. */
  recencyHalfLifeMs: number;
  /** Weight of ln(1 + interactions) in the log score. */
  affinity: number;
  /** A past interaction's weight halves every this many ms since the last one. */
  affinityHalfLifeMs: number;
  /** Weight of ln(1 + weighted interactions per minute). */
  velocity: number;
  /** Relevance multipliers by content type. */
  contentType: Readonly<Record<ContentType, number>>;
  /** Each earlier pick of the same author divides relevance by e^diversity. */
  diversity: number;
}

export const DEFAULT_WEIGHTS: Readonly<ScoreWeights> = Object.freeze({
  // Recency dominates: a day-old post needs strong affinity and velocity to beat a fresh one.
  recencyHalfLifeMs: 6 * 3_600_000,
  affinity: 0.6,
  affinityHalfLifeMs: 7 * 86_400_000,
  velocity: 0.4,
  // Posts with media draw more engagement than text; a comment shown alone lacks its context; a repost is the
  // original post again (already weighed through its own signals), so it counts as text.
  contentType: Object.freeze({ text: 1, media: 1.2, comment: 0.9, repost: 1 }),
  // ln 2: a second post of an author counts half, a third a quarter...
  diversity: Math.LN2,
});

/** How much likes, comments and reposts count in a velocity (a comment or a share costs the user more). */
export const INTERACTION_WEIGHTS = Object.freeze({ like: 1, comment: 2, repost: 3 });

/** Lifetime velocity from the post store's totals counts the first minute as a minute (no division by ~0). */
const MIN_AGE_FOR_RATE_MS = 60_000;

export function recencyScore(createdAt: number, now: number, w: ScoreWeights = DEFAULT_WEIGHTS): number {
  const age = Math.max(0, now - createdAt);
  return (-Math.LN2 * age) / w.recencyHalfLifeMs;
}

export function affinityScore(affinity: Affinity | undefined, now: number, w: ScoreWeights = DEFAULT_WEIGHTS): number {
  if (affinity === undefined) return 0;
  const amount = affinity.interaction_count;
  if (amount <= 0) return 0;
  const since = Math.max(0, now - affinity.last_interaction_at);
  return w.affinity * Math.log1p(amount) * 2 ** (-since / w.affinityHalfLifeMs);
}

/**
 * Weighted interactions per minute: the event-fed rates when the ranker has them (the mean of the seconds-scale
 * and minutes-scale windows), never less than the post's lifetime average from its stored totals.
 */
export function interactionsPerMinute(candidate: Candidate, velocity: Velocity | undefined, now: number): number {
  const e = candidate.engagement;
  const total =
    INTERACTION_WEIGHTS.like * e.likes +
    INTERACTION_WEIGHTS.comment * e.comments +
    INTERACTION_WEIGHTS.repost * e.shares;
  const lifetime = (total * 60_000) / Math.max(MIN_AGE_FOR_RATE_MS, now - candidate.created_at);
  const recent = velocity === undefined ? 0 : 30 * (velocity.fast + velocity.slow);
  return Math.max(lifetime, recent);
}

export function velocityScore(
  candidate: Candidate,
  velocity: Velocity | undefined,
  now: number,
  w: ScoreWeights = DEFAULT_WEIGHTS,
): number {
  return w.velocity * Math.log1p(interactionsPerMinute(candidate, velocity, now));
}

/** A candidate's score before diversity (the log of its relevance). */
export function baseScore(
  candidate: Candidate,
  viewer: string,
  features: FeatureView,
  now: number,
  w: ScoreWeights = DEFAULT_WEIGHTS,
): number {
  return (
    recencyScore(candidate.created_at, now, w) +
    affinityScore(features.affinity(viewer, candidate.author_id), now, w) +
    velocityScore(candidate, features.velocity(candidate.post_id, now), now, w) +
    Math.log(w.contentType[candidate.content_type])
  );
}

/** Higher score first; ties by the larger post_id (post ids are time-ordered: the newer post first). */
function before(a: RankedPost, b: RankedPost): boolean {
  return a.score > b.score || (a.score === b.score && a.post_id > b.post_id);
}

/**
 * Ranks candidates: base scores, then greedy diversity. Each author's posts queue in score order; the next pick is
 * the author whose head scores best after a penalty of `diversity` per post of theirs already picked. O(n log n).
 * A post_id given twice is ranked once (the read path de-duplicates; this keeps the output a set whatever it gets).
 */
export function rank(
  viewer: string,
  candidates: readonly Candidate[],
  features: FeatureView,
  now: number,
  w: ScoreWeights = DEFAULT_WEIGHTS,
): RankedPost[] {
  const byAuthor = new Map<string, RankedPost[]>();
  const seen = new Set<string>();
  for (const c of candidates) {
    if (seen.has(c.post_id)) continue;
    seen.add(c.post_id);
    const scored = { post_id: c.post_id, score: baseScore(c, viewer, features, now, w) };
    const queue = byAuthor.get(c.author_id);
    if (queue === undefined) byAuthor.set(c.author_id, [scored]);
    else queue.push(scored);
  }
  const heap = new AuthorHeap();
  for (const queue of byAuthor.values()) {
    queue.sort((a, b) => (before(a, b) ? -1 : before(b, a) ? 1 : 0));
    heap.push({ queue, next: 0, adjusted: queue[0]! });
  }
  const ranked: RankedPost[] = [];
  for (let head = heap.pop(); head !== undefined; head = heap.pop()) {
    ranked.push(head.adjusted);
    head.next++;
    const following = head.queue[head.next];
    if (following !== undefined) {
      head.adjusted = { post_id: following.post_id, score: following.score - w.diversity * head.next };
      heap.push(head);
    }
  }
  return ranked;
}

/** The time-order fallback: newest first by created_at, then by post_id (what the read path serves without a ranker). */
export function timeOrder(candidates: readonly Candidate[]): Candidate[] {
  return [...candidates].sort(
    (a, b) => b.created_at - a.created_at || (a.post_id < b.post_id ? 1 : a.post_id > b.post_id ? -1 : 0),
  );
}

interface AuthorHead {
  queue: RankedPost[];
  /** Index in `queue` of the head; also how many of this author's posts were picked. */
  next: number;
  /** The head with the author's diversity penalty applied. */
  adjusted: RankedPost;
}

/** A binary max-heap of authors by their adjusted head (written out: the ranker's hot loop). */
class AuthorHeap {
  private readonly items: AuthorHead[] = [];

  push(item: AuthorHead): void {
    const items = this.items;
    items.push(item);
    let i = items.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!before(items[i]!.adjusted, items[parent]!.adjusted)) break;
      [items[i], items[parent]] = [items[parent]!, items[i]!];
      i = parent;
    }
  }

  pop(): AuthorHead | undefined {
    const items = this.items;
    const top = items[0];
    const last = items.pop();
    if (items.length > 0 && last !== undefined) {
      items[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let best = i;
        if (l < items.length && before(items[l]!.adjusted, items[best]!.adjusted)) best = l;
        if (r < items.length && before(items[r]!.adjusted, items[best]!.adjusted)) best = r;
        if (best === i) break;
        [items[i], items[best]] = [items[best]!, items[i]!];
        i = best;
      }
    }
    return top;
  }
}
