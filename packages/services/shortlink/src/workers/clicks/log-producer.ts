/**
 * One app server's sender of click blocks to one partition of the click topic (click-log.ts). Blocks wait in a
 * bounded local buffer (in clicks; the newest dropped and counted when it is full) and leave in order, one append
 * at a time: an append whose outcome is unknown (a timeout, a failover, an unreachable log) is sent again, the same
 * blocks in the same order, before anything newer. So a block is in the log before every later block of its
 * emitter, maybe more than once; the consumer counts each click once by its emitter's sequence number (CLICKS.md
 * "Exactly-once"), which is why the appends need no producer id of the log's own.
 */
import type { LogClient } from '@raftkit/log';
import { LogError } from '@raftkit/log';
import type { Logger } from '@raftkit/http';
import { CLICK_TOPIC, encodeValue } from './click-log.js';

type DropReason = 'buffer_full' | 'refused' | 'shutdown';

interface ClickMeter {
  sent(clicks: number): void;
  dropped(clicks: number, reason: DropReason): void;
}

/** Records per append (the log takes at most 1,000). */
const APPEND_RECORDS = 1_000;
/** Value characters per append: the log's request body is at most 1 MiB. */
const APPEND_CHARS = 900 * 1024;
const RETRY_MIN_MS = 50;
const RETRY_MAX_MS = 2_000;

interface Block {
  value: string;
  clicks: number;
}

export class ClickLogProducer {
  private readonly queue: Block[] = [];
  private inFlight: Block[] = [];
  private held = 0;
  private connected = false;
  private stopped = false;
  private failures = 0;
  private retryTimer: NodeJS.Timeout | undefined;
  private readonly drains = new Set<() => void>();

  constructor(
    private readonly options: {
      log: LogClient;
      partition: number;
      bufferClicks: number;
      logger: Logger;
      meter: ClickMeter;
      /** Resolves once the topic exists (appends before that would be refused 404). */
      ready: Promise<void>;
    },
  ) {}

  /** Clicks `send` would still take now (0 once closed): a caller cuts a block to fit instead of losing it whole. */
  room(): number {
    return this.stopped ? 0 : Math.max(0, this.options.bufferClicks - this.held);
  }

  dropFull(clicks: number): void {
    this.options.meter.dropped(clicks, 'buffer_full');
  }

  /** Queues one block of `clicks` clicks (the caller checked `room`). */
  send(block: Uint8Array, clicks: number): void {
    if (this.stopped) {
      this.options.meter.dropped(clicks, 'shutdown');
      return;
    }
    this.held += clicks;
    this.queue.push({ value: encodeValue(block), clicks });
    this.pump();
  }

  stats(): { buffered: number; connected: boolean } {
    return { buffered: this.held, connected: this.connected };
  }

  /** Resolves true once nothing is held, false when `timeoutMs` passes first. */
  flush(timeoutMs: number): Promise<boolean> {
    if (this.held === 0) return Promise.resolve(true);
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

  /** Stops at once; what is still held counts as dropped (`shutdown`). */
  close(): void {
    if (this.stopped) return;
    this.stopped = true;
    clearTimeout(this.retryTimer);
    if (this.held > 0) this.options.meter.dropped(this.held, 'shutdown');
    this.held = 0;
    this.queue.splice(0);
    this.inFlight = [];
  }

  private pump(): void {
    if (this.stopped || this.inFlight.length > 0 || this.retryTimer !== undefined || this.queue.length === 0) return;
    let chars = 0;
    let n = 0;
    while (n < this.queue.length && n < APPEND_RECORDS) {
      const next = this.queue[n]!.value.length;
      if (n > 0 && chars + next > APPEND_CHARS) break;
      chars += next;
      n++;
    }
    this.inFlight = this.queue.splice(0, n);
    void this.append(this.inFlight);
  }

  private async append(batch: Block[]): Promise<void> {
    const clicks = batch.reduce((s, b) => s + b.clicks, 0);
    let outcome: 'sent' | 'refused' | 'retry';
    try {
      await this.options.ready;
      await this.options.log.append(
        CLICK_TOPIC,
        this.options.partition,
        batch.map((b) => ({ value: b.value })),
      );
      outcome = 'sent';
    } catch (e) {
      // A body or record the log refuses as such will be refused again: give it up (counted). Anything else
      // (503, 429, a timeout, a connection failure, a topic not created yet) may have stored it or not: resend.
      const status = e instanceof LogError ? e.status : 0;
      outcome = status === 400 || status === 413 ? 'refused' : 'retry';
      if (outcome === 'retry') {
        this.failures++;
        if (this.failures === 1 || this.failures % 20 === 0)
          this.options.logger.log('warn', 'click log unreachable; resending', {
            partition: this.options.partition,
            error: (e as Error).message,
            failures: this.failures,
          });
      } else {
        this.options.logger.log('error', 'click log refused a batch', { error: (e as Error).message });
      }
    }
    if (this.stopped || this.inFlight !== batch) return;
    if (outcome === 'retry') {
      this.connected = false;
      const delay = Math.min(RETRY_MAX_MS, RETRY_MIN_MS * 2 ** Math.min(this.failures - 1, 10));
      this.retryTimer = setTimeout(() => {
        this.retryTimer = undefined;
        if (this.stopped) return;
        void this.append(batch);
      }, delay);
      return;
    }
    this.failures = 0;
    this.connected = outcome === 'sent' || this.connected;
    this.inFlight = [];
    this.held -= clicks;
    if (outcome === 'sent') this.options.meter.sent(clicks);
    else this.options.meter.dropped(clicks, 'refused');
    if (this.held === 0) for (const drain of [...this.drains]) drain();
    this.pump();
  }
}
