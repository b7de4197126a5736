/**
 * feed: the social feed (packages/services/feed) under faults, through its public API on the app workers. Five
 * members (the event log's partitions and the post groups), store partitions, two fan-out workers and two app
 * workers, started as `cluster up --service feed` does (no ranker: reads are then in time order, which makes the
 * cursor check exact); the kill, pause and wipe nemeses also hit one store partition (`faultWorkers`).
 *
 * Setup: AUTHORS authors and FOLLOWERS followers; follower r<i> follows author a<j> unless (i + j) mod 4 = 3, so
 * every author has followers on every store partition and every follower misses one author. Clients (client i on
 * app worker i mod 2): post (a unique text per post), delete one of their own acknowledged posts, read a follower's
 * feed (a first page, then up to 2 more pages with its next_token: one cursor chain per operation), or read one
 * post by id. After the heal the final reads page through every follower's whole feed again and again until it
 * holds every acknowledged post of its followees (or the freshness bound and a margin have passed), then read every
 * post by id. Checks: feed-checks.ts.
 *
 * History: `post` (key author; ok value {post_id, text}); `delete` ({post_id}); `feed` (key follower; ok value
 * {pages: [{ranking, posts: [[post_id, author_id, text]...]}]}); `get` ({post_id}; ok {status: live|deleted|missing});
 * `final-feed` and `final-get` the same after the heal; `follow` in setup.
 */
import type { HistoryEvent } from '../history.js';
import { checkFeed, FEED_AUTHORS, FEED_FOLLOWERS, follows, type FeedPage } from './feed-checks.js';
import { callJson, errorCode, readFailure, writeFailure, type HttpOutcome } from './http.js';
import type { CheckResult, Completion, FinalContext, Worker, WorkerContext, Workload } from './workload.js';

const STORES = 3;
/** The spec's freshness target ("about 30 seconds"): a post is in every follower's feed within it once healed. */
const FRESHNESS_MS = 30_000;
/** How long the final reads keep paging a feed that still misses acknowledged posts. */
const FINAL_MS = FRESHNESS_MS + 15_000;
const PAGE = 20;
const FINAL_PAGE = 100;

interface Acked {
  postId: string;
  author: string;
  deleting: boolean;
}

export class FeedWorkload implements Workload {
  readonly service = 'feed';
  /** No register to check (modelEvents is empty): the feed checks carry the verdict. */
  readonly model = 'register' as const;
  readonly workers: Readonly<Record<string, number>>;
  readonly faultWorkers = 'store';
  /** Members host the log's partitions and the post groups: the wipe nemesis wipes a store partition only. */
  readonly wipeMembers = false;
  private readonly acked: Acked[] = [];

  /**
   * `apps`: app workers (2 by default, the `make test` smoke's). With one, every read and delete goes through the one
   * post cache that the delete itself invalidates (`feed-one-app`); with two, a read on the other app tests that it
   * never serves the post once the delete is acknowledged, whether or not its cache has seen the delete event.
   */
  constructor(
    private readonly apps = 2,
    readonly name = 'feed',
  ) {
    this.workers = { store: STORES, fanout: 2, app: apps };
  }

  describe(): string {
    return `${FEED_AUTHORS} authors, ${FEED_FOLLOWERS} followers (each following 3 of 4 authors); posts, deletes, feed reads of up to 3 pages, post reads through ${this.apps} app worker(s) over ${STORES} store partitions; freshness bound ${FRESHNESS_MS / 1000} s`;
  }

  private appUrls(workerUrls: readonly string[]): readonly string[] {
    // Workers start in the order of `workers`: stores, fan-out workers, then the app workers.
    return workerUrls.slice(STORES + 2, STORES + 2 + this.apps);
  }

  async setup(ctx: FinalContext): Promise<void> {
    const app = this.appUrls(ctx.workerUrls)[0]!;
    for (let i = 0; i < FEED_FOLLOWERS; i++)
      for (let j = 0; j < FEED_AUTHORS; j++) {
        if (!follows(i, j)) continue;
        const body = { follower_id: `r${i}`, followee_id: `a${j}` };
        for (;;) {
          const out = await ctx.perform({ f: 'follow', key: body.follower_id, value: body.followee_id }, async () =>
            toCompletion(
              await callJson(`${app}/api/follow`, {
                method: 'POST',
                token: ctx.token,
                body,
                timeoutMs: ctx.opTimeoutMs,
              }),
              200,
              () => body.followee_id,
              writeFailure,
            ),
          );
          if (out.type === 'ok') break;
          if (Date.now() > ctx.deadline) throw new Error(`setup: follow ${JSON.stringify(body)}: ${out.error}`);
          await ctx.sleep(300);
        }
      }
  }

  createWorker(ctx: WorkerContext): Worker {
    const apps = this.appUrls(ctx.workerUrls);
    const app = apps[ctx.worker % apps.length]!;
    let n = 0;
    const token = ctx.token;
    const timeoutMs = ctx.opTimeoutMs;
    return {
      step: async () => {
        const r = ctx.rng.float();
        if (r < 0.45) {
          const author = `a${ctx.rng.int(0, FEED_AUTHORS - 1)}`;
          const text = `p${ctx.worker}.${n++}`;
          const out = await ctx.perform({ f: 'post', key: author, value: { text } }, async () => {
            const res = await callJson(`${app}/api/posts`, {
              method: 'POST',
              token,
              body: { author_id: author, text },
              timeoutMs,
            });
            return toCompletion(res, 201, (b) => ({ post_id: (b as { post_id: string }).post_id, text }), writeFailure);
          });
          if (out.type === 'ok')
            this.acked.push({ postId: (out.value as { post_id: string }).post_id, author, deleting: false });
          return;
        }
        if (r < 0.55) {
          const live = this.acked.filter((a) => !a.deleting);
          if (live.length === 0) return;
          const victim = live[ctx.rng.int(0, live.length - 1)]!;
          victim.deleting = true;
          await ctx.perform({ f: 'delete', key: victim.author, value: { post_id: victim.postId } }, async () =>
            toCompletion(
              await callJson(`${app}/api/posts/${victim.postId}`, { method: 'DELETE', token, timeoutMs }),
              200,
              () => ({ post_id: victim.postId }),
              writeFailure,
            ),
          );
          return;
        }
        if (r < 0.9) {
          const user = `r${ctx.rng.int(0, FEED_FOLLOWERS - 1)}`;
          const pages = 1 + (ctx.rng.chance(0.5) ? ctx.rng.int(1, 2) : 0);
          await ctx.perform({ f: 'feed', key: user }, () => readFeed(app, token, user, PAGE, pages, timeoutMs));
          return;
        }
        if (this.acked.length === 0) return;
        const post = this.acked[ctx.rng.int(0, this.acked.length - 1)]!;
        await ctx.perform({ f: 'get', value: { post_id: post.postId } }, () =>
          readPost(app, token, post.postId, timeoutMs),
        );
      },
      finish: async () => {},
    };
  }

  async finalReads(ctx: FinalContext): Promise<void> {
    const apps = this.appUrls(ctx.workerUrls);
    const start = Date.now();
    const deadline = Math.max(ctx.deadline, start + FINAL_MS);
    // What each follower must end up with: acknowledged posts of its followees never asked to be deleted.
    const expected = (user: number): Set<string> =>
      new Set(this.acked.filter((a) => !a.deleting && follows(user, Number(a.author.slice(1)))).map((a) => a.postId));
    await Promise.all(
      Array.from({ length: FEED_FOLLOWERS }, async (_, i) => {
        const want = expected(i);
        for (let round = 0; ; round++) {
          const app = apps[(i + round) % apps.length]!;
          const out = await ctx.perform({ f: 'final-feed', key: `r${i}` }, () =>
            readFeed(app, ctx.token, `r${i}`, FINAL_PAGE, 50, ctx.opTimeoutMs),
          );
          if (out.type === 'ok') {
            const seen = new Set((out.value as { pages: FeedPage[] }).pages.flatMap((p) => p.posts.map(([id]) => id)));
            if ([...want].every((id) => seen.has(id))) break;
          }
          if (Date.now() > deadline) break;
          await ctx.sleep(1_000);
        }
      }),
    );
    for (const [k, a] of this.acked.entries()) {
      const app = apps[k % apps.length]!;
      for (;;) {
        const out = await ctx.perform({ f: 'final-get', value: { post_id: a.postId } }, () =>
          readPost(app, ctx.token, a.postId, ctx.opTimeoutMs),
        );
        if (out.type === 'ok' || Date.now() > deadline) break;
        await ctx.sleep(500);
      }
    }
  }

  check(events: readonly HistoryEvent[]): CheckResult[] {
    return checkFeed(events, { freshnessMs: FRESHNESS_MS });
  }

  modelEvents(): readonly HistoryEvent[] {
    return [];
  }
}

function toCompletion(
  out: HttpOutcome,
  okStatus: number,
  value: (body: unknown) => unknown,
  failure: (o: HttpOutcome) => { type: 'fail' | 'info'; error: string },
): Completion {
  if (out.kind === 'response' && out.status === okStatus) return { type: 'ok', value: value(out.body) };
  // A post stored whose event the log did not take: not acknowledged, and it may show up (or not).
  if (out.kind === 'response' && errorCode(out.body) === 'event_not_appended')
    return { type: 'info', error: 'event_not_appended' };
  return failure(out);
}

/** One cursor chain: a first page, then up to `pages - 1` more with each answer's next_token. */
async function readFeed(
  app: string,
  token: string,
  user: string,
  limit: number,
  pages: number,
  timeoutMs: number,
): Promise<Completion> {
  const got: FeedPage[] = [];
  let next: string | null = null;
  for (let p = 0; p < pages; p++) {
    const q: string = `user_id=${user}&limit=${limit}${next !== null ? `&next_token=${encodeURIComponent(next)}` : ''}`;
    const out = await callJson(`${app}/api/feed?${q}`, { method: 'GET', token, timeoutMs });
    if (out.kind !== 'response' || out.status !== 200) {
      // A later page that fails still leaves the earlier ones as observations.
      if (got.length > 0) break;
      return readFailure(out);
    }
    const body = out.body as {
      posts: Array<{ post_id: string; author_id: string; text: string; created_at: number }>;
      next_token: string | null;
      ranking: string;
    };
    got.push({
      ranking: body.ranking,
      at: Date.now(),
      posts: body.posts.map((x) => [x.post_id, x.author_id, x.text, x.created_at]),
    });
    next = body.next_token;
    if (next === null) break;
  }
  return { type: 'ok', value: { pages: got } };
}

async function readPost(app: string, token: string, postId: string, timeoutMs: number): Promise<Completion> {
  const out = await callJson(`${app}/api/posts/${postId}`, { method: 'GET', token, timeoutMs });
  if (out.kind === 'response' && out.status === 200) return { type: 'ok', value: { post_id: postId, status: 'live' } };
  if (out.kind === 'response' && out.status === 410)
    return { type: 'ok', value: { post_id: postId, status: 'deleted' } };
  if (out.kind === 'response' && out.status === 404)
    return { type: 'ok', value: { post_id: postId, status: 'missing' } };
  return readFailure(out);
}
