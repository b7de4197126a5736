/**
 * An attempt through a deal's gates, after the admission checks: a key already answered here, the deal's state,
 * the winners, the user's held token, the admission-token pool and the alive-shards bitmap (sold out answered here,
 * no inventory call), then the inventory: home shard first, at most one re-route, decided in the background when
 * not in time (queued, polled on state).
 */
import { randomBytes } from 'node:crypto';
import { conflict, HttpError, notFound, type Logger } from '@raftkit/http';
import {
  AliveShards,
  distributeTokens,
  firstRoute,
  homeShard,
  nextRoute,
  poolSize,
  rerouteCandidate,
  tokensValid,
  type RouteDecision,
} from './gates.js';
import { snapshotState, type InventoryBackend, type ReserveOutcome } from '../../inventory.js';
import {
  ADMISSION_BUSY,
  inventoryCall,
  promiseWithin,
  SOLD_OUT,
  wonAnswer,
  type AttemptAnswer,
  type AttemptInput,
  type AttemptResult,
} from './answers.js';
import type { Admission } from './admission.js';
import { remember, type DealCache, type DealEntry } from './deal-cache.js';
import type { Peers } from './peers.js';
import type { Tallies } from './tallies.js';

/** A queued attempt is retried in the background until decided or this long has passed. */
const QUEUED_PATIENCE_MS = 120_000;

/** What the local gates leave to wait for (numbers, not objects: nothing allocated to say it). */
type Next = 0 | 1 | 2 | 3 | 4 | 5;
const NEXT_INVENTORY = 0;
const NEXT_EVERY_SHARD = 1;
const NEXT_PENDING = 2;
const NEXT_SYNTHETIC = 3;
/** The user's earlier attempt (another key) still holds an admission token: wait for it, take none. */
const NEXT_HOLDER = 4;
/** The bitmap is empty from this gateway's own reservations, ahead of the winners it knows: refresh, then the gates again. */
const NEXT_REFRESH = 5;

interface AttemptsOptions {
  cache: DealCache;
  admission: Admission;
  peers: Peers;
  tallies: Tallies;
  backend: InventoryBackend;
  logger: Logger;
  gatewayIndex: number;
  gatewayCount: number;
  stopped(): boolean;
}

export class Attempts {
  private readonly cache: DealCache;
  private readonly tallies: Tallies;
  private readonly backend: InventoryBackend;

  constructor(private readonly o: AttemptsOptions) {
    this.cache = o.cache;
    this.tallies = o.tallies;
    this.backend = o.backend;
  }

  /**
   * The gates, in the spec's order. `synthetic` attempts (the pre-go-live smoke load) run every gate as a dry run:
   * separate buckets, the pool only looked at, the route computed and the shard's count read, nothing written.
   */
  async attempt(input: AttemptInput): Promise<AttemptResult> {
    const now = Date.now();
    this.o.admission.frontGates(input, now);
    return this.attemptAfterFront(input, now);
  }

  /** After the bot check, the rate limits and the user: the deal (loaded if need be), then the local gates and the inventory. */
  async attemptAfterFront(input: AttemptInput, now: number): Promise<AttemptResult> {
    const entry = this.cache.get(input.dealId) ?? (await this.cache.dealEntry(input.dealId));
    if (entry === null) throw notFound(`no deal ${input.dealId}`, { deal_id: input.dealId });
    const next = this.localGates(entry, input, now);
    if (typeof next === 'object') return next;
    return this.afterLocalGates(entry, input, next);
  }

  /**
   * The deal's gates that answer from this gateway's memory: a key already answered here, the deal's state, the
   * winners and the pool and bitmap (sold out). Returns the answer, or what must be awaited next (`Next`); a
   * taken admission token is taken here, synchronously, exactly once.
   */
  localGates(entry: DealEntry, input: AttemptInput, now: number, mayRefresh = true): AttemptAnswer | Next {
    const state = snapshotState(entry.snapshot, now);
    const userKey = input.synthetic ? '' : `${input.userId}\u0000${input.key}`;
    if (!input.synthetic) {
      // A retried key on this gateway: the same answer, no token spent. (Through another gateway the inventory
      // remembers the key, or the winner set answers the user's reservation.)
      const known = entry.answers.get(userKey);
      if (known !== undefined) return this.tallies.count('retry', known);
      // Still being decided here (queued): wait for that same decision as a fresh attempt would, then queued.
      if (entry.pending.has(userKey)) return NEXT_PENDING;
    }
    if (state === 'ended' || !tokensValid(entry.snapshot.endAt, now)) {
      this.tallies.tally('state', 'ended');
      throw conflict('deal_ended', `deal ${input.dealId} has ended`, { state: 'ended' });
    }
    if (state === 'upcoming' && !input.synthetic) {
      this.tallies.tally('state', 'upcoming');
      entry.notLive ??= new HttpError(
        409,
        'deal_not_live',
        `deal ${input.dealId} is not live yet; poll its state`,
        { state: 'upcoming', start_at: new Date(entry.snapshot.startAt).toISOString() },
        { 'retry-after': '1' },
      );
      throw entry.notLive;
    }
    // Gate 3: the admission-token pool, then the bitmap: sold out answered here, no inventory call. A winner (any
    // key, through any gateway) is answered their win and takes no token: every gateway announces a win to the
    // others before it answers it (and learns the rest with its refresh). A user whose earlier attempt (another
    // key) still holds a token waits for it instead of taking a second one. A key another gateway admitted (it
    // spent a token there: it may be deciding it now) goes to the inventory, which answers it what it decided or
    // decides it once: never a local sold out for a key that may have won.
    if (!input.synthetic) {
      const winner = entry.winners.get(input.userId);
      if (winner !== undefined) return this.tallies.count('winners', winner);
      const held = entry.holders.get(input.userId);
      if (held !== undefined && held !== input.key) return NEXT_HOLDER;
      if ((entry.alive.count === 0 || entry.pool.remaining === 0) && entry.admitted.has(userKey))
        return NEXT_EVERY_SHARD;
    }
    if (entry.alive.count === 0) {
      // A sold out from memory only from a bitmap that came with the winners (a refresh reads each group's counts
      // and winners together): a bitmap emptied by this gateway's own reservations since may hide a win through
      // another gateway whose announcement has not arrived, and that winner's retry must be answered the win.
      if (entry.aheadOfWinners && mayRefresh && !input.synthetic) return NEXT_REFRESH;
      return this.tallies.count('bitmap', SOLD_OUT);
    }
    if (input.synthetic) return NEXT_SYNTHETIC;
    if (entry.admitted.has(userKey)) return NEXT_INVENTORY;
    if (entry.pool.take() === 'sold_out' && !this.topUp(entry)) {
      // Sold out only when every unit is reserved (as of the last refresh, about a second old); tokens spent while
      // units are unreserved (losers on empty shards, skew) are re-issued once per refresh, and past that the
      // attempt is shed with a retry, never told sold out.
      if (entry.snapshot.remaining === 0) {
        // Every unit reserved as of the last refresh; sold out from memory only once that copy held every winner.
        if (entry.aheadOfWinners && mayRefresh) return NEXT_REFRESH;
        return this.tallies.count('pool', SOLD_OUT);
      }
      this.tallies.tally('pool', 'busy');
      throw ADMISSION_BUSY;
    }
    this.tallies.tally('pool', 'admitted');
    this.o.peers.admit(entry, input.userId, input.key);
    return NEXT_INVENTORY;
  }

  /**
   * A spent share while the last refresh counted unreserved units: this gateway's share of 3 x what remains,
   * once per refresh, then a token taken. False when there is nothing to re-issue now.
   */
  private topUp(entry: DealEntry): boolean {
    const remaining = entry.snapshot.remaining;
    if (remaining <= 0) return false;
    const share = Math.max(1, distributeTokens(poolSize(remaining), this.o.gatewayCount)[this.o.gatewayIndex]!);
    if (!entry.pool.topUp(share, entry.refreshedAt)) return false;
    this.tallies.tally('pool', 'topped_up');
    this.o.logger.log('info', 'admission tokens re-issued while units remain', {
      deal: entry.snapshot.dealId,
      tokens: share,
      remaining,
    });
    return entry.pool.take() === 'admitted';
  }

  /**
   * A new key of a user whose earlier attempt holds an admission token: that attempt's decision (awaited here, or
   * asked of the inventory with no token when another gateway admitted it). A win is answered; a loss releases
   * the token and this key is a new attempt; undecided in time: 409 `attempt_pending` naming the held key.
   */
  private async afterHolder(entry: DealEntry, input: AttemptInput): Promise<AttemptResult> {
    const held = entry.holders.get(input.userId);
    if (held === undefined || held === input.key) return this.attemptAfterFront(input, Date.now());
    const heldKey = `${input.userId}\u0000${held}`;
    let decision = entry.pending.get(heldKey);
    if (decision === undefined) {
      const known = entry.answers.get(heldKey);
      if (known !== undefined) {
        // Decided here already: a win is theirs; otherwise the token is released.
        if (known.status === 'won') return this.tallies.count('holder', known);
        if (entry.holders.get(input.userId) === held) entry.holders.delete(input.userId);
        return this.attemptAfterFront(input, Date.now());
      }
      // Admitted by another gateway: ask the inventory for that key (routed as a retry of it; no token here).
      const started = this.decide(entry, input.userId, held, true);
      entry.pending.set(heldKey, started);
      void started.then(
        () => entry.pending.delete(heldKey),
        () => entry.pending.delete(heldKey),
      );
      decision = started;
    }
    const first = await promiseWithin(
      decision.catch(() => null),
      this.backendPatienceMs(),
    );
    if (first === null) {
      if (entry.holders.get(input.userId) !== held) return this.attemptAfterFront(input, Date.now());
      throw this.attemptPending(held);
    }
    if (first.status === 'won') return this.tallies.count('holder', first);
    if (first.status === 'queued') {
      throw this.attemptPending(held);
    }
    // Lost: the held token is released (decide did) and this key is an attempt of its own.
    if (entry.holders.get(input.userId) === held) entry.holders.delete(input.userId);
    return this.attemptAfterFront(input, Date.now());
  }

  /** 409 `attempt_pending`: the user's attempt with `held` still holds their admission token, undecided. */
  private attemptPending(held: string): HttpError {
    this.tallies.tally('holder', 'pending');
    return new HttpError(
      409,
      'attempt_pending',
      `the attempt with idempotency_key ${held} is still being decided; poll its state`,
      { idempotency_key: held },
      { 'retry-after': '1' },
    );
  }

  /** What the local gates left to wait for: a key being decided here, the inventory, or the synthetic probe. */
  async afterLocalGates(entry: DealEntry, input: AttemptInput, next: Next): Promise<AttemptResult> {
    switch (next) {
      case NEXT_PENDING: {
        const pending = entry.pending.get(`${input.userId}\u0000${input.key}`);
        // Settled since the local gates looked: its answer is remembered (or it failed: decide it again).
        if (pending === undefined) return this.attemptAfterFront(input, Date.now());
        return this.tallies.count(
          'retry',
          (await promiseWithin(pending, this.backendPatienceMs())) ?? { status: 'queued' },
        );
      }
      case NEXT_SYNTHETIC: {
        const home = homeShard(input.dealId, input.userId, entry.snapshot.shards);
        const probe = await inventoryCall(() => this.backend.probe(input.dealId, home));
        this.tallies.tally('synthetic', probe.remaining > 0 ? 'would_try' : 'would_lose');
        return { status: 'lost', synthetic: true, shard: home };
      }
      case NEXT_EVERY_SHARD:
        return this.decideHere(entry, input.userId, input.key, true);
      case NEXT_HOLDER:
        return this.afterHolder(entry, input);
      case NEXT_REFRESH: {
        // One refresh begun after this attempt came (a win answered elsewhere before it is then in the copy), shared
        // by every attempt waiting here, then the gates once more on the copy it brought (no second refresh: a
        // bitmap emptied meanwhile answers sold out as before).
        const asked = Date.now();
        await inventoryCall(() => this.cache.refresh(entry, asked));
        const again = this.localGates(entry, input, Date.now(), false);
        if (typeof again === 'object') return again;
        return this.afterLocalGates(entry, input, again);
      }
      default:
        // Gate 4: the inventory (and the reservation, the same committed entry).
        return this.decideHere(entry, input.userId, input.key, false);
    }
  }

  /** The inventory part, answered queued if not decided in time (decided in the background, polled on state). */
  private async decideHere(entry: DealEntry, userId: string, key: string, everyShard: boolean): Promise<AttemptAnswer> {
    const userKey = `${userId}\u0000${key}`;
    const decision = this.decide(entry, userId, key, everyShard);
    entry.pending.set(userKey, decision);
    try {
      const answer = await promiseWithin(decision, this.backendPatienceMs());
      if (answer === null) {
        // Not decided in time (a failover, a partition): queued; decided in the background, polled on state.
        void decision.then(
          () => entry.pending.delete(userKey),
          () => entry.pending.delete(userKey),
        );
        return this.tallies.count('inventory', { status: 'queued' });
      }
      entry.pending.delete(userKey);
      return answer;
    } catch (error) {
      entry.pending.delete(userKey);
      throw error;
    }
  }

  /** How long an attempt waits for the inventory before it answers queued. */
  private backendPatienceMs(): number {
    return 4_000;
  }

  /**
   * The inventory part of an attempt, retried until decided (an unknown outcome is retried with the same user and
   * key: the inventory answers what it decided, never a second unit). Remembers the answer.
   */
  private async decide(entry: DealEntry, userId: string, key: string, everyShard = false): Promise<AttemptAnswer> {
    const deadline = Date.now() + QUEUED_PATIENCE_MS;
    const userKey = `${userId}\u0000${key}`;
    let wentLive = false;
    let unknownOutcome = false;
    for (let attempt = 0; ; attempt++) {
      try {
        // A retry after an unknown outcome may follow a reservation that was made: it asks the shards that decide
        // the key whatever the bitmap says now (an empty bitmap would answer sold out without asking).
        const answer = await this.route(entry, userId, key, everyShard || unknownOutcome);
        if (answer === 'not_live' && !wentLive && entry.snapshot.liveAt !== null) {
          // This gateway saw the broadcast and a shard's group has not recorded it yet: relay it, then retry.
          wentLive = true;
          await this.backend.goLive(entry.snapshot.dealId);
          continue;
        }
        if (answer === 'not_live')
          throw new HttpError(
            409,
            'deal_not_live',
            `deal ${entry.snapshot.dealId} is not live yet`,
            { state: 'upcoming' },
            { 'retry-after': '1' },
          );
        if (answer === 'deal_ended')
          throw conflict('deal_ended', `deal ${entry.snapshot.dealId} has ended`, { state: 'ended' });
        remember(entry.answers, userKey, answer);
        // Decided: the token this key held is released (a winner takes none again: the winner set answers them).
        if (entry.holders.get(userId) === key) entry.holders.delete(userId);
        if (answer.status === 'won') {
          entry.winners.set(userId, answer);
          await this.o.peers.announce(entry.snapshot.dealId, userId, answer);
        }
        this.tallies.count('inventory', answer);
        return answer;
      } catch (error) {
        if (error instanceof HttpError || Date.now() > deadline || this.o.stopped()) {
          if (entry.holders.get(userId) === key) entry.holders.delete(userId);
          throw error;
        }
        unknownOutcome = true;
        if (attempt === 0)
          this.o.logger.log('warn', 'inventory did not decide an attempt; retrying in the background', {
            deal: entry.snapshot.dealId,
            error: String((error as Error).message ?? error),
          });
        await new Promise((r) => setTimeout(r, Math.min(1_000, 100 * 2 ** Math.min(attempt, 4))));
      }
    }
  }

  /** Home shard first, exactly one re-route to the shard the home shard pinned the user to. */
  private async route(
    entry: DealEntry,
    userId: string,
    key: string,
    everyShard: boolean,
  ): Promise<AttemptAnswer | 'not_live' | 'deal_ended'> {
    const deal = entry.snapshot;
    const home = homeShard(deal.dealId, userId, deal.shards);
    // A key admitted by another gateway is routed as if every shard held stock: the shards that decided it answer
    // from memory (home's lost names the pin, the pin its win), whatever this gateway's bitmap says.
    const alive = everyShard ? AliveShards.all(deal.shards) : entry.alive;
    let decision: RouteDecision = firstRoute(alive, home);
    let reroute = rerouteCandidate(alive, home, Math.random());
    for (;;) {
      if (decision.kind === 'sold_out') return { status: 'lost', reason: 'sold_out' };
      if (decision.kind === 'lost') return { status: 'lost' };
      const hop: Extract<RouteDecision, { kind: 'shard' }> = decision;
      const out: ReserveOutcome = await this.backend.reserve({
        dealId: deal.dealId,
        shard: hop.shard,
        userId,
        key,
        reservationId: `${hop.shard}-${randomBytes(12).toString('base64url')}`,
        reroute: hop.rerouted ? null : reroute,
      });
      if (out.outcome === 'refused') {
        if (out.error === 'not_live' || out.error === 'deal_ended') return out.error;
        throw new HttpError(500, 'internal', `the inventory refused the attempt: ${out.error}`);
      }
      if (out.outcome === 'won') return wonAnswer(out.reservation);
      if (out.shardEmpty && entry.alive.has(out.shard)) {
        entry.alive.set(out.shard, false);
        entry.aheadOfWinners = true;
      }
      if (out.shardEmpty && alive !== entry.alive) alive.set(out.shard, false);
      decision = nextRoute(hop, alive, out.reroute);
      reroute = null;
    }
  }

  /** A queued attempt's outcome, for its poll: this gateway's answer, else what the inventory remembers. */
  async resolve(entry: DealEntry, userId: string, key: string): Promise<AttemptAnswer> {
    const userKey = `${userId}\u0000${key}`;
    const known = entry.answers.get(userKey);
    if (known !== undefined) return known;
    if (entry.pending.has(userKey)) return { status: 'queued' };
    // A winner's any key is answered their win by an attempt (the gates above): the poll answers the same.
    const winner = entry.winners.get(userId);
    if (winner !== undefined) return winner;
    const record = await inventoryCall(() => this.backend.attempt(entry.snapshot.dealId, userId, key));
    if (record?.status === 'won') return wonAnswer(record.reservation);
    if (record?.status === 'lost') return { status: 'lost' };
    // Not decided anywhere: still queued while the deal can sell, else it will never win.
    const state = snapshotState(entry.snapshot, Date.now());
    return state === 'live' || state === 'upcoming' ? { status: 'queued' } : { status: 'lost', reason: 'sold_out' };
  }
}
