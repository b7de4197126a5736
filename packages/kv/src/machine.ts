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

  /**
   * The map as of this call, encoded afterwards while later commands apply (StateMachine.detachedSnapshot): the
   * keys and entries are copied into two arrays now (entries are never changed in place, a change stores a new
   * one), then packed SNAPSHOT_SLICE pairs at a time with the event loop turning between slices. Encoding the
   * whole map at once held every member's loop for the encoding and forced a major collection in a hurry on all
   * five together, since they snapshot at the same index: a stall of about a second for the whole group.
   */
  detachedSnapshot(): AsyncIterable<Uint8Array> {
    const keys = new Array<string>(this.data.size);
    const entries = new Array<KvEntry>(this.data.size);
    let n = 0;
    this.data.forEach((entry, key) => {
      keys[n] = key;
      entries[n++] = entry;
    });
    return packSlices(keys, entries);
  }

  /** Takes `snapshot`'s bytes or `detachedSnapshot`'s (one or more packed arrays of [key, entry] pairs). */
  restore(data: Uint8Array): void {
    const restored = new Map<string, KvEntry>();
    // An empty map's detached snapshot has no slice at all: no bytes.
    const slices = data.byteLength === 0 ? [] : (packr.unpackMultiple(data) as Array<Array<[string, KvEntry]>>);
    for (const pairs of slices) for (const [key, entry] of pairs) restored.set(key, entry);
    this.data = restored;
  }
}

/** Pairs per packed slice of a detached snapshot: a few milliseconds of encoding between turns of the loop. */
const SNAPSHOT_SLICE = 4_096;

async function* packSlices(keys: readonly string[], entries: readonly KvEntry[]): AsyncGenerator<Uint8Array> {
  for (let start = 0; start < keys.length; start += SNAPSHOT_SLICE) {
    const end = Math.min(keys.length, start + SNAPSHOT_SLICE);
    const pairs = new Array<[string, KvEntry]>(end - start);
    for (let i = start; i < end; i++) pairs[i - start] = [keys[i]!, entries[i]!];
    yield packr.pack(pairs);
    await new Promise<void>((resolve) => setImmediate(resolve));
  }
}
