/** The payloads of the feed's topics (the spec leaves them "not shown"), and the topics' shapes. */
import { ServiceError } from '@raftkit/http';
import type { LogClient } from '@raftkit/log';
import { DELETES_TOPIC, ENGAGEMENT_TOPIC, POSTS_TOPIC } from './rank-wire.js';

/** Record of `feed-posts`, key author_id (one author's events stay in one partition, in order: spec rule 1). */
export interface PostEvent {
  type: 'post';
  post_id: string;
  author_id: string;
  created_at: number;
}

/** Record of `feed-deletes`, key author_id: invalidates post caches, the outbox entry and inbox entries. */
export interface DeleteEvent {
  type: 'delete';
  post_id: string;
  author_id: string;
  created_at: number;
}

/**
 * Records of feed-posts and feed-deletes that are not events (not JSON, a wrong shape), or that a store refused
 * (4xx), with their reason and where they were (packages/platform/log dead-letter.ts); created with the other topics.
 */
export const DEAD_LETTER_TOPIC = 'feed-dead-letter';

const TOPICS: ReadonlyArray<{ name: string; partitions: number }> = [
  { name: POSTS_TOPIC, partitions: 4 },
  { name: DELETES_TOPIC, partitions: 2 },
  { name: ENGAGEMENT_TOPIC, partitions: 2 },
  { name: DEAD_LETTER_TOPIC, partitions: 1 },
];

/** Creates the feed's topics (idempotent), retrying while the members elect and register. */
export async function ensureTopics(log: LogClient, deadlineMs = 600_000): Promise<void> {
  const deadline = Date.now() + deadlineMs;
  for (const t of TOPICS) {
    for (;;) {
      try {
        await log.createTopic(t.name, { partitions: t.partitions });
        break;
      } catch (e) {
        // Made concurrently by another process that saw a different host count (so another replica count): it
        // exists, which is all this needs.
        if (e instanceof ServiceError && e.code === 'topic_exists') break;
        if (Date.now() > deadline) throw e;
        await new Promise((r) => setTimeout(r, 500));
      }
    }
  }
}

/** A post or delete event, or a throw saying why the record is not one (the fan-out's decode step). */
export function decodeEvent(value: string): PostEvent | DeleteEvent {
  let e: Partial<PostEvent> | null;
  try {
    e = JSON.parse(value) as Partial<PostEvent> | null;
  } catch {
    throw new Error('not JSON');
  }
  if (typeof e !== 'object' || e === null || Array.isArray(e)) throw new Error('not a JSON object');
  if (e.type !== 'post' && e.type !== 'delete') throw new Error('type: post or delete');
  if (typeof e.post_id !== 'string' || e.post_id.length === 0 || e.post_id.length > 200)
    throw new Error('post_id: a string of 1..200 characters');
  if (typeof e.author_id !== 'string' || e.author_id.length === 0 || e.author_id.length > 200)
    throw new Error('author_id: a string of 1..200 characters');
  if (typeof e.created_at !== 'number' || !Number.isFinite(e.created_at)) throw new Error('created_at: a time');
  return e as PostEvent | DeleteEvent;
}

/** decodeEvent, or null for a record that is not an event (readers that only skip such records). */
export function parseEvent(value: string): PostEvent | DeleteEvent | null {
  try {
    return decodeEvent(value);
  } catch {
    return null;
  }
}
