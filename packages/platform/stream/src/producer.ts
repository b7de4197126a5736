/**
 * The producer client. `send` never blocks and never throws: records wait in a bounded local buffer while the
 * stream is unreachable, and when the buffer is full the NEWEST record is dropped (and counted), so records
 * already waiting keep their order and the oldest clicks are not sacrificed for the newest. A background loop
 * connects (with exponential backoff and jitter), pipelines full batches and drops each batch once acknowledged.
 * Delivery is at-least-once: a batch written but not acknowledged before a crash is sent again.
 */
import type { Logger, MetricsRegistry } from '@raftkit/http';
import { RpcConnection, type RpcError } from '@raftkit/rpc';
import { MAX_FRAME_BYTES, type Request } from './protocol.js';
import { RecordQueue } from './queue.js';

export interface ProducerOptions {
  /** Where the stream server is now (asked again at each connect); undefined when there is none. */
  address: () => string | undefined;
  token: string;
  /**
   * Units held locally, waiting or unacknowledged, before new records are dropped (default 10,000). A record
   * counts as its `send` weight (1 unless told): a producer whose records each carry many items (e.g. a block of
   * clicks) bounds and counts the items.
   */
  bufferRecords?: number;
  /** Records per produce request (default 500). */
  batchRecords?: number;
  /** Larger records are refused by `send` (default 1 MiB, the log's default limit). */
  maxRecordBytes?: number;
  /** Unacknowledged requests on the wire (default 4). */
  maxInFlight?: number;
  /** A connection that does not acknowledge within this is cut and retried (default 5 s). */
  ackTimeoutMs?: number;
  minBackoffMs?: number;
  maxBackoffMs?: number;
  logger?: Logger;
  metrics?: MetricsRegistry;
  /** Metric names start with this (default "stream_producer"). */
  metricPrefix?: string;
  /**
   * Instead of `metrics`: where to count sent and dropped units, for an owner that runs several producers and
   * renders their sum (buffered and connected are then its business, from `stats()`).
   */
  meter?: ProducerMeter;
}

export type DropReason = 'buffer_full' | 'refused' | 'shutdown';

export interface ProducerMeter {
  sent(units: number): void;
  dropped(units: number, reason: DropReason): void;
}

/** In units: a record counts as its `send` weight. */
export interface ProducerStats {
  /** Units held locally (waiting plus unacknowledged). */
  buffered: number;
  /** Units acknowledged by the stream. */
  sent: number;
  /** Units given up on: buffer full, refused by the server, or still held at close. */
  dropped: number;
  connected: boolean;
}

/** Keeps each produce frame far below the protocol's frame limit. */
const BATCH_BYTES = 4 << 20;

export class StreamProducer {
  private readonly queue = new RecordQueue();
  private readonly inFlight: Uint8Array[][] = [];
  private connection: RpcConnection | undefined;
  private connecting = false;
  private stopped = false;
  private pumpScheduled = false;
  private reconnectTimer: NodeJS.Timeout | undefined;
  private failures = 0;
  private sent = 0;
  private dropped = 0;
  /** Units held (queued plus in flight), kept as a sum so `send` does not walk the batches. */
  private held = 0;
  /** Weights of the records that are not 1 (the common case stores nothing). */
  private readonly weights = new WeakMap<Uint8Array, number>();
  private readonly drains = new Set<() => void>();
  private readonly bufferRecords: number;
  private readonly batchRecords: number;
  private readonly maxInFlight: number;
  private readonly ackTimeoutMs: number;
  private readonly countSent?: (n: number) => void;
  private readonly countDropped?: (n: number, reason: DropReason) => void;

  constructor(private readonly options: ProducerOptions) {
    this.bufferRecords = options.bufferRecords ?? 10_000;
    this.batchRecords = options.batchRecords ?? 500;
    this.maxInFlight = options.maxInFlight ?? 4;
    this.ackTimeoutMs = options.ackTimeoutMs ?? 5_000;
    const metrics = options.metrics;
    if (options.meter !== undefined) {
      const meter = options.meter;
      this.countSent = (n) => meter.sent(n);
      this.countDropped = (n, reason) => meter.dropped(n, reason);
    } else if (metrics !== undefined) {
      const prefix = options.metricPrefix ?? 'stream_producer';
      const sent = metrics.counter(`${prefix}_sent_total`, 'Records acknowledged by the stream');
      const dropped = metrics.counter(
        `${prefix}_dropped_total`,
        'Records dropped, by reason (buffer_full, refused, shutdown)',
      );
      metrics.gauge(`${prefix}_buffered`, 'Records held locally: waiting or unacknowledged').set(() => this.buffered);
      metrics.gauge(`${prefix}_connected`, '1 while connected to the stream').set(() => (this.connection ? 1 : 0));
      this.countSent = (n) => sent.inc(n);
      this.countDropped = (n, reason) => dropped.inc(n, { reason });
    }
    this.connect();
  }

  private get buffered(): number {
    return this.held;
  }

  private weightOf(records: Uint8Array[]): number {
    let n = 0;
    for (const r of records) n += this.weights.get(r) ?? 1;
    return n;
  }

  /**
   * Queues a record worth `weight` units (default 1); false when it was dropped whole (it would take the buffer
   * past its bound, or the producer is closed).
   */
  send(record: Uint8Array, weight = 1): boolean {
    const full = this.held + weight > this.bufferRecords;
    if (this.stopped || full || record.length > (this.options.maxRecordBytes ?? 1 << 20)) {
      this.drop(weight, this.stopped ? 'shutdown' : full ? 'buffer_full' : 'refused');
      return false;
    }
    if (weight !== 1) this.weights.set(record, weight);
    this.held += weight;
    this.queue.push(record);
    this.schedulePump();
    return true;
  }

  /** Units `send` would still take now (0 once closed): lets a caller cut a block to fit instead of losing it whole. */
  room(): number {
    return this.stopped ? 0 : Math.max(0, this.bufferRecords - this.held);
  }

  /** Counts `units` the caller gave up on because they did not fit (see `room`) as dropped, `buffer_full`. */
  dropFull(units: number): void {
    this.drop(units, 'buffer_full');
  }

  stats(): ProducerStats {
    return {
      buffered: this.buffered,
      sent: this.sent,
      dropped: this.dropped,
      connected: this.connection !== undefined,
    };
  }

  /** Resolves true once nothing is held locally, false if `timeoutMs` passes first. */
  flush(timeoutMs: number): Promise<boolean> {
    if (this.buffered === 0) return Promise.resolve(true);
    return new Promise((resolve) => {
      const done = (ok: boolean) => {
        this.drains.delete(onDrain);
        clearTimeout(timer);
        resolve(ok);
      };
      const onDrain = () => done(true);
      const timer = setTimeout(() => done(false), timeoutMs);
      this.drains.add(onDrain);
    });
  }

  /** Stops at once: whatever is still held counts as dropped ("shutdown"). Call flush first to deliver it. */
  async close(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    clearTimeout(this.reconnectTimer);
    const held = this.held;
    this.queue.clear();
    this.inFlight.splice(0);
    this.held = 0;
    this.drop(held, 'shutdown');
    this.connection?.close();
    this.connection = undefined;
  }

  private drop(n: number, reason: DropReason): void {
    if (n === 0) return;
    this.dropped += n;
    this.countDropped?.(n, reason);
  }

  private connect(): void {
    if (this.stopped || this.connecting || this.connection) return;
    const address = this.options.address();
    if (address === undefined) return this.retryLater('no stream address');
    this.connecting = true;
    RpcConnection.open({
      address,
      token: this.options.token,
      timeoutMs: this.ackTimeoutMs,
      maxFrameBytes: MAX_FRAME_BYTES,
    }).then(
      (connection) => {
        this.connecting = false;
        if (this.stopped) return connection.close();
        this.failures = 0;
        this.connection = connection;
        connection.onClose((reason) => this.onDisconnect(connection, reason));
        this.options.logger?.log('info', 'stream producer connected', { address });
        this.pump();
      },
      (e: Error) => {
        this.connecting = false;
        this.retryLater(e.message);
      },
    );
  }

  private retryLater(reason: string): void {
    if (this.stopped) return;
    this.failures++;
    const min = this.options.minBackoffMs ?? 50;
    const max = this.options.maxBackoffMs ?? 2_000;
    const delay = Math.min(max, min * 2 ** Math.min(this.failures - 1, 16)) * (0.5 + Math.random() / 2);
    if (this.failures === 1 || this.failures % 20 === 0)
      this.options.logger?.log('warn', 'stream unreachable, buffering', {
        reason,
        failures: this.failures,
        buffered: this.buffered,
      });
    this.reconnectTimer = setTimeout(() => this.connect(), delay);
  }

  private onDisconnect(connection: RpcConnection, reason: RpcError): void {
    if (this.connection !== connection) return;
    this.connection = undefined;
    // Unacknowledged batches go back first, in order: they may be written already (at-least-once).
    this.queue.unshift(this.inFlight.splice(0).flat());
    this.retryLater(reason.message);
  }

  private schedulePump(): void {
    if (this.pumpScheduled || this.connection === undefined || this.inFlight.length >= this.maxInFlight) return;
    this.pumpScheduled = true;
    // Records emitted in the same tick share a request.
    setImmediate(() => {
      this.pumpScheduled = false;
      this.pump();
    });
  }

  private pump(): void {
    const connection = this.connection;
    if (connection === undefined) return;
    while (this.inFlight.length < this.maxInFlight && this.queue.size > 0) {
      // A partial batch waits while a request is on the wire: that request's ack (one group commit later) sends it
      // with whatever arrived meanwhile. A busy producer thus makes one socket write per commit, not one per
      // event-loop turn (each write of a tiny frame cost more CPU than the records in it); full batches pipeline.
      if (this.inFlight.length > 0 && this.queue.size < this.batchRecords) break;
      const batch = this.queue.take(this.batchRecords, BATCH_BYTES);
      this.inFlight.push(batch);
      connection.call({ t: 'produce', records: batch } satisfies Request, { timeoutMs: this.ackTimeoutMs }).then(
        () => this.settle(batch, 'sent'),
        (e: RpcError) => {
          if (e.code === 'bad_request') return this.settle(batch, 'refused');
          // A server that cannot append, or does not acknowledge in time, is treated like one that is down: the
          // connection is cut and its unacknowledged batches go again, in order, on a new one.
          if (this.connection === connection) connection.close(e);
        },
      );
    }
  }

  private settle(batch: Uint8Array[], outcome: 'sent' | 'refused'): void {
    const i = this.inFlight.indexOf(batch);
    if (i < 0) return;
    this.inFlight.splice(i, 1);
    const units = this.weightOf(batch);
    this.held -= units;
    if (outcome === 'sent') {
      this.sent += units;
      this.countSent?.(units);
    } else {
      this.options.logger?.log('warn', 'stream refused a batch', { records: batch.length, units });
      this.drop(units, 'refused');
    }
    if (this.buffered === 0) for (const drain of [...this.drains]) drain();
    this.pump();
  }
}
