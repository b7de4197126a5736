/**
 * The replicated key-value map: pure and deterministic. Each key remembers the log index of its last change
 * (its revision), so clients can tell versions apart.
 */
import { Packr } from 'msgpackr';
import { batchCommandsField, commandOf, nullableStringField, stringField } from '@raftkit/http';
import type { ApplyContext, StateMachine } from '@raftkit/raft';

/** A command on one key: what a request asks for. */
export type KvKeyCommand =
  | { op: 'put'; key: string; value: string }
  | { op: 'delete'; key: string }
  /** `from` null: the key must be absent. `to` null: delete it. */
  | { op: 'cas'; key: string; from: string | null; to: string | null };

export type KvCommand =
  | KvKeyCommand
  /**
   * Writes gathered from one turn of a member's event loop (src/batch.ts), applied in order exactly as the same
   * commands in consecutive entries would be, except that they share the entry's index as their revision. The
   * batcher never puts two commands on one key in a batch, so a key's revision still names one change.
   */
  | { op: 'batch'; commands: KvKeyCommand[] };

export type KvKeyResult =
  | { op: 'put'; revision: number }
  | { op: 'delete'; deleted: boolean; revision: number }
  | { op: 'cas'; ok: true; revision: number }
  | { op: 'cas'; ok: false; current: string | null; revision: number };

export type KvResult = KvKeyResult | { op: 'batch'; results: KvKeyResult[] };

/** The most commands one batch carries. */
export const MAX_BATCH_COMMANDS = 1_000;

export interface KvEntry {
  value: string;
  revision: number;
}

const packr = new Packr({ useRecords: false });

/**
 * Throws CommandShapeError unless `command` is a KvCommand: checked before anything changes, so a malformed entry
 * (a bug or a forged one) is refused the same way on every member (ApplyError for its proposer) and changes nothing.
 */
export function checkKvCommand(command: unknown): asserts command is KvCommand {
  const c = commandOf(command, ['put', 'delete', 'cas', 'batch'] as const);
  if (c.op === 'batch') {
    batchCommandsField(c, ['put', 'delete', 'cas'] as const, checkKvCommand, MAX_BATCH_COMMANDS);
    return;
  }
  stringField(c, 'key');
  if (c.op === 'put') stringField(c, 'value', undefined, 0);
  if (c.op === 'cas') {
    nullableStringField(c, 'from');
    nullableStringField(c, 'to');
  }
}

export class KvMachine implements StateMachine<KvCommand, KvResult> {
  private data = new Map<string, KvEntry>();

  get(key: string): KvEntry | undefined {
    return this.data.get(key);
  }

  get size(): number {
    return this.data.size;
  }

  apply(command: KvCommand, context: ApplyContext): KvResult {
    checkKvCommand(command);
    const revision = context.index;
    if (command.op === 'batch') return { op: 'batch', results: command.commands.map((c) => this.applyOne(c, revision)) };
    return this.applyOne(command, revision);
  }

  private applyOne(command: KvKeyCommand, revision: number): KvKeyResult {
    switch (command.op) {
      case 'put':
        this.data.set(command.key, { value: command.value, revision });
        return { op: 'put', revision };
      case 'delete': {
        const deleted = this.data.delete(command.key);
        return { op: 'delete', deleted, revision };
      }
      case 'cas': {
        const current = this.data.get(command.key);
        if ((current?.value ?? null) !== command.from) {
          return { op: 'cas', ok: false, current: current?.value ?? null, revision: current?.revision ?? 0 };
        }
        if (command.to === null) this.data.delete(command.key);
        else this.data.set(command.key, { value: command.to, revision });
        return { op: 'cas', ok: true, revision };
      }
    }
  }

  snapshot(): Uint8Array {
    return packr.pack([...this.data]);
  }

  restore(data: Uint8Array): void {
    this.data = new Map(packr.unpack(data) as Array<[string, KvEntry]>);
  }
}
