/**
 * A TurnBatcher whose batches never carry two items on the same name (a key, a lock): the n-th item of a turn on
 * a name goes to the turn's n-th batch. A machine that stamps a name's revision with the entry's index needs this,
 * or two changes to one name would share one revision and a watcher or a client could not tell them apart.
 * Batches are sent in the order they were opened, so the log keeps each name's items in the order they arrived.
 */
import { TurnBatcher, type TurnBatcherOptions } from './turn-batcher.js';

export class DistinctNameBatcher<C, I, R> {
  private readonly batcher: TurnBatcher<C, I, R>;
  /** Items per name in this turn; cleared as the turn's batches go. */
  private readonly turn = new Map<string, number>();

  constructor(options: TurnBatcherOptions<C, I, R>) {
    this.batcher = new TurnBatcher(options);
  }

  /** Batches sent, for metrics. */
  get batches(): number {
    return this.batcher.batches;
  }

  /** Items those batches carried. */
  get items(): number {
    return this.batcher.items;
  }

  /** Sends `item` (on `name`) with a batch of this turn that holds nothing else on `name`. */
  submit(name: string, context: C, item: I, bytes = 0): Promise<R> {
    // Scheduled before the batcher's own flush of this turn, so the count restarts with the next turn.
    if (this.turn.size === 0) setImmediate(() => this.turn.clear());
    const n = this.turn.get(name) ?? 0;
    this.turn.set(name, n + 1);
    return this.batcher.submit(n === 0 ? 'b0' : `b${n}`, context, item, bytes);
  }
}
