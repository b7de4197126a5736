/**
 * The replicated key-value map: pure and deterministic. Each key remembers the log index of its last change
 * (its revision), so clients can tell versions apart.
 */
import { Packr } from 'msgpackr';
import type { ApplyContext, StateMachine } from '@raftkit/raft';

export type KvCommand =
  | { op: 'put'; key: string; value: string }
  | { op: 'delete'; key: string }
  /** `from` null: the key must be absent. `to` null: delete it. */
  | { op: 'cas'; key: string; from: string | null; to: string | null };

export type KvResult =
  | { op: 'put'; revision: number }
  | { op: 'delete'; deleted: boolean; revision: number }
  | { op: 'cas'; ok: true; revision: number }
  | { op: 'cas'; ok: false; current: string | null; revision: number };

export interface KvEntry {
  value: string;
  revision: number;
}

const packr = new Packr({ useRecords: false });

export class KvMachine implements StateMachine<KvCommand, KvResult> {
  private data = new Map<string, KvEntry>();

  get(key: string): KvEntry | undefined {
    return this.data.get(key);
  }

  get size(): number {
    return this.data.size;
  }

  apply(command: KvCommand, context: ApplyContext): KvResult {
    const revision = context.index;
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
