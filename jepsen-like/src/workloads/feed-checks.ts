/**
 * The feed workload's checks, pure functions of a history (workloads/feed.ts gives its shape), so tests can feed
 * them hand-made histories with a lost post, a late one, a deleted post served, and a cursor that moved.
 *
 * - feed-fresh: after the heal, every acknowledged post (never asked to be deleted) is in every follower's feed
 *   within the freshness bound: a final read of a follower invoked later than max(heal, acknowledgement) + bound
 *   that lacks it is `not-fresh`; missing from the follower's last final read it is `lost`. A follower with no
 *   successful final read makes the check `unknown`. Figures: when each post was first seen in any feed after its
 *   acknowledgement (p50, p99, max).
 * - feed-deletes: no read invoked after a delete was acknowledged serves that post (a feed page holding it, or the
 *   post read by id answering it live): `deleted-served`.
 * - feed-cursors: within one cursor chain (a first page and the pages its next_token leads to) no post appears
 *   twice (`cursor-duplicate`), and no later page holds a post created after the first page was answered
 *   (`cursor-new-arrival`: the snapshot moved under the cursor).
 * - feed-integrity: every post served was sent (by its text) by its author (`phantom`), to a follower of that
 *   author (`foreign-author`); an acknowledged post read by id after the heal is never unknown (`post-lost`).
 */
import type { HistoryEvent } from '../history.js';
import { healTime, pairOps, quantiles, type Op } from './ops.js';
import type { Anomaly, CheckResult } from './workload.js';

export const FEED_AUTHORS = 4;
export const FEED_FOLLOWERS = 6;

/** Whether follower r<i> follows author a<j>: all but one author each. */
export function follows(follower: number, author: number): boolean {
  return (follower + author) % 4 !== 3;
}

/** One page of a feed read: its ranking, the wall time it was answered (ms), its posts. */
export interface FeedPage {
  ranking: string;
  at?: number;
  posts: Array<[postId: string, author: string, text: string, createdAt?: number]>;
}

interface FeedBound {
  freshnessMs: number;
}

interface Sent {
  author: string;
  text: string;
  op: Op;
  postId?: string;
}

function num(user: string | undefined): number {
  return Number((user ?? '').slice(1));
}

export function checkFeed(events: readonly HistoryEvent[], bound: FeedBound): CheckResult[] {
  const ops = pairOps(events);
  const heal = healTime(events) ?? 0;
  const boundNs = bound.freshnessMs * 1e6;
  const byText = new Map<string, Sent>();
  const byId = new Map<string, Sent>();
  const deleteAsked = new Set<string>();
  const deleteAcked = new Map<string, number>();
  for (const op of ops) {
    if (op.f === 'post') {
      const text = (op.input as { text: string }).text;
      const s: Sent = { author: op.key ?? '', text, op };
      if (op.type === 'ok') {
        s.postId = (op.value as { post_id: string }).post_id;
        byId.set(s.postId, s);
      }
      byText.set(text, s);
    } else if (op.f === 'delete') {
      const id = (op.input as { post_id: string }).post_id;
      deleteAsked.add(id);
      if (op.type === 'ok') deleteAcked.set(id, Math.min(deleteAcked.get(id) ?? Infinity, op.complete));
    }
  }
  const reads = ops.filter((o) => (o.f === 'feed' || o.f === 'final-feed') && o.type === 'ok');
  const pagesOf = (o: Op): FeedPage[] => (o.value as { pages: FeedPage[] }).pages;

  // feed-integrity and feed-cursors, one pass over the reads.
  const integrity: Anomaly[] = [];
  const cursors: Anomaly[] = [];
  const firstSeen = new Map<string, number>();
  for (const o of reads) {
    const user = num(o.key);
    const inChain = new Set<string>();
    const pages = pagesOf(o);
    for (const [k, page] of pages.entries()) {
      for (const [id, author, text, createdAt] of page.posts) {
        const sent = byText.get(text);
        if (sent === undefined || sent.author !== author || (sent.postId !== undefined && sent.postId !== id))
          integrity.push({
            check: 'feed-integrity',
            type: 'phantom',
            description: `r${user}'s feed served ${id} by ${author} "${text}", which no client sent as such`,
            times: [o.invoke],
          });
        else if (!follows(user, num(author)))
          integrity.push({
            check: 'feed-integrity',
            type: 'foreign-author',
            description: `r${user}'s feed served ${id} by ${author}, whom r${user} does not follow`,
            times: [o.invoke],
          });
        if (sent !== undefined && sent.op.type === 'ok' && !firstSeen.has(id))
          firstSeen.set(id, Math.max(0, o.invoke - sent.op.complete));
        if (inChain.has(id))
          cursors.push({
            check: 'feed-cursors',
            type: 'cursor-duplicate',
            description: `r${user}: ${id} served twice in one cursor chain (page ${k + 1} of ${pages.length})`,
            times: [o.invoke, o.complete],
          });
        inChain.add(id);
        const answered = pages[0]!.at;
        if (k > 0 && answered !== undefined && createdAt !== undefined && createdAt > answered)
          cursors.push({
            check: 'feed-cursors',
            type: 'cursor-new-arrival',
            description: `r${user}: page ${k + 1} holds ${id}, created ${createdAt - answered} ms after the first page was answered`,
            times: [o.invoke, o.complete],
          });
      }
    }
  }
  for (const o of ops) {
    if (o.f !== 'final-get' || o.type !== 'ok') continue;
    const v = o.value as { post_id: string; status: string };
    if (v.status === 'missing' && byId.has(v.post_id))
      integrity.push({
        check: 'feed-integrity',
        type: 'post-lost',
        description: `acknowledged post ${v.post_id} read by id after the heal: not found`,
        times: [o.invoke],
      });
  }

  // feed-deletes.
  const deletes: Anomaly[] = [];
  for (const o of ops) {
    if (o.type !== 'ok') continue;
    if (o.f === 'feed' || o.f === 'final-feed') {
      for (const page of pagesOf(o))
        for (const [id] of page.posts) {
          const acked = deleteAcked.get(id);
          if (acked !== undefined && o.invoke > acked)
            deletes.push({
              check: 'feed-deletes',
              type: 'deleted-served',
              description: `${o.key}'s feed served ${id} ${((o.invoke - acked) / 1e6).toFixed(0)} ms after its delete was acknowledged`,
              times: [acked, o.invoke],
            });
        }
    } else if (o.f === 'get' || o.f === 'final-get') {
      const v = o.value as { post_id: string; status: string };
      const acked = deleteAcked.get(v.post_id);
      if (acked !== undefined && o.invoke > acked && v.status === 'live')
        deletes.push({
          check: 'feed-deletes',
          type: 'deleted-served',
          description: `${v.post_id} read live by id ${((o.invoke - acked) / 1e6).toFixed(0)} ms after its delete was acknowledged`,
          times: [acked, o.invoke],
        });
    }
  }

  // feed-fresh.
  const fresh: Anomaly[] = [];
  let unknownFollowers = 0;
  let expectedPairs = 0;
  let lost = 0;
  let late = 0;
  for (let i = 0; i < FEED_FOLLOWERS; i++) {
    const finals = reads.filter((o) => o.f === 'final-feed' && num(o.key) === i).sort((a, b) => a.invoke - b.invoke);
    const sets = finals.map((o) => new Set(pagesOf(o).flatMap((p) => p.posts.map(([id]) => id))));
    let owed = 0;
    for (const [id, s] of byId) {
      if (deleteAsked.has(id) || !follows(i, num(s.author))) continue;
      expectedPairs++;
      owed++;
      if (finals.length === 0) continue;
      const due = Math.max(heal, s.op.complete) + boundNs;
      if (!sets[sets.length - 1]!.has(id)) {
        lost++;
        fresh.push({
          check: 'feed-fresh',
          type: 'lost',
          description: `acknowledged post ${id} by ${s.author} ("${s.text}") missing from r${i}'s last feed read, ${((finals[finals.length - 1]!.invoke - due + boundNs) / 1e9).toFixed(1)} s after the heal or its acknowledgement`,
          times: [s.op.complete, finals[finals.length - 1]!.invoke],
        });
        continue;
      }
      const stale = finals.findIndex((o, k) => o.invoke > due && !sets[k]!.has(id));
      if (stale >= 0) {
        late++;
        fresh.push({
          check: 'feed-fresh',
          type: 'not-fresh',
          description: `acknowledged post ${id} by ${s.author} not yet in r${i}'s feed ${((finals[stale]!.invoke - due + boundNs) / 1e9).toFixed(1)} s after the heal or its acknowledgement (bound ${bound.freshnessMs / 1000} s)`,
          times: [s.op.complete, finals[stale]!.invoke],
        });
      }
    }
    if (finals.length === 0 && owed > 0) unknownFollowers++;
  }
  const seen = quantiles([...firstSeen.values()].map((ns) => ns / 1e6));
  const count = (f: string, type?: string): number =>
    ops.filter((o) => o.f === f && (type === undefined || o.type === type)).length;
  return [
    {
      name: 'feed-fresh',
      valid: fresh.length > 0 ? false : unknownFollowers > 0 ? 'unknown' : true,
      anomalies: fresh,
      stats: {
        posts_ok: byId.size,
        posts_unknown: count('post', 'info'),
        posts_failed: count('post', 'fail'),
        expected_deliveries: expectedPairs,
        lost,
        not_fresh: late,
        followers_unread: unknownFollowers,
        first_seen_p50_ms: seen.p50,
        first_seen_p99_ms: seen.p99,
        first_seen_max_ms: seen.max,
        posts_seen: firstSeen.size,
      },
    },
    {
      name: 'feed-deletes',
      valid: deletes.length === 0,
      anomalies: deletes,
      stats: { deletes_ok: deleteAcked.size, deletes_asked: deleteAsked.size, deleted_served: deletes.length },
    },
    {
      name: 'feed-cursors',
      valid: cursors.length === 0,
      anomalies: cursors,
      stats: {
        chains: reads.filter((o) => pagesOf(o).length > 1).length,
        pages: reads.reduce((n, o) => n + pagesOf(o).length, 0),
        feed_reads_ok: count('feed', 'ok'),
        feed_reads_failed: count('feed', 'fail'),
      },
    },
    {
      name: 'feed-integrity',
      valid: integrity.length === 0,
      anomalies: integrity,
      stats: { gets_ok: count('get', 'ok'), final_gets: count('final-get', 'ok') },
    },
  ];
}
