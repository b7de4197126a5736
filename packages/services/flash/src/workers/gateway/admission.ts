/**
 * Who may attempt, answered from memory before a deal's own gates: the attempt's body checks, the bot check (no
 * token, or a bad one: 429), the per-IP and per-user token buckets (synthetic attempts on their own keys), the
 * bearer token and the account-farm rule; and the user and owner checks of the other public routes. Verified
 * tokens are cached (bounded): the bot check and the user token are an HMAC each, on the path every rejected
 * attempt takes, and a crowd retries with the same tokens, so a lookup replaces the HMAC. The caches are keyed by
 * the user id the attempt names (a short string) and hold that user's last verified token, compared whole: a
 * token is a fresh string of ~120 characters on every request, and keying a map by it hashed all of it each time
 * (it showed in the rejection path's profile), where the comparison with the one remembered token is a memcmp.
 */
import type { IncomingMessage } from 'node:http';
import {
  badRequest,
  bearerToken,
  cookieValue,
  fullCounter,
  HttpError,
  requireObject,
  requireString,
  take,
  unauthorized,
  verifyToken,
  type BucketCounter,
  type BucketLimits,
} from '@raftkit/http';
import { checkBotToken, checkUserToken, eligible, type Account } from './tokens.js';
import { TokenCache } from './token-cache.js';
import {
  BOT_COOKIE,
  BOT_FAILED,
  BOT_REQUIRED,
  KEY_RULE,
  MISSING_KEY,
  rateLimited,
  SYNTHETIC_FORBIDDEN,
  USER_RULE,
  type AttemptInput,
} from './answers.js';
import type { Tallies } from './tallies.js';

const MAX_BUCKETS = 500_000;
/** Verified tokens remembered per gateway (each kind): far above the crowd this machine serves, a bound against misuse. */
export const MAX_CACHED_TOKENS = 100_000;

interface AdmissionSettings {
  /** Per-IP bucket: refill per second (capacity twice that). */
  ipRate: number;
  /** Per-user bucket: refill per second (capacity twice that). */
  userRate: number;
  /** Take the client address from X-Forwarded-For (behind a trusted edge). */
  trustProxy: boolean;
}

export class Admission {
  private readonly ipBuckets = new Map<string, BucketCounter>();
  private readonly userBuckets = new Map<string, BucketCounter>();
  private readonly ipLimits: BucketLimits;
  private readonly userLimits: BucketLimits;
  /** Per user id: the last user token that verified for it, and the account it proved. */
  private readonly userTokens = new TokenCache<{ token: string; account: Account }>(MAX_CACHED_TOKENS);
  /** Per user id: the last anti-bot token that verified for it, and the deal and expiry it carries. */
  private readonly botTokens = new TokenCache<{ token: string; dealId: string; expiresAt: number }>(MAX_CACHED_TOKENS);

  constructor(
    /** The cluster token: the key of the bot and user tokens' HMACs. */
    private readonly secret: string,
    /** Every token the cluster accepts (the cluster token first). */
    private readonly tokens: readonly string[],
    private readonly settings: AdmissionSettings,
    private readonly tallies: Tallies,
  ) {
    this.ipLimits = { capacity: settings.ipRate * 2, refillRate: settings.ipRate };
    this.userLimits = { capacity: settings.userRate * 2, refillRate: settings.userRate };
  }

  /** An attempt's body checked (synchronous: the fast path answers most attempts without a promise). */
  attemptInput(dealId: string, json: unknown, req: IncomingMessage): AttemptInput {
    const body = requireObject(json);
    // Rule 1: no key, no attempt; checked first, before any gate spends anything.
    if (body.idempotency_key === undefined || body.idempotency_key === null || body.idempotency_key === '') {
      this.tallies.tally('input', 'missing_idempotency_key');
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
   * Gates 1 and 2 and who the user is, from memory: the bot check (no token, or a bad one: 429), the per-IP and
   * per-user buckets (synthetic attempts on their own keys), the bearer token and the account-farm rule. Throws the
   * refusal (built once, no stack per request).
   */
  frontGates(input: AttemptInput, now: number): void {
    if (input.botToken === null || input.botToken.length === 0) {
      this.tallies.tally('bot', 'missing');
      throw BOT_REQUIRED;
    }
    const cached = this.botTokens.get(input.userId);
    const bot = cached !== undefined && cached.token === input.botToken ? cached : undefined;
    const botOk =
      bot !== undefined
        ? bot.dealId === input.dealId && bot.expiresAt > now
        : checkBotToken(this.secret, input.botToken, input.dealId, input.userId, now);
    if (botOk && bot === undefined)
      this.botTokens.set(input.userId, {
        token: input.botToken,
        dealId: input.dealId,
        expiresAt: Number(input.botToken.split('.')[1]),
      });
    if (!botOk) {
      this.tallies.tally('bot', 'bad');
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

  private limit(
    buckets: Map<string, BucketCounter>,
    id: string,
    limits: BucketLimits,
    now: number,
    gate: 'ip' | 'user',
  ): void {
    let counter = buckets.get(id);
    if (counter === undefined) {
      if (buckets.size >= MAX_BUCKETS) buckets.clear();
      counter = fullCounter(limits, now);
      buckets.set(id, counter);
    }
    const result = take(counter, limits, now);
    if (!result.allowed) {
      this.tallies.tally(gate, 'rate_limited');
      const seconds = Math.min(3_600, Math.max(1, Math.ceil((result.retryAfterMs ?? 1000) / 1000)));
      throw rateLimited(gate, seconds);
    }
  }

  /** Forgets buckets idle long enough to be full again. */
  sweepBuckets(): void {
    const now = Date.now();
    for (const [buckets, limits] of [
      [this.ipBuckets, this.ipLimits],
      [this.userBuckets, this.userLimits],
    ] as const) {
      const idle = (limits.capacity / limits.refillRate) * 1000 + 1000;
      for (const [k, c] of buckets) if (now - c.lastRefill > idle) buckets.delete(k);
    }
  }

  private clientIp(req: IncomingMessage): string {
    if (this.settings.trustProxy) {
      const header = req.headers['x-forwarded-for'];
      const forwarded = Array.isArray(header) ? header[0] : header;
      // The first address, without splitting the list into an array on every attempt.
      const comma = forwarded === undefined ? -1 : forwarded.indexOf(',');
      const first = comma < 0 ? forwarded?.trim() : forwarded!.slice(0, comma).trim();
      if (first !== undefined && first.length > 0 && first.length <= 64) return first;
    }
    return req.socket.remoteAddress ?? 'unknown';
  }

  /** Whether the request carries the cluster token: checked like every token (constant time, any current token), never with `===`. */
  presentsClusterToken(req: IncomingMessage): boolean {
    const presented = bearerToken(req);
    if (presented === null) return false;
    try {
      return verifyToken(presented, this.tokens).kind === 'cluster';
    } catch {
      return false;
    }
  }

  /** The account a user's bearer token proves, for `userId`; 401 without one, 403 for another user or an ineligible one. */
  requireUser(req: IncomingMessage, userId: string): Account {
    return this.checkUser(bearerToken(req), userId, false);
  }

  /**
   * The account of a reservation's owner, from the caller's bearer token; 401 without one, 403 for anyone else. The
   * 403 does not say whose reservation it is: a reservation id must not tell a stranger who bought.
   */
  requireOwner(req: IncomingMessage, ownerId: string): Account {
    return this.checkUser(bearerToken(req), ownerId, false, false);
  }

  private checkUser(token: string | null, userId: string, forAttempt: boolean, nameUser = true): Account {
    if (token === null)
      throw unauthorized(
        'a user token is required (Authorization: Bearer <user_token> from PUT /api/flash/accounts/{user_id})',
      );
    const cached = this.userTokens.get(userId);
    let account = cached !== undefined && cached.token === token ? cached.account : null;
    if (account === null) {
      account = checkUserToken(this.secret, token);
      // Remembered under the user it proves only (a token of another user is refused below, every time afresh).
      if (account !== null && account.userId === userId) this.userTokens.set(userId, { token, account });
    }
    if (account === null) throw unauthorized('not a user token of this cluster');
    if (account.userId !== userId) {
      if (!nameUser)
        throw new HttpError(
          403,
          'not_owner',
          'this reservation belongs to another user (reservations are not transferable)',
        );
      throw new HttpError(403, 'not_owner', 'this user token is for another user', { user_id: userId });
    }
    if (forAttempt && !eligible(account, Date.now())) {
      this.tallies.tally('account', 'not_eligible');
      throw new HttpError(
        403,
        'account_not_eligible',
        'flash deals need an account older than 30 days with a verified payment method',
        { user_id: userId },
      );
    }
    return account;
  }
}
