/**
 * The read-only questions a state group answers (locally on a member that holds it, or through
 * POST /v1/notify/groups/:group/query from a worker or another member), one place for both paths.
 */
import { badRequest } from '@raftkit/http';
import { CHANNELS, type Channel } from './workers/delivery/channels/channel.js';
import type { DeliveryRow, NotifyMachine, Preferences, RouteDecision, Template } from './machine.js';

export type StateQuery =
  /** `local`: answered from the replica's applied state without a read barrier (preferences may be a few ms old). */
  | { q: 'routeContext'; user_id: string; event_type: string; local?: boolean }
  | { q: 'routeContexts'; user_ids: string[]; event_types: string[]; local?: boolean }
  | { q: 'sendContext'; message_ids: string[]; user_ids: string[] }
  | { q: 'status'; notification_id: string }
  | { q: 'prefs'; user_id: string }
  | { q: 'segment'; segment_id: string }
  | { q: 'inbox'; user_id: string; unread_only: boolean; limit: number };

export interface RouteContext {
  prefs: Preferences;
  templates: Partial<Record<Channel, Template>>;
}

/** The bulk router's batch read: each user's preferences, each event type's templates. */
export interface RouteContexts {
  prefs: Record<string, Preferences>;
  templates: Record<string, Partial<Record<Channel, Template>>>;
}

export interface SendContext {
  rows: Record<string, DeliveryRow | null>;
  prefs: Record<string, Preferences>;
}

export interface StatusPart {
  rows: DeliveryRow[];
  routes: RouteDecision[];
}

export function answer(machine: NotifyMachine, query: StateQuery): unknown {
  switch (query.q) {
    case 'routeContext': {
      const templates: Partial<Record<Channel, Template>> = {};
      for (const channel of CHANNELS) {
        const t = machine.template(query.event_type, channel);
        if (t !== null) templates[channel] = t;
      }
      return { prefs: machine.preferences(query.user_id), templates } satisfies RouteContext;
    }
    case 'routeContexts': {
      const prefs: Record<string, Preferences> = {};
      for (const user of query.user_ids) prefs[user] = machine.preferences(user);
      const templates: Record<string, Partial<Record<Channel, Template>>> = {};
      for (const eventType of query.event_types) {
        const own: Partial<Record<Channel, Template>> = {};
        for (const channel of CHANNELS) {
          const t = machine.template(eventType, channel);
          if (t !== null) own[channel] = t;
        }
        templates[eventType] = own;
      }
      return { prefs, templates } satisfies RouteContexts;
    }
    case 'sendContext': {
      const rows: Record<string, DeliveryRow | null> = {};
      for (const id of query.message_ids) rows[id] = machine.row(id);
      const prefs: Record<string, Preferences> = {};
      for (const user of query.user_ids) prefs[user] = machine.preferences(user);
      return { rows, prefs } satisfies SendContext;
    }
    case 'status':
      return {
        rows: machine.rowsOf(query.notification_id),
        routes: machine.routesOf(query.notification_id),
      } satisfies StatusPart;
    case 'prefs':
      return { prefs: machine.preferences(query.user_id) };
    case 'segment':
      return { user_ids: machine.segment(query.segment_id) };
    case 'inbox':
      return machine.inbox(query.user_id, { unreadOnly: query.unread_only, limit: query.limit });
  }
}

const QUERIES = new Set(['routeContext', 'routeContexts', 'sendContext', 'status', 'prefs', 'segment', 'inbox']);

/** A query as it arrives over HTTP (internal callers only, but still checked: bad input is a 400, never a crash). */
export function checkQuery(value: unknown): StateQuery {
  if (typeof value !== 'object' || value === null || !QUERIES.has((value as { q?: unknown }).q as string)) {
    throw badRequest('invalid_query', `q must be one of ${[...QUERIES].join(', ')}`, { field: 'q' });
  }
  const v = value as Record<string, unknown>;
  const str = (f: string): void => {
    if (typeof v[f] !== 'string') throw badRequest('invalid_field', `${f} must be a string`, { field: f });
  };
  const strs = (f: string): void => {
    if (
      !Array.isArray(v[f]) ||
      !(v[f] as unknown[]).every((x) => typeof x === 'string') ||
      (v[f] as unknown[]).length > 10_000
    ) {
      throw badRequest('invalid_field', `${f} must be an array of at most 10,000 strings`, { field: f });
    }
  };
  switch (v.q) {
    case 'routeContext':
      str('user_id');
      str('event_type');
      break;
    case 'routeContexts':
      strs('user_ids');
      strs('event_types');
      break;
    case 'sendContext':
      strs('message_ids');
      strs('user_ids');
      break;
    case 'status':
      str('notification_id');
      break;
    case 'prefs':
      str('user_id');
      break;
    case 'segment':
      str('segment_id');
      break;
    case 'inbox':
      str('user_id');
      if (typeof v.unread_only !== 'boolean')
        throw badRequest('invalid_field', 'unread_only must be true or false', { field: 'unread_only' });
      if (typeof v.limit !== 'number' || !Number.isSafeInteger(v.limit) || v.limit < 1 || v.limit > 1000)
        throw badRequest('invalid_field', 'limit must be 1..1000', { field: 'limit' });
      break;
  }
  return v as unknown as StateQuery;
}
