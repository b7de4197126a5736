/**
 * The in-memory Raft log of one member: the entries after the latest snapshot, plus the bookkeeping of what is
 * durable, committed and applied. The core owns it; storage only mirrors it for durability.
 */
import { invariant } from './assert.js';
import type { Entry, SnapshotMeta } from './types.js';

export class RaftLog {
  /** Index and term of the last entry covered by the snapshot the log starts after (0, 0 for none). */
  private offsetIndex: number;
  private offsetTerm: number;
  private offsetTime: number;
  /** entries[i].index === offsetIndex + 1 + i */
  private entries: Entry[];
  /** First index not yet handed to the driver for persistence. */
  unstableFrom: number;
  /** Every entry at or below this index is durable (on this member's disk). */
  persisted: number;
  committed: number;
  applied: number;

  constructor(snapshot: SnapshotMeta | null, entries: Entry[], committed: number) {
    this.offsetIndex = snapshot?.index ?? 0;
    this.offsetTerm = snapshot?.term ?? 0;
    this.offsetTime = snapshot?.time ?? 0;
    this.entries = entries.slice();
    for (let i = 0; i < this.entries.length; i++) {
      invariant(this.entries[i]!.index === this.offsetIndex + 1 + i, 'stored entries are not contiguous');
    }
    this.unstableFrom = this.lastIndex() + 1;
    this.persisted = this.lastIndex();
    this.applied = this.offsetIndex;
    this.committed = Math.max(committed, this.offsetIndex);
    invariant(this.committed <= this.lastIndex(), 'stored commit index is beyond the stored log');
  }

  get snapshotIndex(): number {
    return this.offsetIndex;
  }

  firstIndex(): number {
    return this.offsetIndex + 1;
  }

  lastIndex(): number {
    return this.offsetIndex + this.entries.length;
  }

  lastTerm(): number {
    return this.entries.length > 0 ? this.entries[this.entries.length - 1]!.term : this.offsetTerm;
  }

  lastTime(): number {
    return this.entries.length > 0 ? this.entries[this.entries.length - 1]!.time : this.offsetTime;
  }

  /** The term of the entry at `index`, or undefined when it is compacted away or beyond the end. */
  term(index: number): number | undefined {
    if (index === this.offsetIndex) return this.offsetTerm;
    if (index < this.offsetIndex || index > this.lastIndex()) return undefined;
    return this.entries[index - this.offsetIndex - 1]!.term;
  }

  entry(index: number): Entry | undefined {
    if (index <= this.offsetIndex || index > this.lastIndex()) return undefined;
    return this.entries[index - this.offsetIndex - 1];
  }

  matchTerm(index: number, term: number): boolean {
    return this.term(index) === term;
  }

  /** Section 5.4.1: a candidate's log is at least as up to date as ours. */
  isUpToDate(lastIndex: number, lastTerm: number): boolean {
    const myTerm = this.lastTerm();
    return lastTerm > myTerm || (lastTerm === myTerm && lastIndex >= this.lastIndex());
  }

  /** Entries in [from, lastIndex], at most `maxBytes` worth (always at least one when any exist). */
  slice(from: number, maxBytes: number): { entries: Entry[]; bytes: number } {
    invariant(from > this.offsetIndex, () => `slice from ${from} is compacted (snapshot at ${this.offsetIndex})`);
    const start = from - this.offsetIndex - 1;
    let end = start;
    let bytes = 0;
    while (end < this.entries.length) {
      const size = entrySize(this.entries[end]!);
      if (end > start && bytes + size > maxBytes) break;
      bytes += size;
      end++;
    }
    return { entries: this.entries.slice(start, end), bytes };
  }

  /** Entries in [from, to]; the caller guarantees the range is in memory. */
  range(from: number, to: number): Entry[] {
    if (to < from) return [];
    invariant(from > this.offsetIndex && to <= this.lastIndex(), () => `range ${from}..${to} not in the log`);
    return this.entries.slice(from - this.offsetIndex - 1, to - this.offsetIndex);
  }

  /** Append after the last entry (the leader's own proposals). */
  append(entries: Entry[]): void {
    for (const e of entries) {
      invariant(e.index === this.lastIndex() + 1, () => `append at ${e.index} after last ${this.lastIndex()}`);
      this.entries.push(e);
    }
  }

  /**
   * A follower's append: entries must follow `prevIndex`, whose term the caller has matched. Entries already
   * present with the same term are kept; the first conflicting one and everything after it is replaced.
   * Returns the index of the first truncated entry, or null when nothing was truncated.
   */
  appendAfter(prevIndex: number, entries: Entry[]): number | null {
    let i = 0;
    for (; i < entries.length; i++) {
      const e = entries[i]!;
      invariant(e.index === prevIndex + 1 + i, 'append request entries are not contiguous');
      if (e.index <= this.offsetIndex) continue; // already covered by our snapshot, hence committed
      const existing = this.term(e.index);
      if (existing === undefined) break;
      if (existing !== e.term) break;
    }
    if (i === entries.length) return null;
    const first = entries[i]!.index;
    let truncatedAt: number | null = null;
    if (first <= this.lastIndex()) {
      invariant(first > this.committed, () => `truncating committed entry ${first} (commit ${this.committed})`);
      this.entries.length = first - this.offsetIndex - 1;
      truncatedAt = first;
      this.unstableFrom = Math.min(this.unstableFrom, first);
      this.persisted = Math.min(this.persisted, first - 1);
    }
    this.append(entries.slice(i));
    return truncatedAt;
  }

  commitTo(index: number): boolean {
    if (index <= this.committed) return false;
    invariant(index <= this.lastIndex(), () => `commit ${index} beyond last index ${this.lastIndex()}`);
    this.committed = index;
    return true;
  }

  /** Entries not yet handed out for persistence; marks them handed out. */
  takeUnstable(): Entry[] {
    const out = this.unstableFrom <= this.lastIndex() ? this.range(this.unstableFrom, this.lastIndex()) : [];
    this.unstableFrom = this.lastIndex() + 1;
    return out;
  }

  /** The driver made the handed-out entries up to (index, term) durable. */
  persistedTo(index: number, term: number): void {
    if (this.term(index) === term && index < this.unstableFrom) this.persisted = Math.max(this.persisted, index);
  }

  /** Replace the whole log by a snapshot (a follower too far behind, or with a conflicting log). */
  restore(meta: SnapshotMeta): void {
    this.offsetIndex = meta.index;
    this.offsetTerm = meta.term;
    this.offsetTime = meta.time;
    this.entries = [];
    this.unstableFrom = meta.index + 1;
    this.persisted = meta.index;
    this.committed = meta.index;
    this.applied = meta.index;
  }

  /** Drop the entries a saved snapshot covers. */
  compact(meta: SnapshotMeta): void {
    if (meta.index <= this.offsetIndex) return;
    invariant(meta.index <= this.applied, () => `compacting ${meta.index} beyond applied ${this.applied}`);
    invariant(this.term(meta.index) === meta.term, 'compaction snapshot term does not match the log');
    this.entries = this.entries.slice(meta.index - this.offsetIndex);
    this.offsetIndex = meta.index;
    this.offsetTerm = meta.term;
    this.offsetTime = meta.time;
  }
}

/** Approximate wire size of an entry, for flow control. */
function entrySize(e: Entry): number {
  return 24 + (e.kind === 'command' ? e.data.byteLength : e.kind === 'config' ? 64 : 0);
}
