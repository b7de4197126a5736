/**
 * Deliberately BROKEN, for the `flash-async-inventory` workload only: flash's inventory with the replication made
 * asynchronous, as the spec's rule 8 warns against. A reserve is answered won from the shard leader's applied count
 * (a serializable read of it) minus the answers this gateway gave ahead of the log, and the reserve command is sent
 * to the log without waiting for it. A unit is answered before it is durable: a leader that dies (or is cut off)
 * before the entry commits, or a second gateway answering from the same count, hands out units the log still
 * counts as free, so the sale oversells. It exists so the checks can be shown catching that (flash-broken.test.ts).
 *
 * Everything else (deals, go-live, pay, cancel, reads) is ours unchanged: it sits behind flash's InventoryBackend,
 * the interface the gateway already takes, and flash's production code has no path that answers before commit.
 */
import {
  RESERVATION_WINDOW_MS,
  type AttemptRecord,
  type DealSnapshot,
  type DealSpec,
  type InventoryBackend,
  type ReservationChange,
  type ReservationView,
  type ReserveOutcome,
  type ReserveRequest,
} from '@raftkit/flash';

export class AnswerBeforeCommitInventory implements InventoryBackend {
  /** deal NUL shard -> won answers given here whose command has not been decided by the log yet. */
  private readonly ahead = new Map<string, number>();
  /** deal NUL user NUL key -> the won answer given from memory (a retry of the key gets the same). */
  private readonly answered = new Map<string, ReserveOutcome>();
  /** deal -> its SKU, learned from the gateway's refreshes (the answer from memory names it). */
  private readonly skus = new Map<string, string>();

  constructor(private readonly inner: InventoryBackend) {}

  createDeal(spec: DealSpec): Promise<void> {
    return this.inner.createDeal(spec);
  }

  dealIds(): Promise<string[]> {
    return this.inner.dealIds();
  }

  async deal(dealId: string): Promise<DealSnapshot | null> {
    const snapshot = await this.inner.deal(dealId);
    if (snapshot !== null) this.skus.set(dealId, snapshot.skuId);
    return snapshot;
  }

  goLive(dealId: string): Promise<void> {
    return this.inner.goLive(dealId);
  }

  async reserve(request: ReserveRequest): Promise<ReserveOutcome> {
    const key = `${request.dealId}\u0000${request.userId}\u0000${request.key}`;
    const given = this.answered.get(key);
    if (given !== undefined) return given;
    const skuId = this.skus.get(request.dealId);
    if (skuId === undefined) return this.inner.reserve(request);
    const slot = `${request.dealId}\u0000${request.shard}`;
    // The leader's applied count (a read of its local copy, not a barrier), less what this gateway already promised.
    const { remaining } = await this.inner.probe(request.dealId, request.shard);
    const ahead = this.ahead.get(slot) ?? 0;
    // Nothing left by this count: decided through the log (lost, or a unit that came back).
    if (remaining - ahead <= 0) return this.inner.reserve(request);
    this.ahead.set(slot, ahead + 1);
    // The entry goes to the log unwatched: whatever it decides, the answer below was already given.
    void this.inner
      .reserve(request)
      .catch(() => undefined)
      .finally(() => {
        const left = (this.ahead.get(slot) ?? 1) - 1;
        if (left <= 0) this.ahead.delete(slot);
        else this.ahead.set(slot, left);
      });
    const now = Date.now();
    const reservation: ReservationView = {
      reservationId: request.reservationId,
      dealId: request.dealId,
      skuId,
      userId: request.userId,
      shard: request.shard,
      reservedAt: now,
      expiresAt: now + RESERVATION_WINDOW_MS,
      status: 'reserved',
      paymentId: null,
    };
    const answer: ReserveOutcome = { outcome: 'won', reservation };
    if (this.answered.size > 100_000) this.answered.clear();
    this.answered.set(key, answer);
    return answer;
  }

  pay(reservationId: string, userId: string, paymentId: string): Promise<ReservationChange> {
    return this.inner.pay(reservationId, userId, paymentId);
  }

  cancel(reservationId: string, userId: string): Promise<ReservationChange> {
    return this.inner.cancel(reservationId, userId);
  }

  reservation(reservationId: string): Promise<ReservationView | null> {
    return this.inner.reservation(reservationId);
  }

  attempt(dealId: string, userId: string, key: string): Promise<AttemptRecord | null> {
    return this.inner.attempt(dealId, userId, key);
  }

  probe(dealId: string, shard: number): Promise<{ remaining: number }> {
    return this.inner.probe(dealId, shard);
  }

  close(): Promise<void> {
    return this.inner.close();
  }
}
