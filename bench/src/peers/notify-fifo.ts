/**
 * The `notify` benchmark's FIFO side: a notify cluster started without its router and channel worker
 * (`--workers router=0,delivery=0`: the members, the stand-in providers), then those two started here on the FIFO
 * layout (notify-fifo-worker.ts), on free loopback ports, logs and spec files in a temporary folder.
 */
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { PeerAddress } from '@raftkit/http';
import { onCleanup, removeLater } from '../cleanup.js';
import type { OurCluster } from '../ours.js';
import { freePortBlock } from '../procs.js';
import { spawnDaemon, stopDaemons, waitListening, type Daemon } from './daemon.js';
import type { FifoWorkerSpec } from './notify-fifo-worker.js';

const script = fileURLToPath(new URL('./notify-fifo-worker.js', import.meta.url));

/** What the cluster CLI is asked for so that these two are the only router and channel worker. */
export const FIFO_CLUSTER_WORKERS = { router: 0, delivery: 0 };

export interface FifoWorkers {
  pids: number[];
  stop(): Promise<void>;
}

const address = (url: string): string => url.replace(/^https?:\/\//, '');

export async function startFifoWorkers(cluster: OurCluster, settings: Record<string, string>): Promise<FifoWorkers> {
  const dir = mkdtempSync(join(tmpdir(), 'raftkit-bench-notify-fifo-'));
  const removeDir = removeLater(dir);
  const daemons: Daemon[] = [];
  const stop = onCleanup('stop the notify fifo router and channel worker', async () => {
    await stopDaemons(daemons);
    await removeDir();
  });
  try {
    const base = await freePortBlock([1, 2, 3, 4]);
    const own = [
      {
        id: 'router1',
        role: 'router' as const,
        httpAddress: `127.0.0.1:${base + 1}`,
        tcpAddress: `127.0.0.1:${base + 2}`,
      },
      {
        id: 'delivery1',
        role: 'delivery' as const,
        httpAddress: `127.0.0.1:${base + 3}`,
        tcpAddress: `127.0.0.1:${base + 4}`,
      },
    ];
    const members: PeerAddress[] = cluster.members.map((m) => ({
      id: m.id,
      role: 'member',
      httpAddress: address(m.url),
    }));
    const workers: PeerAddress[] = [
      ...cluster.workers.map((w) => ({
        id: w.id,
        role: w.role,
        httpAddress: address(w.url),
        tcpAddress: w.tcpAddress,
      })),
      ...own,
    ];
    process.stderr.write(
      `bench: starting the notify router and channel worker on the fifo layout at 127.0.0.1:${base + 1}, ${base + 3}\n`,
    );
    for (const w of own) {
      const dataDir = join(dir, w.id);
      mkdirSync(dataDir, { recursive: true });
      const spec: FifoWorkerSpec = { ...w, dataDir, members, workers, token: cluster.token, settings };
      const file = join(dataDir, 'spec.json');
      writeFileSync(file, JSON.stringify(spec), { mode: 0o600 });
      daemons.push(
        spawnDaemon(`notify ${w.id} (fifo)`, process.execPath, [script, file], { log: join(dataDir, 'worker.log') }),
      );
    }
    await waitListening(daemons[0]!, base + 1, 30_000);
    await waitListening(daemons[1]!, base + 3, 30_000);
    return { pids: daemons.map((d) => d.pid), stop };
  } catch (e) {
    await stop();
    throw e;
  }
}
