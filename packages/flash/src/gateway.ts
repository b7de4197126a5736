/**
 * The flash-deal gateway role: its settings (`cluster up --set key=value`), the inventory backend they select, and
 * the worker's start (the HTTP listener, the gateway's routes, its timers). The gateway itself, split by concern,
 * is gateway/ (gateway/index.ts says which part does what).
 */
import {
  clusterUrl,
  serveWorkerHttp,
  type RunningWorker,
  type WorkerOptions,
  type WorkerRole,
} from '@raftkit/http';
import type { InventoryBackend } from './inventory.js';
import { RaftInventory } from './raft-inventory.js';
import { Gateway } from './gateway/index.js';

export { Gateway } from './gateway/index.js';
export { BOT_COOKIE, DEAL_ID, STATE_CACHE_CONTROL, USER_ID, type AttemptAnswer } from './gateway/answers.js';
export { MAX_CACHED_TOKENS } from './gateway/admission.js';
export { PREWARM_LEAD_MS, SMOKE_LEAD_MS, SMOKE_MS } from './gateway/prewarm.js';

/** The gateway's settings (`cluster up --set key=value`). */
export interface GatewaySettings {
  /** Leading zero bits of the bot-check work. Default 16. */
  challengeBits: number;
  /** `async` is the deliberately broken inventory mode (rule 8): UNSAFE. Default `sync`. */
  replication: 'sync' | 'async';
  /** Per-IP bucket: refill per second (capacity twice that). Default 50. */
  ipRate: number;
  /** Per-user bucket: refill per second (capacity twice that). Default 2. */
  userRate: number;
  /** Take the client address from X-Forwarded-For (behind a trusted edge). Default false. */
  trustProxy: boolean;
  /** Expected peak attempts per second over all gateways: the smoke load is 1% of it. Default 2000. */
  expectedPeakRps: number;
  /** `inventory=redis://host:port`: the benchmark's peer backend; default ours (Raft). */
  inventory: string | null;
  /** The payment window of new deals; null: the spec's 10 minutes. A knob for tests (expiry in seconds). */
  reservationWindowMs: number | null;
}

export function gatewaySettings(settings: Record<string, string>): GatewaySettings {
  const int = (key: string, fallback: number, min: number, max: number): number => {
    const text = settings[key];
    if (text === undefined) return fallback;
    const n = Number(text);
    if (!Number.isSafeInteger(n) || n < min || n > max) throw new RangeError(`--set ${key}: expected an integer from ${min} to ${max}, got ${text}`);
    return n;
  };
  const replication = settings.inventory_replication ?? 'sync';
  if (replication !== 'sync' && replication !== 'async') throw new RangeError(`--set inventory_replication: sync or async, got ${replication}`);
  return {
    challengeBits: int('challenge_bits', 16, 0, 32),
    replication,
    ipRate: int('ip_rate', 50, 1, 10_000_000),
    userRate: int('user_rate', 2, 1, 1_000_000),
    trustProxy: settings.trust_proxy === '1' || settings.trust_proxy === 'true',
    expectedPeakRps: int('expected_peak_rps', 2_000, 1, 100_000_000),
    inventory: settings.inventory ?? null,
    reservationWindowMs: settings.reservation_window_ms === undefined ? null : int('reservation_window_ms', 600_000, 1_000, 86_400_000),
  };
}

export const gatewayRole: WorkerRole = {
  role: 'gateway',
  count: 2,
  start: startGateway,
};

/** Opens the backend `settings.inventory` names (ours by default; `redis://` is the benchmark's peer, its own file). */
async function openInventory(settings: GatewaySettings, options: WorkerOptions): Promise<InventoryBackend> {
  if (settings.inventory !== null && settings.inventory.startsWith('redis://')) {
    // Resolved at run time: the Redis peer lives in its own module (added for the benchmark), not needed by ours.
    const specifier = './redis-inventory.js';
    const mod = (await import(specifier)) as { createRedisInventory(url: string, options: WorkerOptions): Promise<InventoryBackend> | InventoryBackend };
    return mod.createRedisInventory(settings.inventory, options);
  }
  if (settings.inventory !== null && settings.inventory !== 'raft') throw new RangeError(`--set inventory: raft or redis://host:port, got ${settings.inventory}`);
  return new RaftInventory({ endpoints: options.members.map((m) => clusterUrl(m.httpAddress)), token: options.tokens[0]!, replication: settings.replication });
}

async function startGateway(options: WorkerOptions): Promise<RunningWorker> {
  const settings = gatewaySettings(options.settings);
  const backend = await openInventory(settings, options);
  const http = await serveWorkerHttp(options, {
    health: () => ({ deals: gateway?.dealCount() ?? 0, inventory_replication: settings.replication }),
  });
  const gateway: Gateway = new Gateway(options, settings, backend, http.metrics, options.logger);
  gateway.routes(http.router);
  gateway.start();
  return {
    httpPort: http.port,
    async stop() {
      gateway.stop();
      await http.close();
      await backend.close();
    },
  };
}
