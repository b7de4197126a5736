/**
 * The flash-deal gateway: a worker role (`cluster up --service flash` starts 2) serving the public surface. The
 * gates run in the spec's order, each answering as early and as cheaply as it can, and only the last reaches the
 * inventory:
 *
 *   state (cacheable) -> bot check (429) -> per-IP and per-user token buckets (local memory) -> admission-token
 *   pool (local memory; empty: sold out) -> alive-shards bitmap (local copy; empty: sold out) -> the home shard,
 *   at most one re-route -> (the reservation is the same committed entry as the decrement).
 *
 * Deals are learned from the inventory (every few seconds, and on first sight) and refreshed about every second
 * (every 100 ms in the last seconds before start_at): the go-live is the inventory's recorded broadcast, trusted over
 * this process's clock. See README.md for every decision.
 */
import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  clusterUrl,
  badRequest,
  bearerToken,
  cookieValue,
  conflict,
  fullCounter,
  HttpError,
  notFound,
  Reply,
  requireInteger,
  requireObject,
  requireString,
  sendJson,
  serveWorkerHttp,
  ServiceError,
  take,
  unauthorized,
  verifyToken,
  type BucketCounter,
  type BucketLimits,
  type Logger,
  type MetricsRegistry,
  type RequestContext,
  type Router,
  type RunningWorker,
  type WorkerOptions,
  type WorkerRole,
  parseJsonBody,
} from '@raftkit/http';
import { Pool } from 'undici';
import { AliveShards, distributeTokens, firstRoute, homeShard, nextRoute, poolSize, rerouteCandidate, TokenPool, tokensValid, type RouteDecision } from './gates.js';
import { snapshotState, type DealSnapshot, type InventoryBackend, type ReserveOutcome } from './inventory.js';
import { MAX_SHARDS, type DealState, type ReservationView } from './machine.js';
import { RaftInventory } from './raft-inventory.js';
import { checkBotToken, checkChallenge, checkUserToken, eligible, makeBotToken, makeChallenge, makeUserToken, workBits, BOT_TOKEN_TTL_MS, type Account } from './tokens.js';
import { runSmoke, type SmokeReport } from './smoke.js';
import { TokenCache } from './token-cache.js';

export const DEAL_ID = /^[A-Za-z0-9_-]{1,64}$/;
export const USER_ID = /^[A-Za-z0-9._:@-]{1,128}$/;
const KEY_MAX = 200;
/** The attempt's field rules, made once (the fast path checks every attempt with them). */
const KEY_RULE = { minLength: 1, maxLength: KEY_MAX };
const USER_RULE = { pattern: USER_ID };
/** An attempt body's bound on the fast path (a real one is about 200 bytes). */
const MAX_ATTEMPT_BODY = 16 * 1024;
const NO_STORE = { 'cache-control': 'no-store' };
/** The cookie holding the anti-bot token (the spec's "held in a cookie"). */
export const BOT_COOKIE = 'flash_bot';
/** Cache-Control of the state answer (the spec's CDN gate: a short TTL). */
export const STATE_CACHE_CONTROL = 'public, max-age=1';
const STATE_HEADERS = { 'content-type': 'application/json', 'cache-control': STATE_CACHE_CONTROL };
/** Pre-warm this long before start_at; the smoke load at SMOKE_LEAD_MS before it, for SMOKE_MS. */
export const PREWARM_LEAD_MS = 2 * 60_000;
export const SMOKE_LEAD_MS = 60_000;
export const SMOKE_MS = 30_000;
/** A queued attempt is retried in the background until decided or this long has passed. */
const QUEUED_PATIENCE_MS = 120_000;
/** Answers remembered per deal per gateway (a retried key on this gateway costs nothing, not even a token). */
const MAX_ANSWERS = 200_000;
const MAX_BUCKETS = 500_000;
/** Lookups of deals this gateway does not know yet: 20 a second. */
const LOOKUP_LIMITS: BucketLimits = { capacity: 20, refillRate: 20 };
/** The bot check's refusals, made once: they are immutable, and an Error's stack capture per request would show. */
const BOT_REQUIRED = new HttpError(429, 'bot_check_required', 'solve the challenge (POST .../challenge, then .../challenge/answer) first', {}, { 'retry-after': '1' });
const BOT_FAILED = new HttpError(429, 'bot_check_failed', 'the anti-bot token is not valid for this user and deal', {}, { 'retry-after': '1' });
const rateLimitErrors = new Map<string, HttpError>();
const MISSING_KEY = badRequest('missing_idempotency_key', 'idempotency_key is required: a retry with the same key never reserves a second unit', { field: 'idempotency_key' });
const SYNTHETIC_FORBIDDEN = new HttpError(403, 'forbidden', 'synthetic attempts need the cluster token');
const BODY_TOO_LARGE = new HttpError(413, 'body_too_large', `an attempt is at most ${MAX_ATTEMPT_BODY} bytes`);
/** The local sold-out answer (pool or bitmap): one object, so its bytes are serialised once (`answerWire`). */
const SOLD_OUT: AttemptAnswer = Object.freeze({ status: 'lost', reason: 'sold_out' });
/** The pool's share spent (and re-issued once this refresh) while units remain unreserved: shed, not sold out. */
const ADMISSION_BUSY = new HttpError(429, 'admission_busy', "this gateway's admission tokens are spent for now while units remain; retry", { limit: 'admission' }, { 'retry-after': '1' });
/** Verified tokens remembered per gateway (each kind): far above the crowd this machine serves, a bound against misuse. */
export const MAX_CACHED_TOKENS = 100_000;

/** What the local gates leave to wait for (numbers, not objects: nothing allocated to say it). */
type Next = 0 | 1 | 2 | 3 | 4;
const NEXT_INVENTORY = 0;
const NEXT_EVERY_SHARD = 1;
const NEXT_PENDING = 2;
const NEXT_SYNTHETIC = 3;
/** The user's earlier attempt (another key) still holds an admission token: wait for it, take none. */
const NEXT_HOLDER = 4;

/** An answer as written: status, headers (with the length) and the body's bytes. */
interface Wire {
  status: number;
  headers: Record<string, string | number>;
  /** A string, not a Buffer: node:http then sends the head and the body in one write (a Buffer body is a writev). */
  body: string;
}

/**
 * Answers and refusals as written, made once per object: the refusals are built once (module constants, the deal's
 * not-live), the local sold out is one object, and a remembered answer (a retry, a winner's replay) is the same
 * object each time, so the rejection path neither stringifies JSON nor builds headers per request.
 */
const wires = new WeakMap<object, Wire>();

function wireOf(key: object, status: number, body: unknown, headers: Record<string, string>): Wire {
  let wire = wires.get(key);
  if (wire === undefined) {
    const text = JSON.stringify(body);
    // The same headers, in the same order, as `sendJson` writes.
    wire = { status, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers }, body: text };
    wires.set(key, wire);
  }
  return wire;
}

function answerWire(answer: AttemptAnswer): Wire {
  return wireOf(answer, answer.status === 'queued' ? 202 : 200, answer, NO_STORE);
}

function errorWire(error: HttpError): Wire {
  return wireOf(error, error.status, error.body(), error.headers);
}

function writeWire(res: ServerResponse, wire: Wire): void {
  res.writeHead(wire.status, wire.headers);
  res.end(wire.body);
}

/** The rate limit's refusal for a gate and a Retry-After, made once each (immutable, like the bot check's). */
function rateLimited(gate: 'ip' | 'user', seconds: number): HttpError {
  const key = `${gate}:${seconds}`;
  let error = rateLimitErrors.get(key);
  if (error === undefined) {
    error = new HttpError(429, 'rate_limited', `too many attempts from this ${gate === 'ip' ? 'address' : 'user'}; retry after ${seconds} s`, { limit: gate }, { 'retry-after': String(seconds) });
    rateLimitErrors.set(key, error);
  }
  return error;
}

/** How long a win waits for the other gateways to take its announcement (then the refresh tells them). */
const ANNOUNCE_MS = 1_000;

/** The gateway's settings (`cluster up --set key=value`). */
export interface GatewaySettings {
  /** Leading zero bits of the bot-check work. Default 16. */
  challengeBits: number;
  /** Per-IP bucket: refill per second (capacity twice that). Default 50. */
  ipRate: number;
  /** Per-user bucket: refill per second (capacity twice that). Default 2. */
  userRate: number;
  /** Take the client address from X-Forwarded-For (behind a trusted edge). Default false. */
  trustProxy: boolean;
  /** Expected peak attempts per second over all gateways: the smoke load is 1% of it. Default 2000. */
  expectedPeakRps: number;
  /** The payment window of new deals; null: the spec's 10 minutes. A knob for tests (expiry in seconds). */
  reservationWindowMs: number | null;
}

export function gatewaySettings(settings: Record<string, string>): GatewaySettings {
  const int = (key: string, fallback: number, min: number, max: number): number => {
    const text = settings[key];
    if (text === undefined) return fallback;
    const n = Number(text);
    if (!Number.isSafeInteger(n) || n < min || n > max) throw new RangeError(`--set ${key}: expected an integer from ${min} to ${max}, got ${text}`);
    return n;
  };
  return {
    challengeBits: int('challenge_bits', 16, 0, 32),
    ipRate: int('ip_rate', 50, 1, 10_000_000),
    userRate: int('user_rate', 2, 1, 1_000_000),
    trustProxy: settings.trust_proxy === '1' || settings.trust_proxy === 'true',
    expectedPeakRps: int('expected_peak_rps', 2_000, 1, 100_000_000),
    reservationWindowMs: settings.reservation_window_ms === undefined ? null : int('reservation_window_ms', 600_000, 1_000, 86_400_000),
  };
}

export type AttemptAnswer =
  | { status: 'won'; reservation_id: string; expires_at: string }
  | { status: 'lost'; reason?: 'sold_out' }
  | { status: 'queued' };

interface DealEntry {
  snapshot: DealSnapshot;
  alive: AliveShards;
  /** This gateway's share of the admission-token pool (pre-distributed when the deal is first seen). */
  pool: TokenPool;
  answers: Map<string, AttemptAnswer>;
  /** The deal's winners as the inventory reported them (userId -> their won answer), for retries through here. */
  winners: Map<string, AttemptAnswer>;
  /** Keys (user NUL key) admitted by a gateway (this one or, announced, another): at most the token pool. */
  admitted: Set<string>;
  /**
   * userId -> the key of their attempt that holds an admission token (admitted here or, announced, by another
   * gateway) until it is decided here: one token per account per deal at a time.
   */
  holders: Map<string, string>;
  pending: Map<string, Promise<AttemptAnswer>>;
  /** When the last refresh that completed started (its copy is at least that fresh). */
  refreshedAt: number;
  /** The refresh in flight, if any (one at a time per deal, shared). */
  inflight: Promise<void> | null;
  prewarmedAt: number | null;
  smoke: SmokeReport | null;
  /** The landing state, rendered once per refresh (the pre-rendered page of the spec's pre-warm). */
  stateBody: string;
  /** The state `stateBody` shows: rendered again when the clock moves the deal on (to ended) between refreshes. */
  stateShown: DealState;
  /** The 409 deal_not_live refusal of this deal, built once (the burst before go-live answers many). */
  notLive?: HttpError;
}

/** The per-request parts of an attempt, after the body checks. */
interface AttemptInput {
  dealId: string;
  userId: string;
  key: string;
  botToken: string | null;
  /** The bearer token presented (a user token; checked after the bot check and the rate limits). */
  bearer: string | null;
  ip: string;
  synthetic: boolean;
}

export const gatewayRole: WorkerRole = {
  role: 'gateway',
  count: 2,
  start: startGateway,
};

/**
 * The inventory a gateway of the cluster runs on: ours, the inventory groups on the members. Another backend (the
 * benchmark's Redis peer, a fault-injection variant) is passed to startGateway by its own entry script.
 */
function openInventory(options: WorkerOptions): InventoryBackend {
  return new RaftInventory({ endpoints: options.members.map((m) => clusterUrl(m.httpAddress)), token: options.tokens[0]! });
}

/** A gateway on `backend` (ours unless given), which it owns: closed when the gateway stops. */
export async function startGateway(options: WorkerOptions, backend: InventoryBackend = openInventory(options)): Promise<RunningWorker> {
  const settings = gatewaySettings(options.settings);
  const http = await serveWorkerHttp(options, {
    health: () => ({ deals: gateway?.dealCount() ?? 0 }),
    fastPath: (req, res) => gateway?.fastPath(req, res) ?? false,
  });
  const gateway: Gateway = new Gateway(options, settings, backend, http.metrics, options.logger);
  gateway.routes(http.router);
  gateway.start();
  return {
    httpPort: http.port,
    async stop() {
      gateway.stop();
      await http.close();
      await backend.close();
    },
  };
}

export class Gateway {
  private readonly secret: string;
  private readonly deals = new Map<string, DealEntry>();
  private readonly loading = new Map<string, Promise<DealEntry | null>>();
  /** Deal ids the inventory did not know, and when: a flood of made-up ids costs one lookup a second each. */
  private readonly unknown = new Map<string, number>();
  private readonly lookups: BucketCounter = fullCounter(LOOKUP_LIMITS, Date.now());
  private readonly ipBuckets = new Map<string, BucketCounter>();
  private readonly userBuckets = new Map<string, BucketCounter>();
  private readonly ipLimits: BucketLimits;
  private readonly userLimits: BucketLimits;
  private readonly gatewayIndex: number;
  private readonly gatewayCount: number;
  private timers: NodeJS.Timeout[] = [];
  private stopped = false;
  private readonly outcomes;
  private readonly tallies = new Map<string, number>();
  /** The other gateways (wins and admitted keys are announced to them). */
  private readonly peers: Pool[];
  private readonly admitBatches = new Map<string, Array<[string, string]>>();
  private admitFlush: NodeJS.Timeout | null = null;
  /**
   * Tokens already proven (bounded): the bot check and the user token are an HMAC each, on the path every rejected
   * attempt takes; a crowd retries with the same tokens, so a map lookup replaces the HMAC.
   */
  private readonly userTokens = new TokenCache<Account>(MAX_CACHED_TOKENS);
  private readonly botTokens = new TokenCache<{ dealId: string; userId: string; expiresAt: number }>(MAX_CACHED_TOKENS);

  constructor(
    private readonly options: WorkerOptions,
    readonly settings: GatewaySettings,
    readonly backend: InventoryBackend,
    metrics: MetricsRegistry,
    private readonly logger: Logger,
  ) {
    this.secret = options.tokens[0]!;
    this.ipLimits = { capacity: settings.ipRate * 2, refillRate: settings.ipRate };
    this.userLimits = { capacity: settings.userRate * 2, refillRate: settings.userRate };
    const gateways = options.workers.filter((w) => w.role === options.role);
    this.gatewayCount = Math.max(1, gateways.length);
    this.gatewayIndex = Math.max(0, gateways.findIndex((w) => w.id === options.id));
    this.outcomes = metrics.counter('flash_attempts_total', 'Attempts by the gate that answered them (gate) and the answer');
    this.peers = gateways.filter((w) => w.id !== options.id).map((w) => new Pool(`http://${w.httpAddress}`, { connections: 4, keepAliveTimeout: 30_000 }));
  }

  dealCount(): number {
    return this.deals.size;
  }

  start(): void {
    // Refresh each deal about every second (every 100 ms near go-live), learn new deals every 2 s, pre-warm and
    // smoke-test them on time, and forget idle buckets.
    this.timers.push(setInterval(() => void this.refreshDue(), 100));
    this.timers.push(setInterval(() => void this.discover(), 2_000));
    this.timers.push(setInterval(() => this.sweepBuckets(), 10_000));
    this.timers.push(setInterval(() => this.flushTallies(), 100));
    for (const t of this.timers) t.unref();
    void this.discover();
  }

  stop(): void {
    this.stopped = true;
    if (this.admitFlush !== null) clearTimeout(this.admitFlush);
    this.flushTallies();
    for (const peer of this.peers) void peer.close().catch(() => undefined);
    for (const t of this.timers) clearInterval(t);
    this.timers = [];
  }

  routes(router: Router): void {
    router
      .post('/api/flash/deals', { admits: 'cluster' }, (ctx) => this.createDeal(ctx))
      .put('/api/flash/accounts/:user_id', { admits: 'cluster' }, (ctx) => this.putAccount(ctx))
      .get('/api/flash/:deal_id/state', { admits: 'open' }, (ctx) => this.state(ctx))
      .post('/api/flash/:deal_id/challenge', { admits: 'open' }, (ctx) => this.challenge(ctx))
      .post('/api/flash/:deal_id/challenge/answer', { admits: 'open' }, (ctx) => this.answer(ctx))
      .post('/api/flash/:deal_id/attempt', { admits: 'open' }, (ctx) => this.attemptRoute(ctx))
      .post('/api/flash/:deal_id/checkout', { admits: 'open' }, (ctx) => this.checkout(ctx))
      .get('/api/flash/:deal_id/reservations/:reservation_id', { admits: 'open' }, (ctx) => this.getReservation(ctx))
      .post('/api/flash/:deal_id/reservations/:reservation_id/cancel', { admits: 'open' }, (ctx) => this.cancel(ctx))
      // Another gateway's win (see `announce`): remembered, so this one answers that user's retry the same.
      .post('/internal/flash/winners', { admits: 'cluster' }, async (ctx) => {
        const body = requireObject(await ctx.json());
        const dealId = requireString(body, 'deal_id', { pattern: DEAL_ID });
        const userId = requireString(body, 'user_id', { pattern: USER_ID });
        const reservationId = requireString(body, 'reservation_id', { minLength: 1, maxLength: 100 });
        const expiresAt = requireString(body, 'expires_at', { maxLength: 40 });
        const entry = await this.dealEntry(dealId);
        if (entry === null) throw notFound(`no deal ${dealId}`, { deal_id: dealId });
        entry.winners.set(userId, { status: 'won', reservation_id: reservationId, expires_at: expiresAt });
        return undefined;
      })
      // Keys another gateway admitted (see `admit`).
      .post('/internal/flash/admitted', { admits: 'cluster' }, async (ctx) => {
        const body = requireObject(await ctx.json());
        const dealId = requireString(body, 'deal_id', { pattern: DEAL_ID });
        const keys = body.keys;
        if (!Array.isArray(keys) || keys.length > 100_000) throw badRequest('invalid_field', 'keys must be a list of [user_id, key]', { field: 'keys' });
        const entry = await this.dealEntry(dealId);
        if (entry === null) throw notFound(`no deal ${dealId}`, { deal_id: dealId });
        for (const k of keys) {
          if (!Array.isArray(k) || typeof k[0] !== 'string' || typeof k[1] !== 'string' || k[0].length > 128 || k[1].length > KEY_MAX) {
            throw badRequest('invalid_field', 'keys must be a list of [user_id, key]', { field: 'keys' });
          }
          rememberAdmitted(entry, k[0], k[1]);
        }
        return undefined;
      })
      .post('/api/flash/:deal_id/go-live', { admits: 'cluster' }, async (ctx) => {
        const entry = await this.requireDeal(ctx);
        await this.inventory(() => this.backend.goLive(entry.snapshot.dealId));
        await this.refresh(entry);
        return { deal_id: entry.snapshot.dealId, state: snapshotState(entry.snapshot, Date.now()) };
      })
      .post('/api/flash/:deal_id/prewarm', { admits: 'cluster' }, async (ctx) => {
        const entry = await this.requireDeal(ctx);
        const text = (await ctx.text()).trim();
        const body = text.length === 0 ? {} : requireObject(parseJsonBody(text));
        const seconds = body.smoke_seconds === undefined ? SMOKE_MS / 1000 : requireInteger(body, 'smoke_seconds', { min: 0, max: 300 });
        const rps = body.smoke_rps === undefined ? this.smokeRps() : requireInteger(body, 'smoke_rps', { min: 0, max: 100_000 });
        await this.prewarm(entry);
        void this.smoke(entry, seconds * 1000, rps);
        return new Reply(202, { deal_id: entry.snapshot.dealId, prewarmed_at: new Date(entry.prewarmedAt!).toISOString(), smoke: { seconds, rps } });
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
    if (shards > totalInventory) throw badRequest('invalid_field', 'shards must be at most total_inventory (every shard holds a unit)', { field: 'shards' });
    const startAt = timeField(body, 'start_at');
    const endAt = timeField(body, 'end_at');
    if (endAt <= startAt) throw badRequest('invalid_field', 'end_at must be after start_at', { field: 'end_at' });
    if (endAt <= Date.now()) throw badRequest('invalid_field', 'end_at is in the past', { field: 'end_at' });
    if (Math.ceil(totalInventory / shards) > 1_000_000) throw badRequest('invalid_field', 'at most 1,000,000 units per shard', { field: 'shards' });
    const dealId = `d${randomBytes(9).toString('base64url')}`;
    await this.inventory(() => this.backend.createDeal({ dealId, skuId, totalInventory, startAt, endAt, shards, ...(this.settings.reservationWindowMs === null ? {} : { windowMs: this.settings.reservationWindowMs }) }));
    await this.load(dealId, true);
    return new Reply(201, { deal_id: dealId });
  }

  private async putAccount(ctx: RequestContext): Promise<unknown> {
    const userId = ctx.params.user_id ?? '';
    if (!USER_ID.test(userId)) throw badRequest('invalid_user_id', `a user_id is 1..128 of ${USER_ID.source}`, { field: 'user_id' });
    const body = requireObject(await ctx.json());
    const createdAt = timeField(body, 'created_at');
    if (typeof body.payment_verified !== 'boolean') throw badRequest('invalid_field', 'payment_verified must be true or false', { field: 'payment_verified' });
    const account: Account = { userId, createdAt, paymentVerified: body.payment_verified };
    return { user_id: userId, user_token: makeUserToken(this.secret, account), eligible: eligible(account, Date.now()) };
  }

  // --- the public surface ------------------------------------------------------------------------------------

  private async state(ctx: RequestContext): Promise<Reply> {
    const entry = await this.requireDeal(ctx);
    const userId = ctx.query.get('user_id');
    const key = ctx.query.get('idempotency_key');
    if (userId === null && key === null) return new Reply(200, JSON.parse(stateBodyOf(entry)) as unknown, { 'cache-control': STATE_CACHE_CONTROL });
    // A queued client's poll: its own attempt's outcome (private, never cached).
    if (userId === null || key === null) throw badRequest('invalid_query', 'user_id and idempotency_key go together', { field: userId === null ? 'user_id' : 'idempotency_key' });
    this.requireUser(ctx.req, userId);
    const attempt = await this.resolve(entry, userId, key);
    return new Reply(200, { ...(JSON.parse(stateBodyOf(entry)) as object), attempt }, { 'cache-control': 'private, no-store' });
  }

  private async challenge(ctx: RequestContext): Promise<unknown> {
    const entry = await this.requireDeal(ctx);
    const body = requireObject(await ctx.json());
    const userId = requireString(body, 'user_id', { pattern: USER_ID });
    return { challenge: makeChallenge(this.secret, entry.snapshot.dealId, userId, Date.now()), difficulty: this.settings.challengeBits };
  }

  private async answer(ctx: RequestContext): Promise<Reply> {
    const entry = await this.requireDeal(ctx);
    const dealId = entry.snapshot.dealId;
    const body = requireObject(await ctx.json());
    const userId = requireString(body, 'user_id', { pattern: USER_ID });
    const challenge = requireString(body, 'challenge', { maxLength: 200 });
    const nonce = requireString(body, 'nonce', { minLength: 1, maxLength: 20, pattern: /^\d+$/ });
    const check = checkChallenge(this.secret, challenge, dealId, userId, Date.now());
    if (check === 'invalid') throw badRequest('invalid_challenge', 'this challenge was not given to this user for this deal');
    if (check === 'expired') throw badRequest('challenge_expired', 'the challenge is over 10 minutes old: ask for a new one');
    if (workBits(challenge, nonce) < this.settings.challengeBits) {
      throw badRequest('wrong_answer', `SHA-256(challenge + ":" + nonce) must start with ${this.settings.challengeBits} zero bits`, { field: 'nonce' });
    }
    const expiresAt = Math.max(Date.now() + BOT_TOKEN_TTL_MS, entry.snapshot.endAt);
    const token = makeBotToken(this.secret, dealId, userId, expiresAt);
    const maxAge = Math.ceil((expiresAt - Date.now()) / 1000);
    return new Reply(200, { anti_bot_token: token, expires_at: new Date(expiresAt).toISOString() }, {
      'set-cookie': `${BOT_COOKIE}=${token}; Path=/api/flash/${dealId}; Max-Age=${maxAge}; HttpOnly; SameSite=Strict`,
    });
  }

  private async attemptRoute(ctx: RequestContext): Promise<Reply> {
    const dealId = ctx.params.deal_id ?? '';
    if (!DEAL_ID.test(dealId)) throw badRequest('invalid_deal_id', 'a deal_id is 1..64 of A-Z a-z 0-9 _ -', { field: 'deal_id' });
    const answer = await this.attempt(this.attemptInput(dealId, await ctx.json(), ctx.req));
    return new Reply(answer.status === 'queued' ? 202 : 200, answer, NO_STORE);
  }

  /** An attempt's body checked (synchronous: the fast path answers most attempts without a promise). */
  private attemptInput(dealId: string, json: unknown, req: IncomingMessage): AttemptInput {
    const body = requireObject(json);
    // Rule 1: no key, no attempt; checked first, before any gate spends anything.
    if (body.idempotency_key === undefined || body.idempotency_key === null || body.idempotency_key === '') {
      this.tally('input', 'missing_idempotency_key');
      throw MISSING_KEY;
    }
    const key = requireString(body, 'idempotency_key', KEY_RULE);
    const userId = requireString(body, 'user_id', USER_RULE);
    const botToken = typeof body.anti_bot_token === 'string' ? body.anti_bot_token : cookieValue(req, BOT_COOKIE);
    if (body.anti_bot_token !== undefined && body.anti_bot_token !== null && typeof body.anti_bot_token !== 'string') {
      throw badRequest('invalid_field', 'anti_bot_token must be a string', { field: 'anti_bot_token' });
    }
    const synthetic = req.headers['x-flash-synthetic'] === '1';
    const bearer = bearerToken(req);
    if (synthetic && !this.presentsClusterToken(req)) throw SYNTHETIC_FORBIDDEN;
    return { dealId, userId, key, botToken, bearer, ip: this.clientIp(req), synthetic };
  }

  /**
   * The two hot routes without the router (no URL parsing, no route table walk): `POST /api/flash/{deal}/attempt`
   * and `GET /api/flash/{deal}/state` of a deal this gateway holds. The same handlers and answers as the routes;
   * anything else (a query, an unknown deal, another path) goes to the router.
   */
  fastPath(req: IncomingMessage, res: ServerResponse): boolean {
    const url = req.url;
    if (url === undefined || !url.startsWith('/api/flash/')) return false;
    if (req.method === 'GET' && url.endsWith('/state')) {
      const entry = this.deals.get(url.slice(11, -6));
      if (entry === undefined) return false;
      res.writeHead(200, STATE_HEADERS);
      res.end(stateBodyOf(entry));
      return true;
    }
    if (req.method !== 'POST' || !url.endsWith('/attempt')) return false;
    const dealId = url.slice(11, -8);
    if (!DEAL_ID.test(dealId)) return false;
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size <= MAX_ATTEMPT_BODY) chunks.push(chunk);
    });
    req.on('end', () => this.attemptBody(dealId, chunks, size, req, res));
    req.on('error', () => res.destroy());
    return true;
  }

  /**
   * An attempt's body has arrived (fast path). Every gate that can answer from memory runs synchronously and its
   * answer is written from bytes serialised once (`wireOf`); only an attempt that must wait (the inventory, a
   * deal not loaded yet, a key being decided here) takes a promise. The same gates, order and answers as `attempt`.
   */
  private attemptBody(dealId: string, chunks: Buffer[], size: number, req: IncomingMessage, res: ServerResponse): void {
    let waiting: Promise<AttemptAnswer>;
    try {
      if (size > MAX_ATTEMPT_BODY) throw BODY_TOO_LARGE;
      const text = chunks.length === 1 ? chunks[0]!.toString('utf8') : Buffer.concat(chunks).toString('utf8');
      const input = this.attemptInput(dealId, parseJsonBody(text), req);
      const now = Date.now();
      this.frontGates(input, now);
      const entry = this.deals.get(dealId);
      if (entry === undefined) waiting = this.attemptAfterFront(input, now);
      else {
        const next = this.localGates(entry, input, now);
        if (typeof next === 'object') return writeWire(res, answerWire(next));
        waiting = this.afterLocalGates(entry, input, next);
      }
    } catch (error) {
      return this.failAttempt(res, error);
    }
    waiting.then(
      (answer) => writeWire(res, answerWire(answer)),
      (error: unknown) => this.failAttempt(res, error),
    );
  }

  private failAttempt(res: ServerResponse, error: unknown): void {
    if (error instanceof HttpError) return writeWire(res, errorWire(error));
    this.logger.log('error', 'attempt failed', { error: String((error as Error)?.stack ?? error) });
    if (!res.headersSent) sendJson(res, 500, { error: { code: 'internal', message: 'internal error' } });
  }

  /**
   * The gates, in the spec's order. `synthetic` attempts (the pre-go-live smoke load) run every gate as a dry run:
   * separate buckets, the pool only looked at, the route computed and the shard's count read, nothing written.
   */
  async attempt(input: AttemptInput): Promise<AttemptAnswer & { synthetic?: true; shard?: number }> {
    const now = Date.now();
    this.frontGates(input, now);
    return this.attemptAfterFront(input, now);
  }

  /** After the bot check, the rate limits and the user: the deal (loaded if need be), then the local gates and the inventory. */
  private async attemptAfterFront(input: AttemptInput, now: number): Promise<AttemptAnswer & { synthetic?: true; shard?: number }> {
    const entry = this.deals.get(input.dealId) ?? (await this.dealEntry(input.dealId));
    if (entry === null) throw notFound(`no deal ${input.dealId}`, { deal_id: input.dealId });
    const next = this.localGates(entry, input, now);
    if (typeof next === 'object') return next;
    return this.afterLocalGates(entry, input, next);
  }

  /**
   * Gates 1 and 2 and who the user is, from memory: the bot check (no token, or a bad one: 429), the per-IP and
   * per-user buckets (synthetic attempts on their own keys), the bearer token and the account-farm rule. Throws the
   * refusal (built once, no stack per request).
   */
  private frontGates(input: AttemptInput, now: number): void {
    if (input.botToken === null || input.botToken.length === 0) {
      this.tally('bot', 'missing');
      throw BOT_REQUIRED;
    }
    const bot = this.botTokens.get(input.botToken);
    const botOk = bot !== undefined ? bot.dealId === input.dealId && bot.userId === input.userId && bot.expiresAt > now : checkBotToken(this.secret, input.botToken, input.dealId, input.userId, now);
    if (botOk && bot === undefined) this.botTokens.set(input.botToken, { dealId: input.dealId, userId: input.userId, expiresAt: Number(input.botToken.split('.')[1]) });
    if (!botOk) {
      this.tally('bot', 'bad');
      throw BOT_FAILED;
    }
    const prefix = input.synthetic ? 'synthetic\u0000' : '';
    this.limit(this.ipBuckets, input.synthetic ? prefix + input.ip : input.ip, this.ipLimits, now, 'ip');
    // Then who the user is, and the account-farm defence (an HMAC and a comparison, memory only; cached per token),
    // before the user's own bucket: anyone may get a bot token for any user id (the challenge is open), so charging
    // the bucket first let a stranger keep a user rate-limited through the sale with attempts in that user's name.
    if (!input.synthetic) this.checkUser(input.bearer, input.userId, true);
    this.limit(this.userBuckets, input.synthetic ? prefix + input.userId : input.userId, this.userLimits, now, 'user');
  }

  /**
   * The deal's gates that answer from this gateway's memory: a key already answered here, the deal's state, the
   * winners and the pool and bitmap (sold out). Returns the answer, or what must be awaited next (`Next`); a
   * taken admission token is taken here, synchronously, exactly once.
   */
  private localGates(entry: DealEntry, input: AttemptInput, now: number): AttemptAnswer | Next {
    const state = snapshotState(entry.snapshot, now);
    const userKey = input.synthetic ? '' : `${input.userId}\u0000${input.key}`;
    if (!input.synthetic) {
      // A retried key on this gateway: the same answer, no token spent. (Through another gateway the inventory
      // remembers the key, or the winner set answers the user's reservation.)
      const known = entry.answers.get(userKey);
      if (known !== undefined) return this.count('retry', known);
      // Still being decided here (queued): wait for that same decision as a fresh attempt would, then queued.
      if (entry.pending.has(userKey)) return NEXT_PENDING;
    }
    if (state === 'ended' || !tokensValid(entry.snapshot.endAt, now)) {
      this.tally('state', 'ended');
      throw conflict('deal_ended', `deal ${input.dealId} has ended`, { state: 'ended' });
    }
    if (state === 'upcoming' && !input.synthetic) {
      this.tally('state', 'upcoming');
      entry.notLive ??= new HttpError(409, 'deal_not_live', `deal ${input.dealId} is not live yet; poll its state`, { state: 'upcoming', start_at: new Date(entry.snapshot.startAt).toISOString() }, { 'retry-after': '1' });
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
      if (winner !== undefined) return this.count('winners', winner);
      const held = entry.holders.get(input.userId);
      if (held !== undefined && held !== input.key) return NEXT_HOLDER;
      if ((entry.alive.count === 0 || entry.pool.remaining === 0) && entry.admitted.has(userKey)) return NEXT_EVERY_SHARD;
    }
    if (entry.alive.count === 0) return this.count('bitmap', SOLD_OUT);
    if (input.synthetic) return NEXT_SYNTHETIC;
    if (entry.admitted.has(userKey)) return NEXT_INVENTORY;
    if (entry.pool.take() === 'sold_out' && !this.topUp(entry)) {
      // Sold out only when every unit is reserved (as of the last refresh, about a second old); tokens spent while
      // units are unreserved (losers on empty shards, skew) are re-issued once per refresh, and past that the
      // attempt is shed with a retry, never told sold out.
      if (entry.snapshot.remaining === 0) return this.count('pool', SOLD_OUT);
      this.tally('pool', 'busy');
      throw ADMISSION_BUSY;
    }
    this.tally('pool', 'admitted');
    this.admit(entry, input.userId, input.key);
    return NEXT_INVENTORY;
  }

  /**
   * A spent share while the last refresh counted unreserved units: this gateway's share of 3 x what remains,
   * once per refresh, then a token taken. False when there is nothing to re-issue now.
   */
  private topUp(entry: DealEntry): boolean {
    const remaining = entry.snapshot.remaining;
    if (remaining <= 0) return false;
    const share = Math.max(1, distributeTokens(poolSize(remaining), this.gatewayCount)[this.gatewayIndex]!);
    if (!entry.pool.topUp(share, entry.refreshedAt)) return false;
    this.tally('pool', 'topped_up');
    this.logger.log('info', 'admission tokens re-issued while units remain', { deal: entry.snapshot.dealId, tokens: share, remaining });
    return entry.pool.take() === 'admitted';
  }

  /**
   * A new key of a user whose earlier attempt holds an admission token: that attempt's decision (awaited here, or
   * asked of the inventory with no token when another gateway admitted it). A win is answered; a loss releases
   * the token and this key is a new attempt; undecided in time: 409 `attempt_pending` naming the held key.
   */
  private async afterHolder(entry: DealEntry, input: AttemptInput): Promise<AttemptAnswer & { synthetic?: true; shard?: number }> {
    const held = entry.holders.get(input.userId);
    if (held === undefined || held === input.key) return this.attemptAfterFront(input, Date.now());
    const heldKey = `${input.userId}\u0000${held}`;
    let decision = entry.pending.get(heldKey);
    if (decision === undefined) {
      const known = entry.answers.get(heldKey);
      if (known !== undefined) {
        // Decided here already: a win is theirs; otherwise the token is released.
        if (known.status === 'won') return this.count('holder', known);
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
    const first = await promiseWithin(decision.catch(() => null), this.backendPatienceMs());
    if (first === null) {
      if (entry.holders.get(input.userId) !== held) return this.attemptAfterFront(input, Date.now());
      throw this.attemptPending(held);
    }
    if (first.status === 'won') return this.count('holder', first);
    if (first.status === 'queued') {
      throw this.attemptPending(held);
    }
    // Lost: the held token is released (decide did) and this key is an attempt of its own.
    if (entry.holders.get(input.userId) === held) entry.holders.delete(input.userId);
    return this.attemptAfterFront(input, Date.now());
  }

  /** 409 `attempt_pending`: the user's attempt with `held` still holds their admission token, undecided. */
  private attemptPending(held: string): HttpError {
    this.tally('holder', 'pending');
    return new HttpError(409, 'attempt_pending', `the attempt with idempotency_key ${held} is still being decided; poll its state`, { idempotency_key: held }, { 'retry-after': '1' });
  }

  /** What the local gates left to wait for: a key being decided here, the inventory, or the synthetic probe. */
  private async afterLocalGates(entry: DealEntry, input: AttemptInput, next: Next): Promise<AttemptAnswer & { synthetic?: true; shard?: number }> {
    switch (next) {
      case NEXT_PENDING: {
        const pending = entry.pending.get(`${input.userId}\u0000${input.key}`);
        // Settled since the local gates looked: its answer is remembered (or it failed: decide it again).
        if (pending === undefined) return this.attemptAfterFront(input, Date.now());
        return this.count('retry', (await promiseWithin(pending, this.backendPatienceMs())) ?? { status: 'queued' });
      }
      case NEXT_SYNTHETIC: {
        const home = homeShard(input.dealId, input.userId, entry.snapshot.shards);
        const probe = await this.inventory(() => this.backend.probe(input.dealId, home));
        this.tally('synthetic', probe.remaining > 0 ? 'would_try' : 'would_lose');
        return { status: 'lost', synthetic: true, shard: home };
      }
      case NEXT_EVERY_SHARD:
        return this.decideHere(entry, input.userId, input.key, true);
      case NEXT_HOLDER:
        return this.afterHolder(entry, input);
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
        return this.count('inventory', { status: 'queued' });
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
    for (let attempt = 0; ; attempt++) {
      try {
        const answer = await this.route(entry, userId, key, everyShard);
        if (answer === 'not_live' && !wentLive && entry.snapshot.liveAt !== null) {
          // This gateway saw the broadcast and a shard's group has not recorded it yet: relay it, then retry.
          wentLive = true;
          await this.backend.goLive(entry.snapshot.dealId);
          continue;
        }
        if (answer === 'not_live') throw new HttpError(409, 'deal_not_live', `deal ${entry.snapshot.dealId} is not live yet`, { state: 'upcoming' }, { 'retry-after': '1' });
        if (answer === 'deal_ended') throw conflict('deal_ended', `deal ${entry.snapshot.dealId} has ended`, { state: 'ended' });
        remember(entry.answers, userKey, answer);
        // Decided: the token this key held is released (a winner takes none again: the winner set answers them).
        if (entry.holders.get(userId) === key) entry.holders.delete(userId);
        if (answer.status === 'won') {
          entry.winners.set(userId, answer);
          await this.announce(entry.snapshot.dealId, userId, answer);
        }
        this.count('inventory', answer);
        return answer;
      } catch (error) {
        if (error instanceof HttpError || Date.now() > deadline || this.stopped) {
          if (entry.holders.get(userId) === key) entry.holders.delete(userId);
          throw error;
        }
        if (attempt === 0) this.logger.log('warn', 'inventory did not decide an attempt; retrying in the background', { deal: entry.snapshot.dealId, error: String((error as Error).message ?? error) });
        await new Promise((r) => setTimeout(r, Math.min(1_000, 100 * 2 ** Math.min(attempt, 4))));
      }
    }
  }

  /** Home shard first, exactly one re-route to the shard the home shard pinned the user to. */
  private async route(entry: DealEntry, userId: string, key: string, everyShard: boolean): Promise<AttemptAnswer | 'not_live' | 'deal_ended'> {
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
      if (out.shardEmpty && entry.alive.has(out.shard)) entry.alive.set(out.shard, false);
      if (out.shardEmpty && alive !== entry.alive) alive.set(out.shard, false);
      decision = nextRoute(hop, alive, out.reroute);
      reroute = null;
    }
  }

  /**
   * Tells the other gateways of a win before it is answered, so a retry of that user through any of them after
   * the answer is answered the win even when their pool or bitmap says sold out. Bounded wait: a gateway that does
   * not take it in time learns it with its next refresh (about a second).
   */
  private async announce(dealId: string, userId: string, answer: AttemptAnswer): Promise<void> {
    if (this.peers.length === 0 || answer.status !== 'won') return;
    const body = JSON.stringify({ deal_id: dealId, user_id: userId, reservation_id: answer.reservation_id, expires_at: answer.expires_at });
    await Promise.all(
      this.peers.map((peer) =>
        promiseWithin(
          peer
            .request({ method: 'POST', path: '/internal/flash/winners', headers: { authorization: `Bearer ${this.secret}`, 'content-type': 'application/json' }, body, headersTimeout: ANNOUNCE_MS, bodyTimeout: ANNOUNCE_MS })
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
  private admit(entry: DealEntry, userId: string, key: string): void {
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
            .request({ method: 'POST', path: '/internal/flash/admitted', headers: { authorization: `Bearer ${this.secret}`, 'content-type': 'application/json' }, body, headersTimeout: 5_000, bodyTimeout: 5_000 })
            .then((res) => res.body.dump())
            .catch(() => undefined);
        }
      }
      this.admitBatches.clear();
    }, 2);
  }

  /** A queued attempt's outcome, for its poll: this gateway's answer, else what the inventory remembers. */
  private async resolve(entry: DealEntry, userId: string, key: string): Promise<AttemptAnswer> {
    const userKey = `${userId}\u0000${key}`;
    const known = entry.answers.get(userKey);
    if (known !== undefined) return known;
    if (entry.pending.has(userKey)) return { status: 'queued' };
    // A winner's any key is answered their win by an attempt (the gates above): the poll answers the same.
    const winner = entry.winners.get(userId);
    if (winner !== undefined) return winner;
    const record = await this.inventory(() => this.backend.attempt(entry.snapshot.dealId, userId, key));
    if (record?.status === 'won') return wonAnswer(record.reservation);
    if (record?.status === 'lost') return { status: 'lost' };
    // Not decided anywhere: still queued while the deal can sell, else it will never win.
    const state = snapshotState(entry.snapshot, Date.now());
    return state === 'live' || state === 'upcoming' ? { status: 'queued' } : { status: 'lost', reason: 'sold_out' };
  }

  private async checkout(ctx: RequestContext): Promise<unknown> {
    const entry = await this.requireDeal(ctx);
    const body = requireObject(await ctx.json());
    if (body.idempotency_key === undefined || body.idempotency_key === null || body.idempotency_key === '') {
      throw badRequest('missing_idempotency_key', 'idempotency_key is required on checkout', { field: 'idempotency_key' });
    }
    const key = requireString(body, 'idempotency_key', { minLength: 1, maxLength: KEY_MAX });
    const reservationId = requireString(body, 'reservation_id', { minLength: 1, maxLength: 100 });
    const method = requireString(body, 'payment_method', { minLength: 1, maxLength: 100 });
    const reservation = await this.inventory(() => this.backend.reservation(reservationId));
    if (reservation === null || reservation.dealId !== entry.snapshot.dealId) throw notFound(`no reservation ${reservationId} in this deal`, { reservation_id: reservationId });
    const account = this.requireOwner(ctx.req, reservation.userId);
    const orderId = `o-${reservationId}`;
    // Payment processing is out of scope: the method `test_decline` stands for a refused payment (order `failed`,
    // the reservation stays `reserved` until it expires); any other is taken. The payment id is the checkout's key,
    // so a retried checkout is the same payment.
    if (method === 'test_decline') {
      if (reservation.status === 'paid') return orderAnswer(orderId, reservation);
      return { order_id: orderId, status: 'failed', reservation_id: reservationId, payment_id: null, reservation_status: reservation.status };
    }
    const change = await this.inventory(() => this.backend.pay(reservationId, account.userId, `pay-${key}`));
    if (!change.ok) throw reservationError(change.error, reservationId);
    return orderAnswer(orderId, change.reservation);
  }

  private async getReservation(ctx: RequestContext): Promise<unknown> {
    const entry = await this.requireDeal(ctx);
    const reservationId = ctx.params.reservation_id ?? '';
    const reservation = await this.inventory(() => this.backend.reservation(reservationId));
    if (reservation === null || reservation.dealId !== entry.snapshot.dealId) throw notFound(`no reservation ${reservationId} in this deal`, { reservation_id: reservationId });
    if (!this.presentsClusterToken(ctx.req)) this.requireOwner(ctx.req, reservation.userId);
    return reservationBody(reservation);
  }

  private async cancel(ctx: RequestContext): Promise<unknown> {
    const entry = await this.requireDeal(ctx);
    const reservationId = ctx.params.reservation_id ?? '';
    const reservation = await this.inventory(() => this.backend.reservation(reservationId));
    if (reservation === null || reservation.dealId !== entry.snapshot.dealId) throw notFound(`no reservation ${reservationId} in this deal`, { reservation_id: reservationId });
    const account = this.requireOwner(ctx.req, reservation.userId);
    const change = await this.inventory(() => this.backend.cancel(reservationId, account.userId));
    if (!change.ok) throw reservationError(change.error, reservationId);
    return reservationBody(change.reservation);
  }

  // --- deals: cache, refresh, pre-warm -----------------------------------------------------------------------

  private async requireDeal(ctx: RequestContext): Promise<DealEntry> {
    const dealId = ctx.params.deal_id ?? '';
    if (!DEAL_ID.test(dealId)) throw badRequest('invalid_deal_id', 'a deal_id is 1..64 of A-Z a-z 0-9 _ -', { field: 'deal_id' });
    const entry = await this.dealEntry(dealId);
    if (entry === null) throw notFound(`no deal ${dealId}`, { deal_id: dealId });
    return entry;
  }

  private async dealEntry(dealId: string): Promise<DealEntry | null> {
    const entry = this.deals.get(dealId);
    if (entry !== undefined) return entry;
    const now = Date.now();
    const miss = this.unknown.get(dealId);
    if (miss !== undefined && now - miss < 1_000) return null;
    // A flood of made-up deal ids must not become inventory reads: lookups of deals this gateway has not learned
    // yet share a small bucket (the discovery round learns real ones within 2 s anyway).
    if (!this.loading.has(dealId) && !take(this.lookups, LOOKUP_LIMITS, now).allowed) return null;
    return this.load(dealId, false);
  }

  private load(dealId: string, mustExist: boolean): Promise<DealEntry | null> {
    let loading = this.loading.get(dealId);
    if (loading === undefined) {
      loading = this.inventory(() => this.backend.deal(dealId))
        .then((snapshot) => {
          if (snapshot === null) {
            if (mustExist) throw new HttpError(503, 'unavailable', `deal ${dealId} was created but is not readable yet`, {}, { 'retry-after': '1' });
            if (this.unknown.size > 100_000) this.unknown.clear();
            this.unknown.set(dealId, Date.now());
            return null;
          }
          return this.adopt(snapshot);
        })
        .finally(() => this.loading.delete(dealId));
      this.loading.set(dealId, loading);
    }
    return loading;
  }

  /** First sight of a deal: its share of the token pool is fixed now (pre-distribution) and never refilled. */
  private adopt(snapshot: DealSnapshot): DealEntry {
    const existing = this.deals.get(snapshot.dealId);
    if (existing !== undefined) {
      learnWinners(existing, snapshot);
      return existing;
    }
    const share = distributeTokens(poolSize(snapshot.totalInventory), this.gatewayCount)[this.gatewayIndex]!;
    const entry: DealEntry = {
      snapshot,
      alive: new AliveShards(snapshot.shards, snapshot.alive),
      pool: new TokenPool(share),
      answers: new Map(),
      winners: new Map(),
      admitted: new Set(),
      holders: new Map(),
      pending: new Map(),
      refreshedAt: Date.now(),
      inflight: null,
      prewarmedAt: null,
      smoke: null,
      stateBody: '',
      stateShown: 'upcoming',
    };
    stateBodyOf(entry, true);
    learnWinners(entry, snapshot);
    this.deals.set(snapshot.dealId, entry);
    return entry;
  }

  /** A refresh of the deal's copy (counts, bitmap, go-live, new winners): one in flight per deal, shared. */
  private refresh(entry: DealEntry): Promise<void> {
    if (entry.inflight !== null) return entry.inflight;
    const startedAt = Date.now();
    entry.inflight = this.backend
      .deal(entry.snapshot.dealId)
      .then((snapshot) => {
        entry.refreshedAt = startedAt;
        if (snapshot === null) return;
        entry.snapshot = snapshot;
        entry.alive = new AliveShards(snapshot.shards, snapshot.alive);
        stateBodyOf(entry, true);
        learnWinners(entry, snapshot);
      })
      .finally(() => {
        entry.inflight = null;
      });
    return entry.inflight;
  }


  private refreshing = false;

  private async refreshDue(): Promise<void> {
    if (this.refreshing || this.stopped) return;
    this.refreshing = true;
    try {
      const now = Date.now();
      for (const entry of this.deals.values()) {
        const deal = entry.snapshot;
        if (now > deal.endAt + 15 * 60_000) {
          this.deals.delete(deal.dealId);
          continue;
        }
        // About every second while it sells (the spec's flag refresh); every 100 ms in the last seconds before
        // start_at, so the go-live record is seen at once; rarely long before it or after the end.
        const nearLive = deal.liveAt === null && now >= deal.startAt - 3_000;
        const idle = (deal.liveAt === null && now < deal.startAt - 10_000) || now >= deal.endAt;
        const every = nearLive ? 100 : idle ? 5_000 : 1_000;
        if (now - entry.refreshedAt >= every) await this.refresh(entry).catch(() => undefined);
        // Pre-warm 2 minutes before go-live; the smoke load 1 minute before, for 30 s (once each).
        if (entry.prewarmedAt === null && deal.liveAt === null && now >= deal.startAt - PREWARM_LEAD_MS && now < deal.startAt) await this.prewarm(entry).catch(() => undefined);
        if (entry.smoke === null && deal.liveAt === null && now >= deal.startAt - SMOKE_LEAD_MS && now < deal.startAt - SMOKE_LEAD_MS + SMOKE_MS) {
          void this.smoke(entry, Math.min(SMOKE_MS, deal.startAt - SMOKE_LEAD_MS + SMOKE_MS - now), this.smokeRps());
        }
      }
    } finally {
      this.refreshing = false;
    }
  }

  private async discover(): Promise<void> {
    if (this.stopped) return;
    try {
      for (const id of await this.backend.dealIds()) if (!this.deals.has(id)) await this.load(id, false);
    } catch {
      // The members may be electing; the next round learns the deals.
    }
  }

  /**
   * The spec's pre-warm: the shard counts read back (filled at creation), this gateway's token share fixed, a
   * connection opened to every shard's group (the refresh and one probe per group), the landing state rendered.
   */
  async prewarm(entry: DealEntry): Promise<void> {
    await this.refresh(entry);
    const groups = Math.min(entry.snapshot.shards, 64);
    await Promise.all(Array.from({ length: groups }, (_, shard) => this.backend.probe(entry.snapshot.dealId, shard).catch(() => undefined)));
    entry.prewarmedAt = Date.now();
    this.logger.log('info', 'deal pre-warmed', { deal: entry.snapshot.dealId, tokens: entry.pool.remaining, remaining: entry.snapshot.remaining });
  }

  /** This gateway's part of the smoke load: 1% of the expected peak, split over the gateways. */
  private smokeRps(): number {
    return Math.max(1, Math.round((this.settings.expectedPeakRps * 0.01) / this.gatewayCount));
  }

  private async smoke(entry: DealEntry, ms: number, rps: number): Promise<void> {
    const report: SmokeReport = { started_at: new Date().toISOString(), seconds: ms / 1000, rps, sent: 0, answered: 0, refused: 0, errors: 0, done: false };
    entry.smoke = report;
    const dealId = entry.snapshot.dealId;
    await runSmoke(report, ms, rps, () => this.stopped, async (n) => {
      const userId = `synthetic-${this.options.id}-${n}`;
      const botToken = makeBotToken(this.secret, dealId, userId, Date.now() + 60_000);
      return this.attempt({ dealId, userId, key: `smoke-${n}`, botToken, bearer: null, ip: `synthetic-${n % 100}`, synthetic: true });
    });
  }

  // --- small parts -------------------------------------------------------------------------------------------

  private limit(buckets: Map<string, BucketCounter>, id: string, limits: BucketLimits, now: number, gate: 'ip' | 'user'): void {
    let counter = buckets.get(id);
    if (counter === undefined) {
      if (buckets.size >= MAX_BUCKETS) buckets.clear();
      counter = fullCounter(limits, now);
      buckets.set(id, counter);
    }
    const result = take(counter, limits, now);
    if (!result.allowed) {
      this.tally(gate, 'rate_limited');
      const seconds = Math.min(3_600, Math.max(1, Math.ceil((result.retryAfterMs ?? 1000) / 1000)));
      throw rateLimited(gate, seconds);
    }
  }

  private sweepBuckets(): void {
    const now = Date.now();
    for (const [buckets, limits] of [[this.ipBuckets, this.ipLimits], [this.userBuckets, this.userLimits]] as const) {
      const idle = (limits.capacity / limits.refillRate) * 1000 + 1000;
      for (const [k, c] of buckets) if (now - c.lastRefill > idle) buckets.delete(k);
    }
  }

  private clientIp(req: IncomingMessage): string {
    if (this.settings.trustProxy) {
      const forwarded = req.headers['x-forwarded-for'];
      const first = (Array.isArray(forwarded) ? forwarded[0] : forwarded)?.split(',')[0]?.trim();
      if (first !== undefined && first.length > 0 && first.length <= 64) return first;
    }
    return req.socket.remoteAddress ?? 'unknown';
  }

  /** Whether the request carries the cluster token: checked like every token (constant time, any current token), never with `===`. */
  private presentsClusterToken(req: IncomingMessage): boolean {
    const presented = bearerToken(req);
    if (presented === null) return false;
    try {
      return verifyToken(presented, this.options.tokens).kind === 'cluster';
    } catch {
      return false;
    }
  }

  /** The account a user's bearer token proves, for `userId`; 401 without one, 403 for another user or an ineligible one. */
  private requireUser(req: IncomingMessage, userId: string): Account {
    return this.checkUser(bearerToken(req), userId, false);
  }

  /**
   * The account of a reservation's owner, from the caller's bearer token; 401 without one, 403 for anyone else. The
   * 403 does not say whose reservation it is: a reservation id must not tell a stranger who bought.
   */
  private requireOwner(req: IncomingMessage, ownerId: string): Account {
    return this.checkUser(bearerToken(req), ownerId, false, false);
  }

  private checkUser(token: string | null, userId: string, forAttempt: boolean, nameUser = true): Account {
    if (token === null) throw unauthorized('a user token is required (Authorization: Bearer <user_token> from PUT /api/flash/accounts/{user_id})');
    let account = this.userTokens.get(token) ?? null;
    if (account === null) {
      account = checkUserToken(this.secret, token);
      if (account !== null) this.userTokens.set(token, account);
    }
    if (account === null) throw unauthorized('not a user token of this cluster');
    if (account.userId !== userId) {
      if (!nameUser) throw new HttpError(403, 'not_owner', 'this reservation belongs to another user (reservations are not transferable)');
      throw new HttpError(403, 'not_owner', 'this user token is for another user', { user_id: userId });
    }
    if (forAttempt && !eligible(account, Date.now())) {
      this.tally('account', 'not_eligible');
      throw new HttpError(403, 'account_not_eligible', 'flash deals need an account older than 30 days with a verified payment method', { user_id: userId });
    }
    return account;
  }

  /**
   * Counts an attempt's outcome by gate. Tallied in a plain map and added to the Prometheus counter every 100 ms:
   * the counter's label-set key (a sort and escapes) showed on the rejection path, which must stay cheap.
   */
  private tally(gate: string, answer: string): void {
    const key = `${gate}\u0000${answer}`;
    this.tallies.set(key, (this.tallies.get(key) ?? 0) + 1);
  }

  private flushTallies(): void {
    for (const [key, n] of this.tallies) {
      const [gate, answer] = key.split('\u0000') as [string, string];
      this.outcomes.inc(n, { gate, answer });
    }
    this.tallies.clear();
  }

  private count(gate: string, answer: AttemptAnswer): AttemptAnswer {
    this.tally(gate, answer.status);
    return answer;
  }

  /** A call to the inventory; an unreachable inventory is a 503 (retry), never a guess. */
  private async inventory<T>(work: () => Promise<T>): Promise<T> {
    try {
      return await work();
    } catch (error) {
      if (error instanceof HttpError) throw error;
      if (error instanceof ServiceError) {
        if (error.status < 500 && error.status !== 421) throw new HttpError(error.status, error.code, error.message);
        throw new HttpError(503, 'unavailable', `the inventory is unavailable: ${error.message}`, {}, { 'retry-after': '1' });
      }
      throw new HttpError(503, 'unavailable', `the inventory is unreachable: ${String((error as Error)?.message ?? error)}`, {}, { 'retry-after': '1' });
    }
  }
}

function wonAnswer(r: ReservationView): AttemptAnswer {
  return { status: 'won', reservation_id: r.reservationId, expires_at: new Date(r.expiresAt).toISOString() };
}

/** Admitted keys kept per deal: far above any pool this machine serves (3 per unit), a bound against misuse. */
const MAX_ADMITTED = 1_000_000;

function rememberAdmitted(entry: DealEntry, userId: string, key: string): void {
  if (entry.admitted.size >= MAX_ADMITTED) return;
  entry.admitted.add(`${userId}\u0000${key}`);
  // The latest key admitted for the user holds their token (a later one is admitted only once the earlier one
  // was decided, or in the few milliseconds before another gateway's admission message arrives).
  entry.holders.set(userId, key);
}

function learnWinners(entry: DealEntry, snapshot: DealSnapshot): void {
  for (const w of snapshot.winners) {
    entry.winners.set(w.userId, { status: 'won', reservation_id: w.reservationId, expires_at: new Date(w.expiresAt).toISOString() });
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
  return { order_id: orderId, status: 'paid', reservation_id: r.reservationId, payment_id: r.paymentId, reservation_status: r.status };
}

function reservationError(error: string, reservationId: string): HttpError {
  switch (error) {
    case 'unknown_reservation':
      return notFound(`no reservation ${reservationId}`, { reservation_id: reservationId });
    case 'not_owner':
      return new HttpError(403, 'not_owner', 'this reservation belongs to another user (reservations are not transferable)');
    case 'reservation_expired':
      return conflict('reservation_expired', 'the 10-minute payment window is over; the unit went back', { reservation_id: reservationId });
    case 'reservation_cancelled':
      return conflict('reservation_cancelled', 'this reservation was cancelled', { reservation_id: reservationId });
    case 'already_paid':
      return conflict('already_paid', 'this reservation is paid: it cannot be cancelled', { reservation_id: reservationId });
    default:
      return new HttpError(500, 'internal', `unexpected inventory answer: ${error}`);
  }
}

/** The landing state as rendered, again only when the deal's state moved since (or after a refresh). */
function stateBodyOf(entry: DealEntry, refreshed = false): string {
  const now = Date.now();
  const state = snapshotState(entry.snapshot, now);
  if (refreshed || state !== entry.stateShown) {
    entry.stateBody = renderState(entry.snapshot, now);
    entry.stateShown = state;
  }
  return entry.stateBody;
}

/** The landing state: `{state, remaining}` (remaining once live). */
function renderState(deal: DealSnapshot, now: number): string {
  const state = snapshotState(deal, now);
  const body: Record<string, unknown> = { deal_id: deal.dealId, state };
  if (state === 'live' || state === 'sold_out') body.remaining = deal.remaining;
  body.start_at = new Date(deal.startAt).toISOString();
  body.end_at = new Date(deal.endAt).toISOString();
  return JSON.stringify(body);
}

/** A time field: an ISO 8601 string or milliseconds since the epoch. */
function timeField(body: Record<string, unknown>, field: string): number {
  const v = body[field];
  const ms = typeof v === 'number' ? v : typeof v === 'string' && v.length <= 40 ? Date.parse(v) : NaN;
  if (!Number.isSafeInteger(ms) || ms < 0) throw badRequest('invalid_field', `${field} must be an ISO 8601 time or milliseconds since the epoch`, { field });
  return ms;
}


function remember(answers: Map<string, AttemptAnswer>, key: string, answer: AttemptAnswer): void {
  if (answers.size >= MAX_ANSWERS) answers.delete(answers.keys().next().value!);
  answers.set(key, answer);
}

/** The promise's value, or null if it has not settled within `ms` (it keeps running). */
function promiseWithin<T>(promise: Promise<T>, ms: number): Promise<T | null> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => resolve(null), ms);
    promise.then(
      (v) => {
        clearTimeout(timer);
        resolve(v);
      },
      (e: unknown) => {
        clearTimeout(timer);
        reject(e);
      },
    );
  });
}
