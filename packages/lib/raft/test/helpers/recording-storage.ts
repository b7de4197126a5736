/**
 * A register machine, a real LevelStorage that records how, and when, every append was asked for, and three
 * RaftNodes on them over a LocalNetwork.
 */
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { RaftNode, type RaftNodeOptions } from '../../src/node.js';
import { LevelStorage } from '../../src/storage/leveldb.js';
import { LocalNetwork } from '../../src/transport/local.js';
import type { AppendOptions, Entry, HardState, NodeId, Snapshot, StateMachine, Storage } from '../../src/types.js';

export type Cmd = { key: string; value: number };

export class Register implements StateMachine<Cmd, number> {
  values = new Map<string, number>();
  apply(cmd: Cmd): number {
    this.values.set(cmd.key, cmd.value);
    return cmd.value;
  }
  snapshot(): Uint8Array {
    return new TextEncoder().encode(JSON.stringify([...this.values]));
  }
  restore(data: Uint8Array): void {
    this.values = new Map(JSON.parse(new TextDecoder().decode(data)) as Array<[string, number]>);
  }
}

export interface AppendCall {
  /** performance.now() when the append was asked for. */
  at: number;
  entries: number;
  hardState: HardState | null;
  sync: boolean;
}

/** A real LevelStorage that records each append's shape. */
export class RecordingStorage implements Storage {
  readonly calls: AppendCall[] = [];
  constructor(private readonly inner: LevelStorage) {}
  load(): ReturnType<Storage['load']> {
    return this.inner.load();
  }
  append(entries: Entry[], hardState: HardState | null, options?: AppendOptions): Promise<void> {
    this.calls.push({
      at: performance.now(),
      entries: entries.length,
      hardState: hardState === null ? null : { ...hardState },
      sync: options?.sync !== false,
    });
    return this.inner.append(entries, hardState, options);
  }
  saveSnapshot(snapshot: Snapshot): Promise<void> {
    return this.inner.saveSnapshot(snapshot);
  }
  latestSnapshot(): Promise<Snapshot | null> {
    return this.inner.latestSnapshot();
  }
  compact(upTo: number): Promise<void> {
    return this.inner.compact(upTo);
  }
  close(): Promise<void> {
    return this.inner.close();
  }
}

export const RECORDED_IDS: NodeId[] = ['n1', 'n2', 'n3'];

/** Three members in `dir` (one LevelDB directory each), ticking every 10 ms, with `options` on each. */
export async function startRecorded(dir: string, options: Partial<RaftNodeOptions<Cmd, number>> = {}) {
  const net = new LocalNetwork();
  const bootstrap = Object.fromEntries(RECORDED_IDS.map((id) => [id, `local:${id}`]));
  const nodes = new Map<NodeId, RaftNode<Cmd, number>>();
  const storages = new Map<NodeId, RecordingStorage>();
  const machines = new Map<NodeId, Register>();
  for (const id of RECORDED_IDS) {
    const storage = new RecordingStorage(new LevelStorage(join(dir, id)));
    const machine = new Register();
    storages.set(id, storage);
    machines.set(id, machine);
    nodes.set(
      id,
      await RaftNode.start({
        id,
        storage,
        transport: net.transport(id),
        stateMachine: machine,
        bootstrap,
        tickMs: 10,
        ...options,
      }),
    );
  }
  return { nodes, storages, machines };
}
