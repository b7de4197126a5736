/**
 * How a gateway reaches the inventory: a small interface, so the gateways are the same whichever store counts the
 * units. `RaftInventory` (raft-inventory.ts) is ours: shards as Raft groups, every decrement committed on a
 * majority before it is answered, and the only backend of this package. Others implement the same interface outside
 * it and are passed to `startGateway` (workers/gateway/gateway.ts) by their own entry scripts: the benchmark's Redis DECR-in-Lua peer
 * (bench/src/peers/redis-inventory.ts), jepsen-like's deliberately broken one (its src/variants/).
 *
 * Contract of every backend (the gateway relies on it; the jepsen-like checker verifies it):
 * - `reserve` is an atomic decrement while positive of one shard, with the winner set per shard: a user holds at
 *   most one reservation of a deal, a retried (user, key) answers what it answered, never a second unit;
 * - a won answer is only given once the decrement and the reservation are durable (for ours: committed);
 * - an error thrown by `reserve` means "outcome unknown": the gateway answers `queued` and retries the same
 *   (user, key, reservationId) until it is decided.
 */
import type { DealState, ReservationView } from './machine.js';

/** What the admin's POST /api/flash/deals asks for, with the id the gateway made. */
export interface DealSpec {
  dealId: string;
  skuId: string;
  totalInventory: number;
  startAt: number;
  endAt: number;
  /** How many inventory shards (each an atomic counter); the units are split evenly, the remainder to the first. */
  shards: number;
  /** The payment window; absent: the spec's 10 minutes (`--set reservation_window_ms=N` is a test knob). */
  windowMs?: number;
}

/** A deal as the gateways cache it (refreshed about every second): what was asked for, and where it stands. */
export interface DealSnapshot extends Omit<DealSpec, 'windowMs'> {
  /** The go-live broadcast's time as recorded by the inventory (trusted over the gateway's clock), or null. */
  liveAt: number | null;
  /** Shards that still hold stock (the alive-shards bitmap), in index order. */
  alive: number[];
  /** Units left over all shards. */
  remaining: number;
  /**
   * Winners this backend learned since its previous `deal` call for this deal (all on the first), read with the
   * counts: a gateway answers a winner's retry won even when its pool or bitmap would say sold out. A backend
   * may return none (then a winner's retry through a gateway with a spent pool reads lost: documented weaker).
   */
  winners: Array<{ userId: string; reservationId: string; expiresAt: number }>;
  /**
   * False when `winners` was cut short (a backend hands out a bounded number per call; the next call goes on):
   * until a call brings the rest, a sold out is not proof that every winner is known. Absent: complete.
   */
  winnersComplete?: boolean;
}

export interface ReserveRequest {
  dealId: string;
  shard: number;
  userId: string;
  key: string;
  /** Made by the gateway, `<shard>-<random>`; the reservation keeps it if this attempt wins. */
  reservationId: string;
  /** The re-route the gateway drew (sent with the first hop to the home shard), or null. */
  reroute: number | null;
}

export type ReserveOutcome =
  | { outcome: 'won'; reservation: ReservationView }
  | { outcome: 'lost'; shard: number; shardEmpty: boolean; reroute: number | null }
  /** The deal refused the attempt as a whole: `not_live`, `deal_ended`, `unknown_deal`. */
  | { outcome: 'refused'; error: string };

/** What a reservation change answered: the reservation, or the machine's refusal. */
export type ReservationChange = { ok: true; reservation: ReservationView } | { ok: false; error: string };

/** What a (user, key) attempt was answered, as the inventory remembers it (for a queued attempt's poll). */
export type AttemptRecord =
  | { status: 'won'; reservation: ReservationView }
  | { status: 'lost' }
  | { status: 'unknown' };

export interface InventoryBackend {
  /** Fill the shard counts of a new deal (idempotent for the same spec; `deal_exists` for another). */
  createDeal(spec: DealSpec): Promise<void>;
  /** Ids of every deal the inventory holds (the gateways learn deals from it to pre-warm them). */
  dealIds(): Promise<string[]>;
  /** The deal, or null when there is none. */
  deal(dealId: string): Promise<DealSnapshot | null>;
  /** The go-live broadcast: recorded by the inventory, after which attempts are accepted whatever the clocks say. */
  goLive(dealId: string): Promise<void>;
  reserve(request: ReserveRequest): Promise<ReserveOutcome>;
  pay(reservationId: string, userId: string, paymentId: string): Promise<ReservationChange>;
  cancel(reservationId: string, userId: string): Promise<ReservationChange>;
  reservation(reservationId: string): Promise<ReservationView | null>;
  /** What (user, key) was answered on the user's home shard or pin (null for an unknown deal). */
  attempt(dealId: string, userId: string, key: string): Promise<AttemptRecord | null>;
  /**
   * A dry run of `reserve` for the synthetic smoke load: the same route, the same shard, a read of its count, and
   * nothing written (so it never consumes a unit).
   */
  probe(dealId: string, shard: number): Promise<{ remaining: number }>;
  close(): Promise<void>;
}

/** The shard a reservation id names (`<shard>-<random>`), or null. */
export function shardOfReservation(reservationId: string): number | null {
  const m = /^(\d{1,4})-[A-Za-z0-9_-]{1,64}$/.exec(reservationId);
  return m === null ? null : Number(m[1]);
}

/** The deal's state from a gateway's snapshot and clock (the live flag is the broadcast's, never the clock's). */
export function snapshotState(deal: DealSnapshot, now: number): DealState {
  if (now >= deal.endAt) return 'ended';
  if (deal.liveAt === null) return 'upcoming';
  return deal.alive.length === 0 ? 'sold_out' : 'live';
}
