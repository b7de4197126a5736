/**
 * Durable Storage on LevelDB (the `level` package, classic-level underneath).
 *
 * Every write that must be durable goes through one `db.batch(ops, { sync: true })`, so hard state and entries
 * land atomically and are fsynced before the promise resolves. Operations run one at a time in call order, which
 * keeps the in-memory bookkeeping (snapshot index, last index) equal to what is on disk.
 *
 * Entries are stored in blocks: each append writes its new entries as one value (a MessagePack array) under the
 * key of the block's first index. A block is in force from its first index up to the next block's first index
 * (exclusive), or to its own end for the last block: a later block that starts inside an earlier one replaces
 * that earlier block's tail, which is how a conflicting suffix is truncated without reading anything back. One
 * value per append instead of one per entry is what makes an append cheap: LevelDB's JavaScript batch path costs
 * several microseconds per operation. A value that is a single entry (a map, not an array) is a block of one:
 * that is how databases written before blocks (one key per entry) still load.
 *
 * Snapshot data is stored in chunks under a per-snapshot generation number. A new snapshot's chunks are written
 * first; one final batch then switches the snapshot record to the new generation, deletes the old chunks and
 * the covered entries. A crash in between leaves only unreferenced chunks, which are cleared on the next open.
 */
import { Level } from 'level';
import type { AppendOptions, Entry, HardState, Snapshot, SnapshotMeta, Storage } from '../types.js';
import { encodeEntries } from '../codec/entry-bytes.js';
import { decodeValue, encodeValue } from '../codec/msgpack.js';
import { fieldsOf, intField, parseEntry, parseHardState, parseSnapshotMeta } from '../codec/parse.js';
import { checkCompaction, entriesToStore, initialHardState } from './log-rules.js';
import { StorageKeys, type KeyRange } from './keys.js';

/** The key and value encodings LevelStorage passes on every operation. */
export interface ViewEncodings {
  keyEncoding: 'utf8';
  valueEncoding: 'view';
}

/** A key range, with the encodings, as LevelStorage passes it to iterators. */
export interface RangeOptions extends ViewEncodings {
  gt?: string;
  gte?: string;
  lt?: string;
  lte?: string;
  reverse?: boolean;
  limit?: number;
}

/** One write of an atomic batch. */
export type BatchOp = { type: 'put'; key: string; value: Uint8Array } | { type: 'del'; key: string };

/**
 * The part of a level database LevelStorage uses. A `Level` (whatever its default encodings) or any of its
 * sublevels fits: LevelStorage passes its own key and value encodings on every operation.
 */
export interface SharedLevel {
  /** Open the database (a no-op when it is open). */
  open(): Promise<void>;
  /** Close it. */
  close(): Promise<void>;
  /** One value, or undefined. */
  get(key: string, options: ViewEncodings): Promise<Uint8Array | undefined>;
  /** Write all operations atomically; `sync` flushes to disk before resolving. */
  batch(operations: BatchOp[], options: ViewEncodings & { sync: boolean }): Promise<void>;
  /** Entries of a key range, in key order. */
  iterator(options: RangeOptions): AsyncIterable<[string, Uint8Array]>;
  /** Values of a key range, in key order. */
  values(options: RangeOptions): AsyncIterable<Uint8Array>;
  /** Keys of a key range, in key order. */
  keys(options: RangeOptions): {
    /** Every key of the range. */
    all(): Promise<string[]>;
  };
  /** Delete a key range. */
  clear(options: { gte: string; lt: string; keyEncoding: 'utf8' }): Promise<void>;
}

/** Tuning of LevelStorage. */
export interface LevelStorageOptions {
  /** Bytes of snapshot data per stored value. Default 1 MiB. */
  snapshotChunkBytes?: number;
}

/** Where a LevelStorage keeps its data: its own directory, or a prefix inside a database opened by the caller. */
export type LevelStorageLocation = string | { db: SharedLevel; prefix: string };

const DEFAULT_PREFIX = 'raft';
const DEFAULT_SNAPSHOT_CHUNK_BYTES = 1024 * 1024;
/**
 * Chunks written per synced batch while storing a snapshot: bounds the memory one batch holds and, since LevelDB
 * writes one batch at a time, how long a log append waits behind the snapshot (saveSnapshot writes chunks beside
 * the appends).
 */
const CHUNKS_PER_BATCH = 2;

const ENCODINGS = { keyEncoding: 'utf8', valueEncoding: 'view' } as const;
const SYNCED = { ...ENCODINGS, sync: true } as const;
const UNSYNCED = { ...ENCODINGS, sync: false } as const;

/** What the snapshot record key holds. */
interface SnapshotRecord {
  meta: SnapshotMeta;
  generation: number;
  byteLength: number;
  chunkCount: number;
  /** In memory only: the record and its chunks are in the layout before this one (keys.ts). */
  legacy?: boolean;
}

/**
 * Log bounds known after opening: stored entries are exactly snapshotIndex+1 .. lastIndex, held by the blocks
 * starting at `blockStarts` (ascending; the first block may start at or before snapshotIndex, when a snapshot
 * covered only part of it).
 */
interface OpenState {
  snapshot: SnapshotRecord | null;
  snapshotIndex: number;
  lastIndex: number;
  blockStarts: number[];
  /** Term and vote of the stored hard state: a hard state that changes neither is stored in the block (see append). */
  term: number;
  vote: string | null;
  /**
   * The newest commit index recorded (in the hard-state key or a block) and its write's number: every block records
   * the newest as of its write, so the last block and the key between them hold it (load takes the higher number).
   */
  commit: number;
  seq: number;
  /** The hard state is still under its key of the layout before this one: the next write of it deletes that. */
  legacyHardState: boolean;
  /** The newest snapshot generation handed out, stored or still being written (saveSnapshot). */
  generations: number;
}

/**
 * A block that also records a commit index and the write's number: `{ c: commit, s: seq, e: [entries] }` (a block
 * without them is the bare array of entries). Assembled from the entries' array bytes, not encoded again.
 */
function blockWithCommit(entriesArray: Uint8Array, commit: number, seq: number): Buffer {
  // MessagePack: a map of three, key "c", the commit, key "s", the number, key "e", the array.
  return Buffer.concat([
    BLOCK_MAP_HEADER,
    COMMIT_KEY,
    encodeValue(commit),
    SEQ_KEY,
    encodeValue(seq),
    ENTRIES_KEY,
    entriesArray,
  ]);
}
const BLOCK_MAP_HEADER = Uint8Array.of(0x83);
const COMMIT_KEY = Uint8Array.of(0xa1, 0x63);
const SEQ_KEY = Uint8Array.of(0xa1, 0x73);
const ENTRIES_KEY = Uint8Array.of(0xa1, 0x65);

/** A stored block's entries, and the commit index it records with its write's number (null for a bare array). */
function parseStoredBlock(
  value: unknown,
  start: number,
): { entries: Entry[]; commit: { commit: number; seq: number } | null } {
  if (Array.isArray(value) || (typeof value === 'object' && value !== null && 'index' in value))
    return { entries: parseBlock(value, start), commit: null };
  const fields = fieldsOf(value, 'block');
  return {
    entries: parseBlock(fields.e, start),
    commit: { commit: intField(fields, 'c'), seq: intField(fields, 's') },
  };
}

/** The write number stored beside a hard state (0 when absent: written before blocks recorded commit indexes). */
function hardStateSeq(value: unknown): number {
  const seq = (value as { s?: unknown }).s;
  return typeof seq === 'number' && Number.isSafeInteger(seq) && seq >= 0 ? seq : 0;
}

/** The entries of one stored block: an array of entries, or (as written before blocks) a single entry. */
function parseBlock(value: unknown, start: number): Entry[] {
  const block = Array.isArray(value) ? value.map((item) => parseEntry(item)) : [parseEntry(value)];
  if (block.length === 0) throw new Error(`corrupt log: empty block at ${start}`);
  block.forEach((entry, i) => {
    if (entry.index !== start + i)
      throw new Error(`corrupt log: block ${start} holds entry ${entry.index} at position ${i}`);
  });
  return block;
}

/** The position in `starts` (ascending) of the last start <= index, or -1 when there is none. */
function blockHolding(starts: readonly number[], index: number): number {
  let low = 0;
  let high = starts.length - 1;
  while (low <= high) {
    const middle = (low + high) >> 1;
    if (starts[middle]! <= index) low = middle + 1;
    else high = middle - 1;
  }
  return high;
}

function parseSnapshotRecord(value: unknown): SnapshotRecord {
  const fields = fieldsOf(value, 'snapshot record');
  return {
    meta: parseSnapshotMeta(fields.meta),
    generation: intField(fields, 'generation', 1),
    byteLength: intField(fields, 'byteLength'),
    chunkCount: intField(fields, 'chunkCount'),
  };
}

/** Storage for one member of one group, on LevelDB. */
export class LevelStorage implements Storage {
  private readonly db: SharedLevel;
  /** Whether close() closes the database (we opened it from a directory) or leaves it to its owner. */
  private readonly ownsDb: boolean;
  private readonly keys: StorageKeys;
  private readonly chunkBytes: number;
  private state: OpenState | null = null;
  /** The tail of the operation chain; every operation waits for the previous one. */
  private tail: Promise<unknown> = Promise.resolve();
  /** Snapshot saves past their first step (their chunks are written outside the chain); close waits for them. */
  private readonly saving = new Set<Promise<void>>();
  private closed = false;

  /**
   * @param location a directory (one per member; the database is opened and closed by this storage), or an
   *   already created level database plus a key prefix ('!'-free) to share one database between groups.
   */
  constructor(location: LevelStorageLocation, options: LevelStorageOptions = {}) {
    if (typeof location === 'string') {
      this.db = new Level(location);
      this.ownsDb = true;
      this.keys = new StorageKeys(DEFAULT_PREFIX);
    } else {
      this.db = location.db;
      this.ownsDb = false;
      this.keys = new StorageKeys(location.prefix);
    }
    const chunkBytes = options.snapshotChunkBytes ?? DEFAULT_SNAPSHOT_CHUNK_BYTES;
    if (!Number.isSafeInteger(chunkBytes) || chunkBytes < 1) {
      throw new RangeError(`snapshotChunkBytes must be a positive integer: ${chunkBytes}`);
    }
    this.chunkBytes = chunkBytes;
  }

  load(): Promise<{ hardState: HardState; snapshot: Snapshot | null; entries: Entry[] }> {
    return this.run(async (state) => {
      // open() read the hard state (its commit index from the newer of the key and the last block) and every write
      // since keeps it in `state`.
      const hardState: HardState = { term: state.term, vote: state.vote, commit: state.commit };
      const snapshot = state.snapshot === null ? null : await this.readSnapshot(state.snapshot);
      // entries[i] is entry snapshotIndex+1+i. Each block cuts what came before it at its start, then extends it.
      const entries: Entry[] = [];
      for await (const [key, value] of this.db.iterator({ ...this.keys.entries, ...ENCODINGS })) {
        const start = this.keys.entryIndex(key);
        const held = state.snapshotIndex + entries.length;
        if (start > held + 1) throw new Error(`corrupt log: expected an entry ${held + 1}, found block ${start}`);
        if (start <= held) entries.length = Math.max(0, start - state.snapshotIndex - 1);
        for (const entry of parseStoredBlock(decodeValue(value), start).entries) {
          if (entry.index > state.snapshotIndex) entries.push(entry);
        }
      }
      if (entries.length !== state.lastIndex - state.snapshotIndex) {
        throw new Error(`corrupt log: entries end at ${state.snapshotIndex + entries.length}, not ${state.lastIndex}`);
      }
      return { hardState, snapshot, entries };
    });
  }

  append(entries: Entry[], hardState: HardState | null, options?: AppendOptions): Promise<void> {
    const batchOptions = options?.sync === false ? UNSYNCED : SYNCED;
    return this.run(async (state) => {
      const fresh = entriesToStore(entries, state.snapshotIndex, state.lastIndex);
      const ops: BatchOp[] = [];
      const starts = state.blockStarts;
      const start = fresh[0]?.index;
      // Blocks from `kept` on start at or after the new block: those after it belong to the conflicting suffix
      // being replaced, one at the same index is overwritten by the put. One starting before it is cut by the new
      // block (see above) and stays.
      const kept = start === undefined ? starts.length : blockHolding(starts, start - 1) + 1;
      // A hard state whose term and vote are the stored ones (a newer commit index) goes into the block, not the
      // hard state's own key: that key in every write put it beside the log's keys in every LevelDB table, so the
      // tables of an append-only log overlapped and every compaction rewrote the log (bench/RESULTS.md, kv,
      // findings). load() takes the larger commit index of the two.
      const commitOnly =
        hardState !== null && start !== undefined && hardState.term === state.term && hardState.vote === state.vote;
      const seq = hardState !== null ? state.seq + 1 : state.seq;
      const commit = hardState !== null ? hardState.commit : state.commit;
      if (start !== undefined) {
        for (let i = kept; i < starts.length; i++) {
          if (starts[i] !== start) ops.push({ type: 'del', key: this.keys.entry(starts[i]!) });
        }
        ops.push({
          type: 'put',
          key: this.keys.entry(start),
          value: blockWithCommit(encodeEntries(fresh), commit, seq),
        });
      }
      if (hardState !== null && !commitOnly) this.putHardState(ops, state, hardState, seq);
      if (ops.length === 0) return;
      await this.db.batch(ops, batchOptions);
      state.seq = seq;
      state.commit = commit;
      if (hardState !== null && !commitOnly) {
        state.term = hardState.term;
        state.vote = hardState.vote;
        state.legacyHardState = false;
      }
      if (start !== undefined) {
        starts.length = kept;
        starts.push(start);
        state.lastIndex = fresh[fresh.length - 1]!.index;
      }
    });
  }

  /**
   * In three steps, so that log writes need not wait behind megabytes of snapshot: a new generation is handed
   * out in the operation chain; the chunks are written under it outside the chain (no record names that
   * generation yet, so they are invisible, and an interrupted save's chunks are removed at the next open), while
   * appends go on; then, in the chain again, one synced batch records the snapshot and drops what it covers.
   */
  saveSnapshot(snapshot: Snapshot): Promise<void> {
    if (this.closed) return Promise.reject(new Error('LevelStorage is closed'));
    // Registered now: close waits for every save begun before it, all three steps.
    const saving = this.saveInSteps(snapshot);
    this.saving.add(saving);
    return saving.finally(() => this.saving.delete(saving));
  }

  private async saveInSteps(snapshot: Snapshot): Promise<void> {
    const index = snapshot.meta.index;
    const generation = await this.chain(async (state) => {
      if (index < state.snapshotIndex) return null; // Stale: a newer snapshot is already stored.
      state.generations = Math.max(state.generations, state.snapshot?.generation ?? 0) + 1;
      return state.generations;
    });
    if (generation === null) return;
    const chunkCount = await this.writeChunks(generation, snapshot.data);
    await this.recordSnapshot(snapshot, generation, chunkCount);
  }

  /** saveSnapshot's last step, in the chain: record the snapshot and drop what it covers, or drop its chunks if stale. */
  private recordSnapshot(snapshot: Snapshot, generation: number, chunkCount: number): Promise<void> {
    const { index, term } = snapshot.meta;
    return this.chain(async (state) => {
      if (index < state.snapshotIndex) {
        // A newer snapshot was stored while these chunks were written: they go.
        const stale: BatchOp[] = [];
        for (let chunk = 0; chunk < chunkCount; chunk++)
          stale.push({ type: 'del', key: this.keys.snapshotChunk(generation, chunk) });
        await this.db.batch(stale, UNSYNCED);
        return;
      }
      const previous = state.snapshot;

      const logMatches = (await this.termAt(state, index)) === term;
      const dropUpTo = logMatches ? index : state.lastIndex;
      const record: SnapshotRecord = {
        meta: snapshotMetaValue(snapshot.meta),
        generation,
        byteLength: snapshot.data.byteLength,
        chunkCount,
      };
      const ops: BatchOp[] = [{ type: 'put', key: this.keys.snapshotRecord, value: encodeValue(record) }];
      if (previous?.legacy === true) ops.push({ type: 'del', key: this.keys.legacySnapshotRecord });
      // Blocks that end at or before dropUpTo go; one that straddles it stays whole (load skips its covered part).
      const starts = state.blockStarts;
      let dropped = 0;
      while (
        dropped < starts.length &&
        (dropped + 1 < starts.length ? starts[dropped + 1]! - 1 : state.lastIndex) <= dropUpTo
      ) {
        ops.push({ type: 'del', key: this.keys.entry(starts[dropped]!) });
        dropped++;
      }
      for (let chunk = 0; chunk < (previous?.chunkCount ?? 0); chunk++) {
        ops.push({ type: 'del', key: this.keys.snapshotChunk(previous!.generation, chunk, previous!.legacy === true) });
      }
      // The newest commit index may be recorded only in a block dropped here: the hard-state key keeps it.
      if (dropped > 0)
        this.putHardState(ops, state, { term: state.term, vote: state.vote, commit: state.commit }, state.seq);
      await this.db.batch(ops, SYNCED);
      if (dropped > 0) state.legacyHardState = false;
      state.blockStarts = starts.slice(dropped);
      state.snapshot = record;
      state.snapshotIndex = index;
      state.lastIndex = logMatches ? Math.max(state.lastIndex, index) : index;
    });
  }

  latestSnapshot(): Promise<Snapshot | null> {
    return this.run((state) => (state.snapshot === null ? Promise.resolve(null) : this.readSnapshot(state.snapshot)));
  }

  compact(upTo: number): Promise<void> {
    return this.run(async (state) => {
      checkCompaction(upTo, state.snapshotIndex);
      // saveSnapshot already deleted every covered entry in the batch that stored the snapshot.
    });
  }

  /** Waits for pending operations, then closes the database if this storage opened it. Idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await Promise.allSettled([...this.saving]);
    await this.tail;
    if (this.ownsDb) await this.db.close();
  }

  /** Runs `operation` after every earlier one, opening the storage first if needed. */
  private run<T>(operation: (state: OpenState) => Promise<T>): Promise<T> {
    if (this.closed) return Promise.reject(new Error('LevelStorage is closed'));
    return this.chain(operation);
  }

  /** Appends `operation` to the chain, closed or not (a save begun before close finishes through it). */
  private chain<T>(operation: (state: OpenState) => Promise<T>): Promise<T> {
    const result = this.tail.then(async () => operation(this.state ?? (await this.open())));
    this.tail = result.catch(() => undefined);
    return result;
  }

  /** Opens the database, reads the log bounds and clears chunks left behind by an interrupted snapshot save. */
  private async open(): Promise<OpenState> {
    await this.db.open();
    const stored = await this.get(this.keys.snapshotRecord);
    const legacyRecord = stored === undefined ? await this.get(this.keys.legacySnapshotRecord) : undefined;
    const snapshot =
      stored !== undefined
        ? parseSnapshotRecord(decodeValue(stored))
        : legacyRecord !== undefined
          ? { ...parseSnapshotRecord(decodeValue(legacyRecord)), legacy: true }
          : null;
    const snapshotIndex = snapshot?.meta.index ?? 0;

    const blockKeys = await this.db.keys({ ...this.keys.entries, ...ENCODINGS }).all();
    const blockStarts = blockKeys.map((key) => this.keys.entryIndex(key));
    let lastIndex = snapshotIndex;
    let lastRecord: { commit: number; seq: number } | null = null;
    const lastStart = blockStarts.at(-1);
    if (lastStart !== undefined) {
      const lastBlock = await this.get(this.keys.entry(lastStart));
      if (lastBlock === undefined) throw new Error(`corrupt log: block ${lastStart} vanished while opening`);
      const block = parseStoredBlock(decodeValue(lastBlock), lastStart);
      lastIndex = Math.max(snapshotIndex, lastStart + block.entries.length - 1);
      lastRecord = block.commit;
    }

    // Chunks of no recorded snapshot (an interrupted save), in either layout, go.
    for (const legacy of [false, true]) {
      const allChunks = this.keys.snapshotChunks(legacy);
      if (snapshot === null || (snapshot.legacy === true) !== legacy) {
        await this.clear(allChunks);
      } else {
        const current = this.keys.snapshotGeneration(snapshot.generation, legacy);
        await this.clear({ gte: allChunks.gte, lt: current.gte });
        await this.clear({ gte: current.lt, lt: allChunks.lt });
      }
    }
    const current = await this.get(this.keys.hardState);
    const legacy = current === undefined ? await this.get(this.keys.legacyHardState) : undefined;
    const storedHs = current ?? legacy;
    const storedValue = storedHs === undefined ? undefined : decodeValue(storedHs);
    const { term, vote, commit } = storedValue === undefined ? initialHardState() : parseHardState(storedValue);
    // The commit index of the newest write that recorded one: the key's, or the last block's (appends delete every
    // block after their own, so the last block is the newest written).
    let newest = { commit, seq: storedValue === undefined ? 0 : hardStateSeq(storedValue) };
    if (lastRecord !== null && lastRecord.seq > newest.seq) newest = lastRecord;
    const legacyHardState = legacy !== undefined;
    this.state = {
      snapshot,
      snapshotIndex,
      lastIndex,
      blockStarts,
      term,
      vote,
      commit: newest.commit,
      seq: newest.seq,
      legacyHardState,
      generations: snapshot?.generation ?? 0,
    };
    return this.state;
  }

  /** Writes `data` as chunks of one generation, a few chunks per synced batch. Returns the chunk count. */
  private async writeChunks(generation: number, data: Uint8Array): Promise<number> {
    const chunkCount = Math.ceil(data.byteLength / this.chunkBytes);
    for (let first = 0; first < chunkCount; first += CHUNKS_PER_BATCH) {
      const ops: BatchOp[] = [];
      for (let chunk = first; chunk < Math.min(chunkCount, first + CHUNKS_PER_BATCH); chunk++) {
        const value = data.subarray(chunk * this.chunkBytes, (chunk + 1) * this.chunkBytes);
        ops.push({ type: 'put', key: this.keys.snapshotChunk(generation, chunk), value });
      }
      await this.db.batch(ops, SYNCED);
    }
    return chunkCount;
  }

  private async readSnapshot(record: SnapshotRecord): Promise<Snapshot> {
    const data = new Uint8Array(record.byteLength);
    let offset = 0;
    let chunks = 0;
    const range = this.keys.snapshotGeneration(record.generation, record.legacy === true);
    for await (const value of this.db.values({ ...range, ...ENCODINGS })) {
      if (offset + value.byteLength > data.byteLength) throw new Error('corrupt snapshot: more data than recorded');
      data.set(value, offset);
      offset += value.byteLength;
      chunks++;
    }
    if (offset !== record.byteLength || chunks !== record.chunkCount) {
      throw new Error(
        `corrupt snapshot: ${chunks} chunks / ${offset} bytes, expected ${record.chunkCount} / ${record.byteLength}`,
      );
    }
    return { meta: structuredClone(record.meta), data };
  }

  /** Adds the writing of `hardState` (with write number `seq`) to `ops`, and the removal of its legacy key. */
  private putHardState(ops: BatchOp[], state: OpenState, hardState: HardState, seq: number): void {
    ops.push({ type: 'put', key: this.keys.hardState, value: encodeValue({ ...hardStateValue(hardState), s: seq }) });
    if (state.legacyHardState) ops.push({ type: 'del', key: this.keys.legacyHardState });
  }

  /** The term of the entry at `index`, or undefined when the log holds no such entry. */
  private async termAt(state: OpenState, index: number): Promise<number | undefined> {
    if (state.snapshot !== null && index === state.snapshotIndex) return state.snapshot.meta.term;
    if (index <= state.snapshotIndex || index > state.lastIndex) return undefined;
    const start = state.blockStarts[blockHolding(state.blockStarts, index)];
    if (start === undefined) return undefined;
    const stored = await this.get(this.keys.entry(start));
    return stored === undefined ? undefined : parseStoredBlock(decodeValue(stored), start).entries[index - start]?.term;
  }

  private async get(key: string): Promise<Uint8Array | undefined> {
    return this.db.get(key, ENCODINGS); // abstract-level 2+ resolves a missing key to undefined.
  }

  private clear(range: KeyRange): Promise<void> {
    return this.db.clear({ ...range, keyEncoding: 'utf8' });
  }
}

/** Only the HardState fields, so extra properties on the caller's object are not persisted. */
function hardStateValue(hardState: HardState): HardState {
  return { term: hardState.term, vote: hardState.vote, commit: hardState.commit };
}

function snapshotMetaValue(meta: SnapshotMeta): SnapshotMeta {
  return {
    index: meta.index,
    term: meta.term,
    time: meta.time,
    config: { voters: [...meta.config.voters], learners: [...meta.config.learners] },
  };
}
