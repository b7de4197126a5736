/**
 * Gathers what reaches a process for one key (a Raft group, a partition) during one turn of the event loop into
 * batches, so a busy group pays for one Raft entry, one encoding and one apply per turn instead of one per request.
 * Each item keeps its own answer: `send` resolves with one result per item, in order. Batches stay pipelined: one
 * does not wait for the one before it. The event log's appends and the auction writer's bids go through it.
 */

export interface TurnBatcherOptions<C, I, R> {
  /** The most items one batch carries (the state machine's cap on one command). */
  maxItems: number;
  /** The most bytes one batch carries (by the sizes given to `submit`); a single larger item still goes alone. */
  maxBytes?: number;
  /**
   * Sends one batch with the context of the turn's first submit (e.g. the group's propose), resolving with one
   * result per item in order; a rejection (or a wrong number of results) fails every item of the batch.
   */
  send(context: C, items: I[]): Promise<R[]>;
}

interface Waiting<I, R> {
  item: I;
  bytes: number;
  resolve: (result: R) => void;
  reject: (error: unknown) => void;
}

export class TurnBatcher<C, I, R> {
  private readonly waiting = new Map<string, { context: C; items: Array<Waiting<I, R>> }>();
  /** Batches sent and items they carried, for metrics. */
  batches = 0;
  items = 0;

  constructor(private readonly options: TurnBatcherOptions<C, I, R>) {}

  /** Items of `key` waiting for the end of this turn, for backpressure. */
  pending(key: string): number {
    return this.waiting.get(key)?.items.length ?? 0;
  }

  /** Sends `item` with the next batch of `key`; `bytes` counts towards `maxBytes`. */
  submit(key: string, context: C, item: I, bytes = 0): Promise<R> {
    return new Promise((resolve, reject) => {
      let batch = this.waiting.get(key);
      if (batch === undefined) {
        batch = { context, items: [] };
        this.waiting.set(key, batch);
        setImmediate(() => this.flush(key));
      }
      batch.items.push({ item, bytes, resolve, reject });
    });
  }

  private flush(key: string): void {
    const batch = this.waiting.get(key);
    this.waiting.delete(key);
    if (batch === undefined) return;
    const { items } = batch;
    const maxBytes = this.options.maxBytes ?? Infinity;
    for (let from = 0; from < items.length; ) {
      let to = from + 1;
      let bytes = items[from]!.bytes;
      while (to < items.length && to - from < this.options.maxItems && bytes + items[to]!.bytes <= maxBytes)
        bytes += items[to++]!.bytes;
      this.send(batch.context, items.slice(from, to));
      from = to;
    }
  }

  private send(context: C, items: Array<Waiting<I, R>>): void {
    this.batches++;
    this.items += items.length;
    const fail = (error: unknown): void => {
      for (const w of items) w.reject(error);
    };
    let sent: Promise<R[]>;
    try {
      sent = this.options.send(
        context,
        items.map((w) => w.item),
      );
    } catch (error) {
      fail(error);
      return;
    }
    sent.then((results) => {
      if (results.length !== items.length)
        return fail(new Error(`a batch of ${items.length} answered ${results.length} results`));
      items.forEach((w, n) => w.resolve(results[n]!));
    }, fail);
  }
}
