/**
 * The store worker role (`cluster up` starts STORE_COUNT): one LevelDB partition of the users (by hash of user id,
 * `storeOf`), serving StoreCalls to the app tier and the fan-out workers, and folding followers_count changes in
 * the background (spec rule 3: asynchronously).
 */
import { join } from 'node:path';
import { serveWorkerHttp, type RunningWorker, type WorkerOptions, type WorkerRole } from '@raftkit/http';
import { FeedStore } from './store.js';
import { parseStoreCall, type StoreCall } from '../../store-protocol.js';
import { settingNumber } from '../../settings.js';

export const STORE_ROLE = 'store';
export const STORE_COUNT = 4;
/**
 * How often pending followers_count changes are folded into profiles while there are any. Only a `follower` call
 * adds one: after a fold that found none, the next waits for such a call (and FOLD_IDLE_MS at the latest, for
 * changes left by an earlier run of this process), so an idle store does not scan its LevelDB ten times a second.
 */
const FOLD_EVERY_MS = 100;
const FOLD_IDLE_MS = 10_000;

export const storeRole: WorkerRole = { role: STORE_ROLE, count: STORE_COUNT, start: startStore };

export async function startStore(options: WorkerOptions): Promise<RunningWorker> {
  const store = await FeedStore.open(
    join(options.dataDir, 'store'),
    settingNumber(options.settings, 'threshold', 'FEED_THRESHOLD', 1_000_000),
  );
  const http = await serveWorkerHttp(options, {
    health: () => ({ partition: options.index - 1, threshold: store.threshold, ...store.stats }),
  });
  http.metrics
    .gauge('feed_store_inbox_writes_total', 'Inbox entries written on this store partition')
    .set(() => store.stats.inboxWrites);
  http.metrics.gauge('feed_store_hot_hits_total', 'Inbox reads served by the hot cache').set(() => store.stats.hotHits);
  let folding = false;
  /** Changes may be pending: set by a `follower` call, cleared by a fold that found none. */
  let pending = true;
  let lastFold = 0;
  http.router.post('/internal/store/call', { admits: 'cluster' }, async (ctx) => {
    const call = parseStoreCall(await ctx.json());
    if (call.op === 'follower') pending = true;
    return handle(store, call);
  });

  const timer = setInterval(() => {
    if (folding || (!pending && Date.now() - lastFold < FOLD_IDLE_MS)) return;
    folding = true;
    lastFold = Date.now();
    // Cleared before the fold: a change that lands while it runs sets it again.
    pending = false;
    store.foldCounts().then(
      (folded) => {
        folding = false;
        if (folded > 0) pending = true;
      },
      (e: unknown) => {
        folding = false;
        pending = true;
        options.logger.log('warn', 'fold failed', { error: String(e) });
      },
    );
  }, FOLD_EVERY_MS);
  return {
    httpPort: http.port,
    async stop() {
      clearInterval(timer);
      await http.close();
      await store.close();
    },
  };
}

async function handle(store: FeedStore, c: StoreCall): Promise<unknown> {
  switch (c.op) {
    case 'follow':
      return { changed: await store.follow(c.follower, c.followee, c.at, c.on) };
    case 'follower':
      return { changed: await store.follower(c.followee, c.follower, c.at, c.on) };
    case 'following':
      return { edges: await store.following(c.user, c.limit, c.after) };
    case 'followers':
      return { edges: await store.followers(c.user, c.limit, c.after) };
    case 'profiles':
      return { profiles: await store.profiles(c.users) };
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
    case 'engagement':
      return { engagement: await store.engagement(c.user) };
    case 'add_inbox':
      await store.addInbox(c.entries);
      return { written: c.entries.length };
    case 'remove_inbox':
      await store.removeInbox(c.entries);
      return { removed: c.entries.length };
    case 'inbox':
      return { entries: await store.inbox(c.user, c.months, c.limit) };
    case 'add_outbox':
      await store.addOutbox(c.entries);
      return { written: c.entries.length };
    case 'remove_outbox':
      await store.removeOutbox(c.entries);
      return { removed: c.entries.length };
    case 'outbox':
      return { entries: await store.outbox(c.author, c.months, c.limit, c.before) };
    case 'mark_seen':
      await store.markSeen(c.user, c.post_ids, c.at);
      return { marked: c.post_ids.length };
    case 'seen':
      return { seen: await store.seen(c.user, c.post_ids) };
    case 'put_snapshot':
      await store.putSnapshot(c.user, c.ranked_at, c.snapshot);
      return { ok: true };
    case 'snapshot':
      return { snapshot: await store.snapshot(c.user, c.ranked_at) };
  }
}
