/**
 * Gathers the appends that reach this member for one partition during one turn of the event loop into one Raft
 * entry (`appends`), so a partition under many concurrent appenders costs one entry, one encoding and one apply
 * per turn instead of one per request (the shared TurnBatcher). Each append keeps its own result: the machine applies
 * them in order exactly as separate entries would be, and consecutive plain appends go as one (mergePlain).
 */
import { TurnBatcher } from '@raftkit/http';
import {
  MAX_RECORDS_PER_APPEND,
  type AppendInput,
  type AppendResult,
  type PartitionCommand,
  type PartitionResult,
} from '../machine.js';

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

/** One append of the entry and, for each request, which append carries it and where its records start there. */
interface Merged {
  appends: AppendRequest[];
  shares: Array<{ append: number; skip: number }>;
}

/**
 * Consecutive plain appends (no producer) of one turn become one append, up to MAX_RECORDS_PER_APPEND records: the
 * machine stores their records together and in order exactly as it would store them one append after the other
 * (a plain append has no check that could refuse one of them), and each caller's offsets are its share of the
 * merged append's. Idempotent appends stay whole: each keeps its own sequence check and answer.
 */
function mergePlain(requests: AppendRequest[]): Merged {
  const appends: AppendRequest[] = [];
  const shares: Merged['shares'] = [];
  let open: AppendRequest | null = null;
  for (const request of requests) {
    if (request.producer !== null) {
      open = null;
      shares.push({ append: appends.length, skip: 0 });
      appends.push(request);
      continue;
    }
    if (open !== null && open.records.length + request.records.length <= MAX_RECORDS_PER_APPEND) {
      shares.push({ append: appends.length - 1, skip: open.records.length });
      open.records.push(...request.records);
      continue;
    }
    open = { records: [...request.records], producer: null, seq: null };
    shares.push({ append: appends.length, skip: 0 });
    appends.push(open);
  }
  return { appends, shares };
}

/** A partition's appends of one turn as one entry: a lone append as `append`, several as `appends`. */
async function proposeAppends(propose: Propose, requests: AppendRequest[]): Promise<AppendResult[]> {
  const { appends, shares } = mergePlain(requests);
  let results: AppendResult[];
  if (appends.length === 1) {
    const result = await propose({ op: 'append', ...appends[0]! });
    if (result.op !== 'append') throw new Error(`unexpected result ${result.op}`);
    results = [result];
  } else {
    const result = await propose({ op: 'appends', appends });
    if (result.op !== 'appends') throw new Error('unexpected result of a batch of appends');
    results = result.results;
  }
  return shares.map(({ append, skip }, i) => {
    const result = results[append]!;
    if (!result.ok || appends[append] === requests[i]) return result;
    return { ...result, base: result.base + skip, count: requests[i]!.records.length };
  });
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
