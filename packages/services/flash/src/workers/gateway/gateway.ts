/**
 * The flash-deal gateway role: its settings (`cluster up --set key=value`), the inventory backend they select, and
 * the worker's start (the HTTP listener, the gateway's routes, its timers). The gateway itself, split by concern,
 * is gateway/ (gateway/index.ts says which part does what).
 */
import {
  clusterUrl,
  serveWorkerHttp,
  SINGLE_THREADED_GC,
  type RunningWorker,
  type WorkerOptions,
  type WorkerRole,
} from '@raftkit/http';
import type { InventoryBackend } from '../../inventory.js';
import { RaftInventory } from '../../raft-inventory.js';
import { Gateway } from './index.js';

export { Gateway } from './index.js';
export { BOT_COOKIE, DEAL_ID, STATE_CACHE_CONTROL, USER_ID, type AttemptAnswer } from './answers.js';
export { MAX_CACHED_TOKENS } from './admission.js';
export { PREWARM_LEAD_MS, SMOKE_LEAD_MS, SMOKE_MS } from './prewarm.js';

/** The gateway's settings (`cluster up --set key=value`). */
export interface GatewaySettings {
  /** Leading zero bits of the bot-check work. Default 16. */
  challengeBits: number;
  /** Per-IP bucket: refill per second (capacity twice that). Default 50. */
  ipRate: number;
  /** Per-user bucket: refill per second (capacity twice that). Default 2. */
  userRate: number;
  /** Take the client address from X-Forwarded-For (behind a trusted edge). Default false. */
  trustProxy: boolean;
  /** Expected peak attempts per second over all gateways: the smoke load is 1% of it. Default 2000. */
  expectedPeakRps: number;
  /** The payment window of new deals; null: the spec's 10 minutes. A knob for tests (expiry in seconds). */
  reservationWindowMs: number | null;
}

export function gatewaySettings(settings: Record<string, string>): GatewaySettings {
  const int = (key: string, fallback: number, min: number, max: number): number => {
    const text = settings[key];
    if (text === undefined) return fallback;
    const n = Number(text);
    if (!Number.isSafeInteger(n) || n < min || n > max)
      throw new RangeError(`--set ${key}: expected an integer from ${min} to ${max}, got ${text}`);
    return n;
  };
  return {
    challengeBits: int('challenge_bits', 16, 0, 32),
    ipRate: int('ip_rate', 50, 1, 10_000_000),
    userRate: int('user_rate', 2, 1, 1_000_000),
    trustProxy: settings.trust_proxy === '1' || settings.trust_proxy === 'true',
    expectedPeakRps: int('expected_peak_rps', 2_000, 1, 100_000_000),
    reservationWindowMs:
      settings.reservation_window_ms === undefined ? null : int('reservation_window_ms', 600_000, 1_000, 86_400_000),
  };
}

/**
 * The gateway's node flags. A rejected attempt allocates a few hundred bytes that die with it (the request, the
 * parsed body, the answer's write); the crowd's state (buckets, cached tokens, answers) lives long. Garbage is
 * collected on the gateway's own thread (V8's helper threads took cores from the members and the other gateway on
 * this shared machine, CPU the rejection path paid for without it showing in the gateway's own profile), and the
 * young generation is fixed at 32 MB a semi-space, so scavenges come rarely and each copies only the few attempts
 * in flight.
 */
export const GATEWAY_NODE_FLAGS: readonly string[] = [
  ...SINGLE_THREADED_GC,
  '--max-semi-space-size=32',
  '--min-semi-space-size=32',
];

export const gatewayRole: WorkerRole = {
  role: 'gateway',
  count: 2,
  nodeFlags: GATEWAY_NODE_FLAGS,
  start: startGateway,
};

/**
 * The inventory a gateway of the cluster runs on: ours, the inventory groups on the members. Another backend (the
 * benchmark's Redis peer, a fault-injection variant) is passed to startGateway by its own entry script.
 */
function openInventory(options: WorkerOptions): InventoryBackend {
  return new RaftInventory({
    endpoints: options.members.map((m) => clusterUrl(m.httpAddress)),
    token: options.tokens[0]!,
  });
}

/** A gateway on `backend` (ours unless given), which it owns: closed when the gateway stops. */
export async function startGateway(
  options: WorkerOptions,
  backend: InventoryBackend = openInventory(options),
): Promise<RunningWorker> {
  const settings = gatewaySettings(options.settings);
  const http = await serveWorkerHttp(options, {
    health: () => ({ deals: gateway?.dealCount() ?? 0 }),
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
