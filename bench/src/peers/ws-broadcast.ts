/**
 * The bare `ws` broadcast peer of `bench auction`: `processes` ws-broadcast-server processes (as many as our
 * gateways), each on its own port. The harness plays the writer: it posts each update once to every process,
 * which sends it to its sockets.
 */
import { fileURLToPath } from 'node:url';
import { startNodeServers, type NodeServers } from './daemon.js';

const serverScript = fileURLToPath(new URL('./ws-broadcast-server.js', import.meta.url));

type WsBroadcast = NodeServers;

export function startWsBroadcast(processes: number): Promise<WsBroadcast> {
  return startNodeServers('bare ws broadcast servers', serverScript, processes);
}
