/**
 * The projector: the query view of auctions and their full bid history, fed asynchronously by the bid log (each
 * applied entry's command and result, queued by the apply hook and folded in on the next turn of the event loop).
 * GET requests read this view, never the writer's state, so reads do not contend with bid serialisation.
 *
 * Staleness (README): the view trails this member's applied log by the queue, folded on the next turn
 * (`lagMs()` reports the age of the oldest unfolded entry); a member's applied log trails the writer's commit by
 * about one heartbeat on followers, nothing on the leader. After a restart the view starts from the snapshot (the
 * machine's last 100 changes per auction) and the entries after it.
 */
import type {
  AuctionMachine,
  AuctionCommand,
  AuctionResult,
  AuctionState,
  BidInput,
  BidResult,
  Handoff,
} from '../machine.js';

/** One visible change of an auction's price or leader, as the history shows it. */
export interface ProjectedBid {
  seq: number;
  bid_id: string;
  bidder_id: string;
  amount: number;
  at: number;
  /** `bid`: the bidder's own bid; `proxy`: their proxy answering another bid. */
  kind: 'bid' | 'proxy';
}

/**
 * One bid entry of an auction's log as applied, hidden maximum included: for the cluster's own checks (a
 * sequential replay), served with the cluster token only, never to bidders.
 */
export interface LoggedBid {
  bid_id: string;
  bidder_id: string;
  amount: number;
  max_proxy_amount: number | null;
  idempotency_key: string;
  /** The entry's leader-stamped time. */
  placed_at: number;
  status: string;
  high_bid: number | null;
  high_bidder_id: string | null;
  close_at: number | null;
  new_close_at?: number;
  seq: number;
}

export interface ProjectedAuction {
  auctionId: string;
  group: string;
  itemId: string;
  sellerId: string;
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
  closed: boolean;
  handoff: Handoff | null;
  history: ProjectedBid[];
  /** Bids whose entries applied, whatever their outcome (duplicates and refusals not kept under a key excluded). */
  bidCount: number;
  /** Every bid entry applied for this auction, in log order (at most VIEW_HISTORY_LIMIT, the newest). */
  log: LoggedBid[];
  /** False when `log` misses entries: the view was rebuilt from a snapshot, or the log outgrew the limit. */
  logComplete: boolean;
  closedAt: number | null;
}

/** History kept per auction in the view; beyond, the oldest changes are dropped (counted in `truncated`). */
export const VIEW_HISTORY_LIMIT = 10_000;

interface Pending {
  group: string;
  command: AuctionCommand;
  result: AuctionResult;
  time: number;
  queuedAt: number;
}

export class Projector {
  private readonly auctions = new Map<string, ProjectedAuction>();
  private queue: Pending[] = [];
  private scheduled = false;
  truncated = 0;
  folded = 0;

  constructor(private readonly clock: () => number = Date.now) {}

  /** Called by the apply hook: queue, fold later (asynchronous by design, see the header). */
  push(group: string, command: AuctionCommand, result: AuctionResult, time: number): void {
    this.queue.push({ group, command, result, time, queuedAt: this.clock() });
    if (!this.scheduled) {
      this.scheduled = true;
      setImmediate(() => this.drain());
    }
  }

  /** Folds every queued entry now (the scheduled drain, and tests). */
  drain(): void {
    this.scheduled = false;
    const batch = this.queue;
    this.queue = [];
    for (const p of batch) this.fold(p);
  }

  /** Age in ms of the oldest entry not folded yet (0 when the view is current with this member's log). */
  lagMs(): number {
    const first = this.queue[0];
    return first === undefined ? 0 : this.clock() - first.queuedAt;
  }

  /** Rebuild a group's part of the view from a restored machine (what its snapshot keeps). */
  reseed(group: string, machine: AuctionMachine): void {
    this.drain();
    for (const [id, a] of this.auctions) if (a.group === group) this.auctions.delete(id);
    const now = this.clock();
    for (const id of machine.auctionIds()) {
      const v = machine.getAuction(id, now);
      if (v === null) continue;
      this.auctions.set(id, {
        auctionId: id,
        group,
        itemId: v.itemId,
        sellerId: v.sellerId,
        startPrice: v.startPrice,
        reservePrice: v.reservePrice,
        minIncrement: v.minIncrement,
        startAt: v.startAt,
        endAt: v.endAt,
        closeAt: v.closeAt,
        antiSnipeWindowS: v.antiSnipeWindowS,
        currentHighBid: v.currentHighBid,
        currentHighBidderId: v.currentHighBidderId,
        seq: v.seq,
        closed: v.state === 'closed',
        handoff: v.handoff,
        history: v.bidHistory.map((h) => ({
          seq: h.seq,
          bid_id: h.bidId,
          bidder_id: h.bidderId,
          amount: h.price,
          at: h.at,
          kind: h.kind,
        })),
        bidCount: v.bidCount,
        log: [],
        logComplete: false,
        closedAt: v.handoff?.closedAt ?? null,
      });
    }
  }

  get(auctionId: string): ProjectedAuction | undefined {
    return this.auctions.get(auctionId);
  }

  /** Auctions of a group in a state at `now`, by close time then id; at most `limit`. */
  list(group: string, state: AuctionState | null, now: number, limit: number): ProjectedAuction[] {
    const out: ProjectedAuction[] = [];
    for (const a of this.auctions.values())
      if (a.group === group && (state === null || stateOf(a, now) === state)) out.push(a);
    out.sort((x, y) => x.closeAt - y.closeAt || (x.auctionId < y.auctionId ? -1 : 1));
    return out.slice(0, limit);
  }

  /** Drop auctions the machine no longer holds (closed past retention), so the view stays bounded like the state. */
  forgetMissing(group: string, holds: (auctionId: string) => boolean): void {
    for (const [id, a] of this.auctions) if (a.group === group && !holds(id)) this.auctions.delete(id);
  }

  private fold(p: Pending): void {
    const { command: c, result: r } = p;
    if (c.op === 'create' && r.op === 'create' && r.status === 'created') {
      this.auctions.set(c.auctionId, {
        auctionId: c.auctionId,
        group: p.group,
        itemId: c.itemId,
        sellerId: c.sellerId,
        startPrice: c.startPrice,
        reservePrice: c.reservePrice,
        minIncrement: c.minIncrement,
        startAt: c.startAt,
        endAt: c.endAt,
        closeAt: c.endAt,
        antiSnipeWindowS: c.antiSnipeWindowS,
        currentHighBid: null,
        currentHighBidderId: null,
        seq: 0,
        closed: false,
        handoff: null,
        history: [],
        bidCount: 0,
        log: [],
        logComplete: true,
        closedAt: null,
      });
      return;
    }
    if (r.op === 'bid' && c.op === 'bid') this.foldBid(c, r, p.time);
    else if (r.op === 'bids' && c.op === 'bids') r.results.forEach((b, i) => this.foldBid(c.bids[i]!, b, p.time));
    else if (r.op === 'close' && (r.status === 'closed' || r.status === 'already_closed')) {
      const a = this.auctions.get(r.auctionId);
      if (a === undefined) return;
      a.closed = true;
      a.handoff = r.handoff;
      a.closedAt = r.handoff.closedAt;
      a.seq = Math.max(a.seq, r.seq);
    }
  }

  private foldBid(c: BidInput, r: BidResult, time: number): void {
    const a = this.auctions.get(r.auctionId);
    if (a === undefined || r.status === 'unknown_auction') return;
    const entry: LoggedBid = {
      bid_id: c.bidId,
      bidder_id: c.bidderId,
      amount: c.amount,
      max_proxy_amount: c.maxProxyAmount,
      idempotency_key: c.idempotencyKey,
      placed_at: time,
      status: r.status,
      high_bid: r.newHighBid,
      high_bidder_id: r.highBidderId,
      close_at: r.closeAt,
      seq: r.seq,
    };
    if (r.newCloseAt !== undefined) entry.new_close_at = r.newCloseAt;
    a.log.push(entry);
    if (a.log.length > VIEW_HISTORY_LIMIT) {
      a.log.splice(0, a.log.length - VIEW_HISTORY_LIMIT);
      a.logComplete = false;
    }
    if (r.status === 'duplicate') return;
    if (r.status === 'accepted' || r.status === 'outbid' || r.status === 'below_increment') a.bidCount++;
    if (r.closeAt !== null) a.closeAt = Math.max(a.closeAt, r.closeAt);
    if (!r.changed || r.seq <= a.seq) return;
    a.seq = r.seq;
    a.currentHighBid = r.newHighBid;
    a.currentHighBidderId = r.highBidderId;
    a.history.push({
      seq: r.seq,
      bid_id: r.bidId,
      bidder_id: r.highBidderId ?? '',
      amount: r.newHighBid ?? 0,
      at: time,
      kind: r.highBidderId === r.bidderId ? 'bid' : 'proxy',
    });
    if (a.history.length > VIEW_HISTORY_LIMIT) {
      a.history.splice(0, a.history.length - VIEW_HISTORY_LIMIT);
      this.truncated++;
    }
  }
}

export function stateOf(a: Pick<ProjectedAuction, 'closed' | 'startAt'>, now: number): AuctionState {
  return a.closed ? 'closed' : now < a.startAt ? 'scheduled' : 'live';
}
