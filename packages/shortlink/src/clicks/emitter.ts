/**
 * The app server's side of the click path: `emit` encodes the click and hands it to the stream producer, which
 * buffers (bounded, newest dropped when full) while the stream is unreachable. Nothing here can fail a redirect.
 * Settings: click_buffer (records held locally, default 10,000), click_batch (records per produce request,
 * default 500).
 */
import { randomUUID } from 'node:crypto';
import type { Counter, Logger, MetricsRegistry, PeerAddress } from '@raftkit/http';
import { StreamProducer } from '@raftkit/stream';
import type { ClickRecord } from './record.js';
import { positiveIntSetting } from './settings.js';
import { encodeClick } from './wire.js';

/** How long stop() waits for buffered clicks to reach the stream before counting them as dropped. */
const STOP_FLUSH_MS = 1_000;

export class ClickEmitter {
  private readonly producer: StreamProducer;
  private readonly producerId = randomUUID();
  private seq = 0;
  private readonly emitted: Counter;
  private readonly logger: Logger;

  constructor(options: { workers: PeerAddress[]; token: string; settings: Record<string, string>; logger: Logger; metrics: MetricsRegistry }) {
    this.logger = options.logger;
    this.emitted = options.metrics.counter('clicks_emitted_total', 'Click records emitted by redirects');
    const stream = options.workers.find((w) => w.role === 'stream' && w.tcpAddress !== undefined);
    if (stream === undefined) options.logger.log('warn', 'no stream worker: every click will be dropped');
    this.producer = new StreamProducer({
      address: () => stream?.tcpAddress,
      token: options.token,
      bufferRecords: positiveIntSetting(options.settings, 'click_buffer', 10_000),
      batchRecords: positiveIntSetting(options.settings, 'click_batch', 500),
      logger: options.logger,
      metrics: options.metrics,
      metricPrefix: 'clicks',
    });
  }

  emit(record: ClickRecord): void {
    try {
      this.emitted.inc();
      this.producer.send(encodeClick(this.producerId, this.seq++, record));
    } catch (e) {
      // Unreachable with well-typed input; a click is never worth a failed redirect.
      this.logger.log('error', 'click emit failed', { error: String(e) });
    }
  }

  async stop(): Promise<void> {
    await this.producer.flush(STOP_FLUSH_MS);
    await this.producer.close();
  }
}
