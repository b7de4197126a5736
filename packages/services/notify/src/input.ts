/** Validation of the public request bodies: every failure is a 400 JSON error naming the field. */
import { badRequest, requireObject, requireString, type JsonObject } from '@raftkit/http';
import {
  CHANNELS,
  PRIORITIES,
  type Channel,
  type Priority,
  type PushSubscription,
} from './workers/delivery/channels/channel.js';
import { isChannel, isPriority, type Preferences, type Template } from './machine.js';
import { isValidClock, isValidTimeZone } from './quiet-hours.js';
import { reservedPaths, RESERVED_SEGMENTS } from './template.js';

/** A user id also names the user's token (`client.user.<id>.<mac>`), so it fits the token's name alphabet. */
export const USER_ID = /^[A-Za-z0-9_-]{1,59}$/;
export const EVENT_TYPE = /^[A-Za-z0-9._-]{1,100}$/;
export const SEGMENT_ID = /^[A-Za-z0-9._-]{1,100}$/;
/** The spec leaves it open; one request's records go to the log in a few batches at this size. */
const MAX_USER_IDS = 10_000;
const MAX_SEGMENT_USERS = 100_000;
export const MAX_DATA_BYTES = 16 * 1024;
export const MAX_KEY_BYTES = 200;

interface NotificationInput {
  event_type: string;
  user_ids: string[] | null;
  segment_id: string | null;
  data: Record<string, unknown>;
  priority: Priority;
  idempotency_key: string;
  campaign_id: string | null;
}

function userIds(value: unknown, field: string, max: number): string[] {
  if (!Array.isArray(value) || value.length === 0)
    throw badRequest('invalid_field', `${field} must be a non-empty array of user ids`, { field });
  if (value.length > max)
    throw badRequest('too_many_users', `${field} holds ${value.length} ids; at most ${max} per request`, {
      field,
      max,
    });
  const seen = new Set<string>();
  for (const id of value) {
    if (typeof id !== 'string' || !USER_ID.test(id))
      throw badRequest('invalid_field', `${field} entries must be 1 to 59 characters of A-Z a-z 0-9 _ -`, { field });
    seen.add(id);
  }
  return [...seen];
}

export function parseNotification(body: unknown): NotificationInput {
  const o = requireObject(body);
  const event_type = requireString(o, 'event_type', { pattern: EVENT_TYPE });
  const hasUsers = o.user_ids !== undefined;
  const hasSegment = o.segment_id !== undefined;
  if (hasUsers === hasSegment)
    throw badRequest('invalid_field', 'give exactly one of user_ids or segment_id', {
      field: hasUsers ? 'segment_id' : 'user_ids',
    });
  const user_ids = hasUsers ? userIds(o.user_ids, 'user_ids', MAX_USER_IDS) : null;
  const segment_id = hasSegment ? requireString(o, 'segment_id', { pattern: SEGMENT_ID }) : null;
  const data = o.data === undefined ? {} : requireObject(o.data, 'data');
  if (Buffer.byteLength(JSON.stringify(data)) > MAX_DATA_BYTES)
    throw badRequest('invalid_field', `data must be at most ${MAX_DATA_BYTES} bytes of JSON`, { field: 'data' });
  if (!isPriority(o.priority))
    throw badRequest('invalid_field', `priority must be one of ${PRIORITIES.join(', ')} (it is never inferred)`, {
      field: 'priority',
    });
  if (o.idempotency_key === undefined)
    throw badRequest('invalid_field', 'idempotency_key is required', { field: 'idempotency_key' });
  const idempotency_key = requireString(o, 'idempotency_key', { minLength: 1, maxLength: MAX_KEY_BYTES });
  const campaign_id = o.campaign_id === undefined ? null : requireString(o, 'campaign_id', { pattern: SEGMENT_ID });
  return { event_type, user_ids, segment_id, data, priority: o.priority, idempotency_key, campaign_id };
}

export function parseSegment(body: unknown): string[] {
  return userIds(requireObject(body).user_ids, 'user_ids', MAX_SEGMENT_USERS);
}

export function parseTemplate(body: unknown): Template {
  const o = requireObject(body);
  const template = {
    title: requireString(o, 'title', { maxLength: 1000 }),
    body: requireString(o, 'body', { maxLength: 16 * 1024 }),
  };
  for (const field of ['title', 'body'] as const) {
    const reserved = reservedPaths(template[field]);
    if (reserved.length > 0) {
      throw badRequest(
        'invalid_field',
        `${field}: {{${reserved[0]}}} names no data (${[...RESERVED_SEGMENTS].join(', ')} are not data fields)`,
        { field },
      );
    }
  }
  return template;
}

export function parseChannel(text: string | undefined): Channel {
  if (!isChannel(text))
    throw badRequest('invalid_field', `channel must be one of ${CHANNELS.join(', ')}`, { field: 'channel' });
  return text;
}

const EMAIL = /^[^\s@]{1,64}@[^\s@]{1,255}$/;
const PHONE = /^\+[1-9]\d{6,14}$/;

function subscription(value: unknown, i: number): PushSubscription {
  const field = `contact.push_subscriptions[${i}]`;
  const o = requireObject(value, field);
  if (typeof o.endpoint !== 'string' || !/^https?:\/\//.test(o.endpoint) || o.endpoint.length > 2000)
    throw badRequest('invalid_field', `${field}.endpoint must be an http(s) URL`, { field });
  const keys = requireObject(o.keys, `${field}.keys`);
  if (
    typeof keys.p256dh !== 'string' ||
    typeof keys.auth !== 'string' ||
    keys.p256dh.length > 200 ||
    keys.auth.length > 100
  ) {
    throw badRequest('invalid_field', `${field}.keys must hold p256dh and auth strings`, { field });
  }
  return { endpoint: o.endpoint, keys: { p256dh: keys.p256dh, auth: keys.auth } };
}

/**
 * A PUT of preferences replaces the fields it names and keeps the others (so a caller changing quiet hours does
 * not have to resend the push subscriptions).
 */
export function mergePreferences(current: Preferences, body: unknown): Preferences {
  const o: JsonObject = requireObject(body);
  const next = structuredClone(current);
  for (const key of Object.keys(o)) {
    if (!['channels_enabled', 'quiet_hours', 'frequency_cap', 'contact'].includes(key))
      throw badRequest('invalid_field', `unknown field ${key}`, { field: key });
  }
  if (o.channels_enabled !== undefined) {
    const ce = requireObject(o.channels_enabled, 'channels_enabled');
    for (const [channel, on] of Object.entries(ce)) {
      if (!isChannel(channel))
        throw badRequest('invalid_field', `channels_enabled keys are ${CHANNELS.join(', ')}`, {
          field: 'channels_enabled',
        });
      if (typeof on !== 'boolean')
        throw badRequest('invalid_field', `channels_enabled.${channel} must be true or false`, {
          field: `channels_enabled.${channel}`,
        });
      next.channels_enabled[channel] = on;
    }
  }
  if (o.quiet_hours !== undefined) {
    if (o.quiet_hours === null) next.quiet_hours = null;
    else {
      const q = requireObject(o.quiet_hours, 'quiet_hours');
      for (const f of ['start', 'end'] as const) {
        if (typeof q[f] !== 'string' || !isValidClock(q[f]))
          throw badRequest('invalid_field', `quiet_hours.${f} must be HH:MM (24 h)`, { field: `quiet_hours.${f}` });
      }
      if (typeof q.timezone !== 'string' || !isValidTimeZone(q.timezone))
        throw badRequest('invalid_field', 'quiet_hours.timezone must be an IANA time zone such as Europe/Paris', {
          field: 'quiet_hours.timezone',
        });
      next.quiet_hours = { start: q.start as string, end: q.end as string, timezone: q.timezone };
    }
  }
  if (o.frequency_cap !== undefined) {
    if (!Array.isArray(o.frequency_cap) || o.frequency_cap.length > CHANNELS.length)
      throw badRequest('invalid_field', 'frequency_cap must be an array of {channel, max_per_hour}', {
        field: 'frequency_cap',
      });
    next.frequency_cap = o.frequency_cap.map((c, i) => {
      const e = requireObject(c, `frequency_cap[${i}]`);
      if (!isChannel(e.channel))
        throw badRequest('invalid_field', `frequency_cap[${i}].channel must be one of ${CHANNELS.join(', ')}`, {
          field: `frequency_cap[${i}].channel`,
        });
      if (
        typeof e.max_per_hour !== 'number' ||
        !Number.isSafeInteger(e.max_per_hour) ||
        e.max_per_hour < 0 ||
        e.max_per_hour > 1_000_000
      ) {
        throw badRequest('invalid_field', `frequency_cap[${i}].max_per_hour must be an integer 0..1000000`, {
          field: `frequency_cap[${i}].max_per_hour`,
        });
      }
      return { channel: e.channel, max_per_hour: e.max_per_hour };
    });
  }
  if (o.contact !== undefined) {
    const c = requireObject(o.contact, 'contact');
    if (c.email !== undefined) {
      if (c.email !== null && (typeof c.email !== 'string' || !EMAIL.test(c.email)))
        throw badRequest('invalid_field', 'contact.email must be an email address or null', { field: 'contact.email' });
      next.contact.email = c.email as string | null;
    }
    if (c.phone !== undefined) {
      if (c.phone !== null && (typeof c.phone !== 'string' || !PHONE.test(c.phone)))
        throw badRequest('invalid_field', 'contact.phone must be E.164 (+15551234567) or null', {
          field: 'contact.phone',
        });
      next.contact.phone = c.phone as string | null;
    }
    if (c.push_subscriptions !== undefined) {
      if (!Array.isArray(c.push_subscriptions) || c.push_subscriptions.length > 20)
        throw badRequest('invalid_field', 'contact.push_subscriptions must be an array of at most 20 subscriptions', {
          field: 'contact.push_subscriptions',
        });
      next.contact.push_subscriptions = c.push_subscriptions.map(subscription);
    }
  }
  return next;
}
