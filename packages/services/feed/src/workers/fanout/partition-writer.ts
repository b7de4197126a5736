/**
 * One queue per store partition in a fan-out worker: writes for a partition wait in its queue and leave in batches;
 * a partition none of whose replicas answers (StoreClient tries each) is retried with backoff (up to MAX_BACKOFF_MS)
 * while the other partitions' queues keep flowing (spec: a store outage stalls fan-out for that partition only). Each
 * write resolves when it is stored, so the caller knows when every write of an event is done and only then lets its
 * offset be committed.
 */
import type { StoreClient } from '../../store-client.js';
import type { InboxWrite } from '../../store-protocol.js';
import type { FeedEntry } from '../store/store.js';

const BATCH = 1_000;
const MAX_BACKOFF_MS = 2_000;

type Kind = 'add_inbox' | 'remove_inbox' | 'add_outbox' | 'remove_outbox';

interface Queued {
  kind: Kind;
  entries: InboxWrite[] | FeedEntry[];
  done: () => void;
}

export class PartitionWriter {
  private readonly queue: Queued[] = [];
  private running = false;
  private closed = false;
  /** Entries waiting (for the reader's backpressure). */
  queued = 0;
  failures = 0;
  written = 0;
  /** When the current failure streak began, or null when the partition answers. */
  stalledSince: number | null = null;

  constructor(
    private readonly stores: StoreClient,
    readonly partition: number,
  ) {}

  write(kind: Kind, entries: InboxWrite[] | FeedEntry[]): Promise<void> {
    if (entries.length === 0) return Promise.resolve();
    return new Promise((resolve) => {
      this.queue.push({ kind, entries, done: resolve });
      this.queued += entries.length;
      if (!this.running) void this.run();
    });
  }

  close(): void {
    this.closed = true;
  }

  private async run(): Promise<void> {
    this.running = true;
    let backoff = 50;
    while (this.queue.length > 0 && !this.closed) {
      // Writes of one kind at the head of the queue go together, up to BATCH entries.
      const kind = this.queue[0]!.kind;
      const batch: Queued[] = [];
      let size = 0;
      while (this.queue.length > batch.length) {
        const next = this.queue[batch.length]!;
        if (next.kind !== kind || (size > 0 && size + next.entries.length > BATCH)) break;
        batch.push(next);
        size += next.entries.length;
      }
      const entries = batch.flatMap((q) => q.entries) as InboxWrite[];
      try {
        await this.stores.callPartition(this.partition, { op: kind, entries } as never);
        this.queue.splice(0, batch.length);
        this.queued -= size;
        this.written += size;
        this.stalledSince = null;
        backoff = 50;
        for (const q of batch) q.done();
      } catch {
        this.failures++;
        this.stalledSince ??= Date.now();
        await new Promise((r) => setTimeout(r, backoff));
        backoff = Math.min(MAX_BACKOFF_MS, backoff * 2);
      }
    }
    this.running = false;
  }
}
