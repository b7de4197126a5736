/**
 * The application server's side of id allocation: it holds a leased batch of ids and hands them out one by one;
 * when the batch is 80% used it leases the next in the background, so a create never waits for a lease unless
 * creates outrun the log. Ids whose code is reserved are skipped. Nothing here is persisted: a restarted server
 * leases a fresh batch, and the ids left in the old one are never issued by anyone.
 */
import { codeForId } from '../../codes.js';

export interface Batch {
  start: number;
  end: number;
}

/** How many leased batches a server remembers for GET /internal/leases. */
const HISTORY = 1000;

export class CodeAllocator {
  private current: (Batch & { next: number }) | null = null;
  private ready: Batch | null = null;
  private pending: Promise<void> | null = null;
  private readonly leased: Batch[] = [];
  private issued = 0;

  constructor(
    private readonly lease: () => Promise<Batch>,
    private readonly prefetchAt = 0.8,
  ) {}

  /** The next code of this server's batches (waits for a lease only when none is at hand). */
  async nextCode(): Promise<string> {
    for (;;) {
      const id = await this.nextId();
      const code = codeForId(id);
      if (code !== null) return code;
    }
  }

  private async nextId(): Promise<number> {
    for (;;) {
      const c = this.current;
      if (c !== null && c.next < c.end) {
        const id = c.next++;
        this.issued++;
        if (this.ready === null && c.next - c.start >= (c.end - c.start) * this.prefetchAt)
          void this.fetch().catch(() => undefined);
        return id;
      }
      if (this.ready !== null) {
        this.current = { ...this.ready, next: this.ready.start };
        this.ready = null;
        continue;
      }
      await this.fetch();
    }
  }

  /** One lease in flight at a time; concurrent callers share it. A failure reaches the callers waiting on it. */
  private fetch(): Promise<void> {
    this.pending ??= this.lease()
      .then((batch) => {
        this.ready = batch;
        this.leased.push(batch);
        if (this.leased.length > HISTORY) this.leased.shift();
      })
      .finally(() => {
        this.pending = null;
      });
    return this.pending;
  }

  /** What this server was given, for allocator checks: its batches (latest last) and how many ids it issued. */
  status(): { batches: Batch[]; current: (Batch & { next: number }) | null; issued: number } {
    return {
      batches: [...this.leased],
      current: this.current === null ? null : { ...this.current },
      issued: this.issued,
    };
  }
}
