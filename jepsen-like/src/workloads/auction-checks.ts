/**
 * The auction workload's checks, pure: they read the history only (client operations and the final reads of each
 * auction's bid log) and find
 *
 * - `auction-log-order`: in log order, the high bid of an auction never goes down, and every accepted bid that
 *   moved the price moved it strictly up (so watchers can never be shown a lower price after a higher one); the
 *   visible history (GET's bid_history) is exactly the log's changes of price or leader;
 * - `auction-acknowledged`: every bid a client was told `accepted` (directly, or as the original outcome of a
 *   `duplicate`) is in the final log exactly once, with the status the client was told; no idempotency key
 *   appears twice in a log (a bid retried across a failover applied twice);
 * - `auction-replay`: a sequential replay of the final log through packages/services/auction's machine (the same rules,
 *   one bid at a time, each at its logged time) gives, entry by entry, the status, price, high bidder and close_at
 *   the service logged, and at close the winner and final price the service reports;
 * - `auction-close-at`: close_at as clients observed it (bid answers, reads from the writer) never moves backwards:
 *   an observation that began after another ended shows a close_at at least as late, and the final close_at is at
 *   least every observed one.
 *
 * History shapes (the workload writes them, test/auction-checks.test.ts builds them by hand):
 *   create  invoke {auction_id, seller_id, start_price, reserve_price, min_increment, start_at, end_at, anti_snipe_window_s}
 *           ok     {auction_id}
 *   bid     invoke {auction_id, bidder_id, amount, max_proxy_amount, idempotency_key}
 *           ok     {auction_id, status, new_high_bid, close_at?, new_close_at?, original?: {status}}
 *   read    ok     {auction_id, close_at, fresh}                 (fresh: read from the writer, not a lagging view)
 *   read-log ok    {auction_id, state, close_at, current_high_bid, current_high_bidder_id, winner, final_price,
 *                   now, log: LoggedBid[] | null, visible: VisibleChange[]}
 * Times inside values (placed_at, close_at, start_at) are epoch milliseconds of the service's clock.
 */
import {
  AuctionMachine,
  type AuctionCommand,
  type AuctionResult,
  type BidResult,
  type LoggedBid as ServiceLoggedBid,
} from '@raftkit/auction';
import type { HistoryEvent } from '../history.js';
import { pairOps, type PairedOp } from './log-checks.js';
import type { Anomaly, CheckResult } from './workload.js';

/**
 * One bid command of an auction's log, in log order, with what the service decided: the service's own entry
 * (`GET /api/auctions/{id}/log`), whose `bid_id` and `seq` a reconstructed entry (from what clients saw) lacks.
 */
export type LoggedBid = Omit<ServiceLoggedBid, 'bid_id' | 'seq' | 'new_close_at'> &
  Partial<Pick<ServiceLoggedBid, 'bid_id' | 'seq'>>;

/** A visible price change (what GET's bid_history shows when the full log is not available). */
export interface VisibleChange {
  seq: number;
  /** The bid whose entry made the change (for `proxy`, the other bidder's bid the proxy answered). */
  bid_id: string;
  bidder_id: string;
  /** The new high bid. */
  amount: number;
  at: number;
  kind: 'bid' | 'proxy';
}

export interface FinalAuction {
  auction_id: string;
  state: string;
  close_at: number;
  current_high_bid: number | null;
  current_high_bidder_id: string | null;
  winner: string | null;
  final_price: number | null;
  /** Wall clock (ms) of the read: a live auction long past its close_at is a failure to close. */
  now: number;
  log: LoggedBid[] | null;
  /** True when `log` is every bid entry the service applied (then the frequency limit replays too). */
  log_complete?: boolean;
  visible: VisibleChange[];
}

interface Created {
  auction_id: string;
  seller_id: string;
  start_price: number;
  reserve_price: number | null;
  min_increment: number;
  start_at: number;
  end_at: number;
  anti_snipe_window_s: number;
}

/** How long past close_at a final read may still find an auction live before it counts as not closed. */
const CLOSE_GRACE_MS = 15_000;

class Findings {
  readonly anomalies: Anomaly[] = [];
  constructor(private readonly check: string) {}
  add(type: string, description: string, times?: number[]): void {
    // A broken run can produce thousands of the same finding: the first 200 say enough.
    if (this.anomalies.length < 200)
      this.anomalies.push({ check: this.check, type, description, ...(times !== undefined ? { times } : {}) });
  }
}

function num(v: unknown): number | null {
  return typeof v === 'number' && Number.isFinite(v) ? v : null;
}

function str(v: unknown): string | null {
  return typeof v === 'string' ? v : null;
}

/** The last successful final read of each auction. */
function finalAuctions(ops: readonly PairedOp[]): Map<string, FinalAuction> {
  const out = new Map<string, FinalAuction>();
  for (const op of ops) {
    if (op.f !== 'read-log' || op.type !== 'ok' || op.output === null) continue;
    const id = str(op.output.auction_id);
    if (id !== null) out.set(id, op.output as unknown as FinalAuction);
  }
  return out;
}

function createdAuctions(ops: readonly PairedOp[]): Map<string, Created> {
  const out = new Map<string, Created>();
  for (const op of ops) {
    if (op.f !== 'create' || op.type !== 'ok' || op.output === null) continue;
    const id = str(op.output.auction_id);
    if (id !== null) out.set(id, { ...(op.input as unknown as Created), auction_id: id });
  }
  return out;
}

/** The status a bid answer stands for: a duplicate stands for its original outcome. */
function effectiveStatus(out: Record<string, unknown>): string | null {
  const status = str(out.status);
  if (status !== 'duplicate') return status;
  const original = out.original as Record<string, unknown> | undefined;
  return str(original?.status) ?? null;
}

function checkLogOrder(finals: ReadonlyMap<string, FinalAuction>): CheckResult {
  const found = new Findings('auction-log-order');
  let entries = 0;
  for (const [id, f] of finals) {
    if (f.log !== null) {
      let high: number | null = null;
      let holder: string | null = null;
      f.log.forEach((e, i) => {
        entries++;
        if (e.high_bid !== null && high !== null && e.high_bid < high)
          found.add(
            'price-decreased',
            `${id}: entry ${i} (${e.bidder_id}, ${e.status}) leaves the high bid at ${e.high_bid}, below ${high} before it`,
          );
        if (e.status === 'accepted') {
          // An accepted bid either made its bidder high strictly above the previous price, or was the high
          // bidder raising only their hidden maximum (price and holder unchanged).
          const raiseOnly = e.bidder_id === holder && e.high_bid === high && e.high_bidder_id === holder;
          if (e.high_bid === null || e.high_bidder_id !== e.bidder_id)
            found.add(
              'accepted-not-high',
              `${id}: accepted entry ${i} (${e.bidder_id}) leaves ${String(e.high_bidder_id)} high at ${String(e.high_bid)}`,
            );
          else if (!raiseOnly && high !== null && !(e.high_bid > high))
            found.add(
              'accepted-not-increasing',
              `${id}: accepted entry ${i} (${e.bidder_id}) took the high bid from ${high} to ${e.high_bid}`,
            );
        }
        if (e.high_bid !== null) high = high === null ? e.high_bid : Math.max(high, e.high_bid);
        holder = e.high_bidder_id;
      });
    }
    if (f.log !== null && f.log_complete === true && (f.visible.length === 0 || f.visible[0]!.seq === 1)) {
      // The visible history is the log's changes of price or leader, in the same order (both from the service).
      const changes: string[] = [];
      let prev = 'none';
      for (const e of f.log) {
        const now = `${String(e.high_bid)} by ${String(e.high_bidder_id)}`;
        if (e.high_bid !== null && now !== prev) changes.push(now);
        prev = now;
      }
      const shown = f.visible.map((v) => `${v.amount} by ${v.bidder_id}`);
      const n = Math.min(changes.length, shown.length);
      const at = changes.slice(0, n).findIndex((c, i) => c !== shown[i]);
      if (at >= 0 || changes.length !== shown.length)
        found.add(
          'visible-differs-from-log',
          `${id}: the log's changes of price or leader and the visible history differ${at >= 0 ? ` at change ${at + 1} (log ${changes[at]}, history ${shown[at]})` : ` in length (${changes.length} against ${shown.length})`}`,
        );
    }
    let last: VisibleChange | null = null;
    for (const v of f.visible) {
      entries++;
      if (last !== null && !(v.amount > last.amount))
        found.add(
          'visible-not-increasing',
          `${id}: visible change seq ${v.seq} at ${v.amount} (${v.bidder_id}) after seq ${last.seq} at ${last.amount}`,
        );
      if (last !== null && v.seq !== last.seq + 1)
        found.add(
          'seq-gap',
          `${id}: visible change seq ${v.seq} after seq ${last.seq} (every change of price or leader is kept, so seqs are consecutive)`,
        );
      last = v;
    }
  }
  return {
    name: 'auction-log-order',
    valid: found.anomalies.length === 0,
    anomalies: found.anomalies,
    stats: { auctions: finals.size, entries },
  };
}

function checkAcknowledged(ops: readonly PairedOp[], finals: ReadonlyMap<string, FinalAuction>): CheckResult {
  const found = new Findings('auction-acknowledged');
  let acked = 0;
  let present = 0;
  let unread = 0;
  // Keys in each log: (bidder, key) -> entries. Statuses the machine does not record under the key
  // (not_started, too_frequent) may repeat a key legitimately; any other status must appear once.
  const keyed = new Map<string, Map<string, LoggedBid[]>>();
  for (const [id, f] of finals) {
    if (f.log === null) continue;
    const m = new Map<string, LoggedBid[]>();
    for (const e of f.log) {
      if (e.status === 'not_started' || e.status === 'too_frequent' || e.status === 'duplicate') continue;
      const k = `${e.bidder_id}\0${e.idempotency_key}`;
      const list = m.get(k) ?? [];
      list.push(e);
      m.set(k, list);
    }
    const seen = new Set<string>();
    for (const v of f.visible) {
      if (v.kind === 'bid' && seen.has(v.bid_id))
        found.add('applied-twice', `${id}: bid ${v.bid_id} made ${v.bidder_id} high twice (seq ${v.seq})`);
      seen.add(v.bid_id);
    }
    for (const [k, list] of m)
      if (list.length > 1)
        found.add(
          'applied-twice',
          `${id}: key ${k.replace('\0', '/')} decided ${list.length} times (${list.map((e) => `${e.status}@${e.placed_at}`).join(', ')})`,
        );
    keyed.set(id, m);
  }
  for (const op of ops) {
    if (op.f !== 'bid' || op.type !== 'ok' || op.output === null) continue;
    const status = effectiveStatus(op.output);
    if (status !== 'accepted') continue;
    acked++;
    const id = str(op.input.auction_id) ?? '';
    const bidder = str(op.input.bidder_id) ?? '';
    const key = str(op.input.idempotency_key) ?? '';
    const f = finals.get(id);
    if (f === undefined) {
      unread++;
      continue;
    }
    if (f.log !== null) {
      const entries = keyed.get(id)?.get(`${bidder}\0${key}`) ?? [];
      if (entries.length === 0)
        found.add(
          'acknowledged-lost',
          `${id}: ${bidder}'s bid ${key} (${String(op.input.amount)}) was acknowledged accepted but is not in the log`,
          [op.start, op.end ?? op.start],
        );
      else if (entries[0]!.status !== 'accepted')
        found.add(
          'acknowledged-other-status',
          `${id}: ${bidder}'s bid ${key} was acknowledged accepted but the log decided ${entries[0]!.status}`,
          [op.start, op.end ?? op.start],
        );
      else present++;
      continue;
    }
    // Without the full log: an accepted bid that made its bidder high at a new price is a visible change.
    const price = num(op.output.new_high_bid);
    const high = str(op.output.high_bidder_id);
    if (price === null || (high !== null && high !== bidder)) {
      present++;
      continue;
    }
    if (f.visible.some((v) => v.bidder_id === bidder && v.amount === price)) present++;
    else if (f.visible.length > 0 && f.visible[0]!.amount > price)
      present++; // older than the kept history
    else
      found.add('acknowledged-lost', `${id}: ${bidder}'s accepted bid at ${price} is not in the bid history`, [
        op.start,
        op.end ?? op.start,
      ]);
  }
  return {
    name: 'auction-acknowledged',
    valid: found.anomalies.length === 0,
    anomalies: found.anomalies,
    stats: { acknowledged_accepted: acked, present, auction_unread: unread },
  };
}

/** Replays each final log through a fresh machine, entry by entry, and compares. */
function checkReplay(ops: readonly PairedOp[], finals: ReadonlyMap<string, FinalAuction>): CheckResult {
  const found = new Findings('auction-replay');
  const created = createdAuctions(ops);
  let replayed = 0;
  let closed = 0;
  let withoutLog = 0;
  let fromFullLog = 0;
  for (const [id, f] of finals) {
    const c = created.get(id);
    if (c === undefined) continue;
    if (f.state !== 'closed' && f.now > f.close_at + CLOSE_GRACE_MS)
      found.add('not-closed', `${id}: ${f.state} ${f.now - f.close_at} ms after its close_at`);
    if (f.log === null) {
      withoutLog++;
      continue;
    }
    replayed++;
    if (f.log_complete === true) fromFullLog++;
    // No frequency limit in the replay: a rebuilt log holds only bids that passed it, at their entries' times.
    const m = new AuctionMachine(f.log_complete === true ? {} : { maxBidsPerWindow: Number.MAX_SAFE_INTEGER });
    let index = 0;
    const apply = (command: AuctionCommand, time: number): AuctionResult =>
      m.apply(command, { index: ++index, term: 1, time });
    apply(
      {
        op: 'create',
        auctionId: id,
        itemId: `item-${id}`,
        sellerId: c.seller_id,
        startPrice: c.start_price,
        reservePrice: c.reserve_price,
        minIncrement: c.min_increment,
        startAt: c.start_at,
        endAt: c.end_at,
        antiSnipeWindowS: c.anti_snipe_window_s,
      },
      c.start_at,
    );
    let diverged = false;
    let lastTime = c.start_at;
    f.log.forEach((e, i) => {
      if (diverged) return;
      lastTime = Math.max(lastTime, e.placed_at);
      const r = apply(
        {
          op: 'bid',
          bidId: `replay-${i}`,
          auctionId: id,
          bidderId: e.bidder_id,
          amount: e.amount,
          maxProxyAmount: e.max_proxy_amount,
          idempotencyKey: e.idempotency_key,
        },
        e.placed_at,
      ) as BidResult;
      const got = `${r.status} high ${String(r.newHighBid)} by ${String(r.highBidderId)}${e.close_at !== null ? ` close_at ${String(r.closeAt)}` : ''}`;
      const logged = `${e.status} high ${String(e.high_bid)} by ${String(e.high_bidder_id)}${e.close_at !== null ? ` close_at ${e.close_at}` : ''}`;
      if (got !== logged) {
        // After the first divergence every later entry differs too: one finding per auction says it.
        found.add(
          'replay-differs',
          `${id}: entry ${i} (${e.bidder_id} ${e.amount} max ${String(e.max_proxy_amount)} at ${e.placed_at}): replay ${got}, service ${logged}`,
        );
        diverged = true;
      }
    });
    if (diverged) continue;
    const view = m.getAuction(id, lastTime)!;
    if (view.closeAt !== f.close_at)
      found.add('close-at-differs', `${id}: replay close_at ${view.closeAt}, service ${f.close_at}`);
    if (view.currentHighBid !== f.current_high_bid || view.currentHighBidderId !== f.current_high_bidder_id) {
      found.add(
        'final-differs',
        `${id}: replay high ${String(view.currentHighBid)} by ${String(view.currentHighBidderId)}, service ${String(f.current_high_bid)} by ${String(f.current_high_bidder_id)}`,
      );
    }
    if (f.state === 'closed') {
      closed++;
      const r = apply({ op: 'close', auctionId: id }, Math.max(lastTime, view.closeAt));
      if (r.op === 'close' && r.status === 'closed') {
        if (r.handoff.winnerId !== f.winner || r.handoff.finalPrice !== f.final_price) {
          found.add(
            'winner-differs',
            `${id}: replay winner ${String(r.handoff.winnerId)} at ${String(r.handoff.finalPrice)}, service ${String(f.winner)} at ${String(f.final_price)}`,
          );
        }
      }
    }
  }
  const valid = found.anomalies.length > 0 ? false : replayed === 0 && withoutLog > 0 ? 'unknown' : true;
  return {
    name: 'auction-replay',
    valid,
    anomalies: found.anomalies,
    stats: { replayed, from_full_log: fromFullLog, closed, without_log: withoutLog },
  };
}

interface Observation {
  auction: string;
  start: number;
  end: number;
  closeAt: number;
  what: string;
}

/** close_at as clients saw it from the writer: bid answers (close_at or new_close_at) and fresh reads. */
function observations(ops: readonly PairedOp[]): Observation[] {
  const out: Observation[] = [];
  for (const op of ops) {
    if (op.type !== 'ok' || op.output === null || op.end === null) continue;
    const auction = str(op.output.auction_id) ?? str(op.input.auction_id);
    if (auction === null) continue;
    let closeAt: number | null = null;
    if (op.f === 'bid') closeAt = num(op.output.new_close_at) ?? num(op.output.close_at);
    else if (op.f === 'read' && op.output.fresh === true) closeAt = num(op.output.close_at);
    if (closeAt === null) continue;
    out.push({ auction, start: op.start, end: op.end, closeAt, what: `${op.f} by process ${op.process}` });
  }
  return out;
}

function checkCloseAt(ops: readonly PairedOp[], finals: ReadonlyMap<string, FinalAuction>): CheckResult {
  const found = new Findings('auction-close-at');
  const byAuction = new Map<string, Observation[]>();
  const obs = observations(ops);
  for (const o of obs) {
    const list = byAuction.get(o.auction) ?? [];
    list.push(o);
    byAuction.set(o.auction, list);
  }
  let extended = 0;
  for (const [id, list] of byAuction) {
    // Sweep in time: at each observation's start, the latest close_at among observations that had already ended
    // must not exceed what it observed.
    const ends = [...list].sort((a, b) => a.end - b.end);
    const starts = [...list].sort((a, b) => a.start - b.start);
    let j = 0;
    let best: Observation | null = null;
    for (const o of starts) {
      while (j < ends.length && ends[j]!.end < o.start) {
        if (best === null || ends[j]!.closeAt > best.closeAt) best = ends[j]!;
        j++;
      }
      if (best !== null && o.closeAt < best.closeAt)
        found.add(
          'close-at-backwards',
          `${id}: ${o.what} saw close_at ${o.closeAt} after ${best.what} had seen ${best.closeAt}`,
          [best.end, o.start],
        );
    }
    const max = Math.max(...list.map((o) => o.closeAt));
    const min = Math.min(...list.map((o) => o.closeAt));
    if (max > min) extended++;
    const f = finals.get(id);
    if (f !== undefined && f.close_at < max)
      found.add('final-close-at-earlier', `${id}: final close_at ${f.close_at} is before the ${max} a client saw`);
  }
  return {
    name: 'auction-close-at',
    valid: found.anomalies.length === 0,
    anomalies: found.anomalies,
    stats: { observations: obs.length, auctions_extended: extended },
  };
}

interface ClientBid {
  bidder_id: string;
  amount: number;
  max_proxy_amount: number | null;
  idempotency_key: string;
  status: string;
  seq: number | null;
  new_high_bid: number | null;
  high_bidder_id: string | null;
  close_at: number | null;
  start: number;
}

/** Every bid whose outcome a client learnt (directly, or as the original of a duplicate), by bid id. */
function clientBids(ops: readonly PairedOp[]): Map<string, ClientBid> {
  const out = new Map<string, ClientBid>();
  for (const op of ops) {
    if (op.f !== 'bid' || op.type !== 'ok' || op.output === null) continue;
    const answer =
      str(op.output.status) === 'duplicate' ? (op.output.original as Record<string, unknown> | undefined) : op.output;
    const bidId = str(answer?.bid_id);
    if (answer === undefined || bidId === null || out.has(bidId)) continue;
    out.set(bidId, {
      bidder_id: str(op.input.bidder_id) ?? '',
      amount: num(op.input.amount) ?? 0,
      max_proxy_amount: num(op.input.max_proxy_amount),
      idempotency_key: str(op.input.idempotency_key) ?? '',
      status: str(answer.status) ?? '',
      seq: num(answer.seq),
      new_high_bid: num(answer.new_high_bid),
      high_bidder_id: str(answer.high_bidder_id),
      close_at: num(answer.close_at),
      start: op.start,
    });
  }
  return out;
}

/**
 * The log of the commands that changed an auction, rebuilt when the service shows only its visible changes (GET's
 * bid_history: seq, bid_id, bidder, amount, time, kind): each change is the entry of the bid it names (its
 * amount, maximum and key from the client that sent it), and a high bidder's accepted raise of only their
 * maximum (no visible change) follows the change that made them high (the seq of its answer). Bids that changed
 * nothing are left out: they cannot change a replay. Null with the reason when it cannot be rebuilt (the history
 * does not start at seq 1, or names a bid whose answer no client got).
 */
function reconstructLog(
  visible: readonly VisibleChange[],
  bids: ReadonlyMap<string, ClientBid>,
  auctionId: string,
  bidIdsOf: ReadonlyMap<string, string[]>,
): { log: LoggedBid[] | null; reason: string | null } {
  const sorted = [...visible].sort((a, b) => a.seq - b.seq);
  if (sorted.length > 0 && sorted[0]!.seq !== 1)
    return { log: null, reason: `history starts at seq ${sorted[0]!.seq}` };
  const inHistory = new Set(sorted.map((v) => v.bid_id));
  const bySeq = new Map(sorted.map((v) => [v.seq, v]));
  const raises = new Map<number, ClientBid[]>();
  for (const bidId of bidIdsOf.get(auctionId) ?? []) {
    const c = bids.get(bidId)!;
    if (c.status !== 'accepted' || inHistory.has(bidId) || c.seq === null) continue;
    const v = bySeq.get(c.seq);
    if (v === undefined || v.bidder_id !== c.bidder_id || v.amount !== c.new_high_bid) continue; // not a raise: the acknowledged check reports it
    const list = raises.get(c.seq) ?? [];
    list.push(c);
    raises.set(c.seq, list);
  }
  const log: LoggedBid[] = [];
  const entry = (c: ClientBid, at: number, high: number, holder: string, closeAt: number | null): LoggedBid => ({
    bidder_id: c.bidder_id,
    amount: c.amount,
    max_proxy_amount: c.max_proxy_amount,
    idempotency_key: c.idempotency_key,
    placed_at: at,
    status: c.status,
    high_bid: high,
    high_bidder_id: holder,
    close_at: closeAt,
  });
  for (const v of sorted) {
    const c = bids.get(v.bid_id);
    if (c === undefined) return { log: null, reason: `seq ${v.seq} names bid ${v.bid_id}, whose answer no client got` };
    log.push(entry(c, v.at, v.amount, v.bidder_id, c.seq === v.seq ? c.close_at : null));
    for (const r of (raises.get(v.seq) ?? []).sort((a, b) => a.start - b.start))
      log.push(entry(r, v.at, v.amount, v.bidder_id, r.close_at));
  }
  return { log, reason: null };
}

export function checkAuctionHistory(events: readonly HistoryEvent[]): CheckResult[] {
  const ops = pairOps(events);
  const finals = finalAuctions(ops);
  const bids = clientBids(ops);
  const bidIdsOf = new Map<string, string[]>();
  for (const op of ops) {
    if (op.f !== 'bid' || op.type !== 'ok' || op.output === null) continue;
    const answer =
      str(op.output.status) === 'duplicate' ? (op.output.original as Record<string, unknown> | undefined) : op.output;
    const id = str(op.input.auction_id);
    const bidId = str(answer?.bid_id);
    if (id === null || bidId === null) continue;
    const list = bidIdsOf.get(id) ?? [];
    if (!list.includes(bidId)) list.push(bidId);
    bidIdsOf.set(id, list);
  }
  const unresolved: string[] = [];
  for (const [id, f] of finals) {
    if (f.log !== null) continue;
    const { log, reason } = reconstructLog(f.visible, bids, id, bidIdsOf);
    finals.set(id, { ...f, log });
    if (reason !== null) unresolved.push(`${id}: ${reason}`);
  }
  const replay = checkReplay(ops, finals);
  if (unresolved.length > 0) replay.stats = { ...replay.stats, not_rebuilt: unresolved.slice(0, 20) };
  return [checkLogOrder(finals), checkAcknowledged(ops, finals), replay, checkCloseAt(ops, finals)];
}
