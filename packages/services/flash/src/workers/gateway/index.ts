/**
 * The flash-deal gateway: a worker role (`cluster up --service flash` starts 2) serving the public surface. The
 * gates run in the spec's order, each answering as early and as cheaply as it can, and only the last reaches the
 * inventory:
 *
 *   state (cacheable) -> bot check (429) -> per-IP and per-user token buckets (local memory) -> admission-token
 *   pool (local memory; empty: sold out) -> alive-shards bitmap (local copy; empty: sold out) -> the home shard,
 *   at most one re-route -> (the reservation is the same committed entry as the decrement).
 *
 * Deals are learned from the inventory (every few seconds, and on first sight) and refreshed about every second
 * (every 100 ms in the last seconds before start_at): the go-live is the inventory's recorded broadcast, trusted over
 * this process's clock. See README.md for every decision.
 *
 * This module wires the parts, one concern each: admission.ts (body checks, bot check, buckets, tokens),
 * deal-cache.ts (the deals held here), attempt.ts (a deal's gates and the inventory), peers.ts (wins and admitted
 * keys told to the other gateways), prewarm.ts (refresh, pre-warm, smoke), routes.ts and fast-routes.ts (the HTTP
 * surface), tallies.ts (outcomes by gate), answers.ts (answers and refusals as written).
 */
import type { Logger, MetricsRegistry, Router, WorkerOptions } from '@raftkit/http';
import type { InventoryBackend } from '../../inventory.js';
import type { AttemptInput, AttemptResult } from './answers.js';
import { Admission } from './admission.js';
import { Attempts } from './attempt.js';
import { DealCache, type DealEntry } from './deal-cache.js';
import { FastRoutes } from './fast-routes.js';
import { peerRoutes, Peers } from './peers.js';
import { Prewarm } from './prewarm.js';
import { Routes } from './routes.js';
import { Tallies } from './tallies.js';

/** What the gateway reads of its settings (the settings module's GatewaySettings has these and more). */
interface GatewayParts {
  challengeBits: number;
  ipRate: number;
  userRate: number;
  trustProxy: boolean;
  expectedPeakRps: number;
  reservationWindowMs: number | null;
}

export class Gateway {
  private readonly cache: DealCache;
  private readonly tallies: Tallies;
  private readonly admission: Admission;
  private readonly peers: Peers;
  private readonly attempts: Attempts;
  private readonly prewarmer: Prewarm;
  private readonly fast: FastRoutes;
  private readonly http: Routes;
  private timers: NodeJS.Timeout[] = [];
  private stopped = false;

  constructor(
    options: WorkerOptions,
    readonly settings: GatewayParts,
    readonly backend: InventoryBackend,
    metrics: MetricsRegistry,
    logger: Logger,
  ) {
    const secret = options.tokens[0]!;
    const gateways = options.workers.filter((w) => w.role === options.role);
    const gatewayCount = Math.max(1, gateways.length);
    const gatewayIndex = Math.max(
      0,
      gateways.findIndex((w) => w.id === options.id),
    );
    const stopped = (): boolean => this.stopped;
    this.tallies = new Tallies(metrics);
    this.cache = new DealCache(backend, gatewayIndex, gatewayCount, {
      adopted: (entry) => this.fast.add(entry),
      dropped: (dealId) => this.fast.drop(dealId),
    });
    this.admission = new Admission(secret, options.tokens, settings, this.tallies);
    this.peers = new Peers(options, secret);
    this.attempts = new Attempts({
      cache: this.cache,
      admission: this.admission,
      peers: this.peers,
      tallies: this.tallies,
      backend,
      logger,
      gatewayIndex,
      gatewayCount,
      stopped,
    });
    this.prewarmer = new Prewarm({
      cache: this.cache,
      backend,
      logger,
      id: options.id,
      secret,
      expectedPeakRps: settings.expectedPeakRps,
      gatewayCount,
      attempt: (input) => this.attempt(input),
      stopped,
    });
    this.fast = new FastRoutes(this.cache, this.admission, this.attempts, logger);
    this.http = new Routes({
      cache: this.cache,
      admission: this.admission,
      attempts: this.attempts,
      prewarm: this.prewarmer,
      backend,
      secret,
      challengeBits: settings.challengeBits,
      reservationWindowMs: settings.reservationWindowMs,
    });
  }

  dealCount(): number {
    return this.cache.size;
  }

  start(): void {
    // Refresh each deal about every second (every 100 ms near go-live), learn new deals every 2 s, pre-warm and
    // smoke-test them on time, and forget idle buckets.
    this.timers.push(setInterval(() => void this.prewarmer.refreshDue(), 100));
    this.timers.push(setInterval(() => void this.cache.discover(() => this.stopped), 2_000));
    this.timers.push(setInterval(() => this.admission.sweepBuckets(), 10_000));
    this.timers.push(setInterval(() => this.tallies.flush(), 100));
    for (const t of this.timers) t.unref();
    void this.cache.discover(() => this.stopped);
  }

  stop(): void {
    this.stopped = true;
    this.peers.close();
    this.tallies.flush();
    for (const t of this.timers) clearInterval(t);
    this.timers = [];
  }

  /** The routes, in the table's order; then each held deal's exact routes (attempt, state). */
  routes(router: Router): void {
    this.http.publicRoutes(router);
    peerRoutes(router, this.cache);
    this.http.dealAdminRoutes(router);
    this.fast.attach(router);
  }

  /**
   * The gates, in the spec's order. `synthetic` attempts (the pre-go-live smoke load) run every gate as a dry run:
   * separate buckets, the pool only looked at, the route computed and the shard's count read, nothing written.
   */
  attempt(input: AttemptInput): Promise<AttemptResult> {
    return this.attempts.attempt(input);
  }

  /** The spec's pre-warm of a deal (see Prewarm.prewarm). */
  prewarm(entry: DealEntry): Promise<void> {
    return this.prewarmer.prewarm(entry);
  }
}
