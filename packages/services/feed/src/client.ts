/**
 * A typed client of the feed's public surface (the app workers): posts, the feed with its continuation token,
 * the follow graph, likes, reposts, deletes, profiles. On ClusterClient (packages/platform/http): a keep-alive pool per app
 * worker, failover while one does not answer or answers 503. Errors are ServiceErrors with the service's code.
 */
import { ClusterClient } from '@raftkit/http';
import type { FeedPage, PostView } from './workers/app/feed-reader.js';
import type { AccountState, Edge, Profile } from './workers/store/store.js';

export interface FeedClientOptions {
  /** App worker base URLs, e.g. http://127.0.0.1:8841 */
  endpoints: string[];
  /** A user's token (`client.<user>...`: acts as that user) or the cluster token (acts for anyone). */
  token: string;
  timeoutMs?: number;
}

export interface PostInput {
  author_id?: string;
  text: string;
  media_ids?: string[];
  parent_post_id?: string | null;
}

export class FeedClient {
  private readonly cluster: ClusterClient;

  constructor(options: FeedClientOptions) {
    this.cluster = new ClusterClient({
      endpoints: options.endpoints,
      token: options.token,
      timeoutMs: options.timeoutMs ?? 15_000,
    });
  }

  post(input: PostInput): Promise<{ post_id: string; created_at: number }> {
    return this.call('POST', '/api/posts', input);
  }

  getPost(postId: string): Promise<PostView> {
    return this.call('GET', `/api/posts/${encodeURIComponent(postId)}`);
  }

  deletePost(postId: string): Promise<{ post_id: string; deleted: true; deleted_at: number }> {
    return this.call('DELETE', `/api/posts/${encodeURIComponent(postId)}`);
  }

  /** One page of `user`'s feed (the token's user when omitted); pass the previous page's next_token to go on. */
  feed(options: { user_id?: string; limit?: number; next_token?: string | null } = {}): Promise<FeedPage> {
    const query = new URLSearchParams();
    if (options.user_id !== undefined) query.set('user_id', options.user_id);
    if (options.limit !== undefined) query.set('limit', String(options.limit));
    if (options.next_token !== undefined && options.next_token !== null) query.set('next_token', options.next_token);
    const q = query.toString();
    return this.call('GET', `/api/feed${q.length > 0 ? `?${q}` : ''}`);
  }

  follow(follower_id: string, followee_id: string): Promise<{ ok: true; changed: boolean }> {
    return this.call('POST', '/api/follow', { follower_id, followee_id });
  }

  unfollow(follower_id: string, followee_id: string): Promise<{ ok: true; changed: boolean }> {
    return this.call('POST', '/api/unfollow', { follower_id, followee_id });
  }

  like(postId: string, user_id?: string): Promise<{ post_id: string; liked: boolean; changed: boolean }> {
    return this.call('POST', `/api/posts/${encodeURIComponent(postId)}/like`, user_id === undefined ? {} : { user_id });
  }

  unlike(postId: string, user_id?: string): Promise<{ post_id: string; liked: boolean; changed: boolean }> {
    return this.call(
      'DELETE',
      `/api/posts/${encodeURIComponent(postId)}/like`,
      user_id === undefined ? {} : { user_id },
    );
  }

  repost(postId: string, user_id?: string): Promise<{ post_id: string; created_at: number; repost_of: string }> {
    return this.call(
      'POST',
      `/api/posts/${encodeURIComponent(postId)}/repost`,
      user_id === undefined ? {} : { user_id },
    );
  }

  markSeen(post_ids: string[], user_id?: string): Promise<{ ok: true; marked: number }> {
    return this.call('POST', '/api/seen', user_id === undefined ? { post_ids } : { post_ids, user_id });
  }

  profile(userId: string): Promise<Profile> {
    return this.call('GET', `/api/users/${encodeURIComponent(userId)}/profile`);
  }

  updateProfile(userId: string, change: { display_name?: string; account_state?: AccountState }): Promise<Profile> {
    return this.call('PUT', `/api/users/${encodeURIComponent(userId)}/profile`, change);
  }

  /** Whom `userId` follows, by user id from `after` (exclusive), one single-key range read. */
  following(
    userId: string,
    options: { limit?: number; after?: string } = {},
  ): Promise<{ user_id: string; following: Edge[]; next_after: string | null }> {
    return this.call('GET', `/api/users/${encodeURIComponent(userId)}/following${edgeQuery(options)}`);
  }

  /** Who follows `userId`, the other view of the same relation. */
  followers(
    userId: string,
    options: { limit?: number; after?: string } = {},
  ): Promise<{ user_id: string; followers: Edge[]; next_after: string | null }> {
    return this.call('GET', `/api/users/${encodeURIComponent(userId)}/followers${edgeQuery(options)}`);
  }

  posts(
    authorId: string,
    options: { limit?: number; before?: string } = {},
  ): Promise<{ posts: PostView[]; next_before: string | null }> {
    const query = new URLSearchParams();
    if (options.limit !== undefined) query.set('limit', String(options.limit));
    if (options.before !== undefined) query.set('before', options.before);
    const q = query.toString();
    return this.call('GET', `/api/users/${encodeURIComponent(authorId)}/posts${q.length > 0 ? `?${q}` : ''}`);
  }

  close(): Promise<void> {
    return this.cluster.close();
  }

  private async call<T>(method: string, path: string, body?: object): Promise<T> {
    return (await this.cluster.call(method, path, body)) as T;
  }
}

function edgeQuery(options: { limit?: number; after?: string }): string {
  const query = new URLSearchParams();
  if (options.limit !== undefined) query.set('limit', String(options.limit));
  if (options.after !== undefined) query.set('after', options.after);
  const q = query.toString();
  return q.length > 0 ? `?${q}` : '';
}
