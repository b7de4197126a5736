/**
 * The app tier's access to the authoritative post store (the post groups, through a GroupRouter to each group's
 * leader) with the post cache in front of it (spec rule 6: read-mostly, long TTL, invalidated by delete events,
 * which every app worker tails from `feed-deletes`).
 */
import { GroupRouter, ServiceError, unavailable } from '@raftkit/http';
import type { LogClient } from '@raftkit/log';
import { parseEvent } from '../../events.js';
import type { Post, PostResult } from '../../machine.js';
import { locatePost } from '../../placement.js';
import { DELETES_TOPIC } from '../../rank-wire.js';

/** Posts the cache holds (least recently used dropped first). */
const CACHE_POSTS = 200_000;
const CACHE_TTL_MS = 10 * 60_000;

type GetAnswer = { posts: Post[]; deleted?: Post[]; unknown?: string[] };

/** The checked reads waiting for one group's next call: their ids, merged, and their shared answer. */
interface CheckBatch {
  miss: Set<string>;
  check: Set<string>;
  answer: Promise<GetAnswer>;
  settle: { resolve: (a: GetAnswer) => void; reject: (e: unknown) => void };
}

export class PostsClient {
  readonly router: GroupRouter;
  /**
   * The group of each post id seen (post ids map to groups by hash slot, and the post groups do not split). Cleared
   * whole when it grows past the cache's size.
   */
  private readonly groupMemo = new Map<string, string>();
  /** Per post group: the checked call in flight (if any) and the batch that goes when it is answered. */
  private readonly checkQueues = new Map<string, { running: boolean; next: CheckBatch | null }>();
  private readonly cache = new Map<string, { post: Post; at: number }>();
  private tailing = true;
  readonly stats = { hits: 0, misses: 0, invalidations: 0, checks: 0, checkCalls: 0 };

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

  /**
   * One post (tombstones included), or null when unknown, checked against its group (`getMany`): a 503 when the
   * group cannot confirm it, since a cached post that cannot be checked may have been deleted.
   */
  async get(postId: string): Promise<Post | null> {
    const { posts, unanswered } = await this.read([postId], true);
    if (unanswered) throw unavailable('the post group did not answer', 1);
    return posts.get(postId) ?? null;
  }

  /**
   * Hydration: the posts of these ids (tombstones included; unknown ids left out), from the cache, the misses in
   * one call per post group. A group that does not answer leaves its posts out (a slightly thinner page, never a
   * failed read: the spec favours availability).
   *
   * `checked` is for what is served: every post comes from one call per post group made after a ReadIndex on
   * its leader (`check_ids`: the cached ones, answered with only those deleted since), so a post whose delete was
   * acknowledged anywhere before this call is a tombstone here, whether or not this worker has read its delete
   * event yet. Unchecked (the pre-filter's up to 2,000 candidates) takes the cache as it is.
   */
  async getMany(ids: readonly string[], checked = false): Promise<Map<string, Post>> {
    return (await this.read(ids, checked)).posts;
  }

  private async read(
    ids: readonly string[],
    checked: boolean,
  ): Promise<{ posts: Map<string, Post>; unanswered: boolean }> {
    const out = new Map<string, Post>();
    const hits = new Map<string, Post>();
    const misses: string[] = [];
    const now = Date.now();
    for (const id of ids) {
      const hit = this.cache.get(id);
      if (hit !== undefined && now - hit.at < CACHE_TTL_MS) {
        this.stats.hits++;
        if (checked) hits.set(id, hit.post);
        else out.set(id, hit.post);
      } else misses.push(id);
    }
    if (misses.length === 0 && hits.size === 0) return { posts: out, unanswered: false };
    this.stats.misses += misses.length;
    const byGroup = new Map<string, { miss: string[]; check: string[] }>();
    let unanswered = false;
    const add = async (id: string, list: 'miss' | 'check'): Promise<void> => {
      let group = this.groupMemo.get(id);
      if (group === undefined) {
        try {
          group = await this.router.groupOf(id);
        } catch {
          unanswered = true;
          return;
        }
        if (this.groupMemo.size >= CACHE_POSTS) this.groupMemo.clear();
        this.groupMemo.set(id, group);
      }
      let batch = byGroup.get(group);
      if (batch === undefined) byGroup.set(group, (batch = { miss: [], check: [] }));
      batch[list].push(id);
    };
    for (const id of misses) await add(id, 'miss');
    for (const id of hits.keys()) {
      // Known ids without an await each (a page is up to 100 of them, on every read).
      const known = this.groupMemo.get(id);
      if (known === undefined) await add(id, 'check');
      else {
        let batch = byGroup.get(known);
        if (batch === undefined) byGroup.set(known, (batch = { miss: [], check: [] }));
        batch.check.push(id);
      }
    }
    if (checked) this.stats.checks += byGroup.size;
    await Promise.all(
      [...byGroup].map(async ([group, batch]) => {
        try {
          const answer = checked
            ? await this.checkedGet(group, batch.miss, batch.check)
            : ((await this.router.call(
                group,
                'POST',
                `/internal/feed/groups/${group}/get`,
                { post_ids: batch.miss },
                { timeoutMs: 3_000 },
              )) as GetAnswer);
          // Checked ids first: an id another read of the batch missed comes back whole in `posts`, and wins.
          if (checked) for (const id of batch.check) out.set(id, hits.get(id)!);
          for (const p of answer.posts) {
            out.set(p.post_id, p);
            this.remember(p);
          }
          if (!checked) return;
          for (const p of answer.deleted ?? []) {
            out.set(p.post_id, p);
            this.remember(p);
          }
          for (const id of answer.unknown ?? []) {
            out.delete(id);
            this.cache.delete(id);
          }
        } catch (e) {
          if (!(e instanceof ServiceError)) throw e;
          unanswered = true;
        }
      }),
    );
    return { posts: out, unanswered };
  }

  /**
   * A checked get of one group, batched: the reads that arrive while the group's call is in flight share the next
   * call, sent as soon as it is answered (at most one in flight per group). Each read's ids go in a call that starts
   * after the read did, so its ReadIndex is taken after any delete acknowledged before the read began: the same
   * guarantee as a call of its own, at one call per round trip instead of one per read.
   */
  private checkedGet(group: string, miss: readonly string[], check: readonly string[]): Promise<GetAnswer> {
    let q = this.checkQueues.get(group);
    if (q === undefined) this.checkQueues.set(group, (q = { running: false, next: null }));
    if (q.next === null) {
      let settle!: CheckBatch['settle'];
      const answer = new Promise<GetAnswer>((resolve, reject) => (settle = { resolve, reject }));
      // Settled with no reader attached when every reader left: not an unhandled rejection.
      answer.catch(() => undefined);
      q.next = { miss: new Set(), check: new Set(), answer, settle };
    }
    const batch = q.next;
    for (const id of miss) batch.miss.add(id);
    for (const id of check) batch.check.add(id);
    if (!q.running) this.sendChecks(group, q);
    return batch.answer;
  }

  private sendChecks(group: string, q: { running: boolean; next: CheckBatch | null }): void {
    const batch = q.next;
    if (batch === null) return;
    q.next = null;
    q.running = true;
    this.stats.checkCalls++;
    // An id both missed by one read and checked by another is fetched whole: its answer covers both.
    const check = [...batch.check].filter((id) => !batch.miss.has(id));
    this.router
      .call(
        group,
        'POST',
        `/internal/feed/groups/${group}/get`,
        { post_ids: [...batch.miss], check_ids: check },
        { timeoutMs: 3_000 },
      )
      .then(
        (a) => batch.settle.resolve(a as GetAnswer),
        (e: unknown) => batch.settle.reject(e),
      )
      .finally(() => {
        q.running = false;
        this.sendChecks(group, q);
      });
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
