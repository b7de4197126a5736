/**
 * The dashboard's timeline: events derived by the collector and fault records tailed from each cluster's
 * DIR/timeline.jsonl (written by the actions module, from the CLI or the dashboard), numbered in one sequence so a
 * page asks for "everything after seq N". Bounded: the oldest events are dropped past MAX_EVENTS.
 */
import { closeSync, openSync, readSync, statSync } from 'node:fs';
import { timelinePath, type FaultRecord } from '../actions.js';
import type { TimelineEvent, TimelineKind } from './types.js';

export const MAX_EVENTS = 5_000;
/** Fault ids remembered per cluster, to skip records seen before when a trimmed file is read again. */
const MAX_SEEN = 20_000;

interface Tail {
  offset: number;
  ino: number;
  seen: Set<string>;
}

export class Timeline {
  private readonly events: TimelineEvent[] = [];
  private nextSeq = 1;
  private readonly tails = new Map<string, Tail>();
  /** Fault id -> the event made of it, for the dashboard's own fault calls (bounded with the seen sets). */
  private readonly byFaultId = new Map<string, TimelineEvent>();

  add(
    cluster: string,
    kind: TimelineKind,
    member: string | null,
    group: string | null,
    text: string,
    at = Date.now(),
  ): TimelineEvent {
    const event: TimelineEvent = { seq: this.nextSeq++, at, cluster, kind, member, group, text };
    this.events.push(event);
    if (this.events.length > MAX_EVENTS) this.events.splice(0, this.events.length - MAX_EVENTS);
    return event;
  }

  /** Events after `since`, of one cluster or all, at most `limit` (the newest). */
  since(since: number, cluster?: string, limit = 1_000): TimelineEvent[] {
    // Events are in seq order: find the first after `since` by binary search.
    let lo = 0;
    let hi = this.events.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.events[mid]!.seq <= since) lo = mid + 1;
      else hi = mid;
    }
    const out = this.events.slice(lo).filter((e) => cluster === undefined || e.cluster === cluster);
    return out.length > limit ? out.slice(-limit) : out;
  }

  get lastSeq(): number {
    return this.nextSeq - 1;
  }

  /**
   * Reads the fault records appended to a cluster's timeline file since the last call. The first read of a file
   * skips what was there before the dashboard started, except the newest `backfill` records (history worth showing).
   */
  ingestFaults(cluster: string, dataDir: string, backfill = 50): void {
    const path = timelinePath(dataDir);
    let st;
    try {
      st = statSync(path);
    } catch {
      return;
    }
    let tail = this.tails.get(cluster);
    const first = tail === undefined;
    if (tail === undefined) {
      tail = { offset: 0, ino: st.ino, seen: new Set() };
      this.tails.set(cluster, tail);
    }
    // Trimmed (renamed over) or truncated: read it whole again; the seen ids skip what was already taken.
    if (st.ino !== tail.ino || st.size < tail.offset) {
      tail.offset = 0;
      tail.ino = st.ino;
    }
    if (st.size === tail.offset) return;
    const length = Math.min(st.size - tail.offset, 4_000_000);
    const buffer = Buffer.alloc(length);
    const fd = openSync(path, 'r');
    try {
      readSync(fd, buffer, 0, length, tail.offset);
    } finally {
      closeSync(fd);
    }
    const text = buffer.toString('utf8');
    const end = text.lastIndexOf('\n');
    if (end < 0) return; // half a line so far
    tail.offset += Buffer.byteLength(text.slice(0, end + 1));
    let records: FaultRecord[] = [];
    for (const line of text.slice(0, end).split('\n')) {
      try {
        const r = JSON.parse(line) as FaultRecord;
        if (typeof r.id === 'string' && typeof r.at === 'number' && typeof r.text === 'string') records.push(r);
      } catch {
        // a line torn by a crash: skip it
      }
    }
    if (first) records = records.slice(-backfill);
    for (const r of records) {
      if (tail.seen.has(r.id)) continue;
      tail.seen.add(r.id);
      if (tail.seen.size > MAX_SEEN) tail.seen.delete(tail.seen.values().next().value!);
      const event = this.add(cluster, 'fault', typeof r.member === 'string' ? r.member : null, null, r.text, r.at);
      this.byFaultId.set(r.id, event);
      if (this.byFaultId.size > MAX_EVENTS) this.byFaultId.delete(this.byFaultId.keys().next().value!);
    }
  }

  /** The event made of a fault record (after ingestFaults read it). */
  faultEvent(id: string): TimelineEvent | undefined {
    return this.byFaultId.get(id);
  }

  /** Forget a cluster's file position (its folder went away). */
  forget(cluster: string): void {
    this.tails.delete(cluster);
  }
}
