/**
 * The app tier's access to the authoritative post store (the post groups, through a GroupRouter to each group's
 * leader) with the post cache in front of it (spec rule 6: read-mostly, long TTL, invalidated by delete events,
 * which every app worker tails from `feed-deletes`).
 */
import { GroupRouter, ServiceError } from '@raftkit/http';
import type { LogClient } from '@raftkit/log';
import { parseEvent } from '../../events.js';
import type { Post, PostResult } from '../../machine.js';
import { locatePost } from '../../placement.js';
import { DELETES_TOPIC } from '../../rank-wire.js';

/** Posts the cache holds (least recently used dropped first). */
const CACHE_POSTS = 200_000;
const CACHE_TTL_MS = 10 * 60_000;

export class PostsClient {
  readonly router: GroupRouter;
  private readonly cache = new Map<string, { post: Post; at: number }>();
  private tailing = true;
  readonly stats = { hits: 0, misses: 0, invalidations: 0 };

  constructor(endpoints: string[], token: string) {
    this.router = new GroupRouter({ endpoints, token, timeoutMs: 10_000, locate: locatePost });
  }

  async propose(postId: string, path: string, body: object): Promise<PostResult> {
    return (await this.router.callKey(postId, 'POST', path, body)) as PostResult;
  }

  remember(post: Post): void {
    this.cache.delete(post.post_id);
    this.cache.set(post.post_id, { post, at: Date.now() });
    if (this.cache.size > CACHE_POSTS) this.cache.delete(this.cache.keys().next().value!);
  }

  invalidate(postId: string): void {
    if (this.cache.delete(postId)) this.stats.invalidations++;
  }

  /** One post (tombstones included), or null when unknown. */
  async get(postId: string): Promise<Post | null> {
    return (await this.getMany([postId])).get(postId) ?? null;
  }

  /**
   * Hydration: the posts of these ids (tombstones included; unknown ids left out), from the cache, the misses in
   * one call per post group. A group that does not answer leaves its posts out (a slightly thinner page, never a
   * failed read: the spec favours availability).
   */
  async getMany(ids: readonly string[]): Promise<Map<string, Post>> {
    const out = new Map<string, Post>();
    const misses: string[] = [];
    const now = Date.now();
    for (const id of ids) {
      const hit = this.cache.get(id);
      if (hit !== undefined && now - hit.at < CACHE_TTL_MS) {
        this.stats.hits++;
        out.set(id, hit.post);
      } else misses.push(id);
    }
    if (misses.length === 0) return out;
    this.stats.misses += misses.length;
    const byGroup = new Map<string, string[]>();
    for (const id of misses) {
      let group: string;
      try {
        group = await this.router.groupOf(id);
      } catch {
        continue;
      }
      let list = byGroup.get(group);
      if (list === undefined) byGroup.set(group, (list = []));
      list.push(id);
    }
    await Promise.all(
      [...byGroup].map(async ([group, list]) => {
        try {
          const answer = (await this.router.call(
            group,
            'POST',
            `/internal/feed/groups/${group}/get`,
            { post_ids: list },
            { timeoutMs: 3_000 },
          )) as { posts: Post[] };
          for (const p of answer.posts) {
            out.set(p.post_id, p);
            this.remember(p);
          }
        } catch (e) {
          if (!(e instanceof ServiceError)) throw e;
        }
      }),
    );
    return out;
  }

  /** Tails `feed-deletes` from its current end, dropping deleted posts from the cache. */
  async tailDeletes(log: LogClient): Promise<void> {
    let partitions = 0;
    const positions: number[] = [];
    // Where each partition ends now, retried while the log elects (the cache starts empty: older deletes do not matter).
    while (this.tailing) {
      try {
        partitions = await log.partitions(DELETES_TOPIC);
        positions.length = 0;
        for (let p = 0; p < partitions; p++)
          positions.push((await log.fetch(DELETES_TOPIC, p, 0, { maxRecords: 1 })).end_offset);
        break;
      } catch {
        await new Promise((r) => setTimeout(r, 500));
      }
    }
    while (this.tailing) {
      for (let p = 0; p < partitions && this.tailing; p++) {
        try {
          const answer = await log.fetch(DELETES_TOPIC, p, positions[p]!, {
            maxRecords: 500,
            waitMs: p === partitions - 1 ? 500 : 0,
          });
          for (const r of answer.records) {
            const e = parseEvent(r.value);
            if (e !== null) this.invalidate(e.post_id);
          }
          positions[p] = answer.next_offset;
        } catch {
          await new Promise((r) => setTimeout(r, 200));
        }
      }
    }
  }

  async close(): Promise<void> {
    this.tailing = false;
    await this.router.close();
  }
}
