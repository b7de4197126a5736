/**
 * Gathers the appends that reach this member for one partition during one turn of the event loop into one Raft
 * entry (`appends`), so a partition under many concurrent appenders costs one entry, one encoding and one apply
 * per turn instead of one per request. Each append keeps its own result: the machine applies them in order exactly
 * as separate entries would be. Entries stay pipelined: a batch does not wait for the one before it.
 */
import type { AppendInput, AppendResult, PartitionCommand, PartitionResult } from './machine.js';

/** What one append asks for. */
export interface AppendRequest {
  records: AppendInput[];
  producer: string | null;
  seq: number | null;
}

/** Proposes one command to a partition's group (its RaftNode's propose). */
export type Propose = (command: PartitionCommand) => Promise<PartitionResult>;

interface Waiting {
  request: AppendRequest;
  bytes: number;
  resolve: (result: AppendResult) => void;
  reject: (error: unknown) => void;
}

/** An entry's share of maxCommandBytes (8 MiB by default in the Raft node), with room for encoding. */
const MAX_BATCH_BYTES = 4 * 1024 * 1024;
const MAX_BATCH_APPENDS = 1000;

export class AppendBatcher {
  private readonly waiting = new Map<string, { propose: Propose; items: Waiting[] }>();
  /** Entries proposed and appends they carried, for metrics. */
  entries = 0;
  appends = 0;

  /** Appends `request` to partition `group` with the next batch of that partition. */
  submit(group: string, propose: Propose, request: AppendRequest, bytes: number): Promise<AppendResult> {
    return new Promise((resolve, reject) => {
      let batch = this.waiting.get(group);
      if (batch === undefined) {
        batch = { propose, items: [] };
        this.waiting.set(group, batch);
        setImmediate(() => this.flush(group));
      }
      batch.items.push({ request, bytes, resolve, reject });
    });
  }

  private flush(group: string): void {
    const batch = this.waiting.get(group);
    this.waiting.delete(group);
    if (batch === undefined) return;
    const items = batch.items;
    for (let from = 0; from < items.length; ) {
      let to = from + 1;
      let bytes = items[from]!.bytes;
      while (to < items.length && to - from < MAX_BATCH_APPENDS && bytes + items[to]!.bytes <= MAX_BATCH_BYTES) bytes += items[to++]!.bytes;
      this.propose(batch.propose, items.slice(from, to));
      from = to;
    }
  }

  private propose(propose: Propose, items: Waiting[]): void {
    this.entries++;
    this.appends += items.length;
    if (items.length === 1) {
      const only = items[0]!;
      propose({ op: 'append', ...only.request }).then((result) => {
        if (result.op === 'append') only.resolve(result);
        else only.reject(new Error(`unexpected result ${result.op}`));
      }, only.reject);
      return;
    }
    propose({ op: 'appends', appends: items.map((i) => i.request) }).then(
      (result) => {
        if (result.op !== 'appends' || result.results.length !== items.length) {
          for (const i of items) i.reject(new Error('unexpected result of a batch of appends'));
          return;
        }
        items.forEach((item, n) => item.resolve(result.results[n]!));
      },
      (error: unknown) => {
        for (const i of items) i.reject(error);
      },
    );
  }
}
