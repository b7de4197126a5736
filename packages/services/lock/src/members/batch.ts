/**
 * Acquires and releases that reach a member in one turn of its event loop go to the Raft log as one `batch` entry:
 * a busy member pays for one entry, one encoding, one session record and one apply per turn instead
 * of one per request (the shared DistinctNameBatcher). A lone command still goes as itself.
 *
 * Two commands on the same lock name never share a batch: the machine stamps a lock's revision with the entry's
 * index, and a watcher that asks for changes after revision R must not miss a second change made under the same R.
 */
import { DistinctNameBatcher } from '@raftkit/http';
import { MAX_BATCH_COMMANDS, type BatchableCommand, type LockCommand, type LockResult } from '../machine.js';

export type Propose = (command: LockCommand) => Promise<LockResult>;

async function proposeBatch(propose: Propose, commands: BatchableCommand[]): Promise<LockResult[]> {
  if (commands.length === 1) return [await propose(commands[0]!)];
  const result = await propose({ op: 'batch', commands });
  if (!result.ok || result.op !== 'batch') throw new Error('unexpected result of a batch of lock commands');
  return result.results;
}

export class LockBatcher {
  private readonly batcher = new DistinctNameBatcher<Propose, BatchableCommand, LockResult>({
    maxItems: MAX_BATCH_COMMANDS,
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

  submit(propose: Propose, command: BatchableCommand): Promise<LockResult> {
    return this.batcher.submit(command.name, propose, command);
  }
}
