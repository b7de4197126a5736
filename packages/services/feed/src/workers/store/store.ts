/**
 * One store partition's data (a store worker holds one): the follow graph in both directions, profiles, per-(user,
 * author) engagement, inbox and outbox buckets, seen marks and feed snapshots, in one LevelDB; plus the write-
 * through hot cache of recent inbox entries (spec rule 6: written on every push). Writes are serialised in this
 * process (read-modify-write of profiles and count deltas), and every write is idempotent, so a fan-out worker
 * may replay a post event after any crash.
 *
 * A replica (replica.ts) applies the partition's ops from the log in offset order inside `applying(offset, ...)`:
 * every LevelDB batch written meanwhile also records the next offset to apply (`cfg/applied`), so an op and its
 * offset are stored together, exactly once per replica across crashes. Writes take their times from the op, never
 * from the clock, so every replica stores the same keys.
 */
import { Level } from 'level';
import { keys, month, prefixEnd } from './keys.js';

export type AccountState = 'active' | 'suspended' | 'deactivated';

export interface Profile {
  user_id: string;
  display_name: string;
  followers_count: number;
  is_celebrity: boolean;
  account_state: AccountState;
}

export interface FeedEntry {
  post_id: string;
  author_id: string;
  created_at: number;
}

export interface Engagement {
  user_id: string;
  author_id: string;
  interaction_count: number;
  last_interaction_at: number;
}

export interface Edge {
  user_id: string;
  created_at: number;
}

/** Inbox entries a user's hot cache keeps (newest first); reads wanting more go to LevelDB. */
const HOT_ENTRIES = 500;
/** Users with a hot cache in one store process (least recently used dropped first). */
const HOT_USERS = 20_000;
/** Feed snapshots (the ranked list a next_token points into) live this long. */
export const SNAPSHOT_TTL_MS = 15 * 60_000;

interface Hot {
  /** Newest first. */
  entries: FeedEntry[];
  /** Every entry of the buckets it was loaded for is here (none was trimmed away). */
  complete: boolean;
  months: string;
}

type Value = unknown;

export class FeedStore {
  private chain: Promise<unknown> = Promise.resolve();
  private readonly hot = new Map<string, Hot>();
  /** Users whose inbox is being loaded into the hot cache, and whether a write touched it meanwhile. */
  private readonly loading = new Map<string, { dirty: boolean }>();
  private thresholdValue: number;
  readonly stats = { inboxWrites: 0, hotHits: 0, hotMisses: 0, folds: 0 };

  private constructor(
    private readonly db: Level<string, Value>,
    threshold: number,
    private readonly defaultThreshold: number,
  ) {
    this.thresholdValue = threshold;
  }

  static async open(dir: string, defaultThreshold: number): Promise<FeedStore> {
    const db = new Level<string, Value>(dir, { valueEncoding: 'json' });
    await db.open();
    const stored = await db.get(keys.threshold);
    return new FeedStore(db, typeof stored === 'number' ? stored : defaultThreshold, defaultThreshold);
  }

  /** Empties the store (a replica about to replay its partition's log from offset 0). */
  async reset(): Promise<void> {
    await this.db.clear();
    this.dropHot();
    this.thresholdValue = this.defaultThreshold;
  }

  close(): Promise<void> {
    return this.db.close();
  }

  get threshold(): number {
    return this.thresholdValue;
  }

  /** Runs writes one at a time (they read before they write). */
  private serial<T>(work: () => Promise<T>): Promise<T> {
    const run = this.chain.then(work, work);
    this.chain = run.catch(() => undefined);
    return run;
  }

  /** The offset being applied (null outside `applying`), and whether a batch already recorded it. */
  private applyingOffset: number | null = null;
  private stamped = false;

  /** Writes a batch; inside `applying`, the batch also records the op's offset as applied. */
  private async write(batch: ReturnType<Level<string, Value>['batch']>): Promise<void> {
    if (this.applyingOffset !== null) {
      batch.put(keys.applied, this.applyingOffset + 1);
      this.stamped = true;
    }
    await batch.write();
  }

  /**
   * Runs one op of the log at `offset`: its writes record offset + 1 as the next to apply, in the same batch; an op
   * that wrote nothing (a follow already there) records it alone. Ops run one at a time (the replica's loop).
   */
  async applying<T>(offset: number, op: () => Promise<T>): Promise<T> {
    this.applyingOffset = offset;
    this.stamped = false;
    try {
      const result = await op();
      if (!this.stamped) await this.db.put(keys.applied, offset + 1);
      return result;
    } finally {
      this.applyingOffset = null;
    }
  }

  /** The next log offset to apply, or null for a store that never applied one (new, or wiped). */
  async appliedOffset(): Promise<number | null> {
    const v = await this.db.get(keys.applied);
    return typeof v === 'number' ? v : null;
  }

  /**
   * Every key and value, from one LevelDB iterator (an implicit snapshot, so `cfg/applied` among them matches the
   * data exactly): what a wiped replica copies from a peer.
   */
  async *exportAll(): AsyncGenerator<[string, unknown]> {
    for await (const [k, v] of this.db.iterator()) yield [k, v];
  }

  /**
   * Replaces everything with a peer's copy. `cfg/applied` is written last, so a copy cut short leaves a store that
   * still counts as never applied (and is cleared and copied again).
   */
  async importAll(rows: AsyncIterable<[string, unknown]>): Promise<number> {
    await this.db.clear();
    this.dropHot();
    let applied: unknown;
    let batch = this.db.batch();
    let n = 0;
    for await (const [k, v] of rows) {
      if (k === keys.applied) {
        applied = v;
        continue;
      }
      batch.put(k, v);
      if (++n % 1_000 === 0) {
        await this.write(batch);
        batch = this.db.batch();
      }
    }
    await this.write(batch);
    if (typeof applied !== 'number') throw new Error('the copy has no applied offset');
    const stored = await this.db.get(keys.threshold);
    this.thresholdValue = typeof stored === 'number' ? stored : this.defaultThreshold;
    await this.db.put(keys.applied, applied);
    return n;
  }

  /** Empties the hot cache; loads in progress read what may be gone, so they are answered but not cached. */
  private dropHot(): void {
    this.hot.clear();
    for (const load of this.loading.values()) load.dirty = true;
  }

  private async getJson<T>(key: string): Promise<T | undefined> {
    return (await this.db.get(key)) as T | undefined;
  }

  private async range<T>(gte: string, lt: string, limit: number): Promise<Array<[string, T]>> {
    const out: Array<[string, T]> = [];
    for await (const [k, v] of this.db.iterator({ gte, lt, limit })) out.push([k, v as T]);
    return out;
  }

  // ---- follow graph ----

  /** The follower's side (who X follows). Answers whether it changed. */
  follow(follower: string, followee: string, at: number, on: boolean): Promise<boolean> {
    return this.serial(async () => {
      const key = keys.following(follower, followee);
      const had = (await this.db.get(key)) !== undefined;
      if (had === on) return false;
      const batch = this.db.batch();
      if (on) batch.put(key, at);
      else batch.del(key);
      await this.write(batch);
      return true;
    });
  }

  /** The followee's side (who follows X), and the count change that a later fold applies (asynchronously). */
  follower(followee: string, follower: string, at: number, on: boolean): Promise<boolean> {
    return this.serial(async () => {
      const key = keys.followers(followee, follower);
      const had = (await this.db.get(key)) !== undefined;
      if (had === on) return false;
      const deltaKey = keys.countDelta(followee, follower);
      const pending = await this.getJson<number>(deltaKey);
      const delta = (pending ?? 0) + (on ? 1 : -1);
      const batch = this.db.batch();
      if (on) batch.put(key, at);
      else batch.del(key);
      if (delta === 0) batch.del(deltaKey);
      else batch.put(deltaKey, delta);
      await this.write(batch);
      return true;
    });
  }

  async following(user: string, limit: number, after = ''): Promise<Edge[]> {
    return this.edges(keys.following(user), limit, after);
  }

  async followers(user: string, limit: number, after = ''): Promise<Edge[]> {
    return this.edges(keys.followers(user), limit, after);
  }

  private async edges(prefix: string, limit: number, after: string): Promise<Edge[]> {
    const gte = after === '' ? prefix : prefix + after + '\x00';
    const rows = await this.range<number>(gte, prefixEnd(prefix), limit);
    return rows.map(([k, at]) => ({ user_id: k.slice(prefix.length), created_at: at }));
  }

  /**
   * Folds pending followers_count changes into profiles (rule 3: asynchronously, a moment after the follow) and
   * sets is_celebrity against the current threshold. Answers how many changes it folded.
   */
  foldCounts(max = 2_000): Promise<number> {
    return this.serial(async () => {
      const rows = await this.range<number>(keys.countDelta(), prefixEnd(keys.countDelta()), max);
      if (rows.length === 0) return 0;
      const byUser = new Map<string, number>();
      for (const [k, d] of rows) {
        const user = k.slice(keys.countDelta().length).split('/')[0]!;
        byUser.set(user, (byUser.get(user) ?? 0) + d);
      }
      const batch = this.db.batch();
      for (const [user, d] of byUser) {
        const p = await this.profileOrDefault(user);
        const count = Math.max(0, p.followers_count + d);
        batch.put(keys.profile(user), { ...p, followers_count: count, is_celebrity: count > this.thresholdValue });
      }
      for (const [k] of rows) batch.del(k);
      await this.write(batch);
      this.stats.folds += rows.length;
      return rows.length;
    });
  }

  async pendingCountChanges(): Promise<number> {
    return (await this.range<number>(keys.countDelta(), prefixEnd(keys.countDelta()), 100_000)).length;
  }

  // ---- profiles ----

  private async profileOrDefault(user: string): Promise<Profile> {
    return (
      (await this.getJson<Profile>(keys.profile(user))) ?? {
        user_id: user,
        display_name: user,
        followers_count: 0,
        is_celebrity: false,
        account_state: 'active',
      }
    );
  }

  async profiles(users: readonly string[]): Promise<Profile[]> {
    return Promise.all(users.map((u) => this.profileOrDefault(u)));
  }

  putProfile(user: string, change: { display_name?: string; account_state?: AccountState }): Promise<Profile> {
    return this.serial(async () => {
      const p = { ...(await this.profileOrDefault(user)), ...change };
      await this.write(this.db.batch().put(keys.profile(user), p));
      return p;
    });
  }

  /** A new threshold: kept, and every profile of this partition re-flagged (only future posts see it). */
  setThreshold(threshold: number): Promise<number> {
    return this.serial(async () => {
      this.thresholdValue = threshold;
      const batch = this.db.batch();
      batch.put(keys.threshold, threshold);
      let changed = 0;
      for await (const [k, v] of this.db.iterator({ gte: keys.profile(), lt: prefixEnd(keys.profile()) })) {
        const p = v as Profile;
        const flag = p.followers_count > threshold;
        if (flag !== p.is_celebrity) {
          batch.put(k, { ...p, is_celebrity: flag });
          changed++;
        }
      }
      await this.write(batch);
      return changed;
    });
  }

  // ---- engagement ----

  engage(user: string, author: string, at: number): Promise<Engagement> {
    return this.serial(async () => {
      const key = keys.engagement(user, author);
      const e = (await this.getJson<Engagement>(key)) ?? {
        user_id: user,
        author_id: author,
        interaction_count: 0,
        last_interaction_at: 0,
      };
      const next = {
        ...e,
        interaction_count: e.interaction_count + 1,
        last_interaction_at: Math.max(e.last_interaction_at, at),
      };
      await this.write(this.db.batch().put(key, next));
      return next;
    });
  }

  async engagement(user: string, limit = 1_000): Promise<Engagement[]> {
    return (await this.range<Engagement>(keys.engagement(user), prefixEnd(keys.engagement(user)), limit)).map(
      ([, v]) => v,
    );
  }

  // ---- inbox and outbox ----

  /** Fan-out's write: durable first, then the hot cache (write-through). Idempotent. */
  async addInbox(entries: ReadonlyArray<FeedEntry & { user_id: string }>): Promise<void> {
    if (entries.length === 0) return;
    const batch = this.db.batch();
    for (const e of entries)
      batch.put(keys.inbox(e.user_id, e.created_at, e.post_id), {
        post_id: e.post_id,
        author_id: e.author_id,
        created_at: e.created_at,
      });
    await this.write(batch);
    this.stats.inboxWrites += entries.length;
    for (const e of entries) {
      const load = this.loading.get(e.user_id);
      if (load !== undefined) load.dirty = true;
      const h = this.hot.get(e.user_id);
      if (h === undefined || !h.months.includes(month(e.created_at))) continue;
      if (h.entries.some((x) => x.post_id === e.post_id)) continue;
      h.entries.push({ post_id: e.post_id, author_id: e.author_id, created_at: e.created_at });
      h.entries.sort(newestFirst);
      if (h.entries.length > HOT_ENTRIES) {
        h.entries.length = HOT_ENTRIES;
        h.complete = false;
      }
    }
  }

  async removeInbox(entries: ReadonlyArray<{ user_id: string; post_id: string; created_at: number }>): Promise<void> {
    if (entries.length === 0) return;
    const batch = this.db.batch();
    for (const e of entries) batch.del(keys.inbox(e.user_id, e.created_at, e.post_id));
    await this.write(batch);
    for (const e of entries) {
      const load = this.loading.get(e.user_id);
      if (load !== undefined) load.dirty = true;
      const h = this.hot.get(e.user_id);
      if (h !== undefined) h.entries = h.entries.filter((x) => x.post_id !== e.post_id);
    }
  }

  /** The newest `limit` inbox entries of the given month buckets, newest first (hot cache when it covers them). */
  async inbox(user: string, months: readonly string[], limit: number): Promise<FeedEntry[]> {
    const tag = months.join(',');
    const h = this.hot.get(user);
    if (h !== undefined && h.months === tag && (h.complete || h.entries.length >= limit)) {
      this.stats.hotHits++;
      this.hot.delete(user);
      this.hot.set(user, h);
      return h.entries.slice(0, limit);
    }
    this.stats.hotMisses++;
    const out: FeedEntry[] = [];
    const want = Math.max(limit, HOT_ENTRIES);
    // A write landing while the buckets are read may or may not be in what the read returns: such a load is
    // answered but not cached (a cache missing a write would hide that post until the entry is evicted).
    const load = this.loading.get(user) ?? { dirty: false };
    const mine = !this.loading.has(user);
    if (mine) this.loading.set(user, load);
    try {
      for (const m of months) {
        if (out.length >= want) break;
        const prefix = keys.inboxBucket(user, m);
        for (const [, v] of await this.range<FeedEntry>(prefix, prefixEnd(prefix), want - out.length)) out.push(v);
      }
    } finally {
      if (mine) this.loading.delete(user);
    }
    out.sort(newestFirst);
    if (mine && !load.dirty) {
      this.hot.set(user, { entries: out.slice(0, HOT_ENTRIES), complete: out.length < want, months: tag });
      if (this.hot.size > HOT_USERS) this.hot.delete(this.hot.keys().next().value!);
    }
    return out.slice(0, limit);
  }

  async addOutbox(entries: ReadonlyArray<FeedEntry>): Promise<void> {
    const batch = this.db.batch();
    for (const e of entries)
      batch.put(keys.outbox(e.author_id, e.created_at, e.post_id), {
        post_id: e.post_id,
        author_id: e.author_id,
        created_at: e.created_at,
      });
    await this.write(batch);
  }

  async removeOutbox(entries: ReadonlyArray<FeedEntry>): Promise<void> {
    const batch = this.db.batch();
    for (const e of entries) batch.del(keys.outbox(e.author_id, e.created_at, e.post_id));
    await this.write(batch);
  }

  /** An author's newest outbox entries in the given buckets, newest first; `before` (a post id) pages older. */
  async outbox(
    author: string,
    months: readonly string[],
    limit: number,
    before: string | null = null,
  ): Promise<FeedEntry[]> {
    const out: FeedEntry[] = [];
    for (const m of months) {
      const prefix = keys.outboxBucket(author, m);
      for await (const [, v] of this.db.iterator({ gte: prefix, lt: prefixEnd(prefix) })) {
        const e = v as FeedEntry;
        if (before !== null && e.post_id >= before) continue;
        out.push(e);
        if (out.length >= limit) break;
      }
      if (out.length >= limit) break;
    }
    return out.sort(newestFirst).slice(0, limit);
  }

  /**
   * The retention sweep: deletes the inbox and outbox entries of month buckets before `oldest` (yyyymm), at most
   * `max` per call (`more` says a next call has some left). Old months sort first in an owner's keys, so the scan
   * skips each owner's kept buckets with one seek. It reads only the store, so every replica applying the same op
   * at the same offset deletes the same keys.
   */
  sweep(oldest: string, max = 10_000): Promise<{ deleted: number; more: boolean }> {
    return this.serial(async () => {
      const batch = this.db.batch();
      let deleted = 0;
      let more = false;
      for (const prefix of [keys.inboxAll, keys.outboxAll]) {
        const it = this.db.keys({ gte: prefix, lt: prefixEnd(prefix) });
        try {
          for (let k = await it.next(); k !== undefined; k = await it.next()) {
            const rest = k.slice(prefix.length);
            const owner = rest.slice(0, rest.indexOf('/'));
            if (rest.slice(owner.length + 1, owner.length + 7) >= oldest) {
              it.seek(prefixEnd(`${prefix}${owner}/`));
              continue;
            }
            if (deleted >= max) {
              more = true;
              break;
            }
            batch.del(k);
            deleted++;
          }
        } finally {
          await it.close();
        }
        if (more) break;
      }
      await this.write(batch);
      // The hot cache may hold entries of a swept bucket: it reloads from what is left (and a load that was reading
      // meanwhile is not cached).
      if (deleted > 0) this.dropHot();
      return { deleted, more };
    });
  }

  // ---- seen marks and feed snapshots ----

  async markSeen(user: string, postIds: readonly string[], at: number): Promise<void> {
    const batch = this.db.batch();
    for (const id of postIds) batch.put(keys.seen(user, id), at);
    await this.write(batch);
  }

  async seen(user: string, postIds: readonly string[]): Promise<string[]> {
    const values = await this.db.getMany(postIds.map((id) => keys.seen(user, id)));
    return postIds.filter((_, i) => values[i] !== undefined);
  }

  /**
   * Keeps one ranked list (what a next_token points into); drops the user's expired ones. Not serialised with the
   * other writes: it is on every feed read's path and touches only this user's snapshot keys.
   */
  async putSnapshot(user: string, rankedAt: number, snapshot: unknown): Promise<void> {
    const batch = this.db.batch();
    for (const [k] of await this.range<unknown>(
      keys.snapshot(user),
      keys.snapshot(user, Math.max(0, rankedAt - SNAPSHOT_TTL_MS)),
      1_000,
    ))
      batch.del(k);
    batch.put(keys.snapshot(user, rankedAt), snapshot);
    await this.write(batch);
  }

  async snapshot(user: string, rankedAt: number): Promise<unknown> {
    return (await this.db.get(keys.snapshot(user, rankedAt))) ?? null;
  }
}

export function newestFirst(a: FeedEntry, b: FeedEntry): number {
  return b.created_at - a.created_at || (a.post_id < b.post_id ? 1 : a.post_id > b.post_id ? -1 : 0);
}
