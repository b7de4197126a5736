/**
 * The analytics store on LevelDB. One write batch per consumed batch holds the counter increments, the
 * producers' last counted seqs and the consumer's next offset, so a crash either keeps all of a batch or none
 * of it: no click is counted twice or lost. Increments are read-modify-write; a write-through cache of recently used
 * counter values (this process is the only writer; counter-cache.ts) keeps the reads for hot links in memory.
 *
 * Batches are pipelined: `apply` returns once its batch is counted in memory and its write is issued, so the
 * next batch is read and aggregated while this one is written. At most one write is in flight; its values stay
 * in `unwritten` until it lands (the cache may evict them). A failed write poisons the store until `recover`
 * reloads the durable state.
 */
import { Level } from 'level';
import { aggregate, statPrefix, type BatchAggregate } from './aggregate.js';
import { CounterCache } from './counter-cache.js';
import type { LinkStats } from './record.js';
import type { StreamedClick } from './wire.js';

const OFFSET_KEY = 'o';
const seqKey = (producer: string) => `p!${producer}`;
const refererCountKey = (code: string) => `n!${code}`;

export interface StoreOptions {
  /** Distinct referer hosts kept per link; later hosts count under "other" (default 200). */
  maxReferers?: number;
  /** Counter values cached in memory (default 200,000). */
  cacheKeys?: number;
}

export class AnalyticsStore {
  private readonly cache: CounterCache;
  private readonly maxReferers: number;
  private unwritten = new Map<string, number>();
  private writing: Promise<void> = Promise.resolve();
  private failure: Error | undefined;
  /** Offset after the last batch counted in memory, and after the last batch on disk. */
  private consumed: number;
  private durable: number;

  private constructor(
    private readonly db: Level<string, string>,
    private readonly seqs: Map<string, number>,
    offset: number,
    options: StoreOptions,
  ) {
    this.cache = new CounterCache(options.cacheKeys ?? 200_000);
    this.maxReferers = options.maxReferers ?? 200;
    this.consumed = offset;
    this.durable = offset;
  }

  static async open(path: string, options: StoreOptions = {}): Promise<AnalyticsStore> {
    const db = new Level<string, string>(path, { valueEncoding: 'utf8', writeBufferSize: 32 << 20 });
    await db.open();
    const { offset, seqs } = await loadProgress(db);
    return new AnalyticsStore(db, seqs, offset, options);
  }

  /** The stream offset of the next record to consume (its batch may still be being written). */
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

  /** Counts a consumed batch; `nextOffset` is the offset just after its last record. */
  async apply(clicks: Array<StreamedClick | null>, nextOffset: number): Promise<BatchAggregate> {
    if (this.failure) throw this.failure;
    const batch = aggregate(clicks, (producer) => this.seqs.get(producer));
    const counts = batch.counts;
    // The batch's counters' new values: one pass over its counters, a Map lookup or two each for those in memory
    // (nearly all of them), one getMany for the rest. The Map operations per counter were the consumer's main
    // JavaScript cost, so each counter is looked up once and written once.
    const updates = new Map<string, number>();
    const missing: string[] = [];
    for (const [key, inc] of counts) {
      const value = this.unwritten.get(key) ?? this.cache.get(key);
      if (value === undefined) missing.push(key);
      else updates.set(key, value + inc);
    }
    // Referer hosts new to their link (no counter yet), in batch order: within the link's cap each gets its own
    // counter, past it the clicks count under "other". Only their links need the distinct-referer count and the
    // "other" counter: looking both up for every link of every batch made most reads LevelDB searches for absent keys.
    const newHosts: Array<{ key: string; code: string; inc: number }> = [];
    if (missing.length > 0) {
      const stored = await this.db.getMany(missing);
      for (let i = 0; i < missing.length; i++) {
        const key = missing[i]!;
        const inc = counts.get(key)!;
        const raw = stored[i];
        if (raw !== undefined) {
          updates.set(key, Number(raw) + inc);
          continue;
        }
        const [, code, kind] = key.split('!', 3) as [string, string, string];
        if (kind === 'r' && !key.endsWith('!r!other')) newHosts.push({ key, code, inc });
        else updates.set(key, inc);
      }
    }
    const refererCounts = new Map<string, number>();
    if (newHosts.length > 0) {
      const codes = new Set(newHosts.map((h) => h.code));
      const known = await this.current([...codes].flatMap((code) => [refererCountKey(code), `${statPrefix(code)}r!other`]));
      for (const { key, code, inc } of newHosts) {
        const distinct = refererCounts.get(code) ?? known.get(refererCountKey(code)) ?? 0;
        if (distinct < this.maxReferers) {
          refererCounts.set(code, distinct + 1);
          updates.set(key, inc);
          continue;
        }
        counts.delete(key);
        const other = `${statPrefix(code)}r!other`;
        counts.set(other, (counts.get(other) ?? 0) + inc);
        updates.set(other, (updates.get(other) ?? known.get(other) ?? 0) + inc);
      }
    }
    for (const [code, n] of refererCounts) updates.set(refererCountKey(code), n);
    await this.writing;
    if (this.failure) throw this.failure;
    // A chained batch: one native call per put, where an array of op objects had each op's fields read through N-API.
    const write = this.db.batch();
    try {
      for (const [key, value] of updates) write.put(key, String(value));
      for (const [producer, seq] of batch.seqs) write.put(seqKey(producer), String(seq));
      write.put(OFFSET_KEY, String(nextOffset));
    } catch (e) {
      // Nothing counted in memory yet: the consumer retries the same batch.
      await write.close();
      throw e;
    }
    for (const [key, value] of updates) this.cache.set(key, value);
    for (const [producer, seq] of batch.seqs) this.seqs.set(producer, seq);
    this.consumed = nextOffset;
    this.unwritten = updates;
    this.writing = write.write().then(
      () => {
        this.durable = nextOffset;
        this.unwritten = new Map();
      },
      (e: Error) => {
        this.failure = e;
      },
    );
    return batch;
  }

  /** Resolves once every counted batch is on disk; rejects if a write failed. */
  async flush(): Promise<void> {
    await this.writing;
    if (this.failure) throw this.failure;
  }

  /** After a failed write: forgets everything in memory and resumes from what is on disk. */
  async recover(): Promise<void> {
    await this.writing;
    const { offset, seqs } = await loadProgress(this.db);
    this.cache.clear();
    this.unwritten = new Map();
    this.seqs.clear();
    for (const [producer, seq] of seqs) this.seqs.set(producer, seq);
    this.consumed = offset;
    this.durable = offset;
    this.failure = undefined;
  }

  /** Values of existing counters among `keys` (absent keys are absent from the map). */
  private async current(keys: string[]): Promise<Map<string, number>> {
    const found = new Map<string, number>();
    const missing: string[] = [];
    for (const key of keys) {
      const cached = this.unwritten.get(key) ?? this.cache.get(key);
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
    await this.writing;
    await this.db.clear();
    this.cache.clear();
    this.unwritten = new Map();
    this.seqs.clear();
    this.consumed = 0;
    this.durable = 0;
    this.failure = undefined;
  }

  async close(): Promise<void> {
    await this.writing;
    await this.db.close();
  }
}

async function loadProgress(db: Level<string, string>): Promise<{ offset: number; seqs: Map<string, number> }> {
  const offset = Number((await db.get(OFFSET_KEY)) ?? 0);
  const seqs = new Map<string, number>();
  for await (const [key, value] of db.iterator({ gte: 'p!', lt: 'p"' })) seqs.set(key.slice(2), Number(value));
  return { offset, seqs };
}
