/**
 * The app server's side of the click path. `emit` only appends the click to its partition's open block (the
 * partition of its short code, partition.ts); a block leaves as one stream record (wire.ts) when it holds
 * `click_block` clicks (default 500) or `click_block_ms` (default 100, CLICK_BLOCK_MS) after its first click, whichever comes first.
 * So the redirect path does no encoding and no I/O, and the stream gets one record per block instead of one per
 * click. Each partition has its own stream producer, which buffers (bounded, newest dropped when full) while its
 * stream is unreachable. Nothing here can fail a redirect.
 * Settings: click_buffer (clicks held locally per partition, default 10,000), click_batch (blocks per produce
 * request, default 500), click_block, click_block_ms.
 */
import { randomUUID } from 'node:crypto';
import type { Counter, Logger, MetricsRegistry, PeerAddress } from '@raftkit/http';
import { StreamProducer } from '@raftkit/stream';
import { partitionOf, workersOf } from './partition.js';
import type { ClickRecord } from './record.js';
import { positiveIntSetting } from './settings.js';
import { encodeClicks } from './wire.js';

/**
 * A block's longest wait: the click stream's group-commit window (CLICK_COMMIT_MS), since a block that leaves sooner
 * waits for that commit anyway. 20 ms against 5 cost the app server about 2 us less per click and the stream about
 * 1 us (fewer timers, records and produce calls; packages/services/shortlink/README.md "Speed"); 50 against 20 took another
 * ~3 us per redirect off the stream at 6,000 redirects/s; 100 against 50 (with the stream's commits) another 1.6 us
 * at 10,000 redirects/s (roles.ts). A block still leaves at `click_block` (500) clicks first: 500 clicks with
 * referer and user agent at their 512-character cap stay under the stream's 1 MiB record limit, 1,000 would not.
 */
export const CLICK_BLOCK_MS = 100;

/** How long stop() waits for buffered clicks to reach the stream before counting them as dropped. */
const STOP_FLUSH_MS = 1_000;

/** One partition's producer and open block. */
interface Partition {
  producer: StreamProducer;
  /** One id per emitter process and partition: seqs are per partition, so each partition's are consecutive. */
  id: string;
  seq: number;
  block: ClickRecord[];
}

export class ClickEmitter {
  private readonly partitions: Partition[];
  private readonly emitted: Counter;
  private readonly logger: Logger;
  private readonly blockClicks: number;
  private readonly blockMs: number;
  private timer: NodeJS.Timeout | undefined;

  constructor(options: {
    workers: PeerAddress[];
    token: string;
    settings: Record<string, string>;
    logger: Logger;
    metrics: MetricsRegistry;
  }) {
    this.logger = options.logger;
    this.emitted = options.metrics.counter('clicks_emitted_total', 'Click records emitted by redirects');
    this.blockClicks = positiveIntSetting(options.settings, 'click_block', 500);
    this.blockMs = positiveIntSetting(options.settings, 'click_block_ms', CLICK_BLOCK_MS);
    const streams = workersOf(options.workers, 'stream').filter((w) => w.tcpAddress !== undefined);
    if (streams.length === 0) options.logger.log('warn', 'no stream worker: every click will be dropped');
    const process = randomUUID();
    // One set of click series per app server, summed over the partitions' producers.
    const m = options.metrics;
    const sent = m.counter('clicks_sent_total', 'Clicks acknowledged by the stream');
    const dropped = m.counter('clicks_dropped_total', 'Clicks dropped, by reason (buffer_full, refused, shutdown)');
    m.gauge('clicks_buffered', 'Clicks held locally: in open blocks, waiting or unacknowledged').set(() => this.held());
    m.gauge('clicks_connected', 'Stream partitions this app server is connected to').set(
      () => this.partitions.filter((p) => p.producer.stats().connected).length,
    );
    const meter = {
      sent: (n: number) => sent.inc(n),
      dropped: (n: number, reason: string) => dropped.inc(n, { reason }),
    };
    this.partitions = (streams.length === 0 ? [undefined] : streams).map((stream: PeerAddress | undefined, p) => ({
      producer: new StreamProducer({
        address: () => stream?.tcpAddress,
        token: options.token,
        bufferRecords: positiveIntSetting(options.settings, 'click_buffer', 10_000),
        batchRecords: positiveIntSetting(options.settings, 'click_batch', 500),
        logger: options.logger,
        meter,
      }),
      id: `${process}:${p}`,
      seq: 0,
      block: [],
    }));
  }

  emit(record: ClickRecord): void {
    this.emitted.inc();
    const part =
      this.partitions.length === 1
        ? this.partitions[0]!
        : this.partitions[partitionOf(record.short_code, this.partitions.length)]!;
    part.block.push(record);
    if (part.block.length >= this.blockClicks) this.send(part);
    else this.timer ??= setTimeout(() => this.flushBlocks(), this.blockMs);
  }

  /** Clicks held by this emitter: in open blocks, plus queued or unacknowledged in the producers. */
  held(): number {
    return this.partitions.reduce((n, p) => n + p.block.length + p.producer.stats().buffered, 0);
  }

  /** Sends every open block now. */
  flushBlocks(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    for (const part of this.partitions) if (part.block.length > 0) this.send(part);
  }

  private send(part: Partition): void {
    const clicks = part.block;
    part.block = [];
    const firstSeq = part.seq;
    part.seq += clicks.length;
    try {
      // A block that does not fit the buffer is cut: its newest clicks are the ones dropped (and counted).
      const fits = Math.min(clicks.length, part.producer.room());
      if (fits < clicks.length) part.producer.dropFull(clicks.length - fits);
      if (fits > 0)
        part.producer.send(
          encodeClicks(part.id, firstSeq, fits === clicks.length ? clicks : clicks.slice(0, fits)),
          fits,
        );
    } catch (e) {
      // Unreachable with well-typed input; a click is never worth a failed redirect.
      this.logger.log('error', 'click emit failed', { error: String(e) });
    }
  }

  async stop(): Promise<void> {
    this.flushBlocks();
    await Promise.all(this.partitions.map((p) => p.producer.flush(STOP_FLUSH_MS)));
    await Promise.all(this.partitions.map((p) => p.producer.close()));
  }
}
