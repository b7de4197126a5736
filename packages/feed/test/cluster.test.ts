/**
 * The feed on real processes: `cluster up --service feed` (3 members hosting the log and the post groups, 3 store
 * partitions, 2 fan-out workers, the ranker, the app tier), one cluster for every case; real sockets, real LevelDB,
 * real SIGKILL and SIGSTOP. Threshold 3 followers, so a celebrity takes four follows. Waits are generous; nothing
 * asserts speed. Each case uses its own users (the seen marks, inboxes and follows of one do not touch another's).
 */
import t from 'tap';
import { deriveClientToken } from '@raftkit/http';
import { partitionOf } from '@raftkit/log';
import { call, startCluster, until, type Answer } from '@raftkit/testkit';

const STORES = 3;
const cluster = await startCluster('feed', { nodes: 3, workers: `store=${STORES}`, settings: { threshold: '3' } });
t.teardown(() => cluster.down());
const admin = cluster.token;
const app = cluster.role('app')[0]!.url;
const stores = cluster.role('store').map((w) => w.url);

const tokens = new Map<string, string>();
const tok = (user: string): string => {
  let tk = tokens.get(user);
  if (tk === undefined) tokens.set(user, (tk = deriveClientToken(admin, user)));
  return tk;
};
let run = 0;
/** A user id unique to this run and case. */
const uid = (name: string): string => `${name}-${++run}`;

async function ok(answer: Promise<Answer>, status = 200): Promise<Record<string, unknown>> {
  const a = await answer;
  if (a.status !== status) throw new Error(`expected ${status}, got ${a.status}: ${JSON.stringify(a.body)}`);
  return a.body;
}
const post = async (author: string, text: string, extra: Record<string, unknown> = {}): Promise<string> =>
  (await ok(call(app, 'POST', '/api/posts', { token: tok(author), body: { author_id: author, text, ...extra } }), 201)).post_id as string;
const follow = async (follower: string, followee: string): Promise<void> => {
  await ok(call(app, 'POST', '/api/follow', { token: tok(follower), body: { follower_id: follower, followee_id: followee } }));
};
interface FeedPost {
  post_id: string;
  author_id: string;
  created_at: number;
}
const feed = async (user: string, limit = 100, next: string | null = null): Promise<{ posts: FeedPost[]; next_token: string | null; ranking: string }> => {
  const q = new URLSearchParams({ limit: String(limit) });
  if (next !== null) q.set('next_token', next);
  return (await ok(call(app, 'GET', `/api/feed?${q}`, { token: tok(user) }))) as never;
};
const ids = (posts: FeedPost[]): string[] => posts.map((p) => p.post_id);
/** The inbox of `user` as its store partition holds it (cluster token, the store's internal call). */
const inbox = async (user: string): Promise<string[]> => {
  const body = await ok(call(stores[partitionOf(user, STORES)]!, 'POST', '/internal/store/call', { token: admin, body: { op: 'inbox', user, months: monthsNow(), limit: 1000 } }));
  return (body.entries as FeedPost[]).map((e) => e.post_id);
};
const profile = async (user: string): Promise<Record<string, unknown>> => ok(call(app, 'GET', `/api/users/${user}/profile`, { token: tok(user) }));
function monthsNow(): string[] {
  const d = new Date();
  const m = `${d.getUTCFullYear()}${String(d.getUTCMonth() + 1).padStart(2, '0')}`;
  const p = new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth() - 1, 1));
  return [m, `${p.getUTCFullYear()}${String(p.getUTCMonth() + 1).padStart(2, '0')}`];
}

// The post groups and the topics are made once the members have registered: the first post waits for them.
await until('the first post is accepted', async () => (await call(app, 'POST', '/api/posts', { token: tok('warmup'), body: { text: 'hello' } })).status === 201, 120_000, 500);

t.test('a push author: the post reaches every follower inbox and feed', async (t) => {
  const author = uid('pusher');
  const fans = [uid('fan'), uid('fan'), uid('fan')];
  for (const f of fans) await follow(f, author);
  const id = await post(author, 'pushed post');
  for (const f of fans) {
    await until(`${f} sees the post`, async () => ids((await feed(f)).posts).includes(id), 60_000, 200);
    t.ok((await inbox(f)).includes(id), `${f}'s inbox holds it (push)`);
  }
  const got = await ok(call(app, 'GET', `/api/posts/${id}`, { token: tok(fans[0]!) }));
  t.match(got, { post_id: id, author_id: author, text: 'pushed post', media_ids: [], parent_post_id: null, engagement_counts: { likes: 0, comments: 0, shares: 0 } });
  t.match(await profile(author), { followers_count: 3, is_celebrity: false });
});
