/**
 * Group commit of creates on an application server: while one batch is on its way through the log, the creates
 * that arrive wait in a queue, and the whole queue (up to a size bound) goes as the next batch the moment the
 * previous one returns. An idle server sends a lone create at once (after the current I/O turn, so creates read
 * together leave together), so batching costs no timer wait; a busy one turns N member calls and N Raft entries
 * into one. Each create's promise settles with its own outcome, and only once its batch has committed.
 */
import type { CreateSpec } from '../../machine.js';

interface BatchLimits {
  /** Links per batch. */
  maxLinks: number;
  /** Approximate JSON bytes per batch: stays under the members' 1 MiB body limit whatever the URLs' lengths. */
  maxBytes: number;
}

export const BATCH_DEFAULTS: BatchLimits = { maxLinks: 256, maxBytes: 512 * 1024 };

/** JSON overhead of one link besides its strings (field names, numbers, punctuation), rounded up. */
const LINK_OVERHEAD_BYTES = 160;

interface Waiting<R> {
  spec: CreateSpec;
  bytes: number;
  resolve(result: R): void;
  reject(error: unknown): void;
}

export class CreateBatcher<R> {
  private queue: Array<Waiting<R>> = [];
  private busy = false;

  /**
   * `send` delivers one batch and answers one result per link, in order; if it throws, every create of the batch
   * fails with that error (their outcome is unknown, as for a single create whose answer was lost), and so does
   * every create waiting for the next batch (their outcome is known: not written).
   */
  constructor(
    private readonly send: (links: CreateSpec[]) => Promise<R[]>,
    private readonly limits: BatchLimits = BATCH_DEFAULTS,
    private readonly onBatch: (size: number) => void = () => undefined,
  ) {}

  create(spec: CreateSpec): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      // Strings here are ASCII (URLs are stored percent-encoded; codes and users have ASCII alphabets).
      const bytes = LINK_OVERHEAD_BYTES + spec.long_url.length + spec.code.length + spec.created_by.length;
      this.queue.push({ spec, bytes, resolve, reject });
      if (!this.busy) {
        this.busy = true;
        setImmediate(() => this.flush());
      }
    });
  }

  /** Creates waiting for the next batch. */
  get waiting(): number {
    return this.queue.length;
  }

  private flush(): void {
    if (this.queue.length === 0) {
      this.busy = false;
      return;
    }
    let count = 0;
    let bytes = 0;
    // At least one link per batch, however long; then as many as fit both bounds.
    while (
      count < this.queue.length &&
      count < this.limits.maxLinks &&
      (count === 0 || bytes + this.queue[count]!.bytes <= this.limits.maxBytes)
    ) {
      bytes += this.queue[count]!.bytes;
      count++;
    }
    const batch = this.queue.splice(0, count);
    this.onBatch(batch.length);
    this.send(batch.map((w) => w.spec))
      .then((results) => {
        if (results.length !== batch.length)
          throw new Error(`the store answered ${results.length} results for ${batch.length} links`);
        batch.forEach((w, i) => w.resolve(results[i]!));
      })
      .catch((error: unknown) => {
        // The store did not answer within the client's deadline: the creates queued meanwhile fail with the batch
        // (they were never sent, so nothing of theirs was written) instead of each waiting out a deadline of its own.
        for (const w of [...batch, ...this.queue.splice(0)]) w.reject(error);
      })
      .finally(() => this.flush());
  }
}
