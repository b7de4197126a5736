/**
 * The bare node:http ceiling of the shortlink benchmark: `processes` separate Node processes, each on its own
 * port (as our app servers are), each answering every request with the same fixed 302. Clients spread over them
 * exactly as over our app servers (worker w -> process w mod n).
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { onCleanup, removeLater } from '../cleanup.js';
import { freePortBlock } from '../procs.js';
import { spawnDaemon, stopDaemons, waitListening, type Daemon } from './daemon.js';

const serverScript = fileURLToPath(new URL('./node302-server.js', import.meta.url));

export interface Node302 {
  pids: number[];
  origins: string[];
  stop(): Promise<void>;
}

/** `headers` must hold `location`; they are sent as they are with every 302. */
export async function startNode302(processes: number, headers: Record<string, string>): Promise<Node302> {
  const dir = mkdtempSync(join(tmpdir(), 'raftkit-bench-node302-'));
  const removeDir = removeLater(dir);
  const daemons: Daemon[] = [];
  const stop = onCleanup('stop the node:http 302 servers', async () => {
    await stopDaemons(daemons);
    await removeDir();
  });
  const base = await freePortBlock(Array.from({ length: processes }, (_, i) => 1 + i));
  const origins = Array.from({ length: processes }, (_, i) => `http://127.0.0.1:${base + 1 + i}`);
  process.stderr.write(`bench: starting ${processes} bare node:http 302 servers on 127.0.0.1:${base + 1}-${base + processes}\n`);
  try {
    for (let i = 0; i < processes; i++) {
      const port = base + 1 + i;
      const daemon = spawnDaemon(`node302 server ${i + 1}`, process.execPath, [serverScript, String(port), JSON.stringify(headers)], { log: join(dir, `node302-${i + 1}.log`) });
      daemons.push(daemon);
      await waitListening(daemon, port);
    }
  } catch (e) {
    await stop();
    throw e;
  }
  return { pids: daemons.map((d) => d.pid), origins, stop };
}
