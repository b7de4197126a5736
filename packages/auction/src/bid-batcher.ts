/**
 * Gathers the bids that reach the writer for one group during one turn of the event loop into one Raft entry
 * (`bids`), so a hot auction costs one entry, one fsync share and one apply per turn instead of one per bid. The
 * machine applies a batch exactly as it would the same bids as separate entries (property-tested), and each bid
 * keeps its own result. Batches stay pipelined: one does not wait for the one before it.
 */
import type { AuctionCommand, AuctionResult, BidInput, BidResult } from './machine.js';

export type Propose = (command: AuctionCommand) => Promise<AuctionResult>;

interface Waiting {
  bid: BidInput;
  resolve: (result: BidResult) => void;
  reject: (error: unknown) => void;
}

/** The machine's cap on one `bids` command. */
const MAX_BATCH = 1_000;

export class BidBatcher {
  private readonly waiting = new Map<string, { propose: Propose; items: Waiting[] }>();
  entries = 0;
  bids = 0;

  /** Bids waiting for their entry, for backpressure. */
  pending(group: string): number {
    return this.waiting.get(group)?.items.length ?? 0;
  }

  submit(group: string, propose: Propose, bid: BidInput): Promise<BidResult> {
    return new Promise((resolve, reject) => {
      let batch = this.waiting.get(group);
      if (batch === undefined) {
        batch = { propose, items: [] };
        this.waiting.set(group, batch);
        setImmediate(() => this.flush(group));
      }
      batch.items.push({ bid, resolve, reject });
    });
  }

  private flush(group: string): void {
    const batch = this.waiting.get(group);
    this.waiting.delete(group);
    if (batch === undefined) return;
    for (let from = 0; from < batch.items.length; from += MAX_BATCH) this.propose(batch.propose, batch.items.slice(from, from + MAX_BATCH));
  }

  private propose(propose: Propose, items: Waiting[]): void {
    this.entries++;
    this.bids += items.length;
    const fail = (error: unknown): void => {
      for (const i of items) i.reject(error);
    };
    if (items.length === 1) {
      const only = items[0]!;
      propose({ op: 'bid', ...only.bid }).then((r) => (r.op === 'bid' ? only.resolve(r) : only.reject(new Error(`unexpected result ${r.op}`))), fail);
      return;
    }
    propose({ op: 'bids', bids: items.map((i) => i.bid) }).then((r) => {
      if (r.op !== 'bids' || r.results.length !== items.length) return fail(new Error('unexpected result of a batch of bids'));
      items.forEach((item, n) => item.resolve(r.results[n]!));
    }, fail);
  }
}
