/**
 * The other gateways: a win is announced to them before it is answered (bounded wait), and every key admitted here
 * is told to them in small batches, so a retry of that user or key through them is answered alike; and the two
 * internal routes by which this gateway takes the same from them.
 */
import { badRequest, notFound, requireObject, requireString, type Router, type WorkerOptions } from '@raftkit/http';
import { Pool } from 'undici';
import { DEAL_ID, KEY_MAX, promiseWithin, USER_ID, type AttemptAnswer } from './answers.js';
import { rememberAdmitted, type DealCache, type DealEntry } from './deal-cache.js';

/** How long a win waits for the other gateways to take its announcement (then the refresh tells them). */
const ANNOUNCE_MS = 1_000;

export class Peers {
  /** The other gateways (wins and admitted keys are announced to them). */
  private readonly peers: Pool[];
  private readonly admitBatches = new Map<string, Array<[string, string]>>();
  private admitFlush: NodeJS.Timeout | null = null;

  constructor(
    options: WorkerOptions,
    private readonly secret: string,
  ) {
    const gateways = options.workers.filter((w) => w.role === options.role);
    this.peers = gateways
      .filter((w) => w.id !== options.id)
      .map((w) => new Pool(`http://${w.httpAddress}`, { connections: 4, keepAliveTimeout: 30_000 }));
  }

  close(): void {
    if (this.admitFlush !== null) clearTimeout(this.admitFlush);
    for (const peer of this.peers) void peer.close().catch(() => undefined);
  }

  /**
   * Tells the other gateways of a win before it is answered, so a retry of that user through any of them after
   * the answer is answered the win even when their pool or bitmap says sold out. Bounded wait: a gateway that does
   * not take it in time learns it with its next refresh (about a second).
   */
  async announce(dealId: string, userId: string, answer: AttemptAnswer): Promise<void> {
    if (this.peers.length === 0 || answer.status !== 'won') return;
    const body = JSON.stringify({
      deal_id: dealId,
      user_id: userId,
      reservation_id: answer.reservation_id,
      expires_at: answer.expires_at,
    });
    await Promise.all(
      this.peers.map((peer) =>
        promiseWithin(
          peer
            .request({
              method: 'POST',
              path: '/internal/flash/winners',
              headers: { authorization: `Bearer ${this.secret}`, 'content-type': 'application/json' },
              body,
              headersTimeout: ANNOUNCE_MS,
              bodyTimeout: ANNOUNCE_MS,
            })
            .then((res) => res.body.dump())
            .catch(() => undefined),
          ANNOUNCE_MS,
        ),
      ),
    );
  }

  /**
   * A key admitted here (a token spent): remembered, and told to the other gateways (batched, without waiting), so
   * a retry of it through them goes to the inventory instead of a local sold out. Admitted keys are bounded by
   * the token pool, so this costs at most a few messages per unit.
   */
  admit(entry: DealEntry, userId: string, key: string): void {
    rememberAdmitted(entry, userId, key);
    if (this.peers.length === 0) return;
    const dealId = entry.snapshot.dealId;
    let batch = this.admitBatches.get(dealId);
    if (batch === undefined) {
      batch = [];
      this.admitBatches.set(dealId, batch);
    }
    batch.push([userId, key]);
    if (this.admitFlush !== null) return;
    this.admitFlush = setTimeout(() => {
      this.admitFlush = null;
      for (const [deal, keys] of this.admitBatches) {
        const body = JSON.stringify({ deal_id: deal, keys });
        for (const peer of this.peers) {
          peer
            .request({
              method: 'POST',
              path: '/internal/flash/admitted',
              headers: { authorization: `Bearer ${this.secret}`, 'content-type': 'application/json' },
              body,
              headersTimeout: 5_000,
              bodyTimeout: 5_000,
            })
            .then((res) => res.body.dump())
            .catch(() => undefined);
        }
      }
      this.admitBatches.clear();
    }, 2);
  }
}

/** The internal routes the other gateways call: their wins and their admitted keys. */
export function peerRoutes(router: Router, cache: DealCache): void {
  router
    // Another gateway's win (see `announce`): remembered, so this one answers that user's retry the same.
    .post('/internal/flash/winners', { admits: 'cluster' }, async (ctx) => {
      const body = requireObject(await ctx.json());
      const dealId = requireString(body, 'deal_id', { pattern: DEAL_ID });
      const userId = requireString(body, 'user_id', { pattern: USER_ID });
      const reservationId = requireString(body, 'reservation_id', { minLength: 1, maxLength: 100 });
      const expiresAt = requireString(body, 'expires_at', { maxLength: 40 });
      const entry = await cache.dealEntry(dealId);
      if (entry === null) throw notFound(`no deal ${dealId}`, { deal_id: dealId });
      entry.winners.set(userId, { status: 'won', reservation_id: reservationId, expires_at: expiresAt });
      return undefined;
    })
    // Keys another gateway admitted (see `admit`).
    .post('/internal/flash/admitted', { admits: 'cluster' }, async (ctx) => {
      const body = requireObject(await ctx.json());
      const dealId = requireString(body, 'deal_id', { pattern: DEAL_ID });
      const keys = body.keys;
      if (!Array.isArray(keys) || keys.length > 100_000)
        throw badRequest('invalid_field', 'keys must be a list of [user_id, key]', { field: 'keys' });
      const entry = await cache.dealEntry(dealId);
      if (entry === null) throw notFound(`no deal ${dealId}`, { deal_id: dealId });
      for (const k of keys) {
        if (
          !Array.isArray(k) ||
          typeof k[0] !== 'string' ||
          typeof k[1] !== 'string' ||
          k[0].length > 128 ||
          k[1].length > KEY_MAX
        ) {
          throw badRequest('invalid_field', 'keys must be a list of [user_id, key]', { field: 'keys' });
        }
        rememberAdmitted(entry, k[0], k[1]);
      }
      return undefined;
    });
}
