/**
 * The deals' timetable on this gateway: each held deal refreshed about every second (every 100 ms in the last
 * seconds before start_at, so the go-live record is seen at once; rarely long before it or after the end), the
 * spec's pre-warm 2 minutes before go-live, the smoke load 1 minute before it for 30 s, and a deal forgotten
 * 15 minutes after its end.
 */
import type { Logger } from '@raftkit/http';
import type { InventoryBackend } from '../../inventory.js';
import { makeBotToken } from './tokens.js';
import { runSmoke, type SmokeReport } from './smoke.js';
import type { AttemptInput, AttemptResult } from './answers.js';
import type { DealCache, DealEntry } from './deal-cache.js';

/** Pre-warm this long before start_at; the smoke load at SMOKE_LEAD_MS before it, for SMOKE_MS. */
export const PREWARM_LEAD_MS = 2 * 60_000;
export const SMOKE_LEAD_MS = 60_000;
export const SMOKE_MS = 30_000;

interface PrewarmOptions {
  cache: DealCache;
  backend: InventoryBackend;
  logger: Logger;
  /** The gateway's id (names its synthetic users). */
  id: string;
  /** The cluster token: signs the smoke load's bot tokens. */
  secret: string;
  expectedPeakRps: number;
  gatewayCount: number;
  /** Runs one (synthetic) attempt through every gate. */
  attempt(input: AttemptInput): Promise<AttemptResult>;
  stopped(): boolean;
}

export class Prewarm {
  private refreshing = false;

  constructor(private readonly o: PrewarmOptions) {}

  async refreshDue(): Promise<void> {
    if (this.refreshing || this.o.stopped()) return;
    this.refreshing = true;
    try {
      const now = Date.now();
      for (const entry of this.o.cache.entries()) {
        const deal = entry.snapshot;
        if (now > deal.endAt + 15 * 60_000) {
          this.o.cache.drop(deal.dealId);
          continue;
        }
        // About every second while it sells (the spec's flag refresh); every 100 ms in the last seconds before
        // start_at, so the go-live record is seen at once; rarely long before it or after the end.
        const nearLive = deal.liveAt === null && now >= deal.startAt - 3_000;
        const idle = (deal.liveAt === null && now < deal.startAt - 10_000) || now >= deal.endAt;
        const every = nearLive ? 100 : idle ? 5_000 : 1_000;
        if (now - entry.refreshedAt >= every) await this.o.cache.refresh(entry).catch(() => undefined);
        // Pre-warm 2 minutes before go-live; the smoke load 1 minute before, for 30 s (once each).
        if (
          entry.prewarmedAt === null &&
          deal.liveAt === null &&
          now >= deal.startAt - PREWARM_LEAD_MS &&
          now < deal.startAt
        )
          await this.prewarm(entry).catch(() => undefined);
        if (
          entry.smoke === null &&
          deal.liveAt === null &&
          now >= deal.startAt - SMOKE_LEAD_MS &&
          now < deal.startAt - SMOKE_LEAD_MS + SMOKE_MS
        ) {
          void this.smoke(entry, Math.min(SMOKE_MS, deal.startAt - SMOKE_LEAD_MS + SMOKE_MS - now), this.smokeRps());
        }
      }
    } finally {
      this.refreshing = false;
    }
  }

  /**
   * The spec's pre-warm: the shard counts read back (filled at creation), this gateway's token share fixed, a
   * connection opened to every shard's group (the refresh and one probe per group), the landing state rendered.
   */
  async prewarm(entry: DealEntry): Promise<void> {
    await this.o.cache.refresh(entry);
    const groups = Math.min(entry.snapshot.shards, 64);
    await Promise.all(
      Array.from({ length: groups }, (_, shard) =>
        this.o.backend.probe(entry.snapshot.dealId, shard).catch(() => undefined),
      ),
    );
    entry.prewarmedAt = Date.now();
    this.o.logger.log('info', 'deal pre-warmed', {
      deal: entry.snapshot.dealId,
      tokens: entry.pool.remaining,
      remaining: entry.snapshot.remaining,
    });
  }

  /** This gateway's part of the smoke load: 1% of the expected peak, split over the gateways. */
  smokeRps(): number {
    return Math.max(1, Math.round((this.o.expectedPeakRps * 0.01) / this.o.gatewayCount));
  }

  async smoke(entry: DealEntry, ms: number, rps: number): Promise<void> {
    const report: SmokeReport = {
      started_at: new Date().toISOString(),
      seconds: ms / 1000,
      rps,
      sent: 0,
      answered: 0,
      refused: 0,
      errors: 0,
      done: false,
    };
    entry.smoke = report;
    const dealId = entry.snapshot.dealId;
    await runSmoke(
      report,
      ms,
      rps,
      () => this.o.stopped(),
      async (n) => {
        const userId = `synthetic-${this.o.id}-${n}`;
        const botToken = makeBotToken(this.o.secret, dealId, userId, Date.now() + 60_000);
        return this.o.attempt({
          dealId,
          userId,
          key: `smoke-${n}`,
          botToken,
          bearer: null,
          ip: `synthetic-${n % 100}`,
          synthetic: true,
        });
      },
    );
  }
}
