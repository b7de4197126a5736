/**
 * The ranker's features in memory, built from engagement events only: author-viewer affinity (the spec's
 * user_engagement: interaction_count and last_interaction_at) and per-post engagement velocity as two
 * exponentially decaying rates. Deterministic given the events: time comes from each event's `at` and the `now`
 * a lookup passes, never from a clock. Both maps are bounded (least recently touched entries go first), so a
 * ranker holds a working set, not the whole history; what it forgets comes back by replaying the topic.
 */
import { INTERACTION_WEIGHTS } from './score.js';
import type { Affinity, EngagementEvent, FeatureView, Velocity } from './types.js';

export const FAST_HALF_LIFE_MS = 10_000;
export const SLOW_HALF_LIFE_MS = 300_000;

export interface FeatureLimits {
  /** Viewer-author pairs held at most (default 2,000,000). */
  maxPairs?: number;
  /** Posts with a velocity held at most (default 500,000). */
  maxPosts?: number;
}

interface Rates {
  fast: number;
  slow: number;
  /** Time the rates were last decayed to. */
  at: number;
}

function decayed(rate: number, dt: number, halfLife: number): number {
  return dt <= 0 ? rate : rate * 2 ** (-dt / halfLife);
}

export class FeatureStore implements FeatureView {
  private readonly pairs = new Map<string, Affinity>();
  private readonly posts = new Map<string, Rates>();
  private readonly maxPairs: number;
  private readonly maxPosts: number;
  /** Events applied since start (health and metrics). */
  applied = 0;

  constructor(limits: FeatureLimits = {}) {
    this.maxPairs = limits.maxPairs ?? 2_000_000;
    this.maxPosts = limits.maxPosts ?? 500_000;
  }

  get pairCount(): number {
    return this.pairs.size;
  }

  get postCount(): number {
    return this.posts.size;
  }

  apply(event: EngagementEvent): void {
    this.applied++;
    const key = pairKey(event.user_id, event.author_id);
    const current = this.pairs.get(key);
    const next: Affinity = current === undefined ? { interaction_count: 0, last_interaction_at: 0 } : current;
    next.interaction_count++;
    next.last_interaction_at = Math.max(next.last_interaction_at, event.at);
    // Delete and set again: Map order is insertion order, so the first key is the least recently touched.
    if (current !== undefined) this.pairs.delete(key);
    this.pairs.set(key, next);
    if (this.pairs.size > this.maxPairs) this.pairs.delete(this.pairs.keys().next().value!);

    const weight = INTERACTION_WEIGHTS[event.type];
    const rates = this.posts.get(event.post_id);
    // A rate r decaying with half-life h and raised by w*ln2/h per event estimates w events per second.
    if (rates === undefined) {
      this.posts.set(event.post_id, {
        fast: (weight * Math.LN2 * 1000) / FAST_HALF_LIFE_MS,
        slow: (weight * Math.LN2 * 1000) / SLOW_HALF_LIFE_MS,
        at: event.at,
      });
      if (this.posts.size > this.maxPosts) this.posts.delete(this.posts.keys().next().value!);
      return;
    }
    // An event older than the rates' time (events of different users interleave slightly out of order) adds
    // without decaying: its contribution is counted, at worst a little high.
    const dt = event.at - rates.at;
    rates.fast = decayed(rates.fast, dt, FAST_HALF_LIFE_MS) + (weight * Math.LN2 * 1000) / FAST_HALF_LIFE_MS;
    rates.slow = decayed(rates.slow, dt, SLOW_HALF_LIFE_MS) + (weight * Math.LN2 * 1000) / SLOW_HALF_LIFE_MS;
    rates.at = Math.max(rates.at, event.at);
    this.posts.delete(event.post_id);
    this.posts.set(event.post_id, rates);
  }

  affinity(viewer: string, author: string): Affinity | undefined {
    const a = this.pairs.get(pairKey(viewer, author));
    return a === undefined ? undefined : { ...a };
  }

  /** Weighted interactions per second on a post as of `now` (decayed from its last event; not stored back). */
  velocity(postId: string, now: number): Velocity | undefined {
    const r = this.posts.get(postId);
    if (r === undefined) return undefined;
    const dt = now - r.at;
    return { fast: decayed(r.fast, dt, FAST_HALF_LIFE_MS), slow: decayed(r.slow, dt, SLOW_HALF_LIFE_MS) };
  }
}

function pairKey(viewer: string, author: string): string {
  // The viewer's length first makes the key unambiguous whatever characters the ids hold.
  return `${viewer.length}:${viewer}${author}`;
}
