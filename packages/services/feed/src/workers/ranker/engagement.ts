/**
 * Engagement events on the `feed-engagement` topic (the app tier appends one per like, comment and repost, keyed by
 * the acting user): the ranker's parser, which skips anything malformed instead of failing, and the encoder.
 */
import { ENGAGEMENT_TOPIC } from '../../rank-wire.js';
import { ENGAGEMENT_TYPES, type EngagementEvent, type EngagementType } from './types.js';

export { ENGAGEMENT_TOPIC };

export function isEngagementType(value: unknown): value is EngagementType {
  return typeof value === 'string' && (ENGAGEMENT_TYPES as readonly string[]).includes(value);
}

export function encodeEngagement(event: EngagementEvent): string {
  return JSON.stringify({
    type: event.type,
    user_id: event.user_id,
    author_id: event.author_id,
    post_id: event.post_id,
    at: event.at,
  });
}

/** The event a record holds, or null when it is not one (a malformed record is skipped and counted, never fatal). */
export function parseEngagement(value: string): EngagementEvent | null {
  let raw: unknown;
  try {
    raw = JSON.parse(value);
  } catch {
    return null;
  }
  if (typeof raw !== 'object' || raw === null) return null;
  const r = raw as Record<string, unknown>;
  if (!isEngagementType(r.type)) return null;
  if (typeof r.user_id !== 'string' || typeof r.author_id !== 'string' || typeof r.post_id !== 'string') return null;
  if (typeof r.at !== 'number' || !Number.isFinite(r.at) || r.at < 0) return null;
  return { type: r.type, user_id: r.user_id, author_id: r.author_id, post_id: r.post_id, at: r.at };
}
