/**
 * `raft`: committed proposals per second and commit latency for a 5-member group in one process: RaftNode drivers
 * over the in-process network with in-memory storage. Measures the library's own overhead (core, driver,
 * sessions), not the disk or the network. There is no peer to run beside it; the target is 100,000 proposals/s.
 *
 * Run through the harness (`npx bench raft`), or alone:
 *   node bench/dist/src/raft-inprocess.js [--duration S] [--concurrency C] [--size B] [--warmup S] [--out DIR]
 * Either way it writes <out>/raft.json and <out>/raft.svg (default bench/results).
 */
import { realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { LocalNetwork, MemoryStorage, RaftNode } from '@raftkit/raft';
import type { StateMachine } from '@raftkit/raft';
import type { Benchmark, RunOptions, SideResult } from './benchmark.js';
import { measure } from './measure.js';

const MEMBERS = 5;

class Register implements StateMachine<Uint8Array, number> {
  count = 0;
  apply(): number {
    return ++this.count;
  }
  snapshot(): Uint8Array {
    return new TextEncoder().encode(String(this.count));
  }
  restore(data: Uint8Array): void {
    this.count = Number(new TextDecoder().decode(data));
  }
}

async function runOurs(o: RunOptions): Promise<SideResult> {
  const ids = Array.from({ length: MEMBERS }, (_, i) => `n${i + 1}`);
  const net = new LocalNetwork();
  const bootstrap = Object.fromEntries(ids.map((id) => [id, id]));
  const nodes = await Promise.all(
    ids.map((id) =>
      RaftNode.start<Uint8Array, number>({
        id,
        storage: new MemoryStorage(),
        transport: net.transport(id),
        stateMachine: new Register(),
        bootstrap,
        tickMs: 50,
        snapshotEvery: 50_000,
        requestTimeoutMs: 30_000,
      }),
    ),
  );
  try {
    const deadline = Date.now() + 30_000;
    let leader = nodes.find((n) => n.isLeader);
    while (leader === undefined) {
      if (Date.now() > deadline) throw new Error('no leader within 30 s');
      await new Promise((r) => setTimeout(r, 20));
      leader = nodes.find((n) => n.isLeader);
    }
    const payload = new Uint8Array(o.size).fill(7);
    const proposer = leader;
    return await measure(
      {
        label: 'raft',
        system: `raftkit RaftNode x${MEMBERS} in one process (LocalNetwork, MemoryStorage)`,
        members: MEMBERS,
        serverPids: [process.pid],
        op: async () => {
          await proposer.propose(payload);
        },
        extra: { note: 'members and load generator share this one process: server CPU is the whole process' },
      },
      o,
    );
  } finally {
    for (const n of nodes) await n.stop();
  }
}

export const raftBenchmark: Benchmark = {
  name: 'raft',
  description: `Committed proposals per second for a ${MEMBERS}-member RaftNode group in one process (in-memory storage and network); no peer, target 100,000/s`,
  title: (o) => `raft: ${MEMBERS} RaftNodes in one process, ${o.size}-byte proposals, vs the 100,000/s target`,
  peers: [],
  defaults: { durationS: 10, concurrency: 2000, size: 16, warmupS: 2 },
  target: { ops_per_sec: 100_000, note: 'library overhead goal: 100,000 committed proposals/s in one process' },
  workload: (o) => ({
    operation: 'RaftNode.propose(payload) on the leader, resolved when applied',
    payload_bytes: o.size,
    members: MEMBERS,
    storage: 'MemoryStorage',
    network: 'LocalNetwork (in-process)',
  }),
  runOurs,
};

// Standalone use: node bench/dist/src/raft-inprocess.js [--duration S] ...
const self = fileURLToPath(import.meta.url);
if (process.argv[1] !== undefined && realpathSync(process.argv[1]) === self) {
  const { runStandalone } = await import('./runner.js');
  await runStandalone(raftBenchmark, process.argv.slice(2));
}
