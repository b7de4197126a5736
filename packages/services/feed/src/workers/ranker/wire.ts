/**
 * The ranker's framed-RPC protocol (packages/platform/rpc, msgpack frames): the rank call of the agreed contract
 * (../rank-wire.ts) with two optional additions, the affinity and stats calls, and the parser that turns an
 * untrusted decoded request into a typed one or a `bad_request` naming the field.
 */
import { RpcError } from '@raftkit/rpc';
import { MAX_RANK_CANDIDATES, type RankRequest as AgreedRankRequest, type RankResponse } from '../../rank-wire.js';
import { CONTENT_TYPES, type Affinity, type Candidate, type ContentType } from './types.js';

export const MAX_CANDIDATES = MAX_RANK_CANDIDATES;
export const MAX_ID_LENGTH = 200;

export interface RankRequest extends Omit<AgreedRankRequest, 'now'> {
  /** The read path's clock (ms); the ranker's own when absent. */
  now?: number;
  /** Skip the recent-ranking cache (a test, or a caller that wants fresh features). */
  fresh?: boolean;
}

/** The agreed answer, plus whether it came from the recent-ranking cache and when it was ranked. */
export interface RankAnswer extends RankResponse {
  /** True when this is the viewer's recent ranking of the same candidates, served again. */
  cached: boolean;
  /** When the ranking was computed (the ranker's clock, ms). */
  ranked_at: number;
}

/** A viewer's affinity to an author as the ranker holds it now (null: no event seen). */
interface AffinityRequest {
  op: 'affinity';
  viewer: string;
  author: string;
}

interface StatsRequest {
  op: 'stats';
}

export interface RankerStats {
  events_applied: number;
  events_malformed: number;
  pairs: number;
  posts: number;
  cached_viewers: number;
  cache_hits: number;
  cache_misses: number;
}

export type RankerRequest = RankRequest | AffinityRequest | StatsRequest;
export type AffinityAnswer = Affinity | null;

function bad(message: string): RpcError {
  return new RpcError('bad_request', message);
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function id(value: unknown, field: string): string {
  if (typeof value !== 'string' || value.length === 0 || value.length > MAX_ID_LENGTH)
    throw bad(`${field} must be a string of 1 to ${MAX_ID_LENGTH} characters`);
  return value;
}

function count(value: unknown, field: string): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0)
    throw bad(`${field} must be a non-negative integer`);
  return value;
}

function time(value: unknown, field: string): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0)
    throw bad(`${field} must be a time in ms since the epoch`);
  return value;
}

function candidate(raw: unknown, i: number): Candidate {
  const at = `candidates[${i}]`;
  if (!isRecord(raw)) throw bad(`${at} must be an object`);
  if (typeof raw.content_type !== 'string' || !(CONTENT_TYPES as readonly string[]).includes(raw.content_type))
    throw bad(`${at}.content_type must be one of ${CONTENT_TYPES.join(', ')}`);
  const e = raw.engagement;
  if (!isRecord(e)) throw bad(`${at}.engagement must be { likes, comments, shares }`);
  return {
    post_id: id(raw.post_id, `${at}.post_id`),
    author_id: id(raw.author_id, `${at}.author_id`),
    created_at: time(raw.created_at, `${at}.created_at`),
    content_type: raw.content_type as ContentType,
    engagement: {
      likes: count(e.likes, `${at}.engagement.likes`),
      comments: count(e.comments, `${at}.engagement.comments`),
      shares: count(e.shares, `${at}.engagement.shares`),
    },
  };
}

export function parseRankerRequest(raw: unknown): RankerRequest {
  if (!isRecord(raw)) throw bad('a request must be an object with an op');
  switch (raw.op) {
    case 'rank': {
      if (!Array.isArray(raw.candidates)) throw bad('candidates must be an array');
      if (raw.candidates.length > MAX_CANDIDATES)
        throw bad(`at most ${MAX_CANDIDATES} candidates, got ${raw.candidates.length}`);
      const request: RankRequest = {
        op: 'rank',
        viewer: id(raw.viewer, 'viewer'),
        candidates: raw.candidates.map(candidate),
      };
      if (raw.now !== undefined) request.now = time(raw.now, 'now');
      if (raw.fresh !== undefined) {
        if (typeof raw.fresh !== 'boolean') throw bad('fresh must be true or false');
        request.fresh = raw.fresh;
      }
      return request;
    }
    case 'affinity':
      return { op: 'affinity', viewer: id(raw.viewer, 'viewer'), author: id(raw.author, 'author') };
    case 'stats':
      return { op: 'stats' };
    default:
      throw bad('op must be rank, affinity or stats');
  }
}
