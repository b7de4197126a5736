/**
 * The feed's part of the Raft members (combined with the event log's: `createFeedService`): the post groups'
 * machines and the internal endpoints the app workers call, each routed by the app's GroupRouter to the leader of
 * the post's group. Members hold no other feed state: the graph, inboxes and outboxes are the store workers'.
 */
import {
  badRequest,
  HttpError,
  notFound,
  requireObject,
  unavailable,
  type ServiceContext,
  type ServiceDefinition,
  type OnRequestKind,
  type RequestContext,
} from '@raftkit/http';
import type { ManagedGroupOptions, RaftNode } from '@raftkit/raft';
import { checkPostCommand, PostsMachine, type Post, type PostCommand, type PostResult } from '../machine.js';
import { POST_ID } from '../post-id.js';
import { sharedBarrier } from './shared-barrier.js';
import { DEFAULT_POST_GROUPS, isPostsGroup, locatePost, POSTS_GROUP_PREFIX, postGroupPlan } from '../placement.js';

type PostsNode = RaftNode<PostCommand, PostResult, PostsMachine>;

/** Post ids one hydrate call may ask for. */
const MAX_GET = 2_000;
/** A checked read's ReadIndex wait: below the app's 3 s call timeout, so a member without a quorum answers 503. */
const BARRIER_TIMEOUT_MS = 2_000;

/**
 * The post groups: a PostsMachine each, on the cluster's replica count of processes (3 unless `cluster up --set replicas=5`;
 * fewer while fewer are live).
 */
const POSTS_KIND: OnRequestKind = {
  name: 'posts',
  provisioning: 'on request',
  includes: isPostsGroup,
  groupOptions: () => ({ stateMachine: new PostsMachine() as unknown as ManagedGroupOptions['stateMachine'] }),
};

export function feedMemberPart(groups = DEFAULT_POST_GROUPS): ServiceDefinition {
  return {
    name: 'feed-posts',
    kinds: [POSTS_KIND],
    routes: (service) => memberRoutes(service, groups),
  };
}

function memberRoutes(service: ServiceContext, groups: number): void {
  // Checked reads of one group share ReadIndex rounds (shared-barrier.ts), per Raft node of the group on this member.
  const barriers = new WeakMap<PostsNode, () => Promise<void>>();
  const barrierOf = (node: PostsNode): (() => Promise<void>) => {
    let barrier = barriers.get(node);
    if (barrier === undefined)
      barriers.set(node, (barrier = sharedBarrier(() => node.readBarrier({ timeoutMs: BARRIER_TIMEOUT_MS }))));
    return barrier;
  };
  const managed = service.managed;
  const timer = setInterval(() => void ensureGroups(service, groups).catch(() => undefined), 500);
  timer.unref();
  service.onStop(() => clearInterval(timer));

  const nodeOfPost = (ctx: RequestContext, postId: string): PostsNode => {
    const records = managed
      .catalog()
      .groupsWithPrefix(POSTS_GROUP_PREFIX)
      .map((g) => ({ name: g.name, members: g.members, data: g.data }));
    const group = locatePost(postId, records);
    if (group === null) throw unavailable('the post groups are being created', 1);
    return service.requireGroup<PostCommand, PostResult, PostsMachine>(ctx, group) as PostsNode;
  };
  const propose = async (ctx: RequestContext, postId: string, command: PostCommand): Promise<PostResult> => {
    try {
      checkPostCommand(command);
    } catch (e) {
      throw badRequest('invalid_command', (e as Error).message);
    }
    const node = nodeOfPost(ctx, postId);
    return service.group(node).write(command);
  };
  const idOf = (ctx: RequestContext): string => {
    const id = ctx.params.id ?? '';
    if (!POST_ID.test(id))
      throw badRequest('invalid_post_id', 'a post id is 18 characters of Crockford base32', { field: 'post_id' });
    return id;
  };

  service.router
    .post('/internal/feed/posts', { admits: 'cluster' }, async (ctx) => {
      const body = requireObject(await ctx.json());
      const post = requireObject(body.post, 'post');
      const id = typeof post.post_id === 'string' ? post.post_id : '';
      return propose(ctx, id, { op: 'create', post } as unknown as PostCommand);
    })
    .post('/internal/feed/posts/:id/delete', { admits: 'cluster' }, async (ctx) => {
      const id = idOf(ctx);
      return propose(ctx, id, { op: 'delete', post_id: id });
    })
    .post('/internal/feed/posts/:id/like', { admits: 'cluster' }, async (ctx) => {
      const id = idOf(ctx);
      const body = requireObject(await ctx.json());
      return propose(ctx, id, { op: 'like', post_id: id, user_id: body.user_id, on: body.on } as PostCommand);
    })
    .post('/internal/feed/posts/:id/count', { admits: 'cluster' }, async (ctx) => {
      const id = idOf(ctx);
      const body = requireObject(await ctx.json());
      return propose(ctx, id, { op: 'count', post_id: id, field: body.field } as PostCommand);
    })
    .get('/internal/feed/posts/:id', { admits: 'cluster' }, (ctx) => {
      const id = idOf(ctx);
      const node = nodeOfPost(ctx, id);
      const post = node.readLocal((m) => m.get(id));
      if (post === null) throw notFound(`no post ${id}`, { post_id: id });
      return post;
    })
    .post('/internal/feed/groups/:group/get', { admits: 'cluster' }, async (ctx) => {
      const group = ctx.params.group ?? '';
      if (!isPostsGroup(group)) throw notFound(`no post group ${group.slice(0, 64)}`);
      const node = service.requireGroup<PostCommand, PostResult, PostsMachine>(ctx, group) as PostsNode;
      const body = requireObject(await ctx.json());
      const ids = postIds(body.post_ids, 'post_ids');
      const check = body.check_ids === undefined ? null : postIds(body.check_ids, 'check_ids');
      if (node.leaderId === null) throw unavailable('the group has no leader yet', 1);
      if (check !== null) {
        // A checked read: ReadIndex first, so the answer reflects every delete acknowledged before the call (a
        // deposed leader cannot get a read index and answers 503 instead). One barrier covers the whole batch, and
        // the checks arriving together share one.
        await service.group(node).call(barrierOf(node));
      }
      // Without check_ids, hydration reads the member's applied state without a barrier: candidates for ranking
      // favour availability, and a post a follower has not applied yet is simply left out (the router sends the
      // call to the leader). What is served is read with check_ids.
      return node.readLocal((m) => {
        const posts = ids.map((i) => m.get(i)).filter((p): p is Post => p !== null);
        if (check === null) return { posts };
        // Of the checked ids (cached on the caller), only those that are no longer live: tombstones and unknowns.
        const deleted = check
          .map((i) => m.get(i) ?? i)
          .filter((p) => typeof p === 'string' || p.deleted_at !== undefined);
        return {
          posts,
          deleted: deleted.filter((p): p is Post => typeof p !== 'string'),
          unknown: deleted.filter((p): p is string => typeof p === 'string'),
        };
      });
    });
}

function postIds(value: unknown, field: string): string[] {
  if (!Array.isArray(value) || value.length > MAX_GET || !value.every((i) => typeof i === 'string' && POST_ID.test(i)))
    throw badRequest('invalid_field', `${field} must be at most ${MAX_GET} post ids`, { field });
  return value as string[];
}

/** Create the post groups once, by the meta leader, when every founding member has registered as a host. */
async function ensureGroups(service: ServiceContext, count: number): Promise<void> {
  const meta = service.managed.meta;
  if (!meta.isLeader) return;
  if (service.managed.catalog().groupsWithPrefix(POSTS_GROUP_PREFIX).length > 0) return;
  if (service.liveHosts() < meta.status().config.voters.length) return;
  const { result } = await service.createGroups(POSTS_KIND, postGroupPlan(count));
  if (!result.ok && result.code !== 'exists') throw new HttpError(500, 'internal', result.message);
}
