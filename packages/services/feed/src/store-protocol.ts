/**
 * The store workers' internal calls (cluster token only): `POST /internal/store/call` with one StoreCall, answered
 * with its StoreAnswer. One entry point keeps the client small; each call is checked here before it touches
 * LevelDB, so a malformed one is a 400 and never an exception in the store.
 */
import { badRequest, requireObject, type JsonObject } from '@raftkit/http';
import { POST_ID } from './post-id.js';
import { USER_ID } from './machine.js';
import type { AccountState, Edge, Engagement, FeedEntry, Profile } from './workers/store/store.js';

export type InboxWrite = FeedEntry & { user_id: string };

export type StoreCall =
  | { op: 'follow'; follower: string; followee: string; at: number; on: boolean }
  | { op: 'follower'; followee: string; follower: string; at: number; on: boolean }
  | { op: 'following'; user: string; limit: number; after: string }
  | { op: 'followers'; user: string; limit: number; after: string }
  | { op: 'profiles'; users: string[] }
  | { op: 'put_profile'; user: string; display_name?: string; account_state?: AccountState }
  | { op: 'threshold'; threshold: number | null }
  | { op: 'engage'; user: string; author: string; at: number }
  | { op: 'engagement'; user: string }
  | { op: 'add_inbox'; entries: InboxWrite[] }
  | { op: 'remove_inbox'; entries: InboxWrite[] }
  | { op: 'inbox'; user: string; months: string[]; limit: number }
  | { op: 'add_outbox'; entries: FeedEntry[] }
  | { op: 'remove_outbox'; entries: FeedEntry[] }
  | { op: 'outbox'; author: string; months: string[]; limit: number; before: string | null }
  | { op: 'mark_seen'; user: string; post_ids: string[]; at: number }
  | { op: 'seen'; user: string; post_ids: string[] }
  | { op: 'put_snapshot'; user: string; ranked_at: number; snapshot: unknown }
  | { op: 'snapshot'; user: string; ranked_at: number }
  | { op: 'fold'; max: number }
  | { op: 'sweep'; now: number; keep_months: number };

/**
 * The calls that change a partition: they go through the partition's `feed-store` log and every replica applies
 * them in offset order (src/workers/store/replica.ts); the others are reads, served by one replica.
 */
const WRITES: ReadonlySet<StoreCall['op']> = new Set([
  'follow',
  'follower',
  'put_profile',
  'engage',
  'add_inbox',
  'remove_inbox',
  'add_outbox',
  'remove_outbox',
  'mark_seen',
  'put_snapshot',
  'fold',
  'sweep',
]);

export function isWrite(call: StoreCall): boolean {
  return WRITES.has(call.op) || (call.op === 'threshold' && call.threshold !== null);
}

interface StoreAnswers {
  follow: { changed: boolean };
  follower: { changed: boolean };
  following: { edges: Edge[] };
  followers: { edges: Edge[] };
  profiles: { profiles: Profile[] };
  put_profile: { profile: Profile };
  threshold: { threshold: number; changed: number };
  engage: { engagement: Engagement };
  engagement: { engagement: Engagement[] };
  add_inbox: { written: number };
  remove_inbox: { removed: number };
  inbox: { entries: FeedEntry[] };
  add_outbox: { written: number };
  remove_outbox: { removed: number };
  outbox: { entries: FeedEntry[] };
  mark_seen: { marked: number };
  seen: { seen: string[] };
  put_snapshot: { ok: true };
  snapshot: { snapshot: unknown };
  fold: { folded: number };
  sweep: { deleted: number; more: boolean; oldest: string };
}

/** A write's answer also carries the log offset it was applied at (read-your-writes: StoreClient). */
export type StoreAnswer<C extends StoreCall> = StoreAnswers[C['op']] & { offset?: number };

const MAX_BATCH = 10_000;
const MONTH = /^\d{6}$/;

function bad(message: string): never {
  throw badRequest('invalid_call', message);
}
const user = (v: unknown, f: string): string =>
  typeof v === 'string' && USER_ID.test(v) ? v : bad(`${f} must be a user id`);
const post = (v: unknown, f: string): string =>
  typeof v === 'string' && POST_ID.test(v) ? v : bad(`${f} must be a post id`);
const int = (v: unknown, f: string, min: number, max: number): number =>
  typeof v === 'number' && Number.isSafeInteger(v) && v >= min && v <= max
    ? v
    : bad(`${f} must be an integer ${min}..${max}`);
const bool = (v: unknown, f: string): boolean => (typeof v === 'boolean' ? v : bad(`${f} must be a boolean`));
const list = (v: unknown, f: string): unknown[] =>
  Array.isArray(v) && v.length <= MAX_BATCH ? v : bad(`${f} must be a list of at most ${MAX_BATCH}`);
const months = (v: unknown): string[] =>
  list(v, 'months')
    .map((m) => (typeof m === 'string' && MONTH.test(m) ? m : bad('months must be yyyymm strings')))
    .slice(0, 24);
const TIME_MAX = 9_999_999_999_999;

function entry(v: unknown, withUser: boolean): InboxWrite {
  const o = requireObject(v, 'entry');
  return {
    user_id: withUser ? user(o.user_id, 'user_id') : '',
    post_id: post(o.post_id, 'post_id'),
    author_id: user(o.author_id, 'author_id'),
    created_at: int(o.created_at, 'created_at', 0, TIME_MAX),
  };
}

export function parseStoreCall(raw: unknown): StoreCall {
  const o: JsonObject = requireObject(raw);
  switch (o.op) {
    case 'follow':
    case 'follower':
      return {
        op: o.op,
        follower: user(o.follower, 'follower'),
        followee: user(o.followee, 'followee'),
        at: int(o.at, 'at', 0, TIME_MAX),
        on: bool(o.on, 'on'),
      };
    case 'following':
    case 'followers':
      return {
        op: o.op,
        user: user(o.user, 'user'),
        limit: int(o.limit, 'limit', 1, 100_000),
        after: o.after === undefined || o.after === '' ? '' : user(o.after, 'after'),
      };
    case 'profiles':
      return { op: 'profiles', users: list(o.users, 'users').map((u) => user(u, 'users')) };
    case 'put_profile': {
      const c: StoreCall = { op: 'put_profile', user: user(o.user, 'user') };
      if (o.display_name !== undefined)
        c.display_name =
          typeof o.display_name === 'string' && o.display_name.length <= 100
            ? o.display_name
            : bad('display_name must be at most 100 characters');
      if (o.account_state !== undefined)
        c.account_state =
          o.account_state === 'active' || o.account_state === 'suspended' || o.account_state === 'deactivated'
            ? o.account_state
            : bad('account_state must be active, suspended or deactivated');
      return c;
    }
    case 'threshold':
      return {
        op: 'threshold',
        threshold: o.threshold === null || o.threshold === undefined ? null : int(o.threshold, 'threshold', 0, 1e12),
      };
    case 'engage':
      return {
        op: 'engage',
        user: user(o.user, 'user'),
        author: user(o.author, 'author'),
        at: int(o.at, 'at', 0, TIME_MAX),
      };
    case 'engagement':
      return { op: 'engagement', user: user(o.user, 'user') };
    case 'add_inbox':
    case 'remove_inbox':
      return { op: o.op, entries: list(o.entries, 'entries').map((e) => entry(e, true)) };
    case 'add_outbox':
    case 'remove_outbox':
      return {
        op: o.op,
        entries: list(o.entries, 'entries').map((e) => {
          const { user_id: _u, ...rest } = entry(e, false);
          return rest;
        }),
      };
    case 'inbox':
      return {
        op: 'inbox',
        user: user(o.user, 'user'),
        months: months(o.months),
        limit: int(o.limit, 'limit', 1, 10_000),
      };
    case 'outbox':
      return {
        op: 'outbox',
        author: user(o.author, 'author'),
        months: months(o.months),
        limit: int(o.limit, 'limit', 1, 10_000),
        before: o.before === null || o.before === undefined ? null : post(o.before, 'before'),
      };
    case 'mark_seen':
      return {
        op: 'mark_seen',
        user: user(o.user, 'user'),
        post_ids: list(o.post_ids, 'post_ids').map((p) => post(p, 'post_ids')),
        at: int(o.at, 'at', 0, TIME_MAX),
      };
    case 'seen':
      return {
        op: 'seen',
        user: user(o.user, 'user'),
        post_ids: list(o.post_ids, 'post_ids').map((p) => post(p, 'post_ids')),
      };
    case 'put_snapshot':
      return {
        op: 'put_snapshot',
        user: user(o.user, 'user'),
        ranked_at: int(o.ranked_at, 'ranked_at', 0, TIME_MAX),
        snapshot: o.snapshot ?? null,
      };
    case 'snapshot':
      return { op: 'snapshot', user: user(o.user, 'user'), ranked_at: int(o.ranked_at, 'ranked_at', 0, TIME_MAX) };
    case 'fold':
      return { op: 'fold', max: int(o.max ?? 2_000, 'max', 1, MAX_BATCH) };
    case 'sweep':
      // Two months at least: the reads use the current and the previous one (spec rule 4).
      return {
        op: 'sweep',
        now: int(o.now, 'now', 0, TIME_MAX),
        keep_months: int(o.keep_months, 'keep_months', 2, 1200),
      };
    default:
      return bad('unknown op');
  }
}
