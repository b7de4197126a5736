/**
 * The contract between the feed's read path (app tier, this package) and the ranker process (src/workers/ranker/, the
 * partner branch): one framed-RPC call (packages/platform/rpc) on the ranker worker's binary listener (its `tcpAddress`),
 * hello with the cluster token. The read path gives it RANK_DEADLINE_MS and serves time order when the answer is
 * late or an error, so nothing the ranker does can fail a feed read.
 */

/** The read path's deadline for one rank call (spec: ranker budget 50 ms). */
export const RANK_DEADLINE_MS = 50;
/** At most this many candidates per call (spec: candidate set 500 to 2,000). */
export const MAX_RANK_CANDIDATES = 2_000;

export type ContentType = 'text' | 'media' | 'comment' | 'repost';

export interface EngagementCounts {
  likes: number;
  comments: number;
  shares: number;
}

export interface RankCandidate {
  post_id: string;
  author_id: string;
  /** Epoch milliseconds. */
  created_at: number;
  content_type: ContentType;
  /** The post record's counters as the post cache holds them (the ranker keeps its own velocity features too). */
  engagement: EngagementCounts;
}

/** The request frame's call: `client.call(request, { timeoutMs: RANK_DEADLINE_MS })`. */
export interface RankRequest {
  op: 'rank';
  viewer: string;
  /** Epoch milliseconds: the read's ranked_at (recency is measured from it). */
  now: number;
  candidates: RankCandidate[];
}

export interface RankedPost {
  post_id: string;
  score: number;
}

/**
 * The answer: every candidate it kept, best first. Post ids it does not know or repeats are ignored by the read
 * path; candidates it leaves out are appended after the ranked ones in time order (so a partial answer loses none).
 */
export interface RankResponse {
  ranked: RankedPost[];
}

/**
 * An engagement event, the value of a record of topic ENGAGEMENT_TOPIC (key: the acting user's id), appended by the
 * app tier on like, comment and repost. The ranker consumes it for affinity (viewer -> author) and velocity (post).
 */
export interface EngagementEvent {
  type: 'like' | 'comment' | 'repost';
  user_id: string;
  author_id: string;
  post_id: string;
  /** Epoch milliseconds. */
  at: number;
}

export const POSTS_TOPIC = 'feed-posts';
export const DELETES_TOPIC = 'feed-deletes';
export const ENGAGEMENT_TOPIC = 'feed-engagement';
