/**
 * In-memory Storage for tests and simulations. Same log semantics as LevelStorage (see log-rules.ts), nothing
 * survives the process.
 */
import type { Entry, HardState, Snapshot, Storage } from '../types.js';
import { checkCompaction, entriesToStore, initialHardState } from './log-rules.js';

/**
 * Storage held in plain arrays. Stored values are kept by reference (callers must not mutate entries or byte
 * arrays after handing them over); the arrays and hard state returned are copies.
 *
 * `close()` keeps the data: handing the same instance to a restarted member models reopening a directory.
 */
export class MemoryStorage implements Storage {
  private hardState: HardState = initialHardState();
  private snapshot: Snapshot | null = null;
  /** entries[i].index === snapshotIndex + 1 + i. */
  private entries: Entry[] = [];

  private get snapshotIndex(): number {
    return this.snapshot?.meta.index ?? 0;
  }

  private get lastIndex(): number {
    return this.snapshotIndex + this.entries.length;
  }

  async load(): Promise<{ hardState: HardState; snapshot: Snapshot | null; entries: Entry[] }> {
    return { hardState: { ...this.hardState }, snapshot: this.snapshot, entries: this.entries.slice() };
  }

  async append(entries: Entry[], hardState: HardState | null): Promise<void> {
    const fresh = entriesToStore(entries, this.snapshotIndex, this.lastIndex);
    if (fresh.length > 0) {
      // Keep everything before the first new entry; the new entries replace the rest.
      this.entries.length = fresh[0]!.index - this.snapshotIndex - 1;
      this.entries.push(...fresh);
    }
    if (hardState !== null) this.hardState = { ...hardState };
  }

  async saveSnapshot(snapshot: Snapshot): Promise<void> {
    const { index, term } = snapshot.meta;
    if (index < this.snapshotIndex) return; // Stale: a newer snapshot is already stored.
    const logMatches = this.termAt(index) === term;
    this.entries = logMatches ? this.entries.slice(index - this.snapshotIndex) : [];
    this.snapshot = snapshot;
  }

  async latestSnapshot(): Promise<Snapshot | null> {
    return this.snapshot;
  }

  async compact(upTo: number): Promise<void> {
    checkCompaction(upTo, this.snapshotIndex);
    // saveSnapshot already dropped every covered entry, so nothing is left at or below upTo.
  }

  /** Nothing to release. */
  async close(): Promise<void> {}

  /** The term of the entry at `index`, or undefined when the log holds no such entry. */
  private termAt(index: number): number | undefined {
    if (this.snapshot !== null && index === this.snapshotIndex) return this.snapshot.meta.term;
    return this.entries[index - this.snapshotIndex - 1]?.term;
  }
}
