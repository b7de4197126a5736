/**
 * The log rules both storages enforce, kept in one place so MemoryStorage and LevelStorage cannot drift apart.
 *
 * Stored entries always form one contiguous run that starts right after the snapshot (or at index 1 when there
 * is none): indexes snapshotIndex+1 .. lastIndex.
 */
import type { Entry, HardState } from '../types.js';

/** The hard state of a member that has never persisted one. */
export function initialHardState(): HardState {
  return { term: 0, vote: null, commit: 0 };
}

/**
 * Checks an `append` batch against the stored log and returns the entries that still need storing.
 *
 * - Entries must be contiguous (each index one more than the previous): anything else is a caller bug.
 * - The first entry may not leave a gap after `lastIndex` (the log would no longer be contiguous).
 * - Entries at or below `snapshotIndex` are already covered by the snapshot (committed, so they cannot
 *   conflict) and are skipped, as etcd's MemoryStorage does.
 *
 * Throws RangeError on a violation, before anything was written.
 */
export function entriesToStore(entries: readonly Entry[], snapshotIndex: number, lastIndex: number): Entry[] {
  if (entries.length === 0) return [];
  for (let i = 1; i < entries.length; i++) {
    if (entries[i]!.index !== entries[i - 1]!.index + 1) {
      throw new RangeError(`append: entries not contiguous at ${entries[i - 1]!.index} -> ${entries[i]!.index}`);
    }
  }
  const first = entries[0]!.index;
  if (first > lastIndex + 1) {
    throw new RangeError(`append: entry ${first} would leave a gap after last stored index ${lastIndex}`);
  }
  return first > snapshotIndex ? entries.slice() : entries.filter((entry) => entry.index > snapshotIndex);
}

/** Throws unless `upTo` is covered by the stored snapshot: compacting further would lose uncovered entries. */
export function checkCompaction(upTo: number, snapshotIndex: number): void {
  if (upTo > snapshotIndex) {
    throw new RangeError(`compact: ${upTo} is beyond the snapshot index ${snapshotIndex}`);
  }
}
