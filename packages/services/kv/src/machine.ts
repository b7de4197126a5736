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
   * Writes gathered from one turn of a member's event loop (src/members/batch.ts), applied in order exactly as the same
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
function checkKvCommand(command: unknown): asserts command is KvCommand {
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
    if (command.op === 'batch')
      return { op: 'batch', results: command.commands.map((c) => this.applyOne(c, revision)) };
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
   * one), then packed SNAPSHOT_SLICE keys at a time with the event loop turning between slices. Encoding the
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

  /**
   * Takes `snapshot`'s bytes (one packed array of [key, entry] pairs) or `detachedSnapshot`'s (packed slices, each
   * FLAT_SLICE then key, value, revision, key, value, revision...).
   */
  restore(data: Uint8Array): void {
    const restored = new Map<string, KvEntry>();
    // An empty map's detached snapshot has no slice at all: no bytes.
    const slices = data.byteLength === 0 ? [] : (packr.unpackMultiple(data) as unknown[][]);
    for (const slice of slices) {
      if (slice[0] === FLAT_SLICE) {
        for (let i = 1; i + 2 < slice.length; i += 3)
          restored.set(slice[i] as string, { value: slice[i + 1] as string, revision: slice[i + 2] as number });
      } else {
        for (const [key, entry] of slice as Array<[string, KvEntry]>) restored.set(key, entry);
      }
    }
    this.data = restored;
  }
}

/** Keys per packed slice of a detached snapshot: a few milliseconds of encoding at a time. */
const SNAPSHOT_SLICE = 4_096;
/**
 * After each slice the encoder rests this many times as long as the slice took: every member encodes at the same
 * moment (they reach the snapshot's index together), so five members encoding flat out took both cores of a small
 * machine from the leader's writes. A snapshot of 100,000 keys then takes about a second instead of 0.3 s.
 */
const SNAPSHOT_REST = 3;
/** The first element of a detached snapshot's slice (a one-array snapshot's first element is a pair, an array). */
const FLAT_SLICE = 3;

async function* packSlices(keys: readonly string[], entries: readonly KvEntry[]): AsyncGenerator<Uint8Array> {
  for (let start = 0; start < keys.length; start += SNAPSHOT_SLICE) {
    const began = performance.now();
    const end = Math.min(keys.length, start + SNAPSHOT_SLICE);
    // Flat triples, not [key, {value, revision}] pairs: no field names to write per key, half the encoding time.
    const slice = new Array<unknown>(1 + 3 * (end - start));
    slice[0] = FLAT_SLICE;
    for (let i = start, at = 1; i < end; i++, at += 3) {
      const entry = entries[i]!;
      slice[at] = keys[i];
      slice[at + 1] = entry.value;
      slice[at + 2] = entry.revision;
    }
    yield packr.pack(slice);
    const rest = Math.ceil((performance.now() - began) * SNAPSHOT_REST);
    await new Promise<void>((resolve) => setTimeout(resolve, rest));
  }
}
