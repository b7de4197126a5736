/**
 * The JSON shapes that cross the wire: the public view of an auction (GET), the bid answer, and the push messages
 * (snapshot, bid_update, auction_closed). One module so members, gateways and the client agree.
 */
import { badRequest, type RequestContext } from '@raftkit/http';
import type { AuctionState, BidResult, BidStatus } from './machine.js';
import { stateOf, type ProjectedAuction, type ProjectedBid } from './members/projector.js';

export interface AuctionBody {
  auction_id: string;
  item_id: string;
  seller_id: string;
  state: 'scheduled' | 'live' | 'closed';
  start_price: number;
  min_increment: number;
  start_at: number;
  end_at: number;
  close_at: number;
  anti_snipe_window_s: number;
  current_high_bid: number | null;
  current_high_bidder_id: string | null;
  /** The auction's change counter: pushes and polls carrying a seq not above the last shown are stale. */
  seq: number;
  bid_count: number;
  bid_history: ProjectedBid[];
  watcher_count: number;
  /** Present once closed: the winner (null when no bid or reserve not met) and the final price. */
  winner?: string | null;
  final_price?: number | null;
  reserve_met?: boolean;
  /** Age of the oldest log entry the answering member's view has not folded yet (0: current with its log). */
  view_lag_ms: number;
}

export function auctionBody(
  a: ProjectedAuction,
  now: number,
  watcherCount: number,
  lagMs: number,
  historyLimit = Infinity,
): AuctionBody {
  const body: AuctionBody = {
    auction_id: a.auctionId,
    item_id: a.itemId,
    seller_id: a.sellerId,
    state: stateOf(a, now),
    start_price: a.startPrice,
    min_increment: a.minIncrement,
    start_at: a.startAt,
    end_at: a.endAt,
    close_at: a.closeAt,
    anti_snipe_window_s: a.antiSnipeWindowS,
    current_high_bid: a.currentHighBid,
    current_high_bidder_id: a.currentHighBidderId,
    seq: a.seq,
    bid_count: a.bidCount,
    bid_history: historyLimit >= a.history.length ? a.history : a.history.slice(a.history.length - historyLimit),
    watcher_count: watcherCount,
    view_lag_ms: lagMs,
  };
  if (a.closed && a.handoff !== null) {
    body.winner = a.handoff.winnerId;
    body.final_price = a.handoff.finalPrice;
    body.reserve_met = a.handoff.reserveMet;
  }
  return body;
}

/** The answer to POST /api/auctions/{id}/bids. */
export interface BidBody {
  status: BidStatus;
  bid_id: string;
  auction_id: string;
  new_high_bid: number | null;
  high_bidder_id: string | null;
  close_at: number | null;
  /** Present exactly when this bid moved close_at: clients overwrite their countdown with it. */
  new_close_at?: number;
  seq: number;
  /** For `duplicate`: the outcome first answered to this idempotency key. */
  original?: BidBody;
}

export function bidBody(r: BidResult): BidBody {
  const body: BidBody = {
    status: r.status,
    bid_id: r.bidId,
    auction_id: r.auctionId,
    new_high_bid: r.newHighBid,
    high_bidder_id: r.highBidderId,
    close_at: r.closeAt,
    seq: r.seq,
  };
  if (r.newCloseAt !== undefined) body.new_close_at = r.newCloseAt;
  if (r.original !== undefined) body.original = bidBody(r.original);
  return body;
}

export interface BidUpdate {
  type: 'bid_update';
  auction_id: string;
  high_bid: number | null;
  bidder: string | null;
  close_at: number;
  seq: number;
}

export interface AuctionClosed {
  type: 'auction_closed';
  auction_id: string;
  winner: string | null;
  final_price: number | null;
  seq: number;
}

export type Push = BidUpdate | AuctionClosed;

export interface SnapshotMessage extends Omit<AuctionBody, 'bid_history'> {
  type: 'snapshot';
}

export type ServerMessage = Push | SnapshotMessage | { type: 'error'; error: { code: string; message: string } };

/** The pushes that bring a watcher who showed `seq` up to `view` (the poll fallback's repair). */
export function pushesFromView(view: AuctionBody): Push[] {
  const out: Push[] = [];
  if (view.current_high_bid !== null || view.state !== 'closed') {
    out.push({
      type: 'bid_update',
      auction_id: view.auction_id,
      high_bid: view.current_high_bid,
      bidder: view.current_high_bidder_id,
      close_at: view.close_at,
      seq: view.state === 'closed' ? view.seq - 1 : view.seq,
    });
  }
  if (view.state === 'closed')
    out.push({
      type: 'auction_closed',
      auction_id: view.auction_id,
      winner: view.winner ?? null,
      final_price: view.final_price ?? null,
      seq: view.seq,
    });
  return out;
}

/** The `state` query of auction lists: live, closed, scheduled, or none (all). */
export function stateQuery(ctx: RequestContext): AuctionState | null {
  const state = ctx.query.get('state');
  if (state === null) return null;
  if (state !== 'live' && state !== 'closed' && state !== 'scheduled')
    throw badRequest('invalid_query', 'state must be live, closed or scheduled', { field: 'state' });
  return state;
}
