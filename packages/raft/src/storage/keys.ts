/**
 * The LevelDB key layout of one member's storage, under a caller-chosen prefix so that many Raft groups can
 * share one database.
 *
 *   <prefix>!hs                      hard state
 *   <prefix>!e!<index:16>            a block of log entries starting at index (see leveldb.ts), or one entry as
 *                                    written before blocks; zero-padded so keys sort in index order
 *   <prefix>!sm                      snapshot record (meta, generation, size, chunk count)
 *   <prefix>!sd!<gen:16>!<chunk:8>   snapshot data, in chunks, per snapshot generation
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
    this.hardState = `${prefix}!hs`;
    this.snapshotRecord = `${prefix}!sm`;
    this.entryPrefix = `${prefix}!e`;
    this.chunkPrefix = `${prefix}!sd`;
  }

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

  snapshotChunk(generation: number, chunk: number): string {
    return `${this.chunkPrefix}!${pad(generation, INDEX_DIGITS)}!${pad(chunk, CHUNK_DIGITS)}`;
  }

  /** All chunk keys of every generation. */
  get snapshotChunks(): KeyRange {
    return { gte: `${this.chunkPrefix}!`, lt: `${this.chunkPrefix}${AFTER_SEPARATOR}` };
  }

  /** The chunk keys of one generation. */
  snapshotGeneration(generation: number): KeyRange {
    const base = `${this.chunkPrefix}!${pad(generation, INDEX_DIGITS)}`;
    return { gte: `${base}!`, lt: `${base}${AFTER_SEPARATOR}` };
  }
}
