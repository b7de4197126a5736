/**
 * A store call on one partition replica: writes as the replica applies them from the log (each replica the same,
 * in offset order: no clock, no randomness), reads as one replica answers them.
 */
import type { StoreAnswer, StoreCall } from '../../store-protocol.js';
import { month, monthsBefore } from './keys.js';
import type { FeedStore } from './store.js';

/** Applies a write call (isWrite): what every replica does with the log record at its offset. */
export async function applyWrite(store: FeedStore, c: StoreCall): Promise<StoreAnswer<StoreCall>> {
  switch (c.op) {
    case 'follow':
      return { changed: await store.follow(c.follower, c.followee, c.at, c.on) };
    case 'follower':
      return { changed: await store.follower(c.followee, c.follower, c.at, c.on) };
    case 'put_profile': {
      const change: Parameters<FeedStore['putProfile']>[1] = {};
      if (c.display_name !== undefined) change.display_name = c.display_name;
      if (c.account_state !== undefined) change.account_state = c.account_state;
      return { profile: await store.putProfile(c.user, change) };
    }
    case 'threshold':
      return c.threshold === null
        ? { threshold: store.threshold, changed: 0 }
        : { threshold: c.threshold, changed: await store.setThreshold(c.threshold) };
    case 'engage':
      return { engagement: await store.engage(c.user, c.author, c.at) };
    case 'add_inbox':
      await store.addInbox(c.entries);
      return { written: c.entries.length };
    case 'remove_inbox':
      await store.removeInbox(c.entries);
      return { removed: c.entries.length };
    case 'add_outbox':
      await store.addOutbox(c.entries);
      return { written: c.entries.length };
    case 'remove_outbox':
      await store.removeOutbox(c.entries);
      return { removed: c.entries.length };
    case 'mark_seen':
      await store.markSeen(c.user, c.post_ids, c.at);
      return { marked: c.post_ids.length };
    case 'put_snapshot':
      await store.putSnapshot(c.user, c.ranked_at, c.snapshot);
      return { ok: true };
    case 'fold':
      return { folded: await store.foldCounts(c.max) };
    case 'sweep': {
      // Keeps keep_months buckets: the op's month and the keep_months - 1 before it.
      const oldest = monthsBefore(month(c.now), c.keep_months - 1);
      return { ...(await store.sweep(oldest)), oldest };
    }
    default:
      return readCall(store, c);
  }
}

/** Answers a read call from this replica's store. */
export async function readCall(store: FeedStore, c: StoreCall): Promise<StoreAnswer<StoreCall>> {
  switch (c.op) {
    case 'following':
      return { edges: await store.following(c.user, c.limit, c.after) };
    case 'followers':
      return { edges: await store.followers(c.user, c.limit, c.after) };
    case 'profiles':
      return { profiles: await store.profiles(c.users) };
    case 'threshold':
      return { threshold: store.threshold, changed: 0 };
    case 'engagement':
      return { engagement: await store.engagement(c.user) };
    case 'inbox':
      return { entries: await store.inbox(c.user, c.months, c.limit) };
    case 'outbox':
      return { entries: await store.outbox(c.author, c.months, c.limit, c.before) };
    case 'seen':
      return { seen: await store.seen(c.user, c.post_ids) };
    case 'snapshot':
      return { snapshot: await store.snapshot(c.user, c.ranked_at) };
    default:
      throw new Error(`${c.op} is a write`);
  }
}
