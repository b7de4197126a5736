/**
 * The `flash` benchmark's peer side: GATEWAYS processes of flash's gateway (flash-redis-gateway.ts) on a Redis
 * inventory, each on its own loopback port, with a fresh cluster token; logs, spec files and cleanup in a temporary
 * folder. The Redis server itself is started by the caller (redis.ts).
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { onCleanup, removeLater } from '../cleanup.js';
import { freePortBlock } from '../procs.js';
import { spawnDaemon, stopDaemons, waitListening, type Daemon } from './daemon.js';
import { GATEWAY_NODE_FLAGS } from '@raftkit/flash';
import type { RedisGatewaySpec } from './flash-redis-gateway.js';

const script = fileURLToPath(new URL('./flash-redis-gateway.js', import.meta.url));

interface RedisGateways {
  token: string;
  gateways: Array<{ url: string; pid: number }>;
  stop(): Promise<void>;
}

export async function startRedisGateways(o: {
  count: number;
  redisPort: number;
  settings: Record<string, string>;
  env?: NodeJS.ProcessEnv;
}): Promise<RedisGateways> {
  const dir = mkdtempSync(join(tmpdir(), 'raftkit-bench-flash-redis-'));
  const removeDir = removeLater(dir);
  const daemons: Daemon[] = [];
  const stop = onCleanup('stop the flash gateways on redis', async () => {
    await stopDaemons(daemons);
    await removeDir();
  });
  try {
    const token = randomBytes(24).toString('hex');
    // Per gateway: its HTTP port, then the second listener's (unused by the gateway; the worker contract has one).
    const base = await freePortBlock(Array.from({ length: 2 * o.count }, (_, i) => 1 + i));
    const gateways = Array.from({ length: o.count }, (_, i) => ({
      id: `gateway${i + 1}`,
      role: 'gateway',
      httpAddress: `127.0.0.1:${base + 1 + 2 * i}`,
      tcpAddress: `127.0.0.1:${base + 2 + 2 * i}`,
    }));
    process.stderr.write(
      `bench: starting ${o.count} flash gateways on redis at 127.0.0.1:${base + 1}-${base + 2 * o.count}\n`,
    );
    for (const [i, g] of gateways.entries()) {
      const dataDir = join(dir, g.id);
      mkdirSync(dataDir, { recursive: true });
      const spec: RedisGatewaySpec = {
        id: g.id,
        index: i + 1,
        dataDir,
        httpAddress: g.httpAddress,
        tcpAddress: g.tcpAddress,
        gateways,
        token,
        settings: o.settings,
        redisUrl: `redis://127.0.0.1:${o.redisPort}`,
      };
      const file = join(dataDir, 'spec.json');
      writeFileSync(file, JSON.stringify(spec), { mode: 0o600 });
      // The node flags of our gateways (the same gateway code on both sides; only the inventory differs).
      const daemon = spawnDaemon(
        `flash gateway ${g.id} (redis)`,
        process.execPath,
        [...GATEWAY_NODE_FLAGS, script, file],
        {
          log: join(dataDir, 'gateway.log'),
          env: { ...process.env, ...o.env },
        },
      );
      daemons.push(daemon);
    }
    for (const [i, d] of daemons.entries()) await waitListening(d, base + 1 + 2 * i, 30_000);
    return {
      token,
      gateways: gateways.map((g, i) => ({ url: `http://${g.httpAddress}`, pid: daemons[i]!.pid })),
      stop,
    };
  } catch (e) {
    await stop();
    throw e;
  }
}
