/**
 * The bare node:http ceiling of the shortlink benchmark: `processes` separate Node processes, each on its own
 * port (as our app servers are), each answering every request with the same fixed 302. Clients spread over them
 * exactly as over our app servers (worker w -> process w mod n).
 */
import { fileURLToPath } from 'node:url';
import { startNodeServers, type NodeServers } from './daemon.js';

const serverScript = fileURLToPath(new URL('./node302-server.js', import.meta.url));

export type Node302 = NodeServers;

/** `headers` must hold `location`; they are sent as they are with every 302. */
export function startNode302(processes: number, headers: Record<string, string>): Promise<Node302> {
  return startNodeServers('bare node:http 302 servers', serverScript, processes, [JSON.stringify(headers)]);
}
