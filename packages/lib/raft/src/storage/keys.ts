/**
 * The LevelDB key layout of one member's storage, under a caller-chosen prefix so that many Raft groups can
 * share one database.
 *
 *   <prefix>!!hs                     hard state
 *   <prefix>!!sm                     snapshot record (meta, generation, size, chunk count)
 *   <prefix>!!sd!<gen:16>!<chunk:8>  snapshot data, in chunks, per snapshot generation
 *   <prefix>!e!<index:16>            a block of log entries starting at index (see leveldb.ts), or one entry as
 *                                    written before blocks; zero-padded so keys sort in index order
 *
 * Everything but the log sorts before it ('!' < 'e'). A LevelDB table spans its smallest to its largest key; with
 * the hard state or the snapshot after the log (the layout before: `<prefix>!hs`, `!sm`, `!sd!...`, still read,
 * see legacy*), every table that held one of them spanned all log entries written after it, so the newest
 * entries never moved down the levels as they were but were merged and rewritten again and again.
 *
 * The prefix may not contain the separator '!', which keeps prefixes from overlapping: every key of prefix p
 * starts with "p!", and "p!" is never the start of "q!" for another '!'-free prefix q.
 */

const SEPARATOR = '!';
/** The character after SEPARATOR: `[x + '!', x + '"')` is exactly the set of keys starting with `x + '!'`. */
const AFTER_SEPARATOR = '"';
const INDEX_DIGITS = 16; // Number.MAX_SAFE_INTEGER has 16 digits.
const CHUNK_DIGITS = 8;

/** A half-open key range, in the shape level's iterator and clear options take. */
export interface KeyRange {
  gte: string;
  lt: string;
}

function pad(value: number, digits: number): string {
  return value.toString().padStart(digits, '0');
}

/** Every key of one storage instance. */
export class StorageKeys {
  readonly hardState: string;
  readonly snapshotRecord: string;
  private readonly entryPrefix: string;
  private readonly chunkPrefix: string;

  constructor(prefix: string) {
    if (prefix.length === 0 || prefix.includes(SEPARATOR)) {
      throw new TypeError(`storage key prefix must be non-empty and must not contain '${SEPARATOR}': ${prefix}`);
    }
    this.hardState = `${prefix}!!hs`;
    this.snapshotRecord = `${prefix}!!sm`;
    this.entryPrefix = `${prefix}!e`;
    this.chunkPrefix = `${prefix}!!sd`;
    this.legacyHardState = `${prefix}!hs`;
    this.legacySnapshotRecord = `${prefix}!sm`;
    this.legacyChunkPrefix = `${prefix}!sd`;
  }

  /** Where the layout before this one kept the hard state and the snapshot record (read, then deleted). */
  readonly legacyHardState: string;
  readonly legacySnapshotRecord: string;
  private readonly legacyChunkPrefix: string;

  entry(index: number): string {
    return `${this.entryPrefix}!${pad(index, INDEX_DIGITS)}`;
  }

  /** Parses the index back out of an entry key. */
  entryIndex(key: string): number {
    return Number(key.slice(this.entryPrefix.length + 1));
  }

  /** All entry keys. */
  get entries(): KeyRange {
    return { gte: `${this.entryPrefix}!`, lt: `${this.entryPrefix}${AFTER_SEPARATOR}` };
  }

  /** `legacy`: in the layout before this one (a snapshot stored by an older version). */
  snapshotChunk(generation: number, chunk: number, legacy = false): string {
    return `${legacy ? this.legacyChunkPrefix : this.chunkPrefix}!${pad(generation, INDEX_DIGITS)}!${pad(chunk, CHUNK_DIGITS)}`;
  }

  /** All chunk keys of every generation (of one layout). */
  snapshotChunks(legacy = false): KeyRange {
    const prefix = legacy ? this.legacyChunkPrefix : this.chunkPrefix;
    return { gte: `${prefix}!`, lt: `${prefix}${AFTER_SEPARATOR}` };
  }

  /** The chunk keys of one generation (of one layout). */
  snapshotGeneration(generation: number, legacy = false): KeyRange {
    const base = `${legacy ? this.legacyChunkPrefix : this.chunkPrefix}!${pad(generation, INDEX_DIGITS)}`;
    return { gte: `${base}!`, lt: `${base}${AFTER_SEPARATOR}` };
  }
}
