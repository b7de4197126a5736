/**
 * The bare `ws` broadcast peer of `bench auction`: `processes` ws-broadcast-server processes (as many as our
 * gateways), each on its own port. The harness plays the writer: it posts each update once to every process,
 * which sends it to its sockets.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { onCleanup, removeLater } from '../cleanup.js';
import { freePortBlock } from '../procs.js';
import { spawnDaemon, stopDaemons, waitListening, type Daemon } from './daemon.js';

const serverScript = fileURLToPath(new URL('./ws-broadcast-server.js', import.meta.url));

export interface WsBroadcast {
  pids: number[];
  origins: string[];
  stop(): Promise<void>;
}

export async function startWsBroadcast(processes: number): Promise<WsBroadcast> {
  const dir = mkdtempSync(join(tmpdir(), 'raftkit-bench-wsb-'));
  const removeDir = removeLater(dir);
  const daemons: Daemon[] = [];
  const stop = onCleanup('stop the bare ws broadcast servers', async () => {
    await stopDaemons(daemons);
    await removeDir();
  });
  const base = await freePortBlock(Array.from({ length: processes }, (_, i) => 1 + i));
  const origins = Array.from({ length: processes }, (_, i) => `http://127.0.0.1:${base + 1 + i}`);
  process.stderr.write(`bench: starting ${processes} bare ws broadcast servers on 127.0.0.1:${base + 1}-${base + processes}\n`);
  try {
    for (let i = 0; i < processes; i++) {
      const port = base + 1 + i;
      const daemon = spawnDaemon(`ws broadcast server ${i + 1}`, process.execPath, [serverScript, String(port)], { log: join(dir, `wsb-${i + 1}.log`) });
      daemons.push(daemon);
      await waitListening(daemon, port);
    }
  } catch (e) {
    await stop();
    throw e;
  }
  return { pids: daemons.map((d) => d.pid), origins, stop };
}
