/**
 * A machine with `detachedSnapshot`: the member keeps applying (and the group keeps committing) while the snapshot
 * is encoded; one snapshot at a time; what is saved is the state as of the snapshot's index, and a member restarted
 * from its LevelDB storage rebuilds the whole state from it and the log after it.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { RaftNode } from '../src/node.js';
import { LevelStorage } from '../src/storage/leveldb.js';
import { LocalNetwork } from '../src/transport/local.js';
import type { NodeId, StateMachine } from '../src/types.js';
import { leaderOf } from './helpers/leader.js';

type Cmd = { key: string };

/** A list of keys whose detached snapshots each wait at a gate of their own until the test opens it. */
class GatedKeys implements StateMachine<Cmd, number> {
  keys: string[] = [];
  detachedCalls = 0;
  restored: string[] | null = null;
  private readonly gates: Array<() => void> = [];

  constructor(private readonly gated = true) {}

  apply(cmd: Cmd): number {
    this.keys.push(cmd.key);
    return this.keys.length;
  }
  snapshot(): Uint8Array {
    throw new Error('a machine with detachedSnapshot is never asked for the blocking one');
  }
  detachedSnapshot(): AsyncIterable<Uint8Array> {
    this.detachedCalls++;
    const view = [...this.keys];
    const gate = this.gated ? new Promise<void>((resolve) => this.gates.push(resolve)) : Promise.resolve();
    return (async function* () {
      await gate;
      yield new TextEncoder().encode(JSON.stringify(view));
    })();
  }
  restore(data: Uint8Array): void {
    this.keys = JSON.parse(new TextDecoder().decode(data)) as string[];
    this.restored = [...this.keys];
  }
  /** Lets the snapshots started so far finish (a later one waits at its own gate). */
  release(): void {
    for (const open of this.gates.splice(0)) open();
  }
}

const ids: NodeId[] = ['n1', 'n2', 'n3'];
const bootstrap = Object.fromEntries(ids.map((id) => [id, `local:${id}`]));
const dir = mkdtempSync(join(tmpdir(), 'detached-snapshot-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

async function until(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

t.test(
  'the group commits and applies while every member encodes its snapshot; the saved one is the state at its index',
  async (t) => {
    const net = new LocalNetwork();
    const machines = new Map<NodeId, GatedKeys>();
    const storages = new Map<NodeId, LevelStorage>();
    const nodes = new Map<NodeId, RaftNode<Cmd, number>>();
    for (const id of ids) {
      machines.set(id, new GatedKeys());
      storages.set(id, new LevelStorage(join(dir, id)));
      nodes.set(
        id,
        await RaftNode.start({
          id,
          storage: storages.get(id)!,
          transport: net.transport(id),
          stateMachine: machines.get(id)!,
          bootstrap,
          tickMs: 10,
          snapshotEvery: 20,
          requestTimeoutMs: 5_000,
        }),
      );
    }
    t.teardown(async () => {
      for (const n of nodes.values()) await n.stop();
    });
    const leader = await leaderOf(nodes);
    for (let i = 1; i <= 25; i++) await leader.propose({ key: `k${i}` });
    await until('every member to start a snapshot', () => [...machines.values()].every((m) => m.detachedCalls === 1));
    // Every member's snapshot is held at the gate: the group still commits, and every member applies.
    for (let i = 26; i <= 60; i++) await leader.propose({ key: `k${i}` });
    await until('every member to apply k60', () => [...machines.values()].every((m) => m.keys.length === 60));
    t.ok(
      [...machines.values()].every((m) => m.detachedCalls === 1),
      'one snapshot at a time: 40 more entries started no second one',
    );
    for (const id of ids)
      t.equal(await storages.get(id)!.latestSnapshot(), null, `${id}: nothing saved while encoding`);

    // The first snapshot goes through; the one that follows at once (60 applied, 20 more than the first's
    // index) waits at its own gate, so the first is the one saved.
    for (const m of machines.values()) m.release();
    await until('every member to save its snapshot', async () =>
      (await Promise.all(ids.map((id) => storages.get(id)!.latestSnapshot()))).every((s) => s !== null),
    );
    const index = (await storages.get('n3')!.latestSnapshot())!.meta.index;
    await nodes.get('n3')!.stop();

    // Restarted from its storage: the snapshot gives the state as of its index, the log after it the rest.
    const again = new GatedKeys(false);
    const restarted = await RaftNode.start({
      id: 'n3',
      storage: new LevelStorage(join(dir, 'n3')),
      transport: net.transport('n3'),
      stateMachine: again,
      bootstrap,
      tickMs: 10,
      snapshotEvery: 20,
      requestTimeoutMs: 5_000,
    });
    nodes.set('n3', restarted);
    const restored = again.restored;
    t.ok(restored !== null, 'restarted from the snapshot');
    const n = restored!.length;
    t.ok(
      n >= 18 && n <= 25,
      `the snapshot holds the ${n} keys applied by its index ${index}, none proposed while it was held`,
    );
    t.ok(index - n <= 3, `index ${index}: the keys and the group's few non-command entries`);
    t.same(
      restored,
      Array.from({ length: n }, (_, i) => `k${i + 1}`),
      'a prefix of the commands, in order',
    );
    await until('the restarted member to catch up', () => again.keys.length === 60);
    t.same(
      again.keys,
      Array.from({ length: 60 }, (_, i) => `k${i + 1}`),
      'snapshot plus the log after it: every command once, in order',
    );
  },
);
