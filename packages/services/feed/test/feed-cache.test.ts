/** FeedCache (pure): what keeps a viewer's ranked feed, what drops it, and builds racing drops. */
import t from 'tap';
import { FeedCache, RECENT_MS, type CachedFeed } from '../src/workers/app/feed-cache.js';
import { dropFor } from '../src/workers/app/store-tail.js';

const feed = (rankedAt: number, authors: string[], ranking: 'ranked' | 'time' = 'ranked'): CachedFeed => ({
  rankedAt,
  feed: { ranking, ids: [`p${rankedAt}`] },
  authors,
});

/** A build whose result the test hands over when it likes. */
function deferred(): { build: () => Promise<CachedFeed>; finish: (f: CachedFeed) => void; calls: () => number } {
  let calls = 0;
  let finish!: (f: CachedFeed) => void;
  return {
    build: () => {
      calls++;
      return new Promise<CachedFeed>((r) => (finish = r));
    },
    finish: (f) => finish(f),
    calls: () => calls,
  };
}

t.test('kept until a drop of the viewer or of an author it follows, or 60 s', async (t) => {
  const cache = new FeedCache();
  let builds = 0;
  const build = (at: number, authors: string[]) => async (): Promise<CachedFeed> => {
    builds++;
    return feed(at, authors);
  };
  t.equal((await cache.get('v', 1_000, build(1_000, ['a', 'b']))).rankedAt, 1_000);
  t.equal((await cache.get('v', 2_000, build(2_000, ['a', 'b']))).rankedAt, 1_000, 'a repeat read is the kept feed');
  t.equal(cache.snapshot('v', 1_000)?.ids[0], 'p1000', 'its snapshot answers a next page');
  dropFor({ op: 'add_inbox', entries: [{ user_id: 'v', post_id: 'x', author_id: 'a', created_at: 1 }] }, cache);
  t.equal((await cache.get('v', 3_000, build(3_000, ['a', 'b']))).rankedAt, 3_000, 'an inbox entry drops it');
  dropFor({ op: 'add_outbox', entries: [{ post_id: 'y', author_id: 'c', created_at: 1 }] }, cache);
  t.equal((await cache.get('v', 3_500, build(3_500, ['a', 'b']))).rankedAt, 3_000, 'an author it does not follow');
  dropFor({ op: 'put_profile', user: 'b', account_state: 'suspended' }, cache);
  t.equal((await cache.get('v', 4_000, build(4_000, ['a', 'b']))).rankedAt, 4_000, 'a followed author changes');
  dropFor({ op: 'mark_seen', user: 'v', post_ids: ['p'], at: 1 }, cache);
  t.equal((await cache.get('v', 5_000, build(5_000, ['a']))).rankedAt, 5_000, 'seen marks drop it');
  dropFor({ op: 'follow', follower: 'v', followee: 'z', at: 1, on: true }, cache);
  t.equal((await cache.get('v', 6_000, build(6_000, ['a']))).rankedAt, 6_000, 'a follow drops it');
  t.equal((await cache.get('v', 6_000 + RECENT_MS, build(7_000, ['a']))).rankedAt, 7_000, 'it expires');
  dropFor({ op: 'threshold', threshold: 5 }, cache);
  t.equal(cache.size, 0, 'a threshold change drops every feed');
  t.equal(builds, 6);
});

t.test('time order: kept only to rank its candidates again', async (t) => {
  const cache = new FeedCache();
  await cache.get('v', 1, async () => feed(1, ['a'], 'time'));
  t.equal((await cache.get('v', 2, async () => feed(2, ['a']))).rankedAt, 2, 'without rerank: not kept');

  cache.dropViewer('v');
  let reranks = 0;
  const timeOrder = (at: number): CachedFeed => ({
    ...feed(at, ['a'], 'time'),
    rerank: async () => {
      reranks++;
      return at < 12 ? timeOrder(at + 1) : feed(at + 1, ['a']);
    },
  });
  let full = 0;
  const build = async (): Promise<CachedFeed> => {
    full++;
    return timeOrder(10);
  };
  t.equal((await cache.get('v', 10, build)).feed.ranking, 'time');
  t.equal((await cache.get('v', 11, build)).rankedAt, 11, 'the next read ranks the same candidates again');
  t.equal((await cache.get('v', 12, build)).rankedAt, 12);
  const ranked = await cache.get('v', 13, build);
  t.same([ranked.feed.ranking, ranked.rankedAt], ['ranked', 13], 'until the ranker answers');
  t.equal((await cache.get('v', 14, build)).rankedAt, 13, 'then that ranking is kept');
  t.same([full, reranks], [1, 3], 'one build from the stores');
  cache.dropViewer('v');
  await cache.get('v', 15, build);
  t.equal(full, 2, 'a drop throws the candidates away');
});

t.test('reads share a build; a drop during a build keeps it from being kept', async (t) => {
  const cache = new FeedCache();
  const d = deferred();
  const first = cache.get('v', 1, d.build);
  const second = cache.get('v', 2, d.build);
  d.finish(feed(1, ['a']));
  t.equal((await first).rankedAt, 1);
  t.equal((await second).rankedAt, 1, 'the second read joined the first build');
  t.equal(d.calls(), 1);

  cache.dropViewer('v');
  const racing = deferred();
  const built = cache.get('v', 3, racing.build);
  cache.dropAuthor('someone'); // a build in flight does not know its authors yet: any drop of an author taints it
  const after = deferred();
  const later = cache.get('v', 4, after.build);
  t.equal(after.calls(), 1, 'a read after the drop does not join the tainted build');
  racing.finish(feed(3, ['a']));
  after.finish(feed(4, ['a']));
  t.equal((await built).rankedAt, 3, 'the tainted build still answers its own read');
  t.equal((await later).rankedAt, 4);
  t.equal((await cache.get('v', 5, async () => feed(5, ['a']))).rankedAt, 4, 'the later build is kept');
});

t.test('nothing is served or kept while the tail is not live', async (t) => {
  let live = false;
  const cache = new FeedCache(() => live);
  await cache.get('v', 1, async () => feed(1, ['a']));
  t.equal((await cache.get('v', 2, async () => feed(2, ['a']))).rankedAt, 2);
  live = true;
  await cache.get('v', 3, async () => feed(3, ['a']));
  live = false;
  t.equal((await cache.get('v', 4, async () => feed(4, ['a']))).rankedAt, 4, 'a kept feed is not served either');
});
