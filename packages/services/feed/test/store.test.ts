/**
 * One store partition on a real LevelDB: both views of the follow relation, the asynchronous followers_count fold
 * and the celebrity flag, the threshold, inbox buckets newest first with the hot cache (and a write racing a cold
 * load), outboxes, seen marks and snapshots.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { month, readMonths } from '../src/workers/store/keys.js';
import { newPostId } from '../src/post-id.js';
import { FeedStore } from '../src/workers/store/store.js';

const dir = mkdtempSync(join(tmpdir(), 'feed-store-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const store = await FeedStore.open(join(dir, 'db'), 2);
t.teardown(() => store.close());
const now = Date.now();
const months = readMonths(now);

t.test('follow graph: one prefix each way; counts folded later; the flag follows the threshold', async (t) => {
  for (const f of ['b', 'c', 'd']) {
    t.equal(await store.follow(f, 'star', now, true), true);
    t.equal(await store.follower('star', f, now, true), true);
  }
  t.equal(await store.follower('star', 'b', now, true), false, 'idempotent');
  t.same(
    (await store.followers('star', 10)).map((e) => e.user_id),
    ['b', 'c', 'd'],
  );
  t.same(
    (await store.following('b', 10)).map((e) => e.user_id),
    ['star'],
  );
  t.same(
    (await store.followers('star', 2, 'b')).map((e) => e.user_id),
    ['c', 'd'],
    'paged after a user',
  );
  t.match(await store.profiles(['star']), [{ followers_count: 0 }], 'not folded yet: asynchronous');
  t.equal(await store.pendingCountChanges(), 3);
  t.equal(await store.foldCounts(), 3);
  t.match(await store.profiles(['star']), [{ followers_count: 3, is_celebrity: true }], '3 > threshold 2');
  // A follow then an unfollow before the fold: no change at all.
  await store.follower('star', 'e', now, true);
  await store.follower('star', 'e', now, false);
  t.equal(await store.pendingCountChanges(), 0);
  await store.follower('star', 'b', now, false);
  await store.foldCounts();
  t.match(await store.profiles(['star']), [{ followers_count: 2, is_celebrity: false }]);
  t.equal(await store.setThreshold(1), 1, 'one profile re-flagged');
  t.match(await store.profiles(['star']), [{ is_celebrity: true }]);
  await store.setThreshold(2);
});

t.test('inbox: newest first, current and previous month, hot cache written through', async (t) => {
  const old = now - 70 * 24 * 3600_000;
  const e = (at: number, author = 'x') => ({
    user_id: 'u1',
    post_id: newPostId(at),
    author_id: author,
    created_at: at,
  });
  const a = e(now - 3);
  const b = e(now - 2);
  const ancient = e(old);
  await store.addInbox([a, ancient, b]);
  t.same(
    (await store.inbox('u1', months, 10)).map((x) => x.post_id),
    [b.post_id, a.post_id],
    'two months only, newest first',
  );
  t.notOk(months.includes(month(old)));
  const c = e(now - 1);
  const hits = store.stats.hotHits;
  await store.addInbox([c]);
  t.same(
    (await store.inbox('u1', months, 10)).map((x) => x.post_id),
    [c.post_id, b.post_id, a.post_id],
    'the write went through to the cache',
  );
  t.equal(store.stats.hotHits, hits + 1, 'served by the hot cache');
  await store.removeInbox([b]);
  t.same(
    (await store.inbox('u1', months, 10)).map((x) => x.post_id),
    [c.post_id, a.post_id],
  );
  await store.addInbox([c]);
  t.equal((await store.inbox('u1', months, 10)).length, 2, 'idempotent');
});

t.test('a write racing a cold load is never lost from the cache', async (t) => {
  for (let i = 0; i < 50; i++) {
    const user = `race${i}`;
    const first = { user_id: user, post_id: newPostId(now - 10), author_id: 'x', created_at: now - 10 };
    await store.addInbox([first]);
    const late = { user_id: user, post_id: newPostId(now), author_id: 'x', created_at: now };
    await Promise.all([store.inbox(user, months, 10), store.addInbox([late])]);
    t.ok(
      (await store.inbox(user, months, 10)).some((x) => x.post_id === late.post_id),
      `round ${i}`,
    );
  }
});

t.test('outbox, seen marks, snapshots, engagement', async (t) => {
  const ids = [now - 3, now - 2, now - 1].map((at) => ({ post_id: newPostId(at), author_id: 'w', created_at: at }));
  await store.addOutbox(ids);
  t.same(
    (await store.outbox('w', months, 10)).map((x) => x.post_id),
    ids.map((x) => x.post_id).reverse(),
  );
  t.same(
    (await store.outbox('w', months, 10, ids[2]!.post_id)).map((x) => x.post_id),
    [ids[1]!.post_id, ids[0]!.post_id],
    'older than a post id',
  );
  await store.removeOutbox([ids[0]!]);
  t.equal((await store.outbox('w', months, 10)).length, 2);
  await store.markSeen('v', [ids[1]!.post_id], now);
  t.same(
    await store.seen(
      'v',
      ids.map((x) => x.post_id),
    ),
    [ids[1]!.post_id],
  );
  await store.putSnapshot('v', now, { ids: ['a'] });
  t.same(await store.snapshot('v', now), { ids: ['a'] });
  await store.putSnapshot('v', now + 16 * 60_000, { ids: ['b'] });
  t.equal(await store.snapshot('v', now), null, 'an expired snapshot is dropped when a new one is kept');
  await store.engage('v', 'w', now);
  t.match(await store.engage('v', 'w', now + 5), { interaction_count: 2, last_interaction_at: now + 5 });
  t.match(await store.engagement('v'), [{ author_id: 'w', interaction_count: 2 }]);
});
