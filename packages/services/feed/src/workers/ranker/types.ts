/**
 * The ranker's vocabulary. What crosses the process boundary (candidates, rankings, engagement events) is the
 * contract in ../rank-wire.ts, agreed with the read path; this file adds what only the ranker holds.
 */
import type { EngagementEvent, RankCandidate } from '../../rank-wire.js';

export type { ContentType, EngagementCounts, EngagementEvent, RankedPost } from '../../rank-wire.js';
/** One post the read path asks to rank. */
export type Candidate = RankCandidate;

export const CONTENT_TYPES = ['text', 'media', 'comment', 'repost'] as const;
export const ENGAGEMENT_TYPES = ['like', 'comment', 'repost'] as const;
export type EngagementType = EngagementEvent['type'];

/** The spec's user_engagement record (one viewer, one author) as the ranker holds it. */
export interface Affinity {
  interaction_count: number;
  /** Milliseconds since the epoch. */
  last_interaction_at: number;
}

/** Weighted interactions per second on one post, as two decaying rates (seconds-scale and minutes-scale). */
export interface Velocity {
  /** Half-life 10 s. */
  fast: number;
  /** Half-life 5 min. */
  slow: number;
}

/** What scoring reads of the ranker's features (a FeatureStore in the process; anything in tests). */
export interface FeatureView {
  affinity(viewer: string, author: string): Affinity | undefined;
  velocity(postId: string, now: number): Velocity | undefined;
}

export const NO_FEATURES: FeatureView = {
  affinity: () => undefined,
  velocity: () => undefined,
};
