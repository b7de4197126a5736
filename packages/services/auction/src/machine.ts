/**
 * The auction service's replicated state machine: many English auctions per Raft group, their bids applied one at
 * a time in log order (the group's leader is the single writer of every auction it holds). Pure and deterministic:
 * time comes only from the entry (ApplyContext.time, leader-stamped), ids come in the commands (made at the edge).
 *
 * Rules (spec "Auction service", bid rules 2 to 4; every "not shown" decided in README.md):
 * - a bid is checked against this state: auction known, not closed, entry time before close_at and at or after
 *   start_at, bidder not the seller, bidder under the per-auction frequency limit;
 * - idempotency keys are kept 24 h (entry time) per (auction, bidder): a repeat answers `duplicate` with the
 *   original outcome and changes nothing;
 * - anti-snipe: an accepted bid with close_at - placed_at < window moves close_at to placed_at + window;
 * - proxy bidding (rule 4), with ties between equal maxima won by the earlier bid.
 *
 * Invariants (checked by tests): the price of an auction never decreases; the high bidder's maximum is at least the
 * price; close_at never decreases; a duplicate changes nothing; the outcome of a sequence of bids does not depend on
 * how they are split into commands.
 */
import { Packr } from 'msgpackr';
import {
  arrayField,
  CommandShapeError,
  commandOf,
  integerField,
  nullableIntegerField,
  stringField,
} from '@raftkit/http';
import type { ApplyContext, StateMachine } from '@raftkit/raft';
import { CloseIndex } from './members/close-index.js';

/** One bid as the API proposes it. `bidId` is made at the edge (a UUID) so it does not depend on log position. */
export interface BidInput {
  bidId: string;
  auctionId: string;
  bidderId: string;
  amount: number;
  /** The hidden proxy maximum; null means the bid's maximum is its amount. */
  maxProxyAmount: number | null;
  idempotencyKey: string;
}

export interface CreateInput {
  op: 'create';
  auctionId: string;
  itemId: string;
  sellerId: string;
  startPrice: number;
  reservePrice: number | null;
  /** Absolute amount in the smallest currency unit (see README: why not a percentage). */
  minIncrement: number;
  startAt: number;
  endAt: number;
  antiSnipeWindowS: number;
}

export type AuctionCommand =
  | CreateInput
  | ({ op: 'bid' } & BidInput)
  /** Several bids applied in array order, exactly as if each were its own command (the leader may batch). */
  | { op: 'bids'; bids: BidInput[] }
  /** Proposed by the leader when its clock passes close_at; the entry's time decides (re-checked here). */
  | { op: 'close'; auctionId: string }
  /** The checkout consumer has processed the hand-off of this auction: drop it from the outbox. */
  | { op: 'ackHandoff'; auctionId: string }
  /** A read through the log (linearizable); changes nothing. */
  | { op: 'get'; auctionId: string }
  /** Block (or unblock) a bidder on every auction of this group (spec rule 2: "bidder not blocked"). */
  | { op: 'block'; bidderId: string; blocked: boolean };

/** Bid outcomes: the spec's five plus the refusals the spec implies (see README). */
export type BidStatus =
  | 'accepted'
  | 'outbid'
  | 'below_increment'
  | 'auction_ended'
  | 'duplicate'
  | 'unknown_auction'
  | 'not_started'
  | 'seller_cannot_bid'
  | 'bidder_blocked'
  | 'too_frequent';

/**
 * Refusals that may pass later (not started yet, too frequent): they decide nothing and leave the idempotency key
 * free, so the same bid (a retry with the same key, or the gateway resending the same bid id after a failover)
 * may be logged again and decided then.
 */
export const KEY_FREEING_STATUSES: ReadonlySet<BidStatus> = new Set<BidStatus>(['not_started', 'too_frequent']);

export interface BidResult {
  op: 'bid';
  status: BidStatus;
  bidId: string;
  auctionId: string;
  bidderId: string;
  /** The auction's current high bid after this bid (null: no bid yet, or unknown auction). */
  newHighBid: number | null;
  highBidderId: string | null;
  closeAt: number | null;
  /** Present exactly when this bid moved close_at (anti-snipe). */
  newCloseAt?: number;
  /** The auction's change counter after this bid: one more for every visible change (price, bidder, close_at). */
  seq: number;
  /** True when watchers must be told (a bid_update with this seq). */
  changed: boolean;
  /** For `duplicate`: the outcome first answered to this key. */
  original?: BidResult;
}

export interface Handoff {
  auctionId: string;
  itemId: string;
  sellerId: string;
  /** Null when there was no bid or the reserve was not met. */
  winnerId: string | null;
  finalPrice: number | null;
  reserveMet: boolean;
  closedAt: number;
}

export type AuctionResult =
  | { op: 'create'; status: 'created' | 'exists'; auctionId: string }
  | BidResult
  | { op: 'bids'; results: BidResult[] }
  | { op: 'close'; status: 'closed'; auctionId: string; seq: number; handoff: Handoff }
  | { op: 'close'; status: 'already_closed'; auctionId: string; seq: number; handoff: Handoff }
  | { op: 'close'; status: 'not_due'; auctionId: string; closeAt: number }
  | { op: 'close'; status: 'unknown_auction'; auctionId: string }
  | { op: 'ackHandoff'; auctionId: string; removed: boolean }
  | { op: 'get'; auctionId: string; auction: AuctionView | null }
  | { op: 'block'; bidderId: string; blocked: boolean; changed: boolean };

export type AuctionState = 'scheduled' | 'live' | 'closed';

/** A visible price change, kept in the auction's recent history. */
export interface HistoryEntry {
  seq: number;
  bidderId: string;
  price: number;
  at: number;
  /** The bid whose apply made this change. */
  bidId: string;
  /** `bid`: the bidder's own bid; `proxy`: the high bidder's proxy answering someone else's bid. */
  kind: 'bid' | 'proxy';
}

export interface AuctionView {
  auctionId: string;
  itemId: string;
  sellerId: string;
  state: AuctionState;
  startPrice: number;
  reservePrice: number | null;
  minIncrement: number;
  startAt: number;
  endAt: number;
  closeAt: number;
  antiSnipeWindowS: number;
  currentHighBid: number | null;
  currentHighBidderId: string | null;
  seq: number;
  bidCount: number;
  /** The most recent visible changes, oldest first (at most `historyLimit`). */
  bidHistory: HistoryEntry[];
  handoff: Handoff | null;
}

export interface AuctionLimits {
  /** Visible changes kept per auction (the full history is the log, read by the projector). */
  historyLimit: number;
  /** How long an idempotency key answers `duplicate` (entry time). */
  idempotencyMs: number;
  /** Keys kept at most, over all auctions of the machine; beyond, the oldest is forgotten early (counted). */
  maxKeys: number;
  /** Bids per bidder per auction in one window of `rateWindowMs` (entry time). */
  maxBidsPerWindow: number;
  rateWindowMs: number;
  /** A closed auction whose hand-off was acknowledged is dropped this long after closing. */
  closedRetentionMs: number;
}

export const DEFAULT_LIMITS: AuctionLimits = {
  historyLimit: 100,
  idempotencyMs: 24 * 3_600_000,
  maxKeys: 1_000_000,
  maxBidsPerWindow: 5,
  rateWindowMs: 1_000,
  closedRetentionMs: 7 * 24 * 3_600_000,
};

/** An auction: what it was created with, and what bidding made of it. */
interface Auction
  extends Pick<
    CreateInput,
    'itemId' | 'sellerId' | 'startPrice' | 'reservePrice' | 'minIncrement' | 'startAt' | 'endAt'
  > {
  closeAt: number;
  antiSnipeMs: number;
  price: number | null;
  highBidderId: string | null;
  /** The high bidder's hidden maximum. */
  highMax: number;
  seq: number;
  bidCount: number;
  history: HistoryEntry[];
  closed: boolean;
  handoff: Handoff | null;
  /** bidderId -> [window start, bids in window] for the frequency limit. */
  rate: Map<string, [number, number]>;
}

/**
 * The first outcome of a key, compact (a key is kept 24 h; the auction and bidder are in the key itself):
 * [expiresAt, status, bidId, newHighBid, highBidderId, closeAt, newCloseAt or -1, seq, changed].
 */
type KeyRecord = [number, BidStatus, string, number | null, string | null, number, number, number, boolean];

interface Snapshot {
  auctions: Array<[string, Omit<Auction, 'rate'> & { rate: Array<[string, [number, number]]> }]>;
  keys: Array<[string, KeyRecord]>;
  outbox: string[];
  closedOrder: Array<[string, number]>;
  keysEvictedEarly: number;
  /** Absent in snapshots taken before blocking existed. */
  blocked?: string[];
}

const packr = new Packr({ useRecords: false });

const ID_MAX = 256;
const MAX_BATCH = 1_000;
/** Amounts are integers in the smallest unit; 2^48 leaves headroom for max + increment in a safe integer. */
const AMOUNT_MAX = 2 ** 48;
const TIME_MAX = 8.64e15;
const WINDOW_S_MAX = 86_400;

function checkBid(c: Record<string, unknown>): void {
  stringField(c, 'bidId', ID_MAX);
  stringField(c, 'auctionId', ID_MAX);
  stringField(c, 'bidderId', ID_MAX);
  const amount = integerField(c, 'amount', 1, AMOUNT_MAX);
  const max = nullableIntegerField(c, 'maxProxyAmount', 1, AMOUNT_MAX);
  if (max !== null && max < amount)
    throw new CommandShapeError(`bid.maxProxyAmount: expected at least amount ${amount}, got ${max}`);
  stringField(c, 'idempotencyKey', ID_MAX);
}

/**
 * Throws CommandShapeError unless `command` is an AuctionCommand: checked before anything changes, so a malformed
 * entry is refused the same way on every member and changes nothing.
 */
export function checkAuctionCommand(command: unknown): asserts command is AuctionCommand {
  const c = commandOf(command, ['create', 'bid', 'bids', 'close', 'ackHandoff', 'get', 'block'] as const);
  switch (c.op) {
    case 'create': {
      for (const k of ['auctionId', 'itemId', 'sellerId']) stringField(c, k, ID_MAX);
      integerField(c, 'startPrice', 1, AMOUNT_MAX);
      nullableIntegerField(c, 'reservePrice', 1, AMOUNT_MAX);
      integerField(c, 'minIncrement', 1, AMOUNT_MAX);
      const startAt = integerField(c, 'startAt', 0, TIME_MAX);
      const endAt = integerField(c, 'endAt', 0, TIME_MAX);
      if (endAt <= startAt)
        throw new CommandShapeError(`create.endAt: expected after startAt ${startAt}, got ${endAt}`);
      integerField(c, 'antiSnipeWindowS', 0, WINDOW_S_MAX);
      return;
    }
    case 'bid':
      checkBid(c);
      return;
    case 'bids':
      arrayField(
        c,
        'bids',
        (x, at) => {
          if (typeof x !== 'object' || x === null || Array.isArray(x))
            throw new CommandShapeError(`bids.${at}: expected an object`);
          checkBid({ op: 'bid', ...(x as Record<string, unknown>) });
          return x;
        },
        MAX_BATCH,
      );
      return;
    case 'close':
    case 'ackHandoff':
    case 'get':
      stringField(c, 'auctionId', ID_MAX);
      return;
    case 'block':
      stringField(c, 'bidderId', ID_MAX);
      if (typeof c.blocked !== 'boolean')
        throw new CommandShapeError(`block.blocked: expected a boolean, got ${typeof c.blocked}`);
      return;
  }
}

function original(b: BidInput, k: KeyRecord): BidResult {
  const [, status, bidId, newHighBid, highBidderId, closeAt, newCloseAt, seq, changed] = k;
  const r: BidResult = {
    op: 'bid',
    status,
    bidId,
    auctionId: b.auctionId,
    bidderId: b.bidderId,
    newHighBid,
    highBidderId,
    closeAt,
    seq,
    changed,
  };
  if (newCloseAt >= 0) r.newCloseAt = newCloseAt;
  return r;
}

export class AuctionMachine implements StateMachine<AuctionCommand, AuctionResult> {
  private auctions = new Map<string, Auction>();
  /** `${auctionId}\0${bidderId}\0${key}` -> the first outcome; insertion order is expiry order (entry time). */
  private keys = new Map<string, KeyRecord>();
  /** Auctions closed whose hand-off checkout has not acknowledged, in closing order. */
  private outbox = new Set<string>();
  /** Closed auctions in closing order with their close time, for retention. */
  private closedOrder: Array<[string, number]> = [];
  private keysEvictedEarly = 0;
  /** Bidders refused on every auction of this group (bidder_blocked), until unblocked. */
  private blocked = new Set<string>();
  /** Open auctions by close time (derived, for `due`). */
  private closing = new CloseIndex();
  readonly limits: AuctionLimits;

  constructor(limits: Partial<AuctionLimits> = {}) {
    this.limits = { ...DEFAULT_LIMITS, ...limits };
  }

  apply(command: AuctionCommand, ctx: ApplyContext): AuctionResult {
    checkAuctionCommand(command);
    if (command.op === 'get') {
      const a = this.auctions.get(command.auctionId);
      return {
        op: 'get',
        auctionId: command.auctionId,
        auction: a === undefined ? null : this.view(command.auctionId, a, ctx.time),
      };
    }
    this.prune(ctx.time);
    switch (command.op) {
      case 'create':
        return this.create(command);
      case 'bid': {
        const { op: _op, ...bid } = command;
        return this.bid(bid, ctx.time);
      }
      case 'bids':
        return { op: 'bids', results: command.bids.map((b) => this.bid(b, ctx.time)) };
      case 'close':
        return this.close(command.auctionId, ctx.time);
      case 'ackHandoff':
        return { op: 'ackHandoff', auctionId: command.auctionId, removed: this.outbox.delete(command.auctionId) };
      case 'block': {
        const had = this.blocked.has(command.bidderId);
        if (command.blocked) this.blocked.add(command.bidderId);
        else this.blocked.delete(command.bidderId);
        return { op: 'block', bidderId: command.bidderId, blocked: command.blocked, changed: had !== command.blocked };
      }
    }
  }

  private create(c: CreateInput): AuctionResult {
    // A retried create (same id) answers `exists` and changes nothing: ids are made once at the edge.
    if (this.auctions.has(c.auctionId)) return { op: 'create', status: 'exists', auctionId: c.auctionId };
    this.closing.add(c.auctionId, c.endAt);
    this.auctions.set(c.auctionId, {
      itemId: c.itemId,
      sellerId: c.sellerId,
      startPrice: c.startPrice,
      reservePrice: c.reservePrice,
      minIncrement: c.minIncrement,
      startAt: c.startAt,
      endAt: c.endAt,
      closeAt: c.endAt,
      antiSnipeMs: c.antiSnipeWindowS * 1_000,
      price: null,
      highBidderId: null,
      highMax: 0,
      seq: 0,
      bidCount: 0,
      history: [],
      closed: false,
      handoff: null,
      rate: new Map(),
    });
    return { op: 'create', status: 'created', auctionId: c.auctionId };
  }

  private bid(b: BidInput, now: number): BidResult {
    const a = this.auctions.get(b.auctionId);
    if (a === undefined) {
      return {
        op: 'bid',
        status: 'unknown_auction',
        bidId: b.bidId,
        auctionId: b.auctionId,
        bidderId: b.bidderId,
        newHighBid: null,
        highBidderId: null,
        closeAt: null,
        seq: 0,
        changed: false,
      };
    }
    const keyId = `${b.auctionId}\0${b.bidderId}\0${b.idempotencyKey}`;
    const known = this.keys.get(keyId);
    if (known !== undefined && known[0] > now)
      return { ...this.answer(b, a, 'duplicate', false), original: original(b, known) };

    const closeBefore = a.closeAt;
    const seqBefore = a.seq;
    const status = this.decide(b, a, now);
    // Refusals that may pass later (not started, too frequent) leave the key free for the retry.
    if (KEY_FREEING_STATUSES.has(status)) return this.answer(b, a, status, false);
    // Anti-snipe (rule 3) for an accepted bid that moved the price; a high bidder raising only their hidden
    // maximum changes nothing visible and does not extend (else they could hold an auction open alone).
    if (status === 'accepted' && a.seq !== seqBefore && a.closeAt - now < a.antiSnipeMs) {
      a.closeAt = now + a.antiSnipeMs;
      this.closing.move(b.auctionId, closeBefore, a.closeAt);
    }
    const result = this.answer(b, a, status, a.seq !== seqBefore);
    if (a.closeAt !== closeBefore) result.newCloseAt = a.closeAt;
    this.remember(keyId, result, now);
    return result;
  }

  /** Rules 2 and 4: the outcome of one bid, with the auction's price and high bidder updated. */
  private decide(b: BidInput, a: Auction, now: number): BidStatus {
    if (a.closed || now >= a.closeAt) return 'auction_ended';
    if (now < a.startAt) return 'not_started';
    if (b.bidderId === a.sellerId) return 'seller_cannot_bid';
    if (this.blocked.has(b.bidderId)) return 'bidder_blocked';
    if (!this.underRate(a, b.bidderId, now)) return 'too_frequent';
    a.bidCount++;
    const max = b.maxProxyAmount ?? b.amount;
    if (a.price === null || a.highBidderId === null) {
      if (b.amount < a.startPrice) return 'below_increment';
      this.raise(a, b.bidderId, b.amount, max, now, b.bidId, 'bid');
      return 'accepted';
    }
    // The high bidder bidding again only raises their hidden maximum (never lowers it); the price stays.
    if (b.bidderId === a.highBidderId) {
      a.highMax = Math.max(a.highMax, max);
      return 'accepted';
    }
    if (b.amount <= a.price) return 'outbid';
    if (b.amount < a.price + a.minIncrement) return 'below_increment';
    if (max > a.highMax) {
      // The new bidder leads at the old maximum plus the increment, never above their own maximum and never
      // below the amount they explicitly bid.
      const price = Math.max(b.amount, Math.min(a.highMax + a.minIncrement, max));
      this.raise(a, b.bidderId, price, max, now, b.bidId, 'bid');
      return 'accepted';
    }
    // The old high bidder's proxy answers: new maximum plus the increment, capped at the old maximum (an equal
    // maximum therefore leaves the earlier bidder high at that maximum).
    const price = Math.min(max + a.minIncrement, a.highMax);
    if (price > a.price) this.raise(a, a.highBidderId, price, a.highMax, now, b.bidId, 'proxy');
    return 'outbid';
  }

  private raise(
    a: Auction,
    bidderId: string,
    price: number,
    max: number,
    now: number,
    bidId: string,
    kind: 'bid' | 'proxy',
  ): void {
    a.price = price;
    a.highBidderId = bidderId;
    a.highMax = max;
    a.seq++;
    a.history.push({ seq: a.seq, bidderId, price, at: now, bidId, kind });
    if (a.history.length > this.limits.historyLimit) a.history.splice(0, a.history.length - this.limits.historyLimit);
  }

  private underRate(a: Auction, bidderId: string, now: number): boolean {
    const w = this.limits.rateWindowMs;
    const start = Math.floor(now / w) * w;
    const entry = a.rate.get(bidderId);
    if (entry === undefined || entry[0] !== start) {
      // Windows of other bidders that are over are swept once the map grows, so it holds recent bidders only.
      if (a.rate.size >= 1_024) for (const [id, [s]] of a.rate) if (s !== start) a.rate.delete(id);
      a.rate.set(bidderId, [start, 1]);
      return true;
    }
    if (entry[1] >= this.limits.maxBidsPerWindow) return false;
    entry[1]++;
    return true;
  }

  private answer(b: BidInput, a: Auction, status: BidStatus, changed: boolean): BidResult {
    return {
      op: 'bid',
      status,
      bidId: b.bidId,
      auctionId: b.auctionId,
      bidderId: b.bidderId,
      newHighBid: a.price,
      highBidderId: a.highBidderId,
      closeAt: a.closeAt,
      seq: a.seq,
      changed,
    };
  }

  private remember(keyId: string, result: BidResult, now: number): void {
    // Delete first so the Map's insertion order stays expiry order when an expired key is used again.
    this.keys.delete(keyId);
    const r = result;
    this.keys.set(keyId, [
      now + this.limits.idempotencyMs,
      r.status,
      r.bidId,
      r.newHighBid,
      r.highBidderId,
      r.closeAt!,
      r.newCloseAt ?? -1,
      r.seq,
      r.changed,
    ]);
    while (this.keys.size > this.limits.maxKeys) {
      this.keys.delete(this.keys.keys().next().value!);
      this.keysEvictedEarly++;
    }
  }

  private close(auctionId: string, now: number): AuctionResult {
    const a = this.auctions.get(auctionId);
    if (a === undefined) return { op: 'close', status: 'unknown_auction', auctionId };
    if (a.closed) return { op: 'close', status: 'already_closed', auctionId, seq: a.seq, handoff: a.handoff! };
    if (now < a.closeAt) return { op: 'close', status: 'not_due', auctionId, closeAt: a.closeAt };
    const reserveMet = a.price !== null && (a.reservePrice === null || a.price >= a.reservePrice);
    a.closed = true;
    this.closing.remove(auctionId, a.closeAt);
    a.seq++;
    a.handoff = {
      auctionId,
      itemId: a.itemId,
      sellerId: a.sellerId,
      winnerId: reserveMet ? a.highBidderId : null,
      finalPrice: reserveMet ? a.price : null,
      reserveMet,
      closedAt: now,
    };
    a.rate.clear();
    this.outbox.add(auctionId);
    this.closedOrder.push([auctionId, now]);
    return { op: 'close', status: 'closed', auctionId, seq: a.seq, handoff: a.handoff };
  }

  /** Expiry by entry time: idempotency keys past 24 h, closed and acknowledged auctions past retention. */
  private prune(now: number): void {
    for (const [id, k] of this.keys) {
      // Insertion order is entry-time order except across a leader's clock step back; a later key that expires
      // first is simply dropped when the ones before it are (lookups check expiry anyway).
      if (k[0] > now) break;
      this.keys.delete(id);
    }
    while (this.closedOrder.length > 0) {
      const [id, closedAt] = this.closedOrder[0]!;
      if (closedAt + this.limits.closedRetentionMs > now || this.outbox.has(id)) break;
      this.closedOrder.shift();
      this.auctions.delete(id);
    }
  }

  private view(auctionId: string, a: Auction, now: number): AuctionView {
    return {
      auctionId,
      itemId: a.itemId,
      sellerId: a.sellerId,
      state: a.closed ? 'closed' : now < a.startAt ? 'scheduled' : 'live',
      startPrice: a.startPrice,
      reservePrice: a.reservePrice,
      minIncrement: a.minIncrement,
      startAt: a.startAt,
      endAt: a.endAt,
      closeAt: a.closeAt,
      antiSnipeWindowS: a.antiSnipeMs / 1_000,
      currentHighBid: a.price,
      currentHighBidderId: a.highBidderId,
      seq: a.seq,
      bidCount: a.bidCount,
      bidHistory: a.history.map((h) => ({ ...h })),
      handoff: a.handoff === null ? null : { ...a.handoff },
    };
  }

  // ---------------------------------------------------------------------------------------------------------
  // Queries (local state; the API runs them after a read barrier, or proposes `get`, when it must be current)

  /** The auction as the API shows it; `now` only decides scheduled versus live. Never shows a proxy maximum. */
  getAuction(auctionId: string, now: number): AuctionView | null {
    const a = this.auctions.get(auctionId);
    return a === undefined ? null : this.view(auctionId, a, now);
  }

  /** Every auction this machine holds (for a derived view rebuilt after a restore). */
  auctionIds(): string[] {
    return [...this.auctions.keys()];
  }

  /** A time at or before the next open auction's close (null: none open), so the close timer can sleep until it. */
  nextCloseBound(): number | null {
    return this.closing.earliestCloseBound();
  }

  /** Open auctions whose close time is at or before `now`: the leader proposes `close` for each. */
  due(now: number, max = 1_000): string[] {
    const out: string[] = [];
    for (const id of this.closing.candidates(now)) {
      const a = this.auctions.get(id)!;
      if (!a.closed && a.closeAt <= now) out.push(id);
      if (out.length >= max) break;
    }
    return out;
  }

  /** Hand-offs not yet acknowledged by checkout, oldest first (the consumer reads them at least once). */
  pendingHandoffs(max = 1_000): Handoff[] {
    const out: Handoff[] = [];
    for (const id of this.outbox) {
      out.push({ ...this.auctions.get(id)!.handoff! });
      if (out.length >= max) break;
    }
    return out;
  }

  get stats(): { auctions: number; keys: number; keysEvictedEarly: number; outbox: number; blocked: number } {
    return {
      auctions: this.auctions.size,
      keys: this.keys.size,
      keysEvictedEarly: this.keysEvictedEarly,
      outbox: this.outbox.size,
      blocked: this.blocked.size,
    };
  }

  snapshot(): Uint8Array {
    const snap: Snapshot = {
      auctions: [...this.auctions].map(([id, a]) => [id, { ...a, rate: [...a.rate] }]),
      keys: [...this.keys],
      outbox: [...this.outbox],
      closedOrder: this.closedOrder,
      keysEvictedEarly: this.keysEvictedEarly,
      blocked: [...this.blocked],
    };
    return packr.pack(snap);
  }

  restore(data: Uint8Array): void {
    const snap = packr.unpack(data) as Snapshot;
    this.auctions = new Map(snap.auctions.map(([id, a]) => [id, { ...a, rate: new Map(a.rate) }]));
    this.closing.clear();
    for (const [id, a] of this.auctions) if (!a.closed) this.closing.add(id, a.closeAt);
    this.keys = new Map(snap.keys);
    this.outbox = new Set(snap.outbox);
    this.closedOrder = snap.closedOrder;
    this.keysEvictedEarly = snap.keysEvictedEarly;
    this.blocked = new Set(snap.blocked ?? []);
  }
}
