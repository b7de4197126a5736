/**
 * Committed proposals per second and commit latency for a 5-member group in one process: RaftNode drivers over
 * the in-process network with in-memory storage. Measures the library's own overhead (core, driver, sessions),
 * not the disk or the network. Usage: node bench/dist/raft-inprocess.js [--duration S] [--concurrency C] [--size B]
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { LocalNetwork, MemoryStorage, RaftNode } from '@raftkit/raft';
import type { StateMachine } from '@raftkit/raft';
import { round, summarize } from './stats.js';

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

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : fallback;
}

async function main(): Promise<void> {
  const durationS = arg('duration', 10);
  const concurrency = arg('concurrency', 2000);
  const size = arg('size', 16);
  const ids = ['n1', 'n2', 'n3', 'n4', 'n5'];
  const net = new LocalNetwork();
  const bootstrap = Object.fromEntries(ids.map((id) => [id, id]));
  const nodes = await Promise.all(
    ids.map((id) =>
      RaftNode.start<Uint8Array, number>({ id, storage: new MemoryStorage(), transport: net.transport(id), stateMachine: new Register(), bootstrap, tickMs: 50, snapshotEvery: 50_000, requestTimeoutMs: 30_000 }),
    ),
  );
  let leader = nodes.find((n) => n.isLeader);
  while (leader === undefined) {
    await new Promise((r) => setTimeout(r, 20));
    leader = nodes.find((n) => n.isLeader);
  }
  const payload = new Uint8Array(size).fill(7);
  const latencies: number[] = [];
  let committed = 0;
  const started = performance.now();
  const end = started + durationS * 1000;
  let lastReport = started;
  const worker = async (): Promise<void> => {
    while (performance.now() < end) {
      const t0 = performance.now();
      await leader!.propose(payload);
      latencies.push(performance.now() - t0);
      committed++;
      const now = performance.now();
      if (now - lastReport > 1000) {
        lastReport = now;
        process.stderr.write(`  ${Math.round((now - started) / 1000)}s: ${committed} committed\n`);
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  const elapsedS = (performance.now() - started) / 1000;
  for (const n of nodes) await n.stop();
  const result = {
    ours: { ops_per_sec: round(committed / elapsedS, 0), ...summarize(latencies), members: 5, concurrency, payload_bytes: size, duration_s: round(elapsedS, 1) },
    target: { ops_per_sec: 100_000 },
    ratio: round(committed / elapsedS / 100_000, 2),
  };
  mkdirSync(new URL('../results/', import.meta.url), { recursive: true });
  writeFileSync(new URL('../results/raft-inprocess.json', import.meta.url), JSON.stringify(result, null, 2) + '\n');
  console.log(JSON.stringify(result, null, 2));
}

await main();
