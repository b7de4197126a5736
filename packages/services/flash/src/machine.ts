/**
 * The flash-deal inventory shard machine: one per shard group (a Raft group); it may hold shards of several deals.
 * Pure and deterministic: time comes only from the entry (leader-stamped ApplyContext.time), ids (deal, reservation)
 * come in the commands, made at the edge, so every member and every replay decides alike.
 *
 * Invariants (checked by tests): a shard's remaining count never goes below zero and remaining + units held by
 * live reservations (reserved or paid) of that shard equals the shard's initial count (zero oversell); a user holds
 * at most one reservation per deal in this machine, and, through the home shard's pin, reaches at most two shards of
 * a deal (so one unit holds across groups too); an idempotency key, once answered won or lost, answers the same
 * again without a change.
 */
import { Packr } from 'msgpackr';
import {
  arrayField,
  CommandShapeError,
  commandOf,
  integerField,
  nullableIntegerField,
  stringArrayField,
  stringField,
} from '@raftkit/http';
import type { ApplyContext, StateMachine } from '@raftkit/raft';

/** The spec's payment window: a winner has 10 minutes to pay, else the unit is released. */
export const RESERVATION_WINDOW_MS = 10 * 60_000;
/** Bounds of a deal's own window (`windowMs` of createDeal: an operator's knob for tests; the spec's is the default). */
export const MIN_WINDOW_MS = 1_000;
const MAX_WINDOW_MS = 24 * 60 * 60_000;
/**
 * How early the deal service's go-live broadcast may arrive before start_at (by this group's entry time) and still
 * be trusted: the broadcast is authoritative, but one far ahead of start_at is a bug, not clock skew.
 */
export const GO_LIVE_LEAD_MS = 5_000;
/** Deals one machine holds at once (ended deals are dropped with `dropDeal`). */
export const MAX_DEALS = 1_024;
/** Shards of one deal (the target is 20). */
export const MAX_SHARDS = 1_024;
/** Units in one shard (the target is 50). */
export const MAX_SHARD_COUNT = 1_000_000;
/**
 * Remembered answers per deal: the winners (always remembered: at most the inventory) plus lost answers up to this
 * many per held unit (and at least MIN_KEYS). Attempts that reach the inventory are capped upstream by the admission
 * tokens (about 3 per unit, each at most 2 shard attempts), so in correct operation the cap is never met; past it a
 * new lost answer is not remembered (a retry of it is decided again: still lost unless a unit came back).
 */
export const KEYS_PER_UNIT = 8;
export const MIN_KEYS = 1_024;
const MAX_ID = 256;

export type ReservationStatus = 'reserved' | 'paid' | 'expired' | 'cancelled';

export type FlashCommand =
  /** The deal record and the shards of it this group holds (`shards`: shard index and its initial count). */
  | {
      op: 'createDeal';
      dealId: string;
      skuId: string;
      totalInventory: number;
      startAt: number;
      endAt: number;
      shardCount: number;
      shards: Array<{ shard: number; count: number }>;
      windowMs?: number;
    }
  /** The deal service's authoritative go-live broadcast, recorded so the group trusts it over start_at. */
  | { op: 'goLive'; dealId: string }
  /**
   * Atomic decrement while positive on one shard; the gateway made `reservationId` (a new id per attempt). `reroute`
   * (optional): on the user's home shard, the random alive shard the gateway drew for its one re-route; if this shard
   * is empty the user is pinned to it, so every later attempt of the user re-routes to that same shard.
   */
  | {
      op: 'reserve';
      dealId: string;
      shard: number;
      userId: string;
      key: string;
      reservationId: string;
      reroute?: number | null;
    }
  /** reserved -> paid, before expires_at. */
  | { op: 'pay'; reservationId: string; userId: string; paymentId: string }
  /** reserved -> cancelled by its user (or by the reservation step undoing a duplicate): the unit goes back. */
  | { op: 'cancel'; reservationId: string; userId: string }
  /** Proposed by the expiry job with the leader's clock; re-checked against the entry's time here. */
  | { op: 'expire'; reservationIds: string[] }
  /** Forget an ended deal once every reservation's window is over (bounded memory). */
  | { op: 'dropDeal'; dealId: string };

export type FlashError =
  | 'unknown_deal'
  | 'deal_exists'
  | 'unknown_shard'
  | 'too_many_deals'
  | 'too_early'
  | 'not_live'
  | 'deal_ended'
  | 'reservation_exists'
  | 'unknown_reservation'
  | 'not_owner'
  | 'reservation_expired'
  | 'reservation_cancelled'
  | 'already_paid'
  | 'deal_in_use';

export interface ReservationView {
  reservationId: string;
  dealId: string;
  skuId: string;
  userId: string;
  shard: number;
  reservedAt: number;
  expiresAt: number;
  status: ReservationStatus;
  paymentId: string | null;
}

export type FlashResult =
  | { ok: true; op: 'createDeal'; dealId: string }
  | { ok: true; op: 'goLive'; dealId: string; liveAt: number }
  /** Won: the reservation this user holds for the deal (the original one on any retry). */
  | { ok: true; op: 'reserve'; outcome: 'won'; reservation: ReservationView }
  /**
   * Lost here. `shardEmpty`: the shard had nothing left (clear its bit); false when the user is pinned elsewhere.
   * `reroute`: the one shard the gateway may still try for this user (their pin), or null: no re-route.
   */
  | { ok: true; op: 'reserve'; outcome: 'lost'; shard: number; shardEmpty: boolean; reroute: number | null }
  | { ok: true; op: 'pay'; reservation: ReservationView }
  | { ok: true; op: 'cancel'; reservation: ReservationView }
  | { ok: true; op: 'expire'; expired: string[] }
  | { ok: true; op: 'dropDeal'; dealId: string }
  | { ok: false; error: FlashError };

export type DealState = 'upcoming' | 'live' | 'sold_out' | 'ended';

/**
 * The spec's deal transitions as a pure function: ended once end_at passes; upcoming until go-live (the broadcast,
 * or start_at by the deciding clock); sold_out when no shard holds stock (the alive-shards bitmap empty); else live.
 * sold_out is derived, not terminal: an expired or cancelled reservation returns its unit and the deal is live again
 * until end_at (the spec's "the unit is released" would otherwise lose the unit).
 */
export function dealState(
  deal: { startAt: number; endAt: number; liveAt: number | null },
  time: number,
  aliveShards: number,
): DealState {
  if (time >= deal.endAt) return 'ended';
  if (deal.liveAt === null && time < deal.startAt) return 'upcoming';
  return aliveShards === 0 ? 'sold_out' : 'live';
}

/** What this group knows of a deal: its record and the shards it holds. */
export interface DealView {
  dealId: string;
  skuId: string;
  totalInventory: number;
  startAt: number;
  endAt: number;
  liveAt: number | null;
  shardCount: number;
  /** Held shards: index, initial count, remaining. */
  shards: Array<{ shard: number; count: number; remaining: number }>;
  /** Units remaining over the held shards. */
  remaining: number;
  /** Held shards that still hold stock (this group's part of the alive-shards bitmap). */
  alive: number[];
}

interface Shard {
  count: number;
  remaining: number;
}

interface Deal {
  skuId: string;
  totalInventory: number;
  startAt: number;
  endAt: number;
  liveAt: number | null;
  shardCount: number;
  /** The payment window of this deal's reservations (the spec's 10 minutes unless createDeal said otherwise). */
  windowMs: number;
  shards: Map<number, Shard>;
  /** userId -> reservationId: the winner set over the held shards (one reservation per user per deal, ever). */
  winners: Map<string, string>;
  /** userId + NUL + key -> reservationId (won); userId + NUL + key + NUL + shard -> that shard (lost there). */
  answers: Map<string, string | number>;
  /**
   * userId -> the shard of the user's one re-route, set when their home shard answered them empty: one user reaches
   * at most two shards of a deal (home and pin), and each holds them to one unit, even across groups.
   */
  pins: Map<string, number>;
  /** Lost answers and pins remembered (bounded by keyLimit). */
  lostRemembered: number;
}

interface Reservation {
  dealId: string;
  userId: string;
  shard: number;
  reservedAt: number;
  expiresAt: number;
  status: ReservationStatus;
  paymentId: string | null;
}

interface Snapshot {
  deals: Array<
    [
      string,
      string,
      number,
      number,
      number,
      number | null,
      number,
      Array<[number, number, number]>,
      Array<[string, string]>,
      Array<[string, string | number]>,
      Array<[string, number]>,
      number,
      number?,
    ]
  >;
  reservations: Array<[string, string, string, number, number, number, ReservationStatus, string | null]>;
}

const packr = new Packr({ useRecords: false });

function idField(c: Record<string, unknown>, key: string): string {
  return stringField(c, key, MAX_ID);
}

/**
 * Throws CommandShapeError unless `command` is a FlashCommand: checked before anything changes, so a malformed entry
 * (a bug or a forged one) is refused alike on every member and changes nothing.
 */
export function checkFlashCommand(command: unknown): asserts command is FlashCommand {
  const c = commandOf(command, ['createDeal', 'goLive', 'reserve', 'pay', 'cancel', 'expire', 'dropDeal'] as const);
  switch (c.op) {
    case 'createDeal': {
      idField(c, 'dealId');
      idField(c, 'skuId');
      const total = integerField(c, 'totalInventory', 1, MAX_SHARDS * MAX_SHARD_COUNT);
      const startAt = integerField(c, 'startAt');
      integerField(c, 'endAt', startAt + 1);
      const shardCount = integerField(c, 'shardCount', 1, MAX_SHARDS);
      const seen = new Set<number>();
      const shards = arrayField(
        c,
        'shards',
        (x, at) => {
          if (typeof x !== 'object' || x === null || Array.isArray(x))
            throw new CommandShapeError(`createDeal.${at}: expected {shard, count}`);
          const s = x as Record<string, unknown>;
          const shard = integerField(s, 'shard', 0, shardCount - 1);
          const count = integerField(s, 'count', 0, MAX_SHARD_COUNT);
          if (seen.has(shard)) throw new CommandShapeError(`createDeal.${at}: shard ${shard} twice`);
          seen.add(shard);
          return count;
        },
        MAX_SHARDS,
      );
      if (shards.length === 0)
        throw new CommandShapeError('createDeal.shards: a group holds at least one shard of the deal');
      if (c.windowMs !== undefined) integerField(c, 'windowMs', MIN_WINDOW_MS, MAX_WINDOW_MS);
      if (shards.reduce((a, b) => a + b, 0) > total)
        throw new CommandShapeError('createDeal.shards: more units than total_inventory');
      return;
    }
    case 'goLive':
    case 'dropDeal':
      idField(c, 'dealId');
      return;
    case 'reserve':
      idField(c, 'dealId');
      integerField(c, 'shard', 0, MAX_SHARDS - 1);
      idField(c, 'userId');
      idField(c, 'key');
      idField(c, 'reservationId');
      if (c.reroute !== undefined) nullableIntegerField(c, 'reroute', 0, MAX_SHARDS - 1);
      return;
    case 'pay':
    case 'cancel':
      idField(c, 'reservationId');
      idField(c, 'userId');
      if (c.op === 'pay') idField(c, 'paymentId');
      return;
    case 'expire':
      stringArrayField(c, 'reservationIds', 100_000, MAX_ID);
      return;
  }
}

export class FlashMachine implements StateMachine<FlashCommand, FlashResult> {
  private deals = new Map<string, Deal>();
  private reservations = new Map<string, Reservation>();

  apply(command: FlashCommand, ctx: ApplyContext): FlashResult {
    checkFlashCommand(command);
    switch (command.op) {
      case 'createDeal':
        return this.createDeal(command);
      case 'goLive': {
        const deal = this.deals.get(command.dealId);
        if (deal === undefined) return { ok: false, error: 'unknown_deal' };
        if (ctx.time >= deal.endAt) return { ok: false, error: 'deal_ended' };
        if (deal.liveAt === null) {
          if (ctx.time < deal.startAt - GO_LIVE_LEAD_MS) return { ok: false, error: 'too_early' };
          deal.liveAt = ctx.time;
        }
        return { ok: true, op: 'goLive', dealId: command.dealId, liveAt: deal.liveAt };
      }
      case 'reserve':
        return this.reserve(command, ctx);
      case 'pay': {
        const r = this.owned(command.reservationId, command.userId);
        if ('error' in r) return r;
        const { reservation } = r;
        // A second pay of a paid reservation answers the first (checkout retries); only the first payment id counts.
        if (reservation.status === 'paid')
          return { ok: true, op: 'pay', reservation: this.view(command.reservationId, reservation) };
        if (reservation.status === 'cancelled') return { ok: false, error: 'reservation_cancelled' };
        if (reservation.status === 'expired' || ctx.time >= reservation.expiresAt)
          return { ok: false, error: 'reservation_expired' };
        reservation.status = 'paid';
        reservation.paymentId = command.paymentId;
        return { ok: true, op: 'pay', reservation: this.view(command.reservationId, reservation) };
      }
      case 'cancel': {
        const r = this.owned(command.reservationId, command.userId);
        if ('error' in r) return r;
        const { reservation } = r;
        if (reservation.status === 'cancelled')
          return { ok: true, op: 'cancel', reservation: this.view(command.reservationId, reservation) };
        if (reservation.status === 'paid') return { ok: false, error: 'already_paid' };
        if (reservation.status === 'expired') return { ok: false, error: 'reservation_expired' };
        this.giveBack(reservation, 'cancelled');
        return { ok: true, op: 'cancel', reservation: this.view(command.reservationId, reservation) };
      }
      case 'expire': {
        const expired: string[] = [];
        for (const id of command.reservationIds) {
          const reservation = this.reservations.get(id);
          // The leader's clock proposed it; the entry's time decides, identically on every member.
          if (reservation !== undefined && reservation.status === 'reserved' && reservation.expiresAt <= ctx.time) {
            this.giveBack(reservation, 'expired');
            expired.push(id);
          }
        }
        return { ok: true, op: 'expire', expired };
      }
      case 'dropDeal': {
        const deal = this.deals.get(command.dealId);
        if (deal === undefined) return { ok: true, op: 'dropDeal', dealId: command.dealId };
        // Every reservation is made before end_at, so its window is over by end_at + the window.
        if (ctx.time < deal.endAt + deal.windowMs) return { ok: false, error: 'deal_in_use' };
        for (const id of deal.winners.values()) this.reservations.delete(id);
        this.deals.delete(command.dealId);
        return { ok: true, op: 'dropDeal', dealId: command.dealId };
      }
    }
  }

  private createDeal(command: Extract<FlashCommand, { op: 'createDeal' }>): FlashResult {
    const existing = this.deals.get(command.dealId);
    if (existing !== undefined) {
      // A retried create with the same record answers ok; a different record under the same id is refused.
      const same =
        existing.skuId === command.skuId &&
        existing.totalInventory === command.totalInventory &&
        existing.startAt === command.startAt &&
        existing.endAt === command.endAt &&
        existing.shardCount === command.shardCount &&
        existing.windowMs === (command.windowMs ?? RESERVATION_WINDOW_MS) &&
        existing.shards.size === command.shards.length &&
        command.shards.every((s) => existing.shards.get(s.shard)?.count === s.count);
      return same ? { ok: true, op: 'createDeal', dealId: command.dealId } : { ok: false, error: 'deal_exists' };
    }
    if (this.deals.size >= MAX_DEALS) return { ok: false, error: 'too_many_deals' };
    const shards = new Map<number, Shard>();
    for (const s of [...command.shards].sort((a, b) => a.shard - b.shard))
      shards.set(s.shard, { count: s.count, remaining: s.count });
    this.deals.set(command.dealId, {
      skuId: command.skuId,
      totalInventory: command.totalInventory,
      startAt: command.startAt,
      endAt: command.endAt,
      liveAt: null,
      shardCount: command.shardCount,
      windowMs: command.windowMs ?? RESERVATION_WINDOW_MS,
      shards,
      winners: new Map(),
      answers: new Map(),
      pins: new Map(),
      lostRemembered: 0,
    });
    return { ok: true, op: 'createDeal', dealId: command.dealId };
  }

  private reserve(command: Extract<FlashCommand, { op: 'reserve' }>, ctx: ApplyContext): FlashResult {
    const deal = this.deals.get(command.dealId);
    if (deal === undefined) return { ok: false, error: 'unknown_deal' };
    const shard = deal.shards.get(command.shard);
    if (shard === undefined) return { ok: false, error: 'unknown_shard' };
    const answerKey = `${command.userId}\u0000${command.key}`;
    // A lost answer is remembered per shard: the gateway's one re-route carries the attempt's key to another shard,
    // and that shard must decide it, not answer the home shard's lost.
    const lostKey = `${answerKey}\u0000${command.shard}`;
    const answered = deal.answers.get(answerKey) ?? deal.answers.get(lostKey);
    // A retried key answers what it answered, whatever happened since (a unit coming back does not turn a lost into
    // a won, a later expiry does not turn a won into a lost: the reservation's own status tells that).
    if (typeof answered === 'string') return this.won(answered);
    if (typeof answered === 'number') return this.lost(command.shard, answered);
    // The same user with a new key (or through another gateway) gets the reservation they hold: one per deal, ever.
    // Not remembered under the new key: the winner set answers it the same every time, and a winner sending fresh
    // keys must not grow the state.
    const held = deal.winners.get(command.userId);
    if (held !== undefined) return this.won(held);
    // Not-live and ended answers are not remembered: they decide nothing about stock, and a retry after go-live
    // must be able to win.
    if (ctx.time >= deal.endAt) return { ok: false, error: 'deal_ended' };
    if (deal.liveAt === null && ctx.time < deal.startAt) return { ok: false, error: 'not_live' };
    const pin = deal.pins.get(command.userId);
    if (pin !== undefined && pin !== command.shard) {
      // Pinned elsewhere (their home shard answered empty before): not a unit here, even if one came back, and the
      // re-route goes to the pin, never to a third shard. Not remembered: the pin never changes, so neither does this.
      return this.lost(command.shard, pin, shard.remaining <= 0);
    }
    if (shard.remaining <= 0) {
      let reroute: number | null = null;
      const r = command.reroute;
      if (
        pin === undefined &&
        r !== undefined &&
        r !== null &&
        r !== command.shard &&
        r < deal.shardCount &&
        deal.lostRemembered < keyLimit(deal)
      ) {
        deal.pins.set(command.userId, r);
        deal.lostRemembered++;
        reroute = r;
      }
      this.rememberLost(deal, lostKey, reroute);
      return this.lost(command.shard, reroute);
    }
    if (this.reservations.has(command.reservationId)) return { ok: false, error: 'reservation_exists' };
    shard.remaining--;
    this.reservations.set(command.reservationId, {
      dealId: command.dealId,
      userId: command.userId,
      shard: command.shard,
      reservedAt: ctx.time,
      expiresAt: ctx.time + deal.windowMs,
      status: 'reserved',
      paymentId: null,
    });
    deal.winners.set(command.userId, command.reservationId);
    deal.answers.set(answerKey, command.reservationId);
    return this.won(command.reservationId);
  }

  /** Remembered lost answers hold the re-route they answered (-1: none), so a retry answers the same. */
  private rememberLost(deal: Deal, lostKey: string, reroute: number | null): void {
    if (deal.lostRemembered >= keyLimit(deal)) return;
    deal.answers.set(lostKey, reroute ?? -1);
    deal.lostRemembered++;
  }

  private lost(shard: number, reroute: number | null, shardEmpty = true): FlashResult {
    const r = reroute === null || reroute < 0 ? null : reroute;
    return { ok: true, op: 'reserve', outcome: 'lost', shard, shardEmpty, reroute: r };
  }

  private won(reservationId: string): FlashResult {
    return {
      ok: true,
      op: 'reserve',
      outcome: 'won',
      reservation: this.view(reservationId, this.reservations.get(reservationId)!),
    };
  }

  private owned(
    reservationId: string,
    userId: string,
  ): { reservation: Reservation } | { ok: false; error: FlashError } {
    const reservation = this.reservations.get(reservationId);
    if (reservation === undefined) return { ok: false, error: 'unknown_reservation' };
    // A reservation_id cannot be transferred (rule 5): only its user pays or cancels it.
    if (reservation.userId !== userId) return { ok: false, error: 'not_owner' };
    return { reservation };
  }

  /** The unit goes back to the shard it came from (the spec's "spare pool"); the user keeps their one reservation. */
  private giveBack(reservation: Reservation, status: 'expired' | 'cancelled'): void {
    reservation.status = status;
    const shard = this.deals.get(reservation.dealId)!.shards.get(reservation.shard)!;
    shard.remaining++;
  }

  private view(reservationId: string, r: Reservation): ReservationView {
    return {
      reservationId,
      dealId: r.dealId,
      skuId: this.deals.get(r.dealId)!.skuId,
      userId: r.userId,
      shard: r.shard,
      reservedAt: r.reservedAt,
      expiresAt: r.expiresAt,
      status: r.status,
      paymentId: r.paymentId,
    };
  }

  /** This group's view of a deal, or null. */
  getDeal(dealId: string): DealView | null {
    const deal = this.deals.get(dealId);
    if (deal === undefined) return null;
    const shards = [...deal.shards].map(([shard, s]) => ({ shard, count: s.count, remaining: s.remaining }));
    return {
      dealId,
      skuId: deal.skuId,
      totalInventory: deal.totalInventory,
      startAt: deal.startAt,
      endAt: deal.endAt,
      liveAt: deal.liveAt,
      shardCount: deal.shardCount,
      shards,
      remaining: shards.reduce((a, s) => a + s.remaining, 0),
      alive: shards.filter((s) => s.remaining > 0).map((s) => s.shard),
    };
  }

  /** The deal's state by this group's shards alone (the service combines every group's `alive`). */
  stateOf(dealId: string, time: number): DealState | null {
    const view = this.getDeal(dealId);
    return view === null ? null : dealState(view, time, view.alive.length);
  }

  getReservation(reservationId: string): ReservationView | null {
    const r = this.reservations.get(reservationId);
    return r === undefined ? null : this.view(reservationId, r);
  }

  /**
   * What this group answered the user's attempt under `key` (read only, for a queued attempt's poll): `won` with
   * the reservation the user holds here (any key of a winner answers it), `lost` when a shard here answered it
   * lost with no re-route left, `unknown` when no shard here decided it; null for a deal this group does not hold.
   */
  attemptOf(
    dealId: string,
    userId: string,
    key: string,
  ): { status: 'won'; reservation: ReservationView } | { status: 'lost' } | { status: 'unknown' } | null {
    const deal = this.deals.get(dealId);
    if (deal === undefined) return null;
    const held = deal.winners.get(userId);
    if (held !== undefined) return { status: 'won', reservation: this.view(held, this.reservations.get(held)!) };
    const prefix = `${userId}\u0000${key}\u0000`;
    // Lost for good only where no re-route was left to follow (-1): a home shard's lost with a pin is decided there.
    for (const shard of deal.shards.keys()) if (deal.answers.get(`${prefix}${shard}`) === -1) return { status: 'lost' };
    return { status: 'unknown' };
  }

  /**
   * The deal's winners from the `from`-th on, in the order they won (the winner set only grows), with their
   * reservation's expiry: the gateways fetch them incrementally to answer a winner's retry the same everywhere.
   */
  winnersFrom(
    dealId: string,
    from: number,
    limit = 10_000,
  ): { total: number; winners: Array<[string, string, number]> } | null {
    const deal = this.deals.get(dealId);
    if (deal === undefined) return null;
    const winners: Array<[string, string, number]> = [];
    let i = 0;
    for (const [userId, reservationId] of deal.winners) {
      if (i++ < from) continue;
      if (winners.length >= limit) break;
      winners.push([userId, reservationId, this.reservations.get(reservationId)!.expiresAt]);
    }
    return { total: deal.winners.size, winners };
  }

  /** Reservations still `reserved` whose window is over by `time`: what the expiry job proposes to expire. */
  dueReservations(time: number, limit = 10_000): string[] {
    const due: string[] = [];
    for (const [id, r] of this.reservations) {
      if (due.length >= limit) break;
      if (r.status === 'reserved' && r.expiresAt <= time) due.push(id);
    }
    return due;
  }

  dealIds(): string[] {
    return [...this.deals.keys()];
  }

  snapshot(): Uint8Array {
    const data: Snapshot = {
      deals: [...this.deals].map(
        ([id, d]) =>
          [
            id,
            d.skuId,
            d.totalInventory,
            d.startAt,
            d.endAt,
            d.liveAt,
            d.shardCount,
            [...d.shards].map(([i, s]) => [i, s.count, s.remaining]),
            [...d.winners],
            [...d.answers],
            [...d.pins],
            d.lostRemembered,
            // Only when not the default, so snapshots of deals made before the field existed read back the same.
            ...(d.windowMs === RESERVATION_WINDOW_MS ? [] : [d.windowMs]),
          ] as Snapshot['deals'][number],
      ),
      reservations: [...this.reservations].map(([id, r]) => [
        id,
        r.dealId,
        r.userId,
        r.shard,
        r.reservedAt,
        r.expiresAt,
        r.status,
        r.paymentId,
      ]),
    };
    return packr.pack(data);
  }

  restore(bytes: Uint8Array): void {
    const data = packr.unpack(bytes) as Snapshot;
    this.deals = new Map(
      data.deals.map(
        ([
          id,
          skuId,
          totalInventory,
          startAt,
          endAt,
          liveAt,
          shardCount,
          shards,
          winners,
          answers,
          pins,
          lostRemembered,
          windowMs,
        ]) => [
          id,
          {
            skuId,
            totalInventory,
            startAt,
            endAt,
            liveAt,
            shardCount,
            windowMs: windowMs ?? RESERVATION_WINDOW_MS,
            shards: new Map(shards.map(([i, count, remaining]) => [i, { count, remaining }])),
            winners: new Map(winners),
            answers: new Map(answers),
            pins: new Map(pins),
            lostRemembered,
          },
        ],
      ),
    );
    this.reservations = new Map(
      data.reservations.map(([id, dealId, userId, shard, reservedAt, expiresAt, status, paymentId]) => [
        id,
        { dealId, userId, shard, reservedAt, expiresAt, status, paymentId },
      ]),
    );
  }
}

function keyLimit(deal: Deal): number {
  let units = 0;
  for (const s of deal.shards.values()) units += s.count;
  return Math.max(MIN_KEYS, units * KEYS_PER_UNIT);
}
