/**
 * One store partition on a real LevelDB: both views of the follow relation, the asynchronous followers_count fold
 * and the celebrity flag, the threshold, inbox buckets newest first with the hot cache (and a write racing a cold
 * load), outboxes, seen marks and snapshots; an op applied at a log offset records it in the same batch; a copy of
 * every key (what a wiped replica takes from a peer) carries that offset; the retention sweep of old month buckets;
 * where the replicas of each partition live.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { month, monthsBefore, readMonths } from '../src/workers/store/keys.js';
import { newPostId } from '../src/post-id.js';
import { FeedStore } from '../src/workers/store/store.js';
import { partitionsOfWorker, replicaWorkers } from '../src/store-placement.js';

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

t.test('ops applied at log offsets: the offset is stored with the writes, a no-op records it too', async (t) => {
  const db = await FeedStore.open(join(dir, 'applied'), 2);
  t.teardown(() => db.close());
  t.equal(await db.appliedOffset(), null, 'a new store never applied anything');
  t.equal(await db.applying(0, () => db.follow('a', 'b', now, true)), true);
  t.equal(await db.appliedOffset(), 1);
  t.equal(await db.applying(1, () => db.follow('a', 'b', now, true)), false, 'the follow was there');
  t.equal(await db.appliedOffset(), 2, 'a no-op still moves the offset');
  await db.applying(2, () => db.addInbox([{ user_id: 'a', post_id: newPostId(now), author_id: 'b', created_at: now }]));
  t.equal(await db.appliedOffset(), 3);
  await db.follow('a', 'c', now, true);
  t.equal(await db.appliedOffset(), 3, 'a write outside applying leaves it');

  // The copy a wiped replica takes: every key, the offset among them; imported, it reads back the same.
  const rows: Array<[string, unknown]> = [];
  for await (const row of db.exportAll()) rows.push(row);
  t.ok(rows.some(([k, v]) => k === 'cfg/applied' && v === 3));
  const copy = await FeedStore.open(join(dir, 'copy'), 2);
  t.teardown(() => copy.close());
  await copy.follow('stale', 'x', now, true);
  async function* source(): AsyncGenerator<[string, unknown]> {
    yield* rows;
  }
  t.equal(await copy.importAll(source()), rows.length - 1);
  t.equal(await copy.appliedOffset(), 3);
  t.same(await copy.following('a', 10), await db.following('a', 10));
  t.same(await copy.following('stale', 10), [], 'what the store held before the copy is gone');
  t.same(await copy.inbox('a', months, 10), await db.inbox('a', months, 10));
  async function* noOffset(): AsyncGenerator<[string, unknown]> {
    yield ['fwing/q/r', now];
  }
  await t.rejects(copy.importAll(noOffset()), /no applied offset/);
  t.equal(await copy.appliedOffset(), null, 'a copy without its offset leaves a store that never applied');
});

t.test(
  'the retention sweep drops buckets before the oldest kept month, inbox and outbox, and nothing else',
  async (t) => {
    const db = await FeedStore.open(join(dir, 'sweep'), 2);
    t.teardown(() => db.close());
    const day = 24 * 3600_000;
    const at = (m: number): number => now - m * 31 * day;
    const entry = (user: string, author: string, m: number) => ({
      user_id: user,
      post_id: newPostId(at(m)),
      author_id: author,
      created_at: at(m),
    });
    const inboxes = [0, 1, 2, 3, 5, 14].map((m) => entry('s1', 'au', m));
    await db.addInbox([...inboxes, entry('s0', 'au', 4), entry('s2', 'au', 0)]);
    await db.addOutbox([0, 3, 6].map((m) => entry('', 'au', m)));
    await db.follow('s1', 'au', at(20), true);
    const all = (user: string) =>
      db.inbox(
        user,
        Array.from({ length: 16 }, (_, i) => monthsBefore(month(now), i)),
        100,
      );
    t.equal((await all('s1')).length, 6);
    const oldest = monthsBefore(month(now), 2);
    t.same(await db.sweep(oldest, 2), { deleted: 2, more: true }, 'at most max per call');
    t.same(await db.sweep(oldest), { deleted: 4, more: false });
    t.same(
      (await all('s1')).map((e) => e.post_id),
      inboxes.slice(0, 3).map((e) => e.post_id),
      'the current month and the two before are kept',
    );
    t.equal((await all('s0')).length, 0);
    t.equal((await all('s2')).length, 1);
    t.equal((await db.outbox('au', [month(now), monthsBefore(month(now), 3)], 10)).length, 1, 'old outbox gone');
    t.equal((await db.following('s1', 10)).length, 1, 'the graph is not swept');
    t.same(await db.sweep(oldest), { deleted: 0, more: false }, 'a repeated sweep changes nothing');

    // A sweep landing while a cold load reads the buckets: the load may answer the old entries, never cache them.
    const wide = Array.from({ length: 6 }, (_, i) => monthsBefore(month(now), i));
    for (let i = 0; i < 30; i++) {
      const user = `sweeprace${i}`;
      await db.addInbox([entry(user, 'au', 0), entry(user, 'au', 4)]);
      await Promise.all([db.inbox(user, wide, 10), db.sweep(oldest)]);
      t.equal((await db.inbox(user, wide, 10)).length, 1, `round ${i}: the swept entry is not served from the cache`);
    }
  },
);

t.test('replica placement: 3 distinct workers per partition, 3 partitions per worker, one down leaves 2', async (t) => {
  for (let n = 1; n <= 7; n++) {
    const want = Math.min(3, n);
    for (let p = 0; p < n; p++) {
      const on = replicaWorkers(p, n);
      t.equal(new Set(on).size, want, `${n} workers: partition ${p} on ${on.join(',')}`);
      t.equal(on[0], p, 'the preferred replica is worker p');
    }
    for (let w = 0; w < n; w++) {
      t.equal(partitionsOfWorker(w, n).length, want, `${n} workers: worker ${w} holds ${want}`);
      for (let p = 0; p < n; p++)
        t.ok(replicaWorkers(p, n).filter((x) => x !== w).length >= want - 1, 'one worker down leaves the others');
    }
  }
});
