/**
 * The replicated key-value store the simulated clients use, wrapped in SessionStateMachine by each member.
 * It also counts how many times each (client, seq) command was applied: more than once breaks exactly-once
 * semantics, which is one of the simulator's invariants. The counts are part of the state (and so of
 * snapshots), since a member restored from a snapshot must remember what the snapshot already applied.
 */
import { Packr } from 'msgpackr';
import type { ApplyContext, StateMachine } from '../src/types.js';

/** `tag` is "client/seq": unique per client operation, repeated by its retries. */
export type KvCommand =
  | { op: 'put'; key: string; value: string; tag: string }
  | { op: 'cas'; key: string; from: string | null; to: string; tag: string }
  /** A command the machine throws on: the proposer must get apply_failed and no key may change. */
  | { op: 'poison'; key: string; tag: string };

export type KvResult = { op: 'put' } | { op: 'cas'; ok: boolean };

const packr = new Packr({ useRecords: false, mapsAsObjects: true });

export class KvMachine implements StateMachine<KvCommand, KvResult> {
  private data = new Map<string, string>();
  private applications = new Map<string, number>();

  constructor(
    private readonly hooks: {
      /** Every application of a command (the simulator notes when each op first took effect). */
      applied(tag: string): void;
      /** A command applied a second time: the exactly-once invariant is broken. */
      duplicate(tag: string, count: number, context: ApplyContext): void;
    },
  ) {}

  get(key: string): string | null {
    return this.data.get(key) ?? null;
  }

  apply(command: KvCommand, context: ApplyContext): KvResult {
    const count = (this.applications.get(command.tag) ?? 0) + 1;
    this.applications.set(command.tag, count);
    this.hooks.applied(command.tag);
    if (count > 1) this.hooks.duplicate(command.tag, count, context);
    switch (command.op) {
      case 'put':
        this.data.set(command.key, command.value);
        return { op: 'put' };
      case 'cas': {
        const current = this.data.get(command.key) ?? null;
        if (current !== command.from) return { op: 'cas', ok: false };
        this.data.set(command.key, command.to);
        return { op: 'cas', ok: true };
      }
      case 'poison':
        throw new Error(`poison command ${command.tag}`);
    }
  }

  snapshot(): Uint8Array {
    return packr.pack({ data: [...this.data], applications: [...this.applications] });
  }

  restore(bytes: Uint8Array): void {
    const state = packr.unpack(bytes) as { data: Array<[string, string]>; applications: Array<[string, number]> };
    this.data = new Map(state.data);
    this.applications = new Map(state.applications);
  }
}
