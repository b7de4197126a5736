/**
 * The feed read (spec rule 3), in order: the viewer's latest inbox candidates (current and previous month
 * buckets), the recent outbox posts of the followed authors that are pulled (is_celebrity), merge and de-duplicate
 * by post_id, pre-filter (already seen, deleted, authors suspended or deactivated or no longer followed), rank
 * (50 ms, else time order), assemble with at most 2 consecutive posts per author, keep the assembled list as a
 * snapshot on the viewer's store partition, and answer its first page hydrated from the post cache, checked against
 * the post groups (no post whose delete was acknowledged is served).
 *
 * Pagination: next_token names the snapshot (ranked_at) and the last post shown; the next page is the snapshot's
 * list after that post, so posts arriving meanwhile neither shift it (no duplicates) nor slip in before the
 * boundary (no gaps): they are in the next first page. Any app worker can continue a token (the snapshot is in
 * the store). A snapshot older than SNAPSHOT_TTL_MS is gone: its token continues in time order below its last post.
 */
import { badRequest } from '@raftkit/http';
import { readMonths } from '../store/keys.js';
import type { Post } from '../../machine.js';
import { applyRanking, decodeToken, encodeToken, limitConsecutive, mergeCandidates } from './assemble.js';
import type { PostsClient } from './posts-client.js';
import type { RankerClient } from '../ranker/client.js';
import { MAX_RANK_CANDIDATES, RANK_DEADLINE_MS, type ContentType, type RankCandidate } from '../../rank-wire.js';
import type { StoreClient } from '../../store-client.js';
import type { FeedEntry, Profile } from '../store/store.js';
import type { StoreCall } from '../../store-protocol.js';
import { FeedCache, RECENT_MS, type CachedFeed, type RankedFeed } from './feed-cache.js';
import { dropFor } from './store-tail.js';

/** Inbox candidates read (the spec's "latest N"). */
const INBOX_CANDIDATES = 1_000;
/** Recent posts taken from each pulled author's outbox. */
const OUTBOX_CANDIDATES = 200;
/** Followed authors considered (the follow list read at once). */
const MAX_FOLLOWING = 10_000;

export interface FeedPage {
  posts: PostView[];
  next_token: string | null;
  ranking: 'ranked' | 'time';
  ranked_at: number;
}

export type PostView = Omit<Post, 'deleted_at'>;

/** A page before its posts are shown (`view`): the post objects as the post cache holds them. */
type RawPage = Omit<FeedPage, 'posts'> & { posts: Post[] };

/** A build's candidates, pre-filtered and hydrated, ready for the ranker. */
interface Gathered {
  /** When they were read from the stores. */
  at: number;
  live: FeedEntry[];
  rankInput: RankCandidate[];
  authors: string[];
}

type Snapshot = RankedFeed;

export function contentType(p: Post): ContentType {
  if (p.repost_of !== null) return 'repost';
  if (p.parent_post_id !== null) return 'comment';
  return p.media_ids.length > 0 ? 'media' : 'text';
}

export function view(p: Post): PostView {
  const { deleted_at: _d, ...rest } = p;
  return rest;
}

export class FeedReader {
  readonly stats = { reads: 0, builds: 0, pages: 0, expiredTokens: 0, timeOrder: 0 };
  /** Each post object's JSON as a page shows it (dropped with the object when the cache replaces or drops it). */
  private readonly postJson = new WeakMap<Post, string>();

  constructor(
    private readonly stores: StoreClient,
    private readonly posts: PostsClient,
    private readonly ranker: RankerClient,
    /** The ranked feeds kept per viewer (feed-cache.ts); by default one that serves nothing. */
    readonly cache: FeedCache = new FeedCache(() => false),
  ) {}

  async read(viewer: string, limit: number, token: string | null): Promise<FeedPage> {
    const page = await this.readPage(viewer, limit, token);
    return { ...page, posts: page.posts.map(view) };
  }

  /**
   * The same answer as `read`, as the JSON text the app serves: each post's text is made once per post object
   * (the post cache's, replaced when the post changes) and reused by every page showing it, rather than a page's
   * 20 posts copied and serialized on every read.
   */
  async readJson(viewer: string, limit: number, token: string | null): Promise<string> {
    const page = await this.readPage(viewer, limit, token);
    let posts = '';
    for (const p of page.posts) {
      let text = this.postJson.get(p);
      if (text === undefined) this.postJson.set(p, (text = JSON.stringify(view(p))));
      posts += posts.length === 0 ? text : `,${text}`;
    }
    return `{"posts":[${posts}],"next_token":${JSON.stringify(page.next_token)},"ranking":"${page.ranking}","ranked_at":${page.ranked_at}}`;
  }

  private async readPage(viewer: string, limit: number, token: string | null): Promise<RawPage> {
    if (token !== null) return this.next(viewer, limit, token);
    this.stats.reads++;
    const built = await this.cache.get(viewer, Date.now(), () => this.build(viewer));
    return this.page(viewer, built.rankedAt, built.feed, 0, limit);
  }

  /** A store write this worker made: the ranked feeds it changes are dropped at once (read your writes here). */
  wrote(call: StoreCall): void {
    dropFor(call, this.cache);
  }

  /** The whole read path: candidates, pre-filter, rank, assemble, and the snapshot a next_token points into. */
  private async build(viewer: string): Promise<CachedFeed> {
    this.stats.builds++;
    const now = Date.now();
    const months = readMonths(now);
    const [inbox, following] = await Promise.all([
      this.stores.call(viewer, { op: 'inbox', user: viewer, months, limit: INBOX_CANDIDATES }),
      this.stores.call(viewer, { op: 'following', user: viewer, limit: MAX_FOLLOWING, after: '' }),
    ]);
    const followed = new Set(following.edges.map((e) => e.user_id));
    const profiles = await this.profiles([...followed]);
    const pulled = [...profiles.values()].filter((p) => p.is_celebrity && followed.has(p.user_id));
    const outboxes = await Promise.all(
      pulled.map((p) =>
        this.stores
          .call(p.user_id, { op: 'outbox', author: p.user_id, months, limit: OUTBOX_CANDIDATES, before: null })
          .then(
            (a) => a.entries,
            () => [] as FeedEntry[],
          ),
      ),
    );
    let candidates = mergeCandidates([inbox.entries, ...outboxes], MAX_RANK_CANDIDATES);

    // Pre-filter: no longer followed, author not active, seen, deleted or unknown.
    candidates = candidates.filter(
      (c) => followed.has(c.author_id) && (profiles.get(c.author_id)?.account_state ?? 'active') === 'active',
    );
    const seen = new Set(
      candidates.length === 0
        ? []
        : (await this.stores.call(viewer, { op: 'seen', user: viewer, post_ids: candidates.map((c) => c.post_id) }))
            .seen,
    );
    const hydrated = await this.posts.getMany(candidates.filter((c) => !seen.has(c.post_id)).map((c) => c.post_id));
    const live = candidates.filter((c) => {
      const p = hydrated.get(c.post_id);
      return p !== undefined && p.deleted_at === undefined;
    });

    const rankInput: RankCandidate[] = live.map((c) => {
      const p = hydrated.get(c.post_id)!;
      return {
        post_id: c.post_id,
        author_id: c.author_id,
        created_at: c.created_at,
        content_type: contentType(p),
        engagement: p.engagement_counts,
      };
    });
    return this.rank(viewer, { at: now, live, rankInput, authors: [...followed] });
  }

  /**
   * Ranks gathered candidates, assembles them and keeps the snapshot. An answer in time order (the ranker missed
   * its deadline) carries `rerank`: the viewer's next read asks the ranker again about the same candidates, kept
   * until a drop like a ranked feed (and for at most RECENT_MS after they were gathered), rather than reading them
   * all from the stores again: under load, most builds were such retries.
   */
  private async rank(viewer: string, g: Gathered): Promise<CachedFeed> {
    const now = Date.now();
    const ranked =
      g.rankInput.length === 0 ? null : await this.ranker.rankWithDeadline(viewer, g.rankInput, RANK_DEADLINE_MS, now);
    if (ranked === null) this.stats.timeOrder++;
    const ordered = limitConsecutive(ranked === null ? g.live : applyRanking(g.live, ranked));
    const snapshot: Snapshot = { ranking: ranked === null ? 'time' : 'ranked', ids: ordered.map((c) => c.post_id) };
    // Kept for any later page of any read of this ranking (its limit may be smaller than this read's).
    if (ordered.length > 1)
      await this.stores.call(viewer, { op: 'put_snapshot', user: viewer, ranked_at: now, snapshot });
    const built: CachedFeed = { rankedAt: now, feed: snapshot, authors: g.authors };
    if (ranked === null && Date.now() - g.at < RECENT_MS) built.rerank = () => this.rank(viewer, g);
    return built;
  }

  private async next(viewer: string, limit: number, text: string): Promise<RawPage> {
    this.stats.pages++;
    const token = decodeToken(text);
    if (token.user !== viewer)
      throw badRequest('invalid_token', "next_token belongs to another user's feed", { field: 'next_token' });
    const stored =
      this.cache.snapshot(viewer, token.ranked_at) ??
      ((await this.stores.call(viewer, { op: 'snapshot', user: viewer, ranked_at: token.ranked_at }))
        .snapshot as Snapshot | null);
    if (stored !== null) {
      const at = stored.ids.indexOf(token.post_id);
      return this.page(viewer, token.ranked_at, stored, at + 1, limit);
    }
    // The snapshot expired: time order of the candidates older than the last post shown.
    this.stats.expiredTokens++;
    const months = readMonths(Date.now());
    const inbox = await this.stores.call(viewer, { op: 'inbox', user: viewer, months, limit: INBOX_CANDIDATES });
    const older = inbox.entries.filter((e) => e.post_id < token.post_id);
    return this.page(viewer, token.ranked_at, { ranking: 'time', ids: older.map((e) => e.post_id) }, 0, limit);
  }

  /**
   * The page of `snapshot` from index `from`, hydrated by a checked read (one call per post group, after a
   * ReadIndex): posts deleted since the candidates were hydrated or the snapshot was made are left out, even when
   * this worker's cache has not seen their delete event yet (the first page's posts are cache hits by now).
   */
  private async page(
    viewer: string,
    rankedAt: number,
    snapshot: Snapshot,
    from: number,
    limit: number,
  ): Promise<RawPage> {
    const ids = snapshot.ids.slice(from, from + limit);
    const posts = await this.posts.getMany(ids, true);
    const shown = ids
      .map((id) => posts.get(id))
      .filter((p): p is Post => p !== undefined && p.deleted_at === undefined);
    const more = from + limit < snapshot.ids.length;
    return {
      posts: shown,
      next_token:
        more && ids.length > 0
          ? encodeToken({ user: viewer, ranked_at: rankedAt, post_id: ids[ids.length - 1]! })
          : null,
      ranking: snapshot.ranking,
      ranked_at: rankedAt,
    };
  }

  /** Profiles of many users, one call per store partition. */
  async profiles(users: readonly string[]): Promise<Map<string, Profile>> {
    const out = new Map<string, Profile>();
    await Promise.all(
      [...this.stores.byPartition(users, (u) => u)].map(async ([partition, list]) => {
        for (let i = 0; i < list.length; i += 5_000) {
          try {
            const answer = await this.stores.callPartition(partition, {
              op: 'profiles',
              users: list.slice(i, i + 5_000),
            });
            for (const p of answer.profiles) out.set(p.user_id, p);
          } catch {
            // A store partition with no replica answering: its authors count as push authors and active (availability
            // over consistency).
          }
        }
      }),
    );
    return out;
  }
}
