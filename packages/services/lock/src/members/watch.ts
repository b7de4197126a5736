/**
 * In-memory watches on this member: long polls and server-sent-event streams, fed by the state machine's change
 * notifications as entries are applied. Hints only: a lost watch costs a re-watch, never correctness.
 *
 * Bounded: at most `maxWatchers` watches at once (beyond, 503 `too_many_watchers`), and a stream whose client does
 * not keep up is dropped with a last `dropped` event telling it to watch again from its last revision: when its
 * unsent bytes stay above `slowBytes` for `slowMs`, pass `maxBufferedBytes`, or when all streams together hold
 * more than `totalBufferedBytes`. A burst (one entry expiring 1,000 sessions queued on a lock is 1,000 events) fits
 * under the per-stream limit, so a client that reads is not dropped for it. Without these, 1,000 streams that
 * never read took a member from 68 MB to 1.1 GB over 5,000 lock changes.
 */
import type { ServerResponse } from 'node:http';
import { HttpError } from '@raftkit/http';
import type { LockChange, LockState } from '../machine.js';

interface WatchFilter {
  /** Fire only on changes that grant this session the lock or take it away (so only the head is woken). */
  session: string | null;
}

interface Waiter {
  filter: WatchFilter;
  fire: (change: LockChange) => void;
}

interface WatchLimits {
  /** Watches (long polls and streams) open at once on this member. */
  maxWatchers: number;
  /** A stream with more unsent bytes than this for `slowMs` is too slow. */
  slowBytes: number;
  slowMs: number;
  /** Unsent bytes a stream may hold at all. */
  maxBufferedBytes: number;
  /** Unsent bytes all streams of the member may hold together. */
  totalBufferedBytes: number;
}

export const DEFAULT_WATCH_LIMITS: WatchLimits = {
  maxWatchers: 10_000,
  slowBytes: 64 * 1024,
  slowMs: 5_000,
  maxBufferedBytes: 1024 * 1024,
  totalBufferedBytes: 256 * 1024 * 1024,
};

/** How often the streams' total backlog is summed at most (only ever while some stream is behind). */
const TOTAL_REFRESH_MS = 100;

/** How long a dropped stream gets to take its last event before its connection is cut. */
const DROP_GRACE_MS = 2_000;

export class WatchHub {
  private readonly waiters = new Map<string, Set<Waiter>>();
  private readonly streams = new Set<ServerResponse>();
  private open = 0;
  private total = { bytes: 0, at: 0 };
  /** Streams dropped for not reading (for metrics and tests). */
  dropped = 0;

  constructor(
    private readonly limits: WatchLimits = DEFAULT_WATCH_LIMITS,
    private readonly onDrop: () => void = () => {},
  ) {}

  /** Unsent bytes of all streams, summed at most every TOTAL_REFRESH_MS. */
  private totalBacklog(): number {
    const now = Date.now();
    if (now - this.total.at >= TOTAL_REFRESH_MS) {
      let bytes = 0;
      for (const res of this.streams) bytes += res.writableLength;
      this.total = { bytes, at: now };
    }
    return this.total.bytes;
  }

  /** Watches open now. */
  get watchers(): number {
    return this.open;
  }

  /** Whether any watch (long poll or stream) waits on `name`: the machine builds a change only for those. */
  watches = (name: string): boolean => this.waiters.has(name);

  publish = (change: LockChange): void => {
    const set = this.waiters.get(change.lock.name);
    if (set === undefined) return;
    for (const w of [...set]) {
      if (w.filter.session !== null && change.granted !== w.filter.session && change.lost !== w.filter.session)
        continue;
      w.fire(change);
    }
  };

  /** Throws 503 `too_many_watchers` when the member holds as many watches as it may. */
  admit(): void {
    if (this.open >= this.limits.maxWatchers) {
      throw new HttpError(
        503,
        'too_many_watchers',
        `this member holds ${this.limits.maxWatchers} watches; retry, or watch through another member`,
        {},
        { 'retry-after': '1' },
      );
    }
  }

  /** Wait for the next matching change of `name`, or null after `timeoutMs`. */
  next(name: string, filter: WatchFilter, timeoutMs: number): Promise<LockChange | null> {
    this.admit();
    this.open++;
    return new Promise((resolve) => {
      const set = this.waiters.get(name) ?? new Set();
      this.waiters.set(name, set);
      const waiter: Waiter = {
        filter,
        fire: (change) => {
          done();
          resolve(change);
        },
      };
      const timer = setTimeout(() => {
        done();
        resolve(null);
      }, timeoutMs);
      const done = (): void => {
        clearTimeout(timer);
        if (!set.delete(waiter)) return;
        this.open--;
        if (set.size === 0) this.waiters.delete(name);
      };
      set.add(waiter);
    });
  }

  /** Stream every matching change of `name` as server-sent events until the client goes away or falls behind. */
  stream(name: string, filter: WatchFilter, res: ServerResponse, initial: LockState): void {
    this.admit();
    this.open++;
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
    let lastRevision = initial.revision;
    let ended = false;
    const set = this.waiters.get(name) ?? new Set();
    this.waiters.set(name, set);
    const stop = (): void => {
      if (ended) return;
      ended = true;
      clearInterval(keepAlive);
      set.delete(waiter);
      if (set.size === 0 && this.waiters.get(name) === set) this.waiters.delete(name);
      this.streams.delete(res);
      this.open--;
    };
    const drop = (): void => {
      stop();
      this.dropped++;
      this.onDrop();
      // The last word, whether or not it gets through: watch again from here (long poll or stream).
      res.end(
        `event: dropped\ndata: ${JSON.stringify({ reason: 'slow_reader', rewatch_after_revision: lastRevision })}\n\n`,
      );
      setTimeout(() => res.destroy(), DROP_GRACE_MS).unref();
    };
    let behindSince: number | null = null;
    res.on('drain', () => {
      behindSince = null;
    });
    const write = (text: string): void => {
      if (ended) return;
      const backlog = res.writableLength;
      if (backlog > this.limits.slowBytes) {
        const now = Date.now();
        behindSince ??= now;
        if (
          backlog > this.limits.maxBufferedBytes ||
          now - behindSince > this.limits.slowMs ||
          this.totalBacklog() > this.limits.totalBufferedBytes
        ) {
          drop();
          return;
        }
      } else {
        behindSince = null;
      }
      res.write(text);
    };
    const send = (event: string, data: string): void => write(`event: ${event}\ndata: ${data}\n\n`);
    const waiter: Waiter = {
      filter,
      fire: (change) => {
        send('change', JSON.stringify(changeBody(change)));
        lastRevision = Math.max(lastRevision, change.lock.revision);
      },
    };
    send('state', JSON.stringify(lockBody(initial)));
    set.add(waiter);
    this.streams.add(res);
    // Comments keep proxies from closing an idle stream.
    const keepAlive = setInterval(() => write(': keep-alive\n\n'), 15_000);
    res.on('close', stop);
  }

  close(): void {
    for (const res of this.streams) res.end();
    this.streams.clear();
  }
}

export function lockBody(lock: LockState): Record<string, unknown> {
  return {
    name: lock.name,
    holder_session: lock.holder,
    fencing_token: lock.token,
    queue_length: lock.queue.length,
    revision: lock.revision,
  };
}

export function changeBody(change: LockChange): Record<string, unknown> {
  return { lock: lockBody(change.lock), granted_session: change.granted, released_session: change.lost };
}
