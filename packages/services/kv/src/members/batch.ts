/**
 * Writes that reach a member in one turn of its event loop go to the Raft log as one `batch` entry: a busy member
 * pays for one entry, one encoding, one log write record, one forwarded proposal and one apply per turn instead of
 * one per request (the shared DistinctNameBatcher). A lone command still goes as itself.
 *
 * Two commands on the same key never share a batch: a key's revision is the index of the entry that last changed
 * it, and two changes under one revision could not be told apart.
 */
import { DistinctNameBatcher } from '@raftkit/http';
import { MAX_BATCH_COMMANDS, type KvCommand, type KvKeyCommand, type KvKeyResult, type KvResult } from '../machine.js';

export type Propose = (command: KvCommand) => Promise<KvResult>;

/**
 * The most bytes of keys and values one batch carries: far below the Raft layer's limit on one command (2 MiB),
 * so a batch is never refused for its size; a single larger write (values go up to 1 MiB) still goes alone.
 */
export const MAX_BATCH_BYTES = 512 * 1024;

async function proposeBatch(propose: Propose, commands: KvKeyCommand[]): Promise<KvKeyResult[]> {
  if (commands.length === 1) return [(await propose(commands[0]!)) as KvKeyResult];
  const result = await propose({ op: 'batch', commands });
  if (result.op !== 'batch' || result.results.length !== commands.length)
    throw new Error('unexpected result of a batch of kv commands');
  return result.results;
}

export class KvBatcher {
  private readonly batcher = new DistinctNameBatcher<Propose, KvKeyCommand, KvKeyResult>({
    maxItems: MAX_BATCH_COMMANDS,
    maxBytes: MAX_BATCH_BYTES,
    send: proposeBatch,
  });

  /** Entries proposed, for metrics. */
  get entries(): number {
    return this.batcher.batches;
  }

  /** Commands those entries carried. */
  get commands(): number {
    return this.batcher.items;
  }

  /** `bytes`: at least the UTF-8 size of the command's key and values (it bounds a batch's size). */
  submit(propose: Propose, command: KvKeyCommand, bytes: number): Promise<KvKeyResult> {
    return this.batcher.submit(command.key, propose, command, bytes);
  }
}
