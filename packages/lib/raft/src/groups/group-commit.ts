/**
 * Group commit across groups: many LevelStorages (one per Raft group, each under its own key prefix) share one
 * database, and the synced batches they ask for within one turn of the event loop are written as one batch with
 * one sync. A process holding a thousand groups thus makes one fsync per round of work, not one per group.
 * Unsynced batches and reads pass straight through.
 */
import type { BatchOp, RangeOptions, SharedLevel, ViewEncodings } from '../storage/leveldb.js';

interface Waiting {
  operations: BatchOp[];
  resolve(): void;
  reject(error: unknown): void;
}

/** What a GroupCommitLevel has done, for tests, metrics and benchmarks. */
export interface GroupCommitStats {
  /** Synced batches asked for by the storages. */
  requested: number;
  /** Synced batches written to the database (each one fsync). */
  written: number;
}

export class GroupCommitLevel implements SharedLevel {
  private waiting: Waiting[] = [];
  private scheduled = false;
  private encodings: ViewEncodings | null = null;
  readonly stats: GroupCommitStats = { requested: 0, written: 0 };

  /** @param db The database every group's storage shares (opened and closed by its owner through this). */
  constructor(private readonly db: SharedLevel) {}

  /** Opens the shared database. */
  open(): Promise<void> {
    return this.db.open();
  }

  /** Closes the shared database. */
  close(): Promise<void> {
    return this.db.close();
  }

  /** Reads one value. */
  get(key: string, options: ViewEncodings): Promise<Uint8Array | undefined> {
    return this.db.get(key, options);
  }

  /**
   * Writes `operations` atomically. A synced batch waits for the end of this turn of the event loop and is written
   * together with the others asked for meanwhile: all of them are durable when it resolves, and a failure fails all.
   */
  batch(operations: BatchOp[], options: ViewEncodings & { sync: boolean }): Promise<void> {
    if (!options.sync) return this.db.batch(operations, options);
    this.stats.requested++;
    this.encodings = { keyEncoding: options.keyEncoding, valueEncoding: options.valueEncoding };
    return new Promise<void>((resolve, reject) => {
      this.waiting.push({ operations, resolve, reject });
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(this.flush);
      }
    });
  }

  /** Entries of a key range. */
  iterator(options: RangeOptions): AsyncIterable<[string, Uint8Array]> {
    return this.db.iterator(options);
  }

  /** Values of a key range. */
  values(options: RangeOptions): AsyncIterable<Uint8Array> {
    return this.db.values(options);
  }

  /** Keys of a key range. */
  keys(options: RangeOptions): ReturnType<SharedLevel['keys']> {
    return this.db.keys(options);
  }

  /** Deletes a key range. */
  clear(options: { gte: string; lt: string; keyEncoding: 'utf8' }): Promise<void> {
    return this.db.clear(options);
  }

  private readonly flush = (): void => {
    this.scheduled = false;
    const batch = this.waiting;
    this.waiting = [];
    if (batch.length === 0) return;
    // Each storage writes only under its own prefix, so the batches of different groups never touch the same key.
    const operations = batch.length === 1 ? batch[0]!.operations : batch.flatMap((w) => w.operations);
    this.stats.written++;
    this.db.batch(operations, { ...this.encodings!, sync: true }).then(
      () => {
        for (const w of batch) w.resolve();
      },
      (error: unknown) => {
        for (const w of batch) w.reject(error);
      },
    );
  };
}
