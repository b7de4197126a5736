/**
 * The analytics store on LevelDB. Batches are counted in memory (per link increments, aggregate.ts) and written
 * out at most once per `flushMs` (default 5 s): one LevelDB write batch holds every counter changed since the last
 * write, the producers' last counted seqs and the consumer's next offset, so a crash either keeps all of an
 * interval's batches or none of them: no click is counted twice or lost (the consumer resumes at the offset on
 * disk, with the seqs on disk). Writing per interval instead of per batch reads and writes each counter once per
 * interval, however many batches and clicks it took: with 10,000 equally popular links at 26,000 clicks/s, ~37,000
 * counter puts a second instead of ~90,000, and no counter lookup at all per batch.
 *
 * Increments are read-modify-write at write time; a write-through cache of recently used counter values (this
 * process is the only writer; counter-cache.ts) keeps the reads for hot links in memory. Writes run one at a time;
 * the next interval is counted while one is written. A failed write (or read) poisons the store until `recover`
 * reloads the durable state. `stats` reads what is on disk: it trails the clicks counted by up to an interval.
 */
import { Level } from 'level';
import type { AbstractChainedBatch } from 'abstract-level';
import { aggregate, statPrefix, type BatchAggregate, type LinkDelta } from './aggregate.js';
import { CounterCache } from './counter-cache.js';
import type { LinkStats } from './record.js';
import type { StreamedClick } from './wire.js';

type ChainedBatch = AbstractChainedBatch<Level<string, string>, string, string>;

const OFFSET_KEY = 'o';
const seqKey = (producer: string) => `p!${producer}`;
const refererCountKey = (code: string) => `n!${code}`;

/**
 * Each counter a link's clicks changed is read and written once per interval, however many clicks it took, so the
 * LevelDB work (memtable inserts, then their compaction: most of this worker's CPU under redirect load) goes with
 * the number of intervals, not clicks; a longer interval roughly halves the CPU per click (bench/RESULTS.md,
 * shortlink findings; test/load/analytics-cpu.js). The cost: stats trail the clicks by up to 5 s, and a crashed
 * worker counts up to 5 s of the stream again (exactly once still).
 */
export const DEFAULT_FLUSH_MS = 5_000;
/** Links with unwritten increments past which a batch waits for a write (bounds memory under a backlog). */
const MAX_PENDING_LINKS = 100_000;

interface StoreOptions {
  /** Distinct referer hosts kept per link; later hosts count under "other" (default 200). */
  maxReferers?: number;
  /** Counter values cached in memory (default 200,000). */
  cacheKeys?: number;
  /** Longest time counted clicks wait in memory before they are written (default DEFAULT_FLUSH_MS, 5 s). */
  flushMs?: number;
}

export class AnalyticsStore {
  private readonly cache: CounterCache;
  private readonly maxReferers: number;
  private readonly flushMs: number;
  /** Increments counted since the last write was taken, and the producers' seqs they advanced. */
  private pending = new Map<string, LinkDelta>();
  private pendingSeqs = new Map<string, number>();
  /** The chain of writes (one at a time); resolves, never rejects (a failure is kept in `failure`). */
  private writing: Promise<void> = Promise.resolve();
  /** A write is queued on the chain and has not taken its snapshot yet. */
  private queued: Promise<void> | undefined;
  private timer: NodeJS.Timeout | undefined;
  private failure: Error | undefined;
  /** Set while the aggregates are wiped: no write may land meanwhile. */
  private wiping = false;
  /** Offset after the last batch counted in memory, after the last batch taken into a write, and on disk. */
  private consumed: number;
  private taken: number;
  private durable: number;

  private constructor(
    private readonly db: Level<string, string>,
    private readonly seqs: Map<string, number>,
    offset: number,
    options: StoreOptions,
  ) {
    this.cache = new CounterCache(options.cacheKeys ?? 200_000);
    this.maxReferers = options.maxReferers ?? 200;
    this.flushMs = options.flushMs ?? DEFAULT_FLUSH_MS;
    this.consumed = offset;
    this.taken = offset;
    this.durable = offset;
  }

  static async open(path: string, options: StoreOptions = {}): Promise<AnalyticsStore> {
    const db = new Level<string, string>(path, { valueEncoding: 'utf8', writeBufferSize: 32 << 20 });
    await db.open();
    const { offset, seqs } = await loadProgress(db);
    return new AnalyticsStore(db, seqs, offset, options);
  }

  /** The stream offset of the next record to consume (its batch may not be written yet). */
  get nextOffset(): number {
    return this.consumed;
  }

  /** The stream offset up to which the aggregates on disk (what `stats` reads) have counted. */
  get committedOffset(): number {
    return this.durable;
  }

  get failed(): boolean {
    return this.failure !== undefined;
  }

  /**
   * Counts a consumed batch in memory; `nextOffset` is the offset just after its last record. It is written with
   * the rest of its interval; resolves at once unless too much waits to be written.
   */
  async apply(clicks: Array<StreamedClick | null>, nextOffset: number): Promise<BatchAggregate> {
    if (this.failure) throw this.failure;
    let batch: BatchAggregate;
    try {
      batch = aggregate(clicks, (producer) => this.seqs.get(producer), this.pending);
    } catch (e) {
      // Part of the batch may be counted in `pending`: only the state on disk can be trusted now.
      this.failure = e as Error;
      throw e;
    }
    for (const [producer, seq] of batch.seqs) {
      this.seqs.set(producer, seq);
      this.pendingSeqs.set(producer, seq);
    }
    this.consumed = nextOffset;
    if (this.pending.size >= MAX_PENDING_LINKS) await this.write();
    else this.timer ??= setTimeout(() => void this.write(), this.flushMs);
    return batch;
  }

  /** Resolves once every counted batch is on disk; rejects if a write failed. */
  async flush(): Promise<void> {
    await this.write();
    if (this.failure) throw this.failure;
  }

  /** After a failed write: forgets everything in memory and resumes from what is on disk. */
  async recover(): Promise<void> {
    // No queued write may take the offset of clicks dropped here.
    this.failure ??= new Error('recovering');
    this.dropPending();
    await this.writing;
    const { offset, seqs } = await loadProgress(this.db);
    this.dropPending();
    this.cache.clear();
    this.seqs.clear();
    for (const [producer, seq] of seqs) this.seqs.set(producer, seq);
    this.consumed = offset;
    this.taken = offset;
    this.durable = offset;
    this.failure = undefined;
  }

  /** Queues a write of everything counted so far (taken when the write before it has landed). */
  private write(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.queued ??= this.writing = this.writing.then(async () => {
      this.queued = undefined;
      try {
        await this.writeOut();
      } catch (e) {
        this.failure = e as Error;
      }
    });
    return this.queued;
  }

  /** Writes what was counted since the last write: the counters' new values, the seqs and the offset, in one batch. */
  private async writeOut(): Promise<void> {
    if (this.failure || this.wiping || (this.consumed === this.taken && this.pending.size === 0)) return;
    const links = this.pending;
    const seqs = this.pendingSeqs;
    const offset = this.consumed;
    this.pending = new Map();
    this.pendingSeqs = new Map();
    this.taken = offset;
    // A chained batch: one native call per put, where an array of op objects had each op's fields read through N-API.
    const write = this.db.batch();
    try {
      await this.putNewValues(links, write);
      if (this.failure || this.wiping) {
        await write.close();
        return;
      }
      for (const [producer, seq] of seqs) write.put(seqKey(producer), String(seq));
      write.put(OFFSET_KEY, String(offset));
    } catch (e) {
      await write.close();
      throw e;
    }
    await write.write();
    this.durable = offset;
  }

  /**
   * Puts the new value of every counter `links` changes into `write`, and into the cache (before the write lands:
   * the next write reads them only after this one, and a failure clears the cache). Existing counters come from the
   * cache (incremented in place) or one getMany; a referer host new to its link (no counter yet) gets its own
   * counter while the link has fewer than `maxReferers` hosts, in the order the hosts first arrived, and counts
   * under "other" past that. Only the links with a new host need their distinct-host count and their "other"
   * counter: looking both up for every link made most reads LevelDB searches for absent keys. A key put twice
   * ("other") holds its last value.
   */
  private async putNewValues(links: Map<string, LinkDelta>, write: ChainedBatch): Promise<void> {
    // Values given here to counters a later step may add to again ("other"); the cache may have evicted them.
    const latest = new Map<string, number>();
    const put = (key: string, value: number): void => {
      this.cache.set(key, value);
      latest.set(key, value);
      write.put(key, String(value));
    };
    const missing: string[] = [];
    const missingInc: number[] = [];
    const add = (key: string, inc: number): number | undefined => {
      const value = this.cache.increment(key, inc);
      if (value === undefined) {
        missing.push(key);
        missingInc.push(inc);
      } else write.put(key, String(value));
      return value;
    };
    for (const [code, link] of links) {
      const prefix = statPrefix(code);
      add(`${prefix}t`, link.total);
      link.days.forEach((day, n) => add(`${prefix}d!${day}`, n));
      link.countries.forEach((country, n) => add(`${prefix}c!${country}`, n));
      link.referers.forEach((host, n) => {
        const key = `${prefix}r!${host}`;
        const value = add(key, n);
        if (host === 'other' && value !== undefined) latest.set(key, value);
      });
    }
    if (missing.length === 0) return;
    const newHosts: Array<{ key: string; code: string; inc: number }> = [];
    const stored = await this.db.getMany(missing);
    for (let i = 0; i < missing.length; i++) {
      const key = missing[i]!;
      const inc = missingInc[i]!;
      const raw = stored[i];
      if (raw !== undefined) {
        put(key, Number(raw) + inc);
        continue;
      }
      const [, code, kind] = key.split('!', 3) as [string, string, string];
      if (kind === 'r' && !key.endsWith('!r!other')) newHosts.push({ key, code, inc });
      else put(key, inc);
    }
    if (newHosts.length === 0) return;
    // A link's hosts were added in first-arrival order, and `missing` keeps that order within each link.
    const refererCounts = new Map<string, number>();
    const codes = new Set(newHosts.map((h) => h.code));
    const known = await this.current(
      [...codes].flatMap((code) => [refererCountKey(code), `${statPrefix(code)}r!other`]),
    );
    for (const { key, code, inc } of newHosts) {
      const distinct = refererCounts.get(code) ?? known.get(refererCountKey(code)) ?? 0;
      if (distinct < this.maxReferers) {
        refererCounts.set(code, distinct + 1);
        put(key, inc);
        continue;
      }
      const other = `${statPrefix(code)}r!other`;
      put(other, (latest.get(other) ?? known.get(other) ?? 0) + inc);
    }
    for (const [code, n] of refererCounts) put(refererCountKey(code), n);
  }

  private dropPending(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.pending = new Map();
    this.pendingSeqs = new Map();
  }

  /** Values of existing counters among `keys` (absent keys are absent from the map). */
  private async current(keys: string[]): Promise<Map<string, number>> {
    const found = new Map<string, number>();
    const missing: string[] = [];
    for (const key of keys) {
      const cached = this.cache.get(key);
      if (cached === undefined) missing.push(key);
      else found.set(key, cached);
    }
    if (missing.length > 0) {
      const values = await this.db.getMany(missing);
      missing.forEach((key, i) => {
        const value = values[i];
        if (value === undefined) return;
        found.set(key, Number(value));
        this.cache.set(key, found.get(key)!);
      });
    }
    return found;
  }

  /** One link's aggregates: a range read over its counters (bounded: days of its lifetime, countries, capped referers). */
  async stats(code: string): Promise<LinkStats> {
    const stats: LinkStats = { short_code: code, total: 0, by_day: {}, by_country: {}, by_referer: {} };
    const prefix = statPrefix(code);
    for await (const [key, raw] of this.db.iterator({ gte: prefix, lt: `${prefix}\xff` })) {
      const value = Number(raw);
      const rest = key.slice(prefix.length);
      if (rest === 't') stats.total = value;
      else if (rest.startsWith('d!')) stats.by_day[rest.slice(2)] = value;
      else if (rest.startsWith('c!')) stats.by_country[rest.slice(2)] = value;
      else if (rest.startsWith('r!')) stats.by_referer[rest.slice(2)] = value;
    }
    return stats;
  }

  /** Forgets every aggregate, seq and the offset: the next batch starts from offset 0 (a replay). */
  async wipe(): Promise<void> {
    this.wiping = true;
    try {
      this.dropPending();
      await this.writing;
      await this.db.clear();
    } finally {
      this.wiping = false;
    }
    this.dropPending();
    this.cache.clear();
    this.seqs.clear();
    this.consumed = 0;
    this.taken = 0;
    this.durable = 0;
    this.failure = undefined;
  }

  /** Writes what was counted (unless a write failed) and closes the database. */
  async close(): Promise<void> {
    await this.write();
    clearTimeout(this.timer);
    await this.db.close();
  }
}

async function loadProgress(db: Level<string, string>): Promise<{ offset: number; seqs: Map<string, number> }> {
  const offset = Number((await db.get(OFFSET_KEY)) ?? 0);
  const seqs = new Map<string, number>();
  for await (const [key, value] of db.iterator({ gte: 'p!', lt: 'p"' })) seqs.set(key.slice(2), Number(value));
  return { offset, seqs };
}
