/**
 * Gathers the bids that reach the writer for one group during one turn of the event loop into one Raft entry
 * (`bids`), so a hot auction costs one entry, one fsync share and one apply per turn instead of one per bid. The
 * machine applies a batch exactly as it would the same bids as separate entries (property-tested), and each bid
 * keeps its own result (the shared TurnBatcher).
 */
import { TurnBatcher } from '@raftkit/http';
import type { AuctionCommand, AuctionResult, BidInput, BidResult } from '../machine.js';

export type Propose = (command: AuctionCommand) => Promise<AuctionResult>;

/** The machine's cap on one `bids` command. */
const MAX_BATCH = 1_000;

/** A group's bids of one turn as one entry: a lone bid as `bid`, several as `bids`. */
async function proposeBids(propose: Propose, bids: BidInput[]): Promise<BidResult[]> {
  if (bids.length === 1) {
    const result = await propose({ op: 'bid', ...bids[0]! });
    if (result.op !== 'bid') throw new Error(`unexpected result ${result.op}`);
    return [result];
  }
  const result = await propose({ op: 'bids', bids });
  if (result.op !== 'bids') throw new Error('unexpected result of a batch of bids');
  return result.results;
}

export class BidBatcher {
  private readonly batcher = new TurnBatcher<Propose, BidInput, BidResult>({ maxItems: MAX_BATCH, send: proposeBids });

  /** Entries proposed, for metrics. */
  get entries(): number {
    return this.batcher.batches;
  }

  /** Bids those entries carried. */
  get bids(): number {
    return this.batcher.items;
  }

  /** Bids waiting for their entry, for backpressure. */
  pending(group: string): number {
    return this.batcher.pending(group);
  }

  submit(group: string, propose: Propose, bid: BidInput): Promise<BidResult> {
    return this.batcher.submit(group, propose, bid);
  }
}
