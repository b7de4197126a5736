/**
 * The app worker's ranked feeds, per viewer: the assembled list of a first-page read (its snapshot), served again
 * to the viewer's next reads until something that could change it happens. Building one is the whole read path
 * (inbox, follow list, profiles, outboxes, seen marks, hydration of up to 2,000 candidates, the ranker, a
 * replicated snapshot); serving one is a page of it, checked against the post groups like any page.
 *
 * What drops an entry (StoreTail feeds it every write of the store partitions, in log order; this worker's own
 * writes also drop at once): a new or removed inbox entry of the viewer, a follow or unfollow by the viewer, a seen
 * mark of the viewer, a new or removed outbox entry or a profile change of an author the viewer follows (pulled
 * authors' posts and suspensions), a threshold change (everything). An entry also expires after RECENT_MS, the
 * spec's "a repeat visit within 60 s may get the recent ranking" (the ranker's own recent-ranking cache: the same
 * candidate set within 60 s gets the same ranking), so engagement moves the order at least that often.
 *
 * A feed answered in time order (the ranker missed its 50 ms) is kept only with its candidates (`rerank`): the
 * viewer's next read asks the ranker again about them rather than building from the stores again.
 *
 * A build races the writes that drop it: it is kept only if nothing dropped its viewer (or any author) while it
 * ran. Reads of one viewer arriving while a build runs share it, unless a drop happened meanwhile.
 */

/** How long a ranked feed is served again at most (the ranker's recent-ranking window). */
export const RECENT_MS = 60_000;
/** Viewers kept (least recently read dropped first). */
const MAX_VIEWERS = 20_000;

export interface RankedFeed {
  ranking: 'ranked' | 'time';
  /** post ids, in feed order. */
  ids: string[];
}

export interface CachedFeed {
  rankedAt: number;
  feed: RankedFeed;
  /** Every author the viewer followed when it was built (their outbox and profile changes drop it). */
  authors: readonly string[];
  /**
   * A feed in time order (the ranker missed its deadline) is kept only for this: the viewer's next read ranks the
   * same candidates again instead of building from the stores. Absent: a time-order feed is not kept.
   */
  rerank?: () => Promise<CachedFeed>;
}

interface Build {
  /** Set when a drop touched this viewer while the build ran: its result is served to its own read only. */
  dirty: boolean;
  promise: Promise<CachedFeed>;
}

export class FeedCache {
  private readonly entries = new Map<string, CachedFeed>();
  /** author -> viewers whose entry follows it. */
  private readonly byAuthor = new Map<string, Set<string>>();
  private readonly builds = new Map<string, Build>();
  readonly stats = { hits: 0, builds: 0, reranks: 0, joined: 0, drops: 0, discarded: 0 };

  /**
   * @param usable whether entries may be served at all (the store tail is live: otherwise a drop could be
   *   missed, and every read builds afresh).
   */
  constructor(private readonly usable: () => boolean = () => true) {}

  get size(): number {
    return this.entries.size;
  }

  /**
   * The viewer's ranked feed: the cached one when still valid, else the build in flight for it (if nothing dropped
   * it since it started), else a new build, kept when nothing dropped the viewer while it ran.
   */
  async get(viewer: string, now: number, fullBuild: () => Promise<CachedFeed>): Promise<CachedFeed> {
    const usable = this.usable();
    const hit = this.entries.get(viewer);
    let build = fullBuild;
    if (hit !== undefined) {
      if (usable && now - hit.rankedAt < RECENT_MS && hit.feed.ranking === 'ranked') {
        this.stats.hits++;
        // Least recently read last.
        this.entries.delete(viewer);
        this.entries.set(viewer, hit);
        return hit;
      }
      if (usable && now - hit.rankedAt < RECENT_MS && hit.rerank !== undefined) {
        this.stats.reranks++;
        build = hit.rerank;
      } else this.remove(viewer);
    }
    const running = this.builds.get(viewer);
    if (usable && running !== undefined && !running.dirty) {
      this.stats.joined++;
      return running.promise;
    }
    if (build === fullBuild) this.stats.builds++;
    const b: Build = { dirty: false, promise: build() };
    this.builds.set(viewer, b);
    try {
      const built = await b.promise;
      // Time order (the ranker missed its deadline) is kept only to rank its candidates again (`rerank`).
      if (!b.dirty && usable && this.usable() && (built.feed.ranking === 'ranked' || built.rerank !== undefined))
        this.put(viewer, built);
      else this.stats.discarded++;
      return built;
    } finally {
      if (this.builds.get(viewer) === b) this.builds.delete(viewer);
    }
  }

  /** The cached feed of this ranked_at, if this worker still has it (a next page's snapshot). */
  snapshot(viewer: string, rankedAt: number): RankedFeed | null {
    const e = this.entries.get(viewer);
    return e !== undefined && e.rankedAt === rankedAt ? e.feed : null;
  }

  /** Something in the viewer's own feed inputs changed (inbox, follows, seen marks). */
  dropViewer(viewer: string): void {
    const b = this.builds.get(viewer);
    if (b !== undefined) b.dirty = true;
    if (this.remove(viewer)) this.stats.drops++;
  }

  /** An author's outbox or profile changed: every viewer following it. */
  dropAuthor(author: string): void {
    // A build in flight does not know its authors yet: any of them may follow this one.
    for (const b of this.builds.values()) b.dirty = true;
    const viewers = this.byAuthor.get(author);
    if (viewers === undefined) return;
    for (const v of [...viewers]) if (this.remove(v)) this.stats.drops++;
  }

  dropAll(): void {
    for (const b of this.builds.values()) b.dirty = true;
    this.stats.drops += this.entries.size;
    this.entries.clear();
    this.byAuthor.clear();
  }

  private put(viewer: string, e: CachedFeed): void {
    this.remove(viewer);
    this.entries.set(viewer, e);
    for (const a of e.authors) {
      let set = this.byAuthor.get(a);
      if (set === undefined) this.byAuthor.set(a, (set = new Set()));
      set.add(viewer);
    }
    if (this.entries.size > MAX_VIEWERS) this.remove(this.entries.keys().next().value!);
  }

  private remove(viewer: string): boolean {
    const e = this.entries.get(viewer);
    if (e === undefined) return false;
    this.entries.delete(viewer);
    for (const a of e.authors) {
      const set = this.byAuthor.get(a);
      if (set === undefined) continue;
      set.delete(viewer);
      if (set.size === 0) this.byAuthor.delete(a);
    }
    return true;
  }
}
