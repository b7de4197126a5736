/**
 * What a stand-in provider received, in arrival order, so tests and the benchmark can read it back over HTTP
 * (GET /admin/received?since=&notification_id=&message_id=&to=&limit=). Each entry has a sequence number (a reader pages with
 * `since`) and the provider's arrival time (the benchmark's "provider receipt"). Bounded: past MAX_KEPT the
 * oldest tenth is dropped (counted), so a long flood cannot exhaust the stand-in's memory (a decrypted push entry
 * is ~0.5 KB: 500,000 is ~250 MB at most).
 */
import { badRequest } from '@raftkit/http';

const MAX_KEPT = 500_000;

export interface ReceivedBase {
  seq: number;
  /** Provider's id for the message (SMTP queue id, push message id, SMS id). */
  id: string;
  /** The delivery's id (`notification:user:channel`) the sender stamped on the message (header, payload, reference). */
  message_id: string | null;
  /** The notification id the sender stamped on it, when it did. */
  notification_id: string | null;
  to: string;
  received_at: number;
}

export class ReceivedLog<T extends ReceivedBase> {
  private entries: T[] = [];
  private nextSeq = 1;
  private dropped = 0;
  private readonly byMessage = new Map<string, number>();

  add(entry: Omit<T, 'seq'>): T {
    const full = { ...entry, seq: this.nextSeq++ } as T;
    this.entries.push(full);
    if (full.message_id !== null) this.byMessage.set(full.message_id, (this.byMessage.get(full.message_id) ?? 0) + 1);
    if (this.entries.length > MAX_KEPT) {
      const cut = Math.floor(MAX_KEPT / 10);
      this.entries = this.entries.slice(cut);
      this.dropped += cut;
    }
    return full;
  }

  find(predicate: (entry: T) => boolean): T | undefined {
    return this.entries.find(predicate);
  }

  get total(): number {
    return this.nextSeq - 1;
  }

  /** The GET /admin/received answer for the query string. */
  query(query: URLSearchParams): { total: number; dropped: number; next_since: number; messages: T[] } {
    const since = intParam(query, 'since', 0);
    const limit = intParam(query, 'limit', 10_000);
    const notificationId = query.get('notification_id');
    const messageId = query.get('message_id');
    const to = query.get('to');
    const out: T[] = [];
    // Entries are in seq order: skip to `since` by binary search, the benchmark pages through millions.
    let lo = 0;
    let hi = this.entries.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.entries[mid]!.seq <= since) lo = mid + 1;
      else hi = mid;
    }
    let last = since;
    for (let i = lo; i < this.entries.length && out.length < limit; i++) {
      const e = this.entries[i]!;
      last = e.seq;
      if (notificationId !== null && e.notification_id !== notificationId) continue;
      if (messageId !== null && e.message_id !== messageId) continue;
      if (to !== null && e.to !== to) continue;
      out.push(e);
    }
    return { total: this.total, dropped: this.dropped, next_since: last, messages: out };
  }

  /** How many distinct deliveries (message ids) arrived, and how many of them more than once. */
  counts(): { distinct: number; duplicated: number } {
    let duplicated = 0;
    for (const n of this.byMessage.values()) if (n > 1) duplicated++;
    return { distinct: this.byMessage.size, duplicated };
  }
}

function intParam(query: URLSearchParams, name: string, fallback: number): number {
  const raw = query.get(name);
  if (raw === null) return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 0)
    throw badRequest('invalid_query', `${name} must be a non-negative integer`, { field: name });
  return n;
}
