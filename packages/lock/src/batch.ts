/**
 * Gathers the acquires and releases that reach a member during one turn of its event loop into one Raft entry
 * (`batch`), so a busy member pays for one entry, one encoding, one session record and one apply per turn instead
 * of one per request (the shared TurnBatcher). A lone command still goes as itself.
 *
 * Two commands on the same lock name never share a batch: the machine stamps a lock's revision with the entry's
 * index, and a watcher that asks for changes after revision R must not miss a second change made under the same R.
 * The n-th command of a turn on a name goes to the turn's n-th batch; batches are proposed in that order, so the
 * log keeps each name's commands in the order they arrived.
 */
import { TurnBatcher } from '@raftkit/http';
import { MAX_BATCH_COMMANDS, type BatchableCommand, type LockCommand, type LockResult } from './machine.js';

export type Propose = (command: LockCommand) => Promise<LockResult>;

async function proposeBatch(propose: Propose, commands: BatchableCommand[]): Promise<LockResult[]> {
  if (commands.length === 1) return [await propose(commands[0]!)];
  const result = await propose({ op: 'batch', commands });
  if (!result.ok || result.op !== 'batch') throw new Error('unexpected result of a batch of lock commands');
  return result.results;
}

export class LockBatcher {
  private readonly batcher = new TurnBatcher<Propose, BatchableCommand, LockResult>({ maxItems: MAX_BATCH_COMMANDS, send: proposeBatch });
  /** Commands per lock name in this turn; cleared as the turn's batches go. */
  private readonly turn = new Map<string, number>();

  /** Entries proposed, for metrics. */
  get entries(): number {
    return this.batcher.batches;
  }

  /** Commands those entries carried. */
  get commands(): number {
    return this.batcher.items;
  }

  submit(propose: Propose, command: BatchableCommand): Promise<LockResult> {
    // Scheduled before the batcher's own flush of this turn, so the count restarts with the next turn.
    if (this.turn.size === 0) setImmediate(() => this.turn.clear());
    const n = this.turn.get(command.name) ?? 0;
    this.turn.set(command.name, n + 1);
    return this.batcher.submit(`b${n}`, propose, command);
  }
}
