/**
 * The app worker role (`cluster up` starts APP_COUNT; the public /api surface, bearer tokens): posts go to the
 * post groups (authoritative) and then to the event log, follows to both store partitions, feed reads through
 * FeedReader. Identity: a client token `client.<user>.<mac>` (deriveClientToken) IS the user; the cluster token
 * acts for any user named in the request. See README.md for every endpoint.
 */
import {
  clusterUrl,
  badRequest,
  forbidden,
  HttpError,
  notFound,
  Reply,
  requireObject,
  requireString,
  serveWorkerHttp,
  ServiceError,
  type JsonObject,
  type Principal,
  type RequestContext,
  type RunningWorker,
  type WorkerOptions,
  type WorkerRole,
} from '@raftkit/http';
import { LogClient, type LogProducer } from '@raftkit/log';
import { ensureTopics, type DeleteEvent, type PostEvent } from '../../events.js';
import { FeedCache } from './feed-cache.js';
import { FeedReader, view } from './feed-reader.js';
import { StoreTail } from './store-tail.js';
import { readMonths } from '../store/keys.js';
import { MAX_MEDIA, MAX_TEXT, MEDIA_ID, USER_ID, type NewPost, type Post, type PostResult } from '../../machine.js';
import { newPostId, POST_ID } from '../../post-id.js';
import { PostsClient } from './posts-client.js';
import { RankerClient, rankerAddresses } from '../ranker/client.js';
import { DELETES_TOPIC, ENGAGEMENT_TOPIC, POSTS_TOPIC, type EngagementEvent } from '../../rank-wire.js';
import { StoreClient } from '../../store-client.js';
import type { AccountState } from '../store/store.js';

export const APP_ROLE = 'app';
const APP_COUNT = 1;
export const DEFAULT_LIMIT = 20;
export const MAX_LIMIT = 100;
const MAX_LIST = 1_000;

export const appRole: WorkerRole = { role: APP_ROLE, count: APP_COUNT, start: startApp };

export async function startApp(options: WorkerOptions): Promise<RunningWorker> {
  const token = options.tokens[0]!;
  const endpoints = options.members.map((m) => clusterUrl(m.httpAddress));
  const log = new LogClient({ endpoints, token, timeoutMs: 10_000 });
  const stores = StoreClient.fromWorkers(options.workers, token);
  const posts = new PostsClient(endpoints, token);
  const ranker = new RankerClient({ addresses: rankerAddresses(options.workers), token });
  const feeds: FeedCache = new FeedCache((): boolean => tail.live());
  const tail: StoreTail = new StoreTail(log, stores, feeds);
  const reader = new FeedReader(stores, posts, ranker, feeds);
  stores.onWrite = (call) => reader.wrote(call);
  let producers: { posts: LogProducer; deletes: LogProducer; engagement: LogProducer } | null = null;

  // Topics first (idempotent; the fan-out workers make them too), then the delete tail for the post cache.
  const topics = async (): Promise<void> => {
    for (;;) {
      try {
        return await ensureTopics(log);
      } catch (e) {
        options.logger.log('warn', 'topics not ready; retrying', { error: String(e) });
      }
    }
  };
  const ready = topics().then(() => {
    producers = {
      posts: log.producer(POSTS_TOPIC),
      deletes: log.producer(DELETES_TOPIC),
      engagement: log.producer(ENGAGEMENT_TOPIC),
    };
    void tail.run().catch((e: unknown) => options.logger.log('warn', 'store tail stopped', { error: String(e) }));
    void posts
      .tailDeletes(log)
      .catch((e: unknown) => options.logger.log('warn', 'delete tail stopped', { error: String(e) }));
  });
  ready.catch((e: unknown) => options.logger.log('error', 'topics not created', { error: String(e) }));
  const producer = async (which: 'posts' | 'deletes' | 'engagement'): Promise<LogProducer> => {
    if (producers === null) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([ready, new Promise((r) => (timer = setTimeout(r, 10_000)))]);
      clearTimeout(timer);
    }
    if (producers === null)
      throw new HttpError(503, 'unavailable', 'the event log topics are not ready yet', {}, { 'retry-after': '1' });
    return producers[which];
  };

  const http = await serveWorkerHttp(options, {
    health: () => ({
      reads: reader.stats,
      rankers: ranker.rankers,
      post_cache: posts.stats,
      feed_cache: { ...feeds.stats, viewers: feeds.size, live: tail.live(), tail: tail.stats },
    }),
  });
  const metrics = http.metrics;
  metrics.gauge('feed_reads_total', 'Feed first pages built').set(() => reader.stats.reads);
  metrics
    .gauge('feed_rank_fallbacks_total', 'Feed reads served in time order (ranker late, failing or absent)')
    .set(() => reader.stats.timeOrder);

  /** A ServiceError from a member or a store, as the same HTTP answer (503 with Retry-After). */
  const mapped = async <T>(work: () => Promise<T>): Promise<T> => {
    try {
      return await work();
    } catch (error) {
      if (error instanceof ServiceError) {
        if (error.status >= 500) throw new HttpError(503, 'unavailable', error.message, {}, { 'retry-after': '1' });
        throw new HttpError(error.status, error.code, error.message);
      }
      throw error;
    }
  };

  /**
   * The user a request acts as: a client token's own name; the cluster token (and feed's own workers' service
   * token, the router admits no other service's) acts for `named` (required). Only a client token names a user.
   */
  const actingUser = (ctx: RequestContext, named: string | undefined, field: string): string => {
    const p = ctx.principal as Principal;
    if (named !== undefined && !USER_ID.test(named))
      throw badRequest('invalid_field', `${field} must be 1..64 of A-Z a-z 0-9 . _ -`, { field });
    if (p.kind !== 'client') {
      if (named === undefined)
        throw badRequest('missing_field', `${field} is required with the cluster or service token`, { field });
      return named;
    }
    if (named !== undefined && named !== p.name)
      throw forbidden(`this token acts for ${p.name}, not ${named}`, { field });
    if (!USER_ID.test(p.name)) throw forbidden('this token names no feed user');
    return p.name;
  };
  const optionalString = (body: JsonObject, field: string): string | undefined =>
    body[field] === undefined ? undefined : requireString(body, field, { maxLength: 200 });
  const postIdOf = (ctx: RequestContext): string => {
    const id = ctx.params.id ?? '';
    if (!POST_ID.test(id))
      throw badRequest('invalid_post_id', 'a post id is 18 characters of Crockford base32', { field: 'post_id' });
    return id;
  };
  const userParam = (ctx: RequestContext): string => {
    const id = ctx.params.id ?? '';
    if (!USER_ID.test(id))
      throw badRequest('invalid_user_id', 'a user id is 1..64 of A-Z a-z 0-9 . _ -', { field: 'user_id' });
    return id;
  };
  const limitOf = (ctx: RequestContext, fallback: number, max: number): number => {
    const text = ctx.query.get('limit');
    if (text === null) return fallback;
    const n = Number(text);
    if (!/^\d{1,6}$/.test(text) || n < 1 || n > max)
      throw badRequest('invalid_query', `limit must be an integer from 1 to ${max}`, { field: 'limit' });
    return n;
  };
  const livePost = async (id: string): Promise<Post> => {
    const post = await mapped(() => posts.get(id));
    if (post === null) throw notFound(`no post ${id}`, { post_id: id });
    if (post.deleted_at !== undefined)
      throw new HttpError(410, 'deleted', `post ${id} was deleted`, { post_id: id, deleted_at: post.deleted_at });
    return post;
  };

  /** Engagement: the ranker's event (asynchronous features) and the store's user_engagement row. */
  const engaged = async (type: EngagementEvent['type'], user: string, post: Post): Promise<void> => {
    const at = Date.now();
    const event: EngagementEvent = { type, user_id: user, author_id: post.author_id, post_id: post.post_id, at };
    await mapped(async () => {
      await (await producer('engagement')).send(JSON.stringify(event), { key: user });
      await stores.call(user, { op: 'engage', user, author: post.author_id, at });
    });
  };

  /** Stores a post authoritatively, then appends its post event; never waits for fan-out (spec rule 1). */
  const createPost = async (input: NewPost): Promise<Post> => {
    const result = await mapped(() => posts.propose(input.post_id, '/internal/feed/posts', { post: input }));
    if (result.op !== 'create') throw new HttpError(500, 'internal', 'unexpected result');
    posts.remember(result.post);
    const event: PostEvent = {
      type: 'post',
      post_id: result.post.post_id,
      author_id: result.post.author_id,
      created_at: result.post.created_at,
    };
    try {
      await (await producer('posts')).send(JSON.stringify(event), { key: event.author_id });
    } catch (e) {
      // Stored but not announced: say so, with the id, rather than a bare error (a retry would make a second post).
      throw new HttpError(
        503,
        'event_not_appended',
        `post ${event.post_id} is stored but its event could not be appended; followers will not receive it`,
        { post_id: event.post_id, cause: String((e as Error).message) },
        { 'retry-after': '1' },
      );
    }
    return result.post;
  };

  const newPostInput = (author: string, body: JsonObject, extra: Partial<NewPost> = {}): NewPost => {
    const text =
      body.text === undefined && extra.repost_of !== undefined
        ? ''
        : requireString(body, 'text', { maxLength: MAX_TEXT * 4 });
    if (text.length > MAX_TEXT)
      throw badRequest('invalid_field', `text must be at most ${MAX_TEXT} characters`, { field: 'text' });
    const media = body.media_ids ?? [];
    if (
      !Array.isArray(media) ||
      media.length > MAX_MEDIA ||
      !media.every((m) => typeof m === 'string' && MEDIA_ID.test(m))
    )
      throw badRequest(
        'invalid_field',
        `media_ids must be at most ${MAX_MEDIA} media ids (1..128 of A-Z a-z 0-9 . _ : -)`,
        { field: 'media_ids' },
      );
    const parent = body.parent_post_id ?? null;
    if (parent !== null && (typeof parent !== 'string' || !POST_ID.test(parent)))
      throw badRequest('invalid_field', 'parent_post_id must be a post id', { field: 'parent_post_id' });
    return {
      post_id: newPostId(),
      author_id: author,
      text,
      media_ids: media as string[],
      parent_post_id: parent as string | null,
      repost_of: null,
      ...extra,
    };
  };

  const follow = async (ctx: RequestContext, on: boolean): Promise<{ ok: true; changed: boolean }> => {
    const body = requireObject(await ctx.json());
    const follower = actingUser(
      ctx,
      typeof body.follower_id === 'string' ? body.follower_id : body.follower_id === undefined ? undefined : '',
      'follower_id',
    );
    const followee = requireString(body, 'followee_id', { pattern: USER_ID });
    if (follower === followee)
      throw badRequest('invalid_field', 'a user cannot follow itself', { field: 'followee_id' });
    const at = Date.now();
    // The follower's side first: the feed reads it (and filters by it), so a follow is visible once this answers.
    const changed = (await mapped(() => stores.call(follower, { op: 'follow', follower, followee, at, on }))).changed;
    await mapped(() => stores.call(followee, { op: 'follower', followee, follower, at, on }));
    return { ok: true, changed };
  };

  http.router
    .post('/api/posts', { admits: 'authenticated' }, async (ctx) => {
      const body = requireObject(await ctx.json());
      const author = actingUser(
        ctx,
        body.author_id === undefined ? undefined : requireString(body, 'author_id', { maxLength: 64 }),
        'author_id',
      );
      const input = newPostInput(author, body);
      let parent: Post | null = null;
      if (input.parent_post_id !== null) parent = await livePost(input.parent_post_id);
      const post = await createPost(input);
      if (parent !== null) {
        await mapped(() =>
          posts.propose(parent.post_id, `/internal/feed/posts/${parent.post_id}/count`, { field: 'comments' }),
        );
        posts.invalidate(parent.post_id);
        await engaged('comment', author, parent);
      }
      return new Reply(201, { post_id: post.post_id, created_at: post.created_at });
    })
    .get('/api/posts/:id', { admits: 'authenticated' }, async (ctx) => view(await livePost(postIdOf(ctx))))
    .delete('/api/posts/:id', { admits: 'authenticated' }, async (ctx) => {
      const id = postIdOf(ctx);
      const post = await livePost(id);
      const p = ctx.principal as Principal;
      if (p.kind === 'client' && p.name !== post.author_id)
        throw forbidden('only the author deletes a post', { post_id: id });
      const result = await mapped(() => posts.propose(id, `/internal/feed/posts/${id}/delete`, {}));
      if (result.op !== 'delete' || result.post === null) throw notFound(`no post ${id}`, { post_id: id });
      posts.remember(result.post);
      const event: DeleteEvent = {
        type: 'delete',
        post_id: id,
        author_id: post.author_id,
        created_at: post.created_at,
      };
      await mapped(async () => (await producer('deletes')).send(JSON.stringify(event), { key: post.author_id }));
      return { post_id: id, deleted: true, deleted_at: result.post.deleted_at };
    })
    .post('/api/posts/:id/like', { admits: 'authenticated' }, async (ctx) => like(ctx, true))
    .delete('/api/posts/:id/like', { admits: 'authenticated' }, async (ctx) => like(ctx, false))
    .post('/api/posts/:id/repost', { admits: 'authenticated' }, async (ctx) => {
      const id = postIdOf(ctx);
      const body = requireObject((await ctx.text()).length === 0 ? {} : await ctx.json());
      const user = actingUser(ctx, optionalString(body, 'user_id'), 'user_id');
      const original = await livePost(id);
      const post = await createPost(newPostInput(user, body, { repost_of: id }));
      await mapped(() => posts.propose(id, `/internal/feed/posts/${id}/count`, { field: 'shares' }));
      posts.invalidate(id);
      await engaged('repost', user, original);
      return new Reply(201, { post_id: post.post_id, created_at: post.created_at, repost_of: id });
    })
    .get('/api/feed', { admits: 'authenticated' }, async (ctx) => {
      const user = actingUser(ctx, ctx.query.get('user_id') ?? undefined, 'user_id');
      const limit = limitOf(ctx, DEFAULT_LIMIT, MAX_LIMIT);
      const token = ctx.query.get('next_token');
      if (token !== null && token.length === 0)
        throw badRequest('invalid_token', 'next_token is empty', { field: 'next_token' });
      // Written here, not returned: the page is JSON text already (FeedReader.readJson).
      const text = await mapped(() => reader.readJson(user, limit, token));
      ctx.res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
      ctx.res.end(text);
    })
    .post('/api/seen', { admits: 'authenticated' }, async (ctx) => {
      const body = requireObject(await ctx.json());
      const user = actingUser(ctx, optionalString(body, 'user_id'), 'user_id');
      const ids = body.post_ids;
      if (
        !Array.isArray(ids) ||
        ids.length === 0 ||
        ids.length > MAX_LIST ||
        !ids.every((i) => typeof i === 'string' && POST_ID.test(i))
      )
        throw badRequest('invalid_field', `post_ids must be 1..${MAX_LIST} post ids`, { field: 'post_ids' });
      await mapped(() => stores.call(user, { op: 'mark_seen', user, post_ids: ids as string[], at: Date.now() }));
      return { ok: true, marked: ids.length };
    })
    .post('/api/follow', { admits: 'authenticated' }, (ctx) => follow(ctx, true))
    .post('/api/unfollow', { admits: 'authenticated' }, (ctx) => follow(ctx, false))
    .get('/api/users/:id/following', { admits: 'authenticated' }, async (ctx) => edges(ctx, 'following'))
    .get('/api/users/:id/followers', { admits: 'authenticated' }, async (ctx) => edges(ctx, 'followers'))
    .get('/api/users/:id/profile', { admits: 'authenticated' }, async (ctx) => {
      const user = userParam(ctx);
      const [profile] = (await mapped(() => stores.call(user, { op: 'profiles', users: [user] }))).profiles;
      return profile;
    })
    .put('/api/users/:id/profile', { admits: 'authenticated' }, async (ctx) => {
      const user = userParam(ctx);
      const body = requireObject(await ctx.json());
      const p = ctx.principal as Principal;
      if (p.kind === 'client' && p.name !== user) throw forbidden('a profile is changed by its user');
      const change: { display_name?: string; account_state?: AccountState } = {};
      if (body.display_name !== undefined)
        change.display_name = requireString(body, 'display_name', { minLength: 1, maxLength: 100 });
      if (body.account_state !== undefined) {
        const s = requireString(body, 'account_state');
        if (s !== 'active' && s !== 'suspended' && s !== 'deactivated')
          throw badRequest('invalid_field', 'account_state must be active, suspended or deactivated', {
            field: 'account_state',
          });
        // Suspension is the operator's; a user may only deactivate or reactivate itself.
        if (s === 'suspended' && p.kind !== 'cluster')
          throw forbidden('only the operator suspends an account', { field: 'account_state' });
        change.account_state = s;
      }
      if (Object.keys(change).length === 0)
        throw badRequest('invalid_body', 'give display_name or account_state', { field: 'body' });
      return (await mapped(() => stores.call(user, { op: 'put_profile', user, ...change }))).profile;
    })
    .get('/api/users/:id/posts', { admits: 'authenticated' }, async (ctx) => {
      const author = userParam(ctx);
      const limit = limitOf(ctx, DEFAULT_LIMIT, MAX_LIMIT);
      const before = ctx.query.get('before');
      if (before !== null && !POST_ID.test(before))
        throw badRequest('invalid_query', 'before must be a post id', { field: 'before' });
      const entries = (
        await mapped(() => stores.call(author, { op: 'outbox', author, months: readMonths(Date.now()), limit, before }))
      ).entries;
      const hydrated = await mapped(() =>
        posts.getMany(
          entries.map((e) => e.post_id),
          true,
        ),
      );
      const list = entries
        .map((e) => hydrated.get(e.post_id))
        .filter((p): p is Post => p !== undefined && p.deleted_at === undefined);
      return {
        posts: list.map(view),
        next_before: entries.length === limit ? entries[entries.length - 1]!.post_id : null,
      };
    })
    .get('/api/admin/threshold', { admits: 'cluster' }, async () => {
      const answers = await mapped(() =>
        Promise.all(
          Array.from({ length: stores.partitions }, (_, p) =>
            stores.callPartition(p, { op: 'threshold', threshold: null }),
          ),
        ),
      );
      return { thresholds: answers.map((a) => a.threshold) };
    })
    .put('/api/admin/threshold', { admits: 'cluster' }, async (ctx) => {
      const body = requireObject(await ctx.json());
      const t = body.threshold;
      if (typeof t !== 'number' || !Number.isSafeInteger(t) || t < 0 || t > 1e12)
        throw badRequest('invalid_field', 'threshold must be an integer 0..1e12 (followers)', { field: 'threshold' });
      const answers = await mapped(() =>
        Promise.all(
          Array.from({ length: stores.partitions }, (_, p) =>
            stores.callPartition(p, { op: 'threshold', threshold: t }),
          ),
        ),
      );
      return { threshold: t, profiles_changed: answers.reduce((n, a) => n + a.changed, 0) };
    });

  async function like(ctx: RequestContext, on: boolean): Promise<unknown> {
    const id = postIdOf(ctx);
    const raw = await ctx.text();
    const body = raw.length === 0 ? {} : requireObject(await ctx.json());
    const user = actingUser(ctx, optionalString(body, 'user_id'), 'user_id');
    const post = await livePost(id);
    const result = (await mapped(() =>
      posts.propose(id, `/internal/feed/posts/${id}/like`, { user_id: user, on }),
    )) as PostResult;
    if (result.op !== 'like' || result.post === null) throw notFound(`no post ${id}`, { post_id: id });
    posts.remember(result.post);
    if (on && result.status === 'changed') await engaged('like', user, post);
    return {
      post_id: id,
      liked: on,
      changed: result.status === 'changed',
      engagement_counts: result.post.engagement_counts,
    };
  }

  async function edges(ctx: RequestContext, op: 'following' | 'followers'): Promise<unknown> {
    const user = userParam(ctx);
    const limit = limitOf(ctx, 100, MAX_LIST);
    const after = ctx.query.get('after') ?? '';
    if (after !== '' && !USER_ID.test(after))
      throw badRequest('invalid_query', 'after must be a user id', { field: 'after' });
    const answer = await mapped(() => stores.call(user, { op, user, limit, after }));
    return {
      user_id: user,
      [op]: answer.edges,
      next_after: answer.edges.length === limit ? answer.edges[answer.edges.length - 1]!.user_id : null,
    };
  }

  return {
    httpPort: http.port,
    async stop() {
      tail.close();
      await http.close();
      ranker.close();
      await posts.close();
      await log.close();
      await stores.close();
    },
  };
}
