/**
 * The decode steps of the notify topics: a record that is not JSON or not the shape its topic carries is refused
 * with a reason (it goes to DEAD_LETTER_TOPIC; the records beside it are routed and sent as usual). Anyone holding a
 * token that may append to a topic could write such a record; a refused one never stops a loop.
 */
import {
  CHANNELS,
  PRIORITIES,
  type Address,
  type Channel,
  type OutboundMessage,
  type Priority,
} from './workers/delivery/channels/channel.js';

/** What the ingestion queue carries: one record per (notification, user), keyed by user_id. */
export interface IngestRecord {
  notification_id: string;
  user_id: string;
  event_type: string;
  priority: (typeof PRIORITIES)[number];
  data: Record<string, unknown>;
  accepted_at: number;
  campaign_id: string | null;
}

/**
 * What a channel topic carries: an outbound message before its attempt. The address is the router's snapshot, used
 * only when the store is unreachable (null: look it up at send time).
 */
export type QueuedMessage = Omit<OutboundMessage, 'address' | 'attempt' | 'receipt_url'> & {
  address: Address | null;
  fallback_from?: Channel;
};

function object(value: string): Record<string, unknown> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch {
    throw new Error('not JSON');
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new Error('not a JSON object');
  return parsed as Record<string, unknown>;
}

function text(o: Record<string, unknown>, field: string, max = 1_000): string {
  const v = o[field];
  if (typeof v !== 'string' || v.length === 0 || v.length > max)
    throw new Error(`${field}: a string of 1..${max} characters`);
  return v;
}

function priority(o: Record<string, unknown>): Priority {
  if (!PRIORITIES.includes(o.priority as Priority)) throw new Error(`priority: one of ${PRIORITIES.join(', ')}`);
  return o.priority as Priority;
}

/** A record of a `notify-ingest-*` topic. */
export function decodeIngest(value: string): IngestRecord {
  const o = object(value);
  text(o, 'notification_id', 100);
  text(o, 'user_id', 200);
  text(o, 'event_type', 200);
  priority(o);
  if (typeof o.data !== 'object' || o.data === null || Array.isArray(o.data)) throw new Error('data: an object');
  if (!Number.isFinite(o.accepted_at)) throw new Error('accepted_at: a time');
  if (o.campaign_id !== null && o.campaign_id !== undefined && typeof o.campaign_id !== 'string')
    throw new Error('campaign_id: a string or null');
  return { ...(o as unknown as IngestRecord), campaign_id: (o.campaign_id as string | null | undefined) ?? null };
}

/** A record of a channel topic (`notify-<priority>-<channel>`). */
export function decodeQueued(value: string): QueuedMessage {
  const o = object(value);
  text(o, 'message_id', 600);
  text(o, 'notification_id', 100);
  text(o, 'user_id', 200);
  text(o, 'event_type', 200);
  priority(o);
  if (!CHANNELS.includes(o.channel as Channel)) throw new Error(`channel: one of ${CHANNELS.join(', ')}`);
  const content = o.content as Record<string, unknown> | null;
  if (typeof content !== 'object' || content === null || Array.isArray(content)) throw new Error('content: an object');
  if (typeof content.title !== 'string' || typeof content.body !== 'string')
    throw new Error('content: title and body are strings');
  if (typeof content.data !== 'object' || content.data === null || Array.isArray(content.data))
    throw new Error('content.data: an object');
  if (!Number.isFinite(o.accepted_at)) throw new Error('accepted_at: a time');
  if (o.address !== null && (typeof o.address !== 'object' || Array.isArray(o.address)))
    throw new Error('address: an object or null');
  return o as unknown as QueuedMessage;
}
