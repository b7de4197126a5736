/**
 * The deals this gateway holds: learned from the inventory (on first sight, and by discovery every few seconds),
 * each with its copy of the counts and alive-shards bitmap (refreshed, one refresh in flight per deal), its share
 * of the admission-token pool (fixed on first sight), the answers given here, the winners and admitted keys it
 * knows of, and the landing state rendered once per refresh.
 */
import { fullCounter, HttpError, take, type BucketCounter, type BucketLimits } from '@raftkit/http';
import { AliveShards, distributeTokens, poolSize, TokenPool } from './gates.js';
import { snapshotState, type DealSnapshot, type InventoryBackend } from '../../inventory.js';
import type { DealState } from '../../machine.js';
import type { SmokeReport } from './smoke.js';
import { inventoryCall, type AttemptAnswer } from './answers.js';

/** Answers remembered per deal per gateway (a retried key on this gateway costs nothing, not even a token). */
const MAX_ANSWERS = 200_000;
/** Admitted keys kept per deal: far above any pool this machine serves (3 per unit), a bound against misuse. */
const MAX_ADMITTED = 1_000_000;
/** Lookups of deals this gateway does not know yet: 20 a second. */
const LOOKUP_LIMITS: BucketLimits = { capacity: 20, refillRate: 20 };

export interface DealEntry {
  snapshot: DealSnapshot;
  alive: AliveShards;
  /**
   * True while `alive` holds shards this gateway saw emptied by its own reservations since the last refresh: the
   * bitmap is then ahead of `winners` (a win through another gateway may have taken a unit this gateway has not
   * heard of), so an empty bitmap is not yet a sold out to answer from memory. A refresh sets both from one copy.
   */
  aheadOfWinners: boolean;
  /** This gateway's share of the admission-token pool (pre-distributed when the deal is first seen). */
  pool: TokenPool;
  answers: Map<string, AttemptAnswer>;
  /** The deal's winners as the inventory reported them (userId -> their won answer), for retries through here. */
  winners: Map<string, AttemptAnswer>;
  /** Keys (user NUL key) admitted by a gateway (this one or, announced, another): at most the token pool. */
  admitted: Set<string>;
  /**
   * userId -> the key of their attempt that holds an admission token (admitted here or, announced, by another
   * gateway) until it is decided here: one token per account per deal at a time.
   */
  holders: Map<string, string>;
  pending: Map<string, Promise<AttemptAnswer>>;
  /** When the last refresh that completed started (its copy is at least that fresh). */
  refreshedAt: number;
  /** The refresh in flight, if any (one at a time per deal, shared). */
  inflight: Promise<void> | null;
  /** When the refresh in flight began (its copy holds every win committed before then). */
  inflightStartedAt: number;
  prewarmedAt: number | null;
  smoke: SmokeReport | null;
  /** The landing state, rendered once per refresh (the pre-rendered page of the spec's pre-warm). */
  stateBody: string;
  /** The state `stateBody` shows: rendered again when the clock moves the deal on (to ended) between refreshes. */
  stateShown: DealState;
  /** The 409 deal_not_live refusal of this deal, built once (the burst before go-live answers many). */
  notLive?: HttpError;
}

/** What the cache tells its owner: a deal first held here, and a deal forgotten. */
interface DealCacheHooks {
  adopted(entry: DealEntry): void;
  dropped(dealId: string): void;
}

export class DealCache {
  private readonly deals = new Map<string, DealEntry>();
  private readonly loading = new Map<string, Promise<DealEntry | null>>();
  /** Deal ids the inventory did not know, and when: a flood of made-up ids costs one lookup a second each. */
  private readonly unknown = new Map<string, number>();
  private readonly lookups: BucketCounter = fullCounter(LOOKUP_LIMITS, Date.now());

  constructor(
    private readonly backend: InventoryBackend,
    private readonly gatewayIndex: number,
    private readonly gatewayCount: number,
    private readonly hooks: DealCacheHooks,
  ) {}

  get size(): number {
    return this.deals.size;
  }

  /** The deal if this gateway holds it (memory only). */
  get(dealId: string): DealEntry | undefined {
    return this.deals.get(dealId);
  }

  entries(): IterableIterator<DealEntry> {
    return this.deals.values();
  }

  /** Forgets a deal (long over). */
  drop(dealId: string): void {
    if (this.deals.delete(dealId)) this.hooks.dropped(dealId);
  }

  async dealEntry(dealId: string): Promise<DealEntry | null> {
    const entry = this.deals.get(dealId);
    if (entry !== undefined) return entry;
    const now = Date.now();
    const miss = this.unknown.get(dealId);
    if (miss !== undefined && now - miss < 1_000) return null;
    // A flood of made-up deal ids must not become inventory reads: lookups of deals this gateway has not learned
    // yet share a small bucket (the discovery round learns real ones within 2 s anyway).
    if (!this.loading.has(dealId) && !take(this.lookups, LOOKUP_LIMITS, now).allowed) return null;
    return this.load(dealId, false);
  }

  load(dealId: string, mustExist: boolean): Promise<DealEntry | null> {
    let loading = this.loading.get(dealId);
    if (loading === undefined) {
      loading = inventoryCall(() => this.backend.deal(dealId))
        .then((snapshot) => {
          if (snapshot === null) {
            if (mustExist)
              throw new HttpError(
                503,
                'unavailable',
                `deal ${dealId} was created but is not readable yet`,
                {},
                { 'retry-after': '1' },
              );
            if (this.unknown.size > 100_000) this.unknown.clear();
            this.unknown.set(dealId, Date.now());
            return null;
          }
          return this.adopt(snapshot);
        })
        .finally(() => this.loading.delete(dealId));
      this.loading.set(dealId, loading);
    }
    return loading;
  }

  /** First sight of a deal: its share of the token pool is fixed now (pre-distribution) and never refilled. */
  private adopt(snapshot: DealSnapshot): DealEntry {
    const existing = this.deals.get(snapshot.dealId);
    if (existing !== undefined) {
      learnWinners(existing, snapshot);
      return existing;
    }
    const share = distributeTokens(poolSize(snapshot.totalInventory), this.gatewayCount)[this.gatewayIndex]!;
    const entry: DealEntry = {
      snapshot,
      alive: new AliveShards(snapshot.shards, snapshot.alive),
      aheadOfWinners: snapshot.winnersComplete === false,
      pool: new TokenPool(share),
      answers: new Map(),
      winners: new Map(),
      admitted: new Set(),
      holders: new Map(),
      pending: new Map(),
      refreshedAt: Date.now(),
      inflight: null,
      inflightStartedAt: 0,
      prewarmedAt: null,
      smoke: null,
      stateBody: '',
      stateShown: 'upcoming',
    };
    stateBodyOf(entry, true);
    learnWinners(entry, snapshot);
    this.deals.set(snapshot.dealId, entry);
    this.hooks.adopted(entry);
    return entry;
  }

  /** A refresh of the deal's copy (counts, bitmap, go-live, new winners): one in flight per deal, shared. */
  refresh(entry: DealEntry, startedNoEarlierThan?: number): Promise<void> {
    if (entry.inflight !== null) {
      if (startedNoEarlierThan === undefined || entry.inflightStartedAt >= startedNoEarlierThan) return entry.inflight;
      // The read in flight began before what the caller must see (a win answered elsewhere before its retry came
      // here): the next one, started after it, is the caller's.
      return entry.inflight.then(
        () => this.refresh(entry, startedNoEarlierThan),
        () => this.refresh(entry, startedNoEarlierThan),
      );
    }
    const startedAt = Date.now();
    entry.inflightStartedAt = startedAt;
    entry.inflight = this.backend
      .deal(entry.snapshot.dealId)
      .then((snapshot) => {
        entry.refreshedAt = startedAt;
        if (snapshot === null) return;
        entry.snapshot = snapshot;
        // The bitmap and the winners from one copy: each group's counts and winners are read together, so a shard
        // empty here has all its winners in `winners` (learned below).
        entry.alive = new AliveShards(snapshot.shards, snapshot.alive);
        // A winner list the backend cut short leaves the bitmap ahead of the winners until a refresh brings the rest.
        entry.aheadOfWinners = snapshot.winnersComplete === false;
        stateBodyOf(entry, true);
        learnWinners(entry, snapshot);
      })
      .finally(() => {
        entry.inflight = null;
      });
    return entry.inflight;
  }

  /** Learns the deals the inventory holds that this gateway does not yet. */
  async discover(stopped: () => boolean): Promise<void> {
    if (stopped()) return;
    try {
      for (const id of await this.backend.dealIds()) if (!this.deals.has(id)) await this.load(id, false);
    } catch {
      // The members may be electing; the next round learns the deals.
    }
  }
}

export function rememberAdmitted(entry: DealEntry, userId: string, key: string): void {
  if (entry.admitted.size >= MAX_ADMITTED) return;
  entry.admitted.add(`${userId}\u0000${key}`);
  // The latest key admitted for the user holds their token (a later one is admitted only once the earlier one
  // was decided, or in the few milliseconds before another gateway's admission message arrives).
  entry.holders.set(userId, key);
}

function learnWinners(entry: DealEntry, snapshot: DealSnapshot): void {
  for (const w of snapshot.winners) {
    entry.winners.set(w.userId, {
      status: 'won',
      reservation_id: w.reservationId,
      expires_at: new Date(w.expiresAt).toISOString(),
    });
  }
}

export function remember(answers: Map<string, AttemptAnswer>, key: string, answer: AttemptAnswer): void {
  if (answers.size >= MAX_ANSWERS) answers.delete(answers.keys().next().value!);
  answers.set(key, answer);
}

/** The landing state as rendered, again only when the deal's state moved since (or after a refresh). */
export function stateBodyOf(entry: DealEntry, refreshed = false): string {
  const now = Date.now();
  const state = snapshotState(entry.snapshot, now);
  if (refreshed || state !== entry.stateShown) {
    entry.stateBody = renderState(entry.snapshot, now);
    entry.stateShown = state;
  }
  return entry.stateBody;
}

/** The landing state: `{state, remaining}` (remaining once live). */
function renderState(deal: DealSnapshot, now: number): string {
  const state = snapshotState(deal, now);
  const body: Record<string, unknown> = { deal_id: deal.dealId, state };
  if (state === 'live' || state === 'sold_out') body.remaining = deal.remaining;
  body.start_at = new Date(deal.startAt).toISOString();
  body.end_at = new Date(deal.endAt).toISOString();
  return JSON.stringify(body);
}
