/**
 * The gateway's general routes: the admin routes (deals, accounts, go-live, pre-warm) and the public surface
 * (state, challenge, attempt, checkout, reservations). The hot two (attempt, state of a deal held here) are also
 * exact routes (fast-routes.ts) with the same answers; these take the rest.
 */
import { randomBytes } from 'node:crypto';
import {
  badRequest,
  conflict,
  HttpError,
  notFound,
  parseJsonBody,
  Reply,
  requireInteger,
  requireObject,
  requireString,
  type RequestContext,
  type Router,
} from '@raftkit/http';
import { snapshotState, type InventoryBackend } from '../../inventory.js';
import { MAX_SHARDS, type ReservationView } from '../../machine.js';
import {
  checkChallenge,
  eligible,
  makeBotToken,
  makeChallenge,
  makeUserToken,
  workBits,
  BOT_TOKEN_TTL_MS,
  type Account,
} from './tokens.js';
import { BOT_COOKIE, DEAL_ID, inventoryCall, KEY_MAX, NO_STORE, STATE_CACHE_CONTROL, USER_ID } from './answers.js';
import type { Admission } from './admission.js';
import type { Attempts } from './attempt.js';
import { stateBodyOf, type DealCache, type DealEntry } from './deal-cache.js';
import { readAttemptBody } from './fast-routes.js';
import { SMOKE_MS, type Prewarm } from './prewarm.js';

interface RoutesOptions {
  cache: DealCache;
  admission: Admission;
  attempts: Attempts;
  prewarm: Prewarm;
  backend: InventoryBackend;
  /** The cluster token: the key of the user, bot and challenge tokens' HMACs. */
  secret: string;
  challengeBits: number;
  /** The payment window of new deals; null: the spec's 10 minutes. */
  reservationWindowMs: number | null;
}

export class Routes {
  private readonly cache: DealCache;
  private readonly admission: Admission;
  private readonly backend: InventoryBackend;
  private readonly secret: string;

  constructor(private readonly o: RoutesOptions) {
    this.cache = o.cache;
    this.admission = o.admission;
    this.backend = o.backend;
    this.secret = o.secret;
  }

  /** The admin routes and the public surface (before the internal routes: the route table's order). */
  publicRoutes(router: Router): void {
    router
      .post('/api/flash/deals', { admits: 'cluster' }, (ctx) => this.createDeal(ctx))
      .put('/api/flash/accounts/:user_id', { admits: 'cluster' }, (ctx) => this.putAccount(ctx))
      .get('/api/flash/:deal_id/state', { admits: 'open' }, (ctx) => this.state(ctx))
      .post('/api/flash/:deal_id/challenge', { admits: 'open' }, (ctx) => this.challenge(ctx))
      .post('/api/flash/:deal_id/challenge/answer', { admits: 'open' }, (ctx) => this.answer(ctx))
      .post('/api/flash/:deal_id/attempt', { admits: 'open' }, (ctx) => this.attemptRoute(ctx))
      .post('/api/flash/:deal_id/checkout', { admits: 'open' }, (ctx) => this.checkout(ctx))
      .get('/api/flash/:deal_id/reservations/:reservation_id', { admits: 'open' }, (ctx) => this.getReservation(ctx))
      .post('/api/flash/:deal_id/reservations/:reservation_id/cancel', { admits: 'open' }, (ctx) => this.cancel(ctx));
  }

  /** A deal's go-live and pre-warm (after the internal routes). */
  dealAdminRoutes(router: Router): void {
    router
      .post('/api/flash/:deal_id/go-live', { admits: 'cluster' }, async (ctx) => {
        const entry = await this.requireDeal(ctx);
        await inventoryCall(() => this.backend.goLive(entry.snapshot.dealId));
        await this.cache.refresh(entry);
        return { deal_id: entry.snapshot.dealId, state: snapshotState(entry.snapshot, Date.now()) };
      })
      .post('/api/flash/:deal_id/prewarm', { admits: 'cluster' }, async (ctx) => {
        const entry = await this.requireDeal(ctx);
        const text = (await ctx.text()).trim();
        const body = text.length === 0 ? {} : requireObject(parseJsonBody(text));
        const seconds =
          body.smoke_seconds === undefined
            ? SMOKE_MS / 1000
            : requireInteger(body, 'smoke_seconds', { min: 0, max: 300 });
        const rps =
          body.smoke_rps === undefined
            ? this.o.prewarm.smokeRps()
            : requireInteger(body, 'smoke_rps', { min: 0, max: 100_000 });
        await this.o.prewarm.prewarm(entry);
        void this.o.prewarm.smoke(entry, seconds * 1000, rps);
        return new Reply(202, {
          deal_id: entry.snapshot.dealId,
          prewarmed_at: new Date(entry.prewarmedAt!).toISOString(),
          smoke: { seconds, rps },
        });
      })
      .get('/api/flash/:deal_id/prewarm', { admits: 'cluster' }, async (ctx) => {
        const entry = await this.requireDeal(ctx);
        return {
          deal_id: entry.snapshot.dealId,
          prewarmed_at: entry.prewarmedAt === null ? null : new Date(entry.prewarmedAt).toISOString(),
          tokens_left: entry.pool.remaining,
          smoke: entry.smoke,
        };
      });
  }

  // --- admin -------------------------------------------------------------------------------------------------

  private async createDeal(ctx: RequestContext): Promise<Reply> {
    const body = requireObject(await ctx.json());
    const skuId = requireString(body, 'sku_id', { minLength: 1, maxLength: 200 });
    const totalInventory = requireInteger(body, 'total_inventory', { min: 1, max: 10_000_000 });
    const shards = requireInteger(body, 'shards', { min: 1, max: MAX_SHARDS });
    if (shards > totalInventory)
      throw badRequest('invalid_field', 'shards must be at most total_inventory (every shard holds a unit)', {
        field: 'shards',
      });
    const startAt = timeField(body, 'start_at');
    const endAt = timeField(body, 'end_at');
    if (endAt <= startAt) throw badRequest('invalid_field', 'end_at must be after start_at', { field: 'end_at' });
    if (endAt <= Date.now()) throw badRequest('invalid_field', 'end_at is in the past', { field: 'end_at' });
    if (Math.ceil(totalInventory / shards) > 1_000_000)
      throw badRequest('invalid_field', 'at most 1,000,000 units per shard', { field: 'shards' });
    const dealId = `d${randomBytes(9).toString('base64url')}`;
    await inventoryCall(() =>
      this.backend.createDeal({
        dealId,
        skuId,
        totalInventory,
        startAt,
        endAt,
        shards,
        ...(this.o.reservationWindowMs === null ? {} : { windowMs: this.o.reservationWindowMs }),
      }),
    );
    await this.cache.load(dealId, true);
    return new Reply(201, { deal_id: dealId });
  }

  private async putAccount(ctx: RequestContext): Promise<unknown> {
    const userId = ctx.params.user_id ?? '';
    if (!USER_ID.test(userId))
      throw badRequest('invalid_user_id', `a user_id is 1..128 of ${USER_ID.source}`, { field: 'user_id' });
    const body = requireObject(await ctx.json());
    const createdAt = timeField(body, 'created_at');
    if (typeof body.payment_verified !== 'boolean')
      throw badRequest('invalid_field', 'payment_verified must be true or false', { field: 'payment_verified' });
    const account: Account = { userId, createdAt, paymentVerified: body.payment_verified };
    return {
      user_id: userId,
      user_token: makeUserToken(this.secret, account),
      eligible: eligible(account, Date.now()),
    };
  }

  // --- the public surface ------------------------------------------------------------------------------------

  private async state(ctx: RequestContext): Promise<Reply> {
    const entry = await this.requireDeal(ctx);
    const userId = ctx.query.get('user_id');
    const key = ctx.query.get('idempotency_key');
    if (userId === null && key === null)
      return new Reply(200, JSON.parse(stateBodyOf(entry)) as unknown, { 'cache-control': STATE_CACHE_CONTROL });
    // A queued client's poll: its own attempt's outcome (private, never cached).
    if (userId === null || key === null)
      throw badRequest('invalid_query', 'user_id and idempotency_key go together', {
        field: userId === null ? 'user_id' : 'idempotency_key',
      });
    this.admission.requireUser(ctx.req, userId);
    const attempt = await this.o.attempts.resolve(entry, userId, key);
    return new Reply(
      200,
      { ...(JSON.parse(stateBodyOf(entry)) as object), attempt },
      { 'cache-control': 'private, no-store' },
    );
  }

  private async challenge(ctx: RequestContext): Promise<unknown> {
    const entry = await this.requireDeal(ctx);
    const body = requireObject(await ctx.json());
    const userId = requireString(body, 'user_id', { pattern: USER_ID });
    return {
      challenge: makeChallenge(this.secret, entry.snapshot.dealId, userId, Date.now()),
      difficulty: this.o.challengeBits,
    };
  }

  private async answer(ctx: RequestContext): Promise<Reply> {
    const entry = await this.requireDeal(ctx);
    const dealId = entry.snapshot.dealId;
    const body = requireObject(await ctx.json());
    const userId = requireString(body, 'user_id', { pattern: USER_ID });
    const challenge = requireString(body, 'challenge', { maxLength: 200 });
    const nonce = requireString(body, 'nonce', { minLength: 1, maxLength: 20, pattern: /^\d+$/ });
    const check = checkChallenge(this.secret, challenge, dealId, userId, Date.now());
    if (check === 'invalid')
      throw badRequest('invalid_challenge', 'this challenge was not given to this user for this deal');
    if (check === 'expired')
      throw badRequest('challenge_expired', 'the challenge is over 10 minutes old: ask for a new one');
    if (workBits(challenge, nonce) < this.o.challengeBits) {
      throw badRequest(
        'wrong_answer',
        `SHA-256(challenge + ":" + nonce) must start with ${this.o.challengeBits} zero bits`,
        { field: 'nonce' },
      );
    }
    const expiresAt = Math.max(Date.now() + BOT_TOKEN_TTL_MS, entry.snapshot.endAt);
    const token = makeBotToken(this.secret, dealId, userId, expiresAt);
    const maxAge = Math.ceil((expiresAt - Date.now()) / 1000);
    return new Reply(
      200,
      { anti_bot_token: token, expires_at: new Date(expiresAt).toISOString() },
      {
        'set-cookie': `${BOT_COOKIE}=${token}; Path=/api/flash/${dealId}; Max-Age=${maxAge}; HttpOnly; SameSite=Strict`,
      },
    );
  }

  private async attemptRoute(ctx: RequestContext): Promise<Reply> {
    const dealId = ctx.params.deal_id ?? '';
    if (!DEAL_ID.test(dealId))
      throw badRequest('invalid_deal_id', 'a deal_id is 1..64 of A-Z a-z 0-9 _ -', { field: 'deal_id' });
    // The target the exact route takes once the deal is held here: its body read the same way (the attempt's own
    // bound and refusal); any other spelling (a query, an encoded byte) as every route reads a body.
    const json =
      ctx.req.url === `/api/flash/${dealId}/attempt` ? parseJsonBody(await readAttemptBody(ctx.req)) : await ctx.json();
    const answer = await this.o.attempts.attempt(this.admission.attemptInput(dealId, json, ctx.req));
    return new Reply(answer.status === 'queued' ? 202 : 200, answer, NO_STORE);
  }

  private async checkout(ctx: RequestContext): Promise<unknown> {
    const entry = await this.requireDeal(ctx);
    const body = requireObject(await ctx.json());
    if (body.idempotency_key === undefined || body.idempotency_key === null || body.idempotency_key === '') {
      throw badRequest('missing_idempotency_key', 'idempotency_key is required on checkout', {
        field: 'idempotency_key',
      });
    }
    const key = requireString(body, 'idempotency_key', { minLength: 1, maxLength: KEY_MAX });
    const reservationId = requireString(body, 'reservation_id', { minLength: 1, maxLength: 100 });
    const method = requireString(body, 'payment_method', { minLength: 1, maxLength: 100 });
    const reservation = await inventoryCall(() => this.backend.reservation(reservationId));
    if (reservation === null || reservation.dealId !== entry.snapshot.dealId)
      throw notFound(`no reservation ${reservationId} in this deal`, { reservation_id: reservationId });
    const account = this.admission.requireOwner(ctx.req, reservation.userId);
    const orderId = `o-${reservationId}`;
    // Payment processing is out of scope: the method `test_decline` stands for a refused payment (order `failed`,
    // the reservation stays `reserved` until it expires); any other is taken. The payment id is the checkout's key,
    // so a retried checkout is the same payment.
    if (method === 'test_decline') {
      if (reservation.status === 'paid') return orderAnswer(orderId, reservation);
      return {
        order_id: orderId,
        status: 'failed',
        reservation_id: reservationId,
        payment_id: null,
        reservation_status: reservation.status,
      };
    }
    const change = await inventoryCall(() => this.backend.pay(reservationId, account.userId, `pay-${key}`));
    if (!change.ok) throw reservationError(change.error, reservationId);
    return orderAnswer(orderId, change.reservation);
  }

  private async getReservation(ctx: RequestContext): Promise<unknown> {
    const entry = await this.requireDeal(ctx);
    const reservationId = ctx.params.reservation_id ?? '';
    const reservation = await inventoryCall(() => this.backend.reservation(reservationId));
    if (reservation === null || reservation.dealId !== entry.snapshot.dealId)
      throw notFound(`no reservation ${reservationId} in this deal`, { reservation_id: reservationId });
    if (!this.admission.presentsClusterToken(ctx.req)) this.admission.requireOwner(ctx.req, reservation.userId);
    return reservationBody(reservation);
  }

  private async cancel(ctx: RequestContext): Promise<unknown> {
    const entry = await this.requireDeal(ctx);
    const reservationId = ctx.params.reservation_id ?? '';
    const reservation = await inventoryCall(() => this.backend.reservation(reservationId));
    if (reservation === null || reservation.dealId !== entry.snapshot.dealId)
      throw notFound(`no reservation ${reservationId} in this deal`, { reservation_id: reservationId });
    const account = this.admission.requireOwner(ctx.req, reservation.userId);
    const change = await inventoryCall(() => this.backend.cancel(reservationId, account.userId));
    if (!change.ok) throw reservationError(change.error, reservationId);
    return reservationBody(change.reservation);
  }

  private async requireDeal(ctx: RequestContext): Promise<DealEntry> {
    const dealId = ctx.params.deal_id ?? '';
    if (!DEAL_ID.test(dealId))
      throw badRequest('invalid_deal_id', 'a deal_id is 1..64 of A-Z a-z 0-9 _ -', { field: 'deal_id' });
    const entry = await this.cache.dealEntry(dealId);
    if (entry === null) throw notFound(`no deal ${dealId}`, { deal_id: dealId });
    return entry;
  }
}

function reservationBody(r: ReservationView): Record<string, unknown> {
  return {
    reservation_id: r.reservationId,
    deal_id: r.dealId,
    user_id: r.userId,
    sku_id: r.skuId,
    reserved_at: new Date(r.reservedAt).toISOString(),
    expires_at: new Date(r.expiresAt).toISOString(),
    status: r.status,
    payment_id: r.paymentId,
  };
}

function orderAnswer(orderId: string, r: ReservationView): Record<string, unknown> {
  return {
    order_id: orderId,
    status: 'paid',
    reservation_id: r.reservationId,
    payment_id: r.paymentId,
    reservation_status: r.status,
  };
}

function reservationError(error: string, reservationId: string): HttpError {
  switch (error) {
    case 'unknown_reservation':
      return notFound(`no reservation ${reservationId}`, { reservation_id: reservationId });
    case 'not_owner':
      return new HttpError(
        403,
        'not_owner',
        'this reservation belongs to another user (reservations are not transferable)',
      );
    case 'reservation_expired':
      return conflict('reservation_expired', 'the 10-minute payment window is over; the unit went back', {
        reservation_id: reservationId,
      });
    case 'reservation_cancelled':
      return conflict('reservation_cancelled', 'this reservation was cancelled', { reservation_id: reservationId });
    case 'already_paid':
      return conflict('already_paid', 'this reservation is paid: it cannot be cancelled', {
        reservation_id: reservationId,
      });
    default:
      return new HttpError(500, 'internal', `unexpected inventory answer: ${error}`);
  }
}

/** A time field: an ISO 8601 string or milliseconds since the epoch. */
function timeField(body: Record<string, unknown>, field: string): number {
  const v = body[field];
  const ms = typeof v === 'number' ? v : typeof v === 'string' && v.length <= 40 ? Date.parse(v) : NaN;
  if (!Number.isSafeInteger(ms) || ms < 0)
    throw badRequest('invalid_field', `${field} must be an ISO 8601 time or milliseconds since the epoch`, { field });
  return ms;
}
