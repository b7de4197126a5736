/**
 * Gathers the appends that reach this member for one partition during one turn of the event loop into one Raft
 * entry (`appends`), so a partition under many concurrent appenders costs one entry, one encoding and one apply
 * per turn instead of one per request (the shared TurnBatcher). Each append keeps its own result: the machine applies
 * them in order exactly as separate entries would be.
 */
import { TurnBatcher } from '@raftkit/http';
import type { AppendInput, AppendResult, PartitionCommand, PartitionResult } from '../machine.js';

/** What one append asks for. */
export interface AppendRequest {
  records: AppendInput[];
  producer: string | null;
  seq: number | null;
}

/** Proposes one command to a partition's group (its RaftNode's propose). */
export type Propose = (command: PartitionCommand) => Promise<PartitionResult>;

/** An entry's share of maxCommandBytes (8 MiB by default in the Raft node), with room for encoding. */
const MAX_BATCH_BYTES = 4 * 1024 * 1024;
const MAX_BATCH_APPENDS = 1000;

/** A partition's appends of one turn as one entry: a lone append as `append`, several as `appends`. */
async function proposeAppends(propose: Propose, requests: AppendRequest[]): Promise<AppendResult[]> {
  if (requests.length === 1) {
    const result = await propose({ op: 'append', ...requests[0]! });
    if (result.op !== 'append') throw new Error(`unexpected result ${result.op}`);
    return [result];
  }
  const result = await propose({ op: 'appends', appends: requests });
  if (result.op !== 'appends') throw new Error('unexpected result of a batch of appends');
  return result.results;
}

export class AppendBatcher {
  private readonly batcher = new TurnBatcher<Propose, AppendRequest, AppendResult>({
    maxItems: MAX_BATCH_APPENDS,
    maxBytes: MAX_BATCH_BYTES,
    send: proposeAppends,
  });

  /** Entries proposed, for metrics. */
  get entries(): number {
    return this.batcher.batches;
  }

  /** Appends those entries carried. */
  get appends(): number {
    return this.batcher.items;
  }

  /** Appends `request` to partition `group` with the next batch of that partition. */
  submit(group: string, propose: Propose, request: AppendRequest, bytes: number): Promise<AppendResult> {
    return this.batcher.submit(group, propose, request, bytes);
  }
}
