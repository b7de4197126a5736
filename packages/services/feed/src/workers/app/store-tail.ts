/**
 * The app worker's view of the store partitions' writes: it tails `feed-store` (every write of every store
 * partition, in the order the replicas apply them) from its end, one long poll per partition, and drops the ranked
 * feeds each write could change (FeedCache). After a batch of records it raises the StoreClient's floor for that
 * partition to the batch's end, so a feed built after the drop reads replicas that have applied what dropped it
 * (a replica behind waits for it or 503s, as for this worker's own writes).
 *
 * Live: every partition answered a poll within LIVE_MS; while not live (the log electing, a partition
 * unreachable, the worker just started), the cache serves nothing and every read builds afresh, so a missed drop
 * cannot leave a stale feed behind.
 */
import type { LogClient } from '@raftkit/log';
import type { StoreCall } from '../../store-protocol.js';
import type { StoreClient } from '../../store-client.js';
import type { FeedCache } from './feed-cache.js';

/** The store partitions' write log (src/workers/store/replica.ts). */
const STORE_TOPIC = 'feed-store';
const POLL_MS = 1_000;
/** A partition whose last poll answered longer ago than this makes the tail not live. */
const LIVE_MS = POLL_MS + 2_000;
const FETCH_RECORDS = 1_000;
/** Snapshots are the one write no feed depends on, and the largest: skipped before parsing. */
const SNAPSHOT_PREFIX = '{"op":"put_snapshot"';

/** What one store write drops from the ranked feeds. */
export function dropFor(call: StoreCall, cache: FeedCache): void {
  switch (call.op) {
    case 'add_inbox':
    case 'remove_inbox':
      for (const e of call.entries) cache.dropViewer(e.user_id);
      return;
    case 'add_outbox':
    case 'remove_outbox':
      for (const e of call.entries) cache.dropAuthor(e.author_id);
      return;
    case 'follow':
      cache.dropViewer(call.follower);
      return;
    case 'mark_seen':
      cache.dropViewer(call.user);
      return;
    case 'put_profile':
      cache.dropAuthor(call.user);
      return;
    case 'threshold':
      cache.dropAll();
      return;
    default:
      // follower (the followee's side), engage, fold, sweep (months no read uses), snapshots: no feed changes.
      return;
  }
}

export class StoreTail {
  private running = true;
  /** Per partition: when its last poll answered (0: not yet at the log's end). */
  private answeredAt: number[] = [];
  readonly stats = { records: 0, malformed: 0 };

  constructor(
    private readonly log: LogClient,
    private readonly stores: StoreClient,
    private readonly cache: FeedCache,
  ) {}

  live(now = Date.now()): boolean {
    if (this.answeredAt.length === 0) return false;
    for (const t of this.answeredAt) if (now - t > LIVE_MS) return false;
    return true;
  }

  /** Runs until close(): finds each partition's end (retried while the log or the topic is not there yet), then polls. */
  async run(): Promise<void> {
    let partitions = 0;
    while (this.running && partitions === 0) {
      try {
        partitions = await this.log.partitions(STORE_TOPIC);
      } catch {
        await new Promise((r) => setTimeout(r, 500));
      }
    }
    this.answeredAt = Array.from({ length: partitions }, () => 0);
    await Promise.all(Array.from({ length: partitions }, (_, p) => this.follow(p)));
  }

  private async follow(partition: number): Promise<void> {
    let position = -1;
    while (this.running) {
      try {
        if (position < 0) {
          // From the end: older writes are in what any build reads.
          position = (await this.log.fetch(STORE_TOPIC, partition, 0, { maxRecords: 1 })).end_offset;
          this.stores.observe(partition, position);
          this.answeredAt[partition] = Date.now();
          continue;
        }
        const answer = await this.log.fetch(STORE_TOPIC, partition, position, {
          maxRecords: FETCH_RECORDS,
          waitMs: POLL_MS,
        });
        // Drops first, then the floor: a build that starts after this reads replicas that have applied them.
        for (const r of answer.records) this.apply(r.value);
        if (answer.records.length > 0) this.stores.observe(partition, answer.next_offset);
        position = answer.next_offset;
        this.answeredAt[partition] = Date.now();
      } catch {
        await new Promise((r) => setTimeout(r, 200));
      }
    }
  }

  private apply(value: string): void {
    this.stats.records++;
    if (value.startsWith(SNAPSHOT_PREFIX)) return;
    let call: StoreCall;
    try {
      call = JSON.parse(value) as StoreCall;
    } catch {
      // Not a store write: the replicas apply it as nothing; so does the cache, but it cannot tell what it meant.
      this.stats.malformed++;
      this.cache.dropAll();
      return;
    }
    try {
      dropFor(call, this.cache);
    } catch {
      this.stats.malformed++;
      this.cache.dropAll();
    }
  }

  close(): void {
    this.running = false;
  }
}
