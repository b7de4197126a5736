/**
 * The y-websocket peer: the reference Yjs WebSocket server (npm `@y/websocket-server`, the server half of
 * y-websocket, run with its own bin script as a user would) on 127.0.0.1, one process, documents in memory
 * (its default: no YPERSISTENCE), garbage collection on (its default).
 */
import { mkdtempSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { removeLater } from '../cleanup.js';
import { freePortBlock } from '../procs.js';
import { spawnDaemon, stopDaemons, waitListening, type Daemon } from './daemon.js';

interface YWebsocketServer {
  url: string;
  pid: number;
  log: string;
  stop(): Promise<void>;
}

/** The server script of the installed @y/websocket-server (its `y-websocket` bin). */
function serverScript(): string {
  const require = createRequire(import.meta.url);
  return join(dirname(require.resolve('@y/websocket-server/package.json')), 'src', 'server.js');
}

export async function startYWebsocket(): Promise<YWebsocketServer> {
  const dir = mkdtempSync(join(tmpdir(), 'raftkit-bench-ywebsocket-'));
  const remove = removeLater(dir);
  const port = await freePortBlock([0]);
  const log = join(dir, 'server.log');
  const daemon: Daemon = spawnDaemon('y-websocket', process.execPath, [serverScript()], {
    log,
    env: { ...process.env, HOST: '127.0.0.1', PORT: String(port) },
  });
  const stop = async (): Promise<void> => {
    await stopDaemons([daemon]);
    await remove();
  };
  try {
    await waitListening(daemon, port);
  } catch (e) {
    await stop();
    throw e;
  }
  return { url: `ws://127.0.0.1:${port}`, pid: daemon.pid, log, stop };
}
