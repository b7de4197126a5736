/**
 * One flash gateway on the Redis inventory, as the `flash` benchmark's peer runs it: `node flash-redis-gateway.js
 * SPEC`, SPEC a JSON file (RedisGatewaySpec) written by flash-redis.ts. It is flash's own gateway code
 * (`startGateway` of @raftkit/flash) with the inventory passed in as an object: the RedisInventory of this folder.
 * No Raft members: the Redis design has none. Logs one JSON object a line on stdout; stops on SIGTERM or SIGINT.
 */
import { readFileSync } from 'node:fs';
import { jsonLogger, type PeerAddress } from '@raftkit/http';
import { startGateway } from '@raftkit/flash';
import { RedisInventory } from './redis-inventory.js';

export interface RedisGatewaySpec {
  /** gateway1, gateway2...: the role and its 1-based index. */
  id: string;
  index: number;
  dataDir: string;
  httpAddress: string;
  tcpAddress: string;
  /** Every gateway of the side, this one included (they announce wins and admitted keys to each other). */
  gateways: PeerAddress[];
  /** The cluster token (admin calls, the token HMACs). */
  token: string;
  /** The gateway settings, as `cluster up --set` gives them to ours. */
  settings: Record<string, string>;
  /** redis://host:port */
  redisUrl: string;
}

const spec = JSON.parse(readFileSync(process.argv[2] ?? '', 'utf8')) as RedisGatewaySpec;
const logger = jsonLogger(() => ({ worker: spec.id, role: 'gateway', service: 'flash' }));
const running = await startGateway(
  {
    id: spec.id,
    role: 'gateway',
    index: spec.index,
    dataDir: spec.dataDir,
    httpAddress: spec.httpAddress,
    tcpAddress: spec.tcpAddress,
    members: [],
    workers: spec.gateways,
    tokens: [spec.token],
    service: 'flash',
    settings: spec.settings,
    logger,
  },
  new RedisInventory({ url: spec.redisUrl }),
);
logger.log('info', 'worker ready', { http: spec.httpAddress, inventory: spec.redisUrl });

let stopping = false;
const stop = (signal: string): void => {
  if (stopping) return;
  stopping = true;
  logger.log('info', 'stopping', { signal });
  void running.stop().finally(() => process.exit(0));
};
process.on('SIGTERM', () => stop('SIGTERM'));
process.on('SIGINT', () => stop('SIGINT'));
