/**
 * The authoritative post store: one PostsMachine per Raft group `feed.posts.N` (a hash-slot range of post ids).
 * Pure: no clock (created_at comes from the post id, deleted_at from the entry's leader time), no I/O. A deleted
 * post stays as a tombstone (author, created_at, deleted_at; its text and media dropped), so a replayed or late
 * create of the same id cannot bring it back and readers can tell "deleted" from "unknown".
 */
import type { ApplyContext, StateMachine } from '@raftkit/raft';
import { POST_ID, postIdTime } from './post-id.js';
import type { EngagementCounts } from './rank-wire.js';

export interface Post {
  post_id: string;
  author_id: string;
  text: string;
  media_ids: string[];
  parent_post_id: string | null;
  repost_of: string | null;
  created_at: number;
  engagement_counts: EngagementCounts;
  /** Set on a tombstone. */
  deleted_at?: number;
}

export interface NewPost {
  post_id: string;
  author_id: string;
  text: string;
  media_ids: string[];
  parent_post_id: string | null;
  repost_of: string | null;
}

export type PostCommand =
  | { op: 'create'; post: NewPost }
  | { op: 'delete'; post_id: string }
  /** A like (or its undo) by one user: counted once per user. */
  | { op: 'like'; post_id: string; user_id: string; on: boolean }
  /** A comment or a repost of the post was created: its counter moves. */
  | { op: 'count'; post_id: string; field: 'comments' | 'shares' };

export type PostResult =
  | { op: 'create'; status: 'created' | 'exists' | 'deleted'; post: Post }
  | { op: 'delete'; status: 'deleted' | 'already_deleted' | 'not_found'; post: Post | null }
  | { op: 'like'; status: 'changed' | 'unchanged' | 'not_found' | 'deleted'; post: Post | null }
  | { op: 'count'; status: 'changed' | 'not_found' | 'deleted'; post: Post | null };

export const MAX_TEXT = 5_000;
export const MAX_MEDIA = 10;
export const USER_ID = /^[A-Za-z0-9._-]{1,64}$/;
export const MEDIA_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** Throws on a command the machine would refuse, so the API answers 400 before anything is logged. */
export function checkPostCommand(value: unknown): asserts value is PostCommand {
  const c = value as Record<string, unknown>;
  if (typeof c !== 'object' || c === null) throw new Error('command must be an object');
  const id = (v: unknown, what: string): void => {
    if (typeof v !== 'string' || !POST_ID.test(v)) throw new Error(`${what} must be a post id`);
  };
  const user = (v: unknown, what: string): void => {
    if (typeof v !== 'string' || !USER_ID.test(v)) throw new Error(`${what} must be 1..64 of A-Z a-z 0-9 . _ -`);
  };
  switch (c.op) {
    case 'create': {
      const p = c.post as Record<string, unknown>;
      if (typeof p !== 'object' || p === null) throw new Error('post must be an object');
      id(p.post_id, 'post_id');
      user(p.author_id, 'author_id');
      if (typeof p.text !== 'string' || p.text.length > MAX_TEXT)
        throw new Error(`text must be a string of at most ${MAX_TEXT} characters`);
      if (
        !Array.isArray(p.media_ids) ||
        p.media_ids.length > MAX_MEDIA ||
        !p.media_ids.every((m) => typeof m === 'string' && MEDIA_ID.test(m))
      )
        throw new Error(`media_ids must be at most ${MAX_MEDIA} media ids`);
      if (p.parent_post_id !== null) id(p.parent_post_id, 'parent_post_id');
      if (p.repost_of !== null) id(p.repost_of, 'repost_of');
      return;
    }
    case 'delete':
      id(c.post_id, 'post_id');
      return;
    case 'like':
      id(c.post_id, 'post_id');
      user(c.user_id, 'user_id');
      if (typeof c.on !== 'boolean') throw new Error('on must be a boolean');
      return;
    case 'count':
      id(c.post_id, 'post_id');
      if (c.field !== 'comments' && c.field !== 'shares') throw new Error('field must be comments or shares');
      return;
    default:
      throw new Error('unknown op');
  }
}

export class PostsMachine implements StateMachine<PostCommand, PostResult> {
  private readonly posts = new Map<string, Post>();
  /** Who liked what (so a like counts once per user). */
  private readonly likers = new Map<string, Set<string>>();

  apply(command: PostCommand, context: ApplyContext): PostResult {
    checkPostCommand(command);
    switch (command.op) {
      case 'create': {
        const existing = this.posts.get(command.post.post_id);
        if (existing !== undefined)
          return { op: 'create', status: existing.deleted_at !== undefined ? 'deleted' : 'exists', post: existing };
        const p = command.post;
        const post: Post = {
          post_id: p.post_id,
          author_id: p.author_id,
          text: p.text,
          media_ids: [...p.media_ids],
          parent_post_id: p.parent_post_id,
          repost_of: p.repost_of,
          created_at: postIdTime(p.post_id),
          engagement_counts: { likes: 0, comments: 0, shares: 0 },
        };
        this.posts.set(post.post_id, post);
        return { op: 'create', status: 'created', post };
      }
      case 'delete': {
        const post = this.posts.get(command.post_id);
        if (post === undefined) return { op: 'delete', status: 'not_found', post: null };
        if (post.deleted_at !== undefined) return { op: 'delete', status: 'already_deleted', post };
        const tombstone: Post = { ...post, text: '', media_ids: [], deleted_at: context.time };
        this.posts.set(post.post_id, tombstone);
        this.likers.delete(post.post_id);
        return { op: 'delete', status: 'deleted', post: tombstone };
      }
      case 'like': {
        const post = this.posts.get(command.post_id);
        if (post === undefined) return { op: 'like', status: 'not_found', post: null };
        if (post.deleted_at !== undefined) return { op: 'like', status: 'deleted', post };
        let set = this.likers.get(post.post_id);
        const had = set?.has(command.user_id) ?? false;
        if (had === command.on) return { op: 'like', status: 'unchanged', post };
        if (command.on) {
          if (set === undefined) this.likers.set(post.post_id, (set = new Set()));
          set.add(command.user_id);
        } else set!.delete(command.user_id);
        const next: Post = {
          ...post,
          engagement_counts: { ...post.engagement_counts, likes: post.engagement_counts.likes + (command.on ? 1 : -1) },
        };
        this.posts.set(post.post_id, next);
        return { op: 'like', status: 'changed', post: next };
      }
      case 'count': {
        const post = this.posts.get(command.post_id);
        if (post === undefined) return { op: 'count', status: 'not_found', post: null };
        if (post.deleted_at !== undefined) return { op: 'count', status: 'deleted', post };
        const next: Post = {
          ...post,
          engagement_counts: { ...post.engagement_counts, [command.field]: post.engagement_counts[command.field] + 1 },
        };
        this.posts.set(post.post_id, next);
        return { op: 'count', status: 'changed', post: next };
      }
    }
  }

  get(postId: string): Post | null {
    return this.posts.get(postId) ?? null;
  }

  get size(): number {
    return this.posts.size;
  }

  snapshot(): Uint8Array {
    const likers = [...this.likers].map(([id, users]) => [id, [...users]]);
    return Buffer.from(JSON.stringify({ posts: [...this.posts.values()], likers }));
  }

  restore(data: Uint8Array): void {
    const state = JSON.parse(Buffer.from(data).toString('utf8')) as {
      posts: Post[];
      likers: Array<[string, string[]]>;
    };
    this.posts.clear();
    this.likers.clear();
    for (const p of state.posts) this.posts.set(p.post_id, p);
    for (const [id, users] of state.likers) this.likers.set(id, new Set(users));
  }
}
