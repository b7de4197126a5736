import t from 'tap';
import type { HistoryEvent } from '../src/history.js';
import { checkFeed, type FeedPage } from '../src/workloads/feed-checks.js';

const MS = 1e6;
const BOUND = { freshnessMs: 30_000 };

type Post = FeedPage['posts'][number];

/** A history built in time order (each operation 10 ms), with the final heal where `heal()` is called. */
function history() {
  const events: HistoryEvent[] = [];
  let clock = 0;
  let proc = 0;
  const op = (f: string, key: string | undefined, input: unknown, type: 'ok' | 'fail' | 'info', value?: unknown) => {
    const p = proc++;
    events.push({ process: p, type: 'invoke', f, ...(key ? { key } : {}), value: input, time: (clock += 10 * MS) });
    events.push({ process: p, type, f, ...(key ? { key } : {}), value, time: (clock += 10 * MS) });
  };
  return {
    events,
    post(author: string, text: string, postId: string, type: 'ok' | 'info' = 'ok'): Post {
      op('post', author, { text }, type, type === 'ok' ? { post_id: postId, text } : undefined);
      return [postId, author, text, 1000];
    },
    del(postId: string, author: string): void {
      op('delete', author, { post_id: postId }, 'ok', { post_id: postId });
    },
    feed(user: string, pages: Post[][], f = 'feed', at = 2000): void {
      op(f, user, undefined, 'ok', { pages: pages.map((posts) => ({ ranking: 'time', at, posts })) });
    },
    get(postId: string, status: string, f = 'get'): void {
      op(f, undefined, { post_id: postId }, 'ok', { post_id: postId, status });
    },
    heal(): void {
      events.push({ process: 'nemesis', type: 'info', f: 'heal', time: (clock += 10 * MS) });
    },
    wait(ms: number): void {
      clock += ms * MS;
    },
  };
}

const byName = (rs: ReturnType<typeof checkFeed>, name: string) => rs.find((r) => r.name === name)!;

/** a0 is followed by r0, r1, r2 (not r3), r4, r5; a1 by r0, r1 (not r2), r3, r4, r5. */
const FOLLOWERS_A0 = ['r0', 'r1', 'r2', 'r4', 'r5'];

function clean() {
  const h = history();
  const p1 = h.post('a0', 'p0.0', 'P1');
  const p2 = h.post('a0', 'p0.1', 'P2');
  h.feed('r0', [[p2], [p1]]);
  h.del('P2', 'a0');
  h.heal();
  for (const u of FOLLOWERS_A0) h.feed(u, [[p1]], 'final-feed');
  h.get('P1', 'live', 'final-get');
  h.get('P2', 'deleted', 'final-get');
  return { h, p1, p2 };
}

t.test('a clean history passes every check', async (t) => {
  const { h } = clean();
  const rs = checkFeed(h.events, BOUND);
  for (const r of rs) t.equal(r.valid, true, r.name);
  t.equal(byName(rs, 'feed-fresh').stats?.expected_deliveries, 5);
  t.equal(byName(rs, 'feed-cursors').stats?.chains, 1);
});

t.test('an acknowledged post missing from a follower after the heal: lost', async (t) => {
  const h = history();
  const p1 = h.post('a0', 'p0.0', 'P1');
  h.heal();
  for (const u of FOLLOWERS_A0) h.feed(u, u === 'r4' ? [[]] : [[p1]], 'final-feed');
  const r = byName(checkFeed(h.events, BOUND), 'feed-fresh');
  t.equal(r.valid, false);
  t.equal(r.anomalies[0]?.type, 'lost');
  t.match(r.anomalies[0]?.description, /P1 .* r4/);
});

t.test('a post that shows up, but only past the freshness bound: not-fresh', async (t) => {
  const h = history();
  const p1 = h.post('a0', 'p0.0', 'P1');
  h.heal();
  h.wait(31_000);
  h.feed('r0', [[]], 'final-feed');
  for (const u of FOLLOWERS_A0) h.feed(u, [[p1]], 'final-feed');
  const r = byName(checkFeed(h.events, BOUND), 'feed-fresh');
  t.equal(r.valid, false);
  t.equal(r.anomalies[0]?.type, 'not-fresh');
  // Missing within the bound is not an anomaly.
  const ok = history();
  const q1 = ok.post('a0', 'p0.0', 'P1');
  ok.heal();
  ok.wait(20_000);
  ok.feed('r0', [[]], 'final-feed');
  for (const u of FOLLOWERS_A0) ok.feed(u, [[q1]], 'final-feed');
  t.equal(byName(checkFeed(ok.events, BOUND), 'feed-fresh').valid, true);
});

t.test('a follower never read after the heal: unknown', async (t) => {
  const h = history();
  const p1 = h.post('a0', 'p0.0', 'P1');
  h.heal();
  for (const u of FOLLOWERS_A0.slice(1)) h.feed(u, [[p1]], 'final-feed');
  t.equal(byName(checkFeed(h.events, BOUND), 'feed-fresh').valid, 'unknown');
});

t.test('a deleted post served after its delete was acknowledged: in a feed, by id', async (t) => {
  const { h, p2 } = clean();
  h.feed('r1', [[p2]]);
  const r = byName(checkFeed(h.events, BOUND), 'feed-deletes');
  t.equal(r.valid, false);
  t.equal(r.anomalies[0]?.type, 'deleted-served');
  const g = clean().h;
  g.get('P2', 'live');
  t.equal(byName(checkFeed(g.events, BOUND), 'feed-deletes').valid, false);
});

t.test('a cursor chain serving a post twice, or a post created after its first page', async (t) => {
  const h = history();
  const p1 = h.post('a0', 'p0.0', 'P1');
  h.feed('r0', [[p1], [p1]]);
  const r = byName(checkFeed(h.events, BOUND), 'feed-cursors');
  t.equal(r.valid, false);
  t.equal(r.anomalies[0]?.type, 'cursor-duplicate');
  const n = history();
  const q1 = n.post('a0', 'p0.0', 'P1');
  const q2: Post = ['P2', 'a0', 'p0.1', 3000];
  n.post('a0', 'p0.1', 'P2');
  n.feed('r0', [[q1], [q2]], 'feed', 2500);
  const r2 = byName(checkFeed(n.events, BOUND), 'feed-cursors');
  t.equal(r2.valid, false);
  t.equal(r2.anomalies[0]?.type, 'cursor-new-arrival');
});

t.test('phantom posts, foreign authors and a lost post by id', async (t) => {
  const h = history();
  h.post('a0', 'p0.0', 'P1');
  h.feed('r0', [[['PX', 'a0', 'never sent', 1000]]]);
  h.feed('r3', [[['P1', 'a0', 'p0.0', 1000]]]);
  h.get('P1', 'missing', 'final-get');
  const r = byName(checkFeed(h.events, BOUND), 'feed-integrity');
  t.equal(r.valid, false);
  t.same(
    r.anomalies.map((a) => a.type),
    ['phantom', 'foreign-author', 'post-lost'],
  );
});

t.test('an unknown post may appear; a failed read changes nothing', async (t) => {
  const h = history();
  const p1 = h.post('a0', 'p0.0', 'P1', 'info');
  h.feed('r0', [[[p1[0], 'a0', 'p0.0', 1000]]]);
  h.heal();
  for (const u of FOLLOWERS_A0) h.feed(u, [[]], 'final-feed');
  for (const r of checkFeed(h.events, BOUND)) t.equal(r.valid, true, r.name);
});
