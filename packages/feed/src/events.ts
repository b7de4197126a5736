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

export const TOPICS: ReadonlyArray<{ name: string; partitions: number }> = [
  { name: POSTS_TOPIC, partitions: 4 },
  { name: DELETES_TOPIC, partitions: 2 },
  { name: ENGAGEMENT_TOPIC, partitions: 2 },
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

export function parseEvent(value: string): PostEvent | DeleteEvent | null {
  try {
    const e = JSON.parse(value) as Partial<PostEvent>;
    if ((e.type === 'post' || e.type === 'delete') && typeof e.post_id === 'string' && typeof e.author_id === 'string' && typeof e.created_at === 'number') return e as PostEvent | DeleteEvent;
  } catch {
    /* a record that is not ours: skipped */
  }
  return null;
}
