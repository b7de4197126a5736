/**
 * The app server's side of the click path. `emit` only appends the click to its partition's open block (the
 * partition of its short code, partition.ts); a block leaves as one record of the click log (wire.ts) when it holds
 * `click_block` clicks (default 500) or `click_block_ms` (default 100, CLICK_BLOCK_MS) after its first click, whichever comes first.
 * So the redirect path does no encoding and no I/O, and the click log gets one record per block instead of one per
 * click. Each partition has its own producer (log-producer.ts), which buffers (bounded, newest dropped when full)
 * while the log is unreachable. Nothing here can fail a redirect.
 * Settings: click_buffer (clicks held locally per partition, default 10,000), click_partitions, click_block,
 * click_block_ms.
 */
import { randomUUID } from 'node:crypto';
import type { Counter, Logger, MetricsRegistry, PeerAddress } from '@raftkit/http';
import type { LogClient } from '@raftkit/log';
import { clickLogClient, clickLogEndpoints, clickPartitions, ensureClickTopic } from './click-log.js';
import { ClickLogProducer } from './log-producer.js';
import { partitionOf } from './partition.js';
import type { ClickRecord } from './record.js';
import { positiveIntSetting } from './settings.js';
import { encodeClicks } from './wire.js';

/**
 * A block's longest wait. Blocks are what keeps the click path cheap (one log record, one msgpack value per block
 * instead of per click): a longer wait makes fewer, fuller blocks and less work per click on both sides (README
 * "Speed"), and an append to the log is a Raft round on three processes, a fixed cost that blocks amortise. A block still leaves at `click_block` (500) clicks first: 500 clicks with
 * referer and user agent at their 512-character cap, in base64, stay under the log's 1 MiB append body.
 */
const CLICK_BLOCK_MS = 100;

/** How long stop() waits for buffered clicks to reach the log before counting them as dropped. */
const STOP_FLUSH_MS = 1_000;

/** One partition's producer and open block. */
interface Partition {
  producer: ClickLogProducer;
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
  private readonly log: LogClient;
  private stopped = false;

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
    const partitions = clickPartitions(options.settings);
    if (clickLogEndpoints(options.workers).length === 0)
      options.logger.log('warn', 'no click log worker: every click will wait in the buffer, then be dropped');
    this.log = clickLogClient(options.workers, options.token);
    // The topic is created by whichever process comes first (the same settings again are no error); appends wait for it.
    const ready = this.createTopic(partitions);
    ready.catch(() => undefined); // only a stop ends it unresolved; producers then hold nothing
    const process = randomUUID();
    // One set of click series per app server, summed over the partitions' producers.
    const m = options.metrics;
    const sent = m.counter('clicks_sent_total', 'Clicks acknowledged by the click log');
    const dropped = m.counter('clicks_dropped_total', 'Clicks dropped, by reason (buffer_full, refused, shutdown)');
    m.gauge('clicks_buffered', 'Clicks held locally: in open blocks, waiting or unacknowledged').set(() => this.held());
    m.gauge('clicks_connected', 'Click log partitions whose last append succeeded').set(
      () => this.partitions.filter((p) => p.producer.stats().connected).length,
    );
    const meter = {
      sent: (n: number) => sent.inc(n),
      dropped: (n: number, reason: string) => dropped.inc(n, { reason }),
    };
    const bufferClicks = positiveIntSetting(options.settings, 'click_buffer', 10_000);
    this.partitions = Array.from({ length: partitions }, (_, p) => ({
      producer: new ClickLogProducer({
        log: this.log,
        partition: p,
        bufferClicks,
        logger: options.logger,
        meter,
        ready,
      }),
      id: `${process}:${p}`,
      seq: 0,
      block: [],
    }));
  }

  /** Creates the click topic, retrying until the log answers (or the emitter stops). */
  private async createTopic(partitions: number): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      try {
        await ensureClickTopic(this.log, partitions);
        return;
      } catch (e) {
        if (this.stopped) throw e;
        if (attempt % 20 === 0)
          this.logger.log('warn', 'click topic not created yet', { error: (e as Error).message, attempt });
        await new Promise((resolve) => setTimeout(resolve, Math.min(2_000, 100 * 2 ** Math.min(attempt, 5))));
      }
    }
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
    this.stopped = true;
    for (const p of this.partitions) p.producer.close();
    await this.log.close();
  }
}
