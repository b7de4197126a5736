/**
 * The gateway's signed tokens, verifiable by any gateway from local memory (an HMAC keyed by the cluster token, no
 * lookup): the bot-check challenge and its answer (the anti-bot token), and the users' bearer tokens, which carry
 * the account's registration (created_at, payment_verified) so the account-farm defence is a local check too.
 */
import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

/** A challenge must be answered within this long. */
const CHALLENGE_TTL_MS = 10 * 60_000;
/** An anti-bot token is honoured this long after it is given (enough for a deal's window). */
export const BOT_TOKEN_TTL_MS = 6 * 60 * 60_000;
/** The account-farm defence: accounts at least this old... */
export const MIN_ACCOUNT_AGE_MS = 30 * 24 * 60 * 60_000;

function mac(secret: string, text: string): string {
  return createHmac('sha256', secret).update(text).digest('base64url').slice(0, 32);
}

function same(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/** A challenge for (deal, user): `c1.<issued ms>.<random>.<mac>`, stateless. */
export function makeChallenge(secret: string, dealId: string, userId: string, now: number): string {
  const rand = randomBytes(9).toString('base64url');
  return `c1.${now}.${rand}.${mac(secret, `challenge\u0000${dealId}\u0000${userId}\u0000${now}\u0000${rand}`)}`;
}

type ChallengeCheck = 'ok' | 'invalid' | 'expired';

export function checkChallenge(
  secret: string,
  challenge: string,
  dealId: string,
  userId: string,
  now: number,
): ChallengeCheck {
  const m = /^c1\.(\d{1,15})\.([A-Za-z0-9_-]{12})\.([A-Za-z0-9_-]{32})$/.exec(challenge);
  if (m === null) return 'invalid';
  const issued = Number(m[1]);
  if (!same(mac(secret, `challenge\u0000${dealId}\u0000${userId}\u0000${issued}\u0000${m[2]}`), m[3]!))
    return 'invalid';
  return now - issued > CHALLENGE_TTL_MS ? 'expired' : 'ok';
}

/** Leading zero bits of SHA-256(challenge + ":" + nonce). */
export function workBits(challenge: string, nonce: string): number {
  const digest = createHash('sha256').update(`${challenge}:${nonce}`).digest();
  let bits = 0;
  for (const byte of digest) {
    if (byte === 0) {
      bits += 8;
      continue;
    }
    bits += Math.clz32(byte) - 24;
    break;
  }
  return bits;
}

/** Finds a nonce (a decimal string) with at least `difficulty` leading zero bits: what a client does. */
export function solveChallenge(challenge: string, difficulty: number): string {
  for (let n = 0; ; n++) if (workBits(challenge, String(n)) >= difficulty) return String(n);
}

/** The anti-bot token for (deal, user), given for a solved challenge: `b1.<expires ms>.<mac>`. */
export function makeBotToken(secret: string, dealId: string, userId: string, expiresAt: number): string {
  return `b1.${expiresAt}.${mac(secret, `bot\u0000${dealId}\u0000${userId}\u0000${expiresAt}`)}`;
}

export function checkBotToken(secret: string, token: string, dealId: string, userId: string, now: number): boolean {
  const m = /^b1\.(\d{1,15})\.([A-Za-z0-9_-]{32})$/.exec(token);
  if (m === null) return false;
  const expiresAt = Number(m[1]);
  return expiresAt > now && same(mac(secret, `bot\u0000${dealId}\u0000${userId}\u0000${expiresAt}`), m[2]!);
}

/** What a user's bearer token carries: the account as registered with PUT /api/flash/accounts/{user_id}. */
export interface Account {
  userId: string;
  createdAt: number;
  paymentVerified: boolean;
}

/** `u1.<base64url of JSON [user, created_at, verified]>.<mac>` */
export function makeUserToken(secret: string, account: Account): string {
  const payload = Buffer.from(JSON.stringify([account.userId, account.createdAt, account.paymentVerified])).toString(
    'base64url',
  );
  return `u1.${payload}.${mac(secret, `user\u0000${payload}`)}`;
}

/** The account a user token proves, or null when it is not one of ours. */
export function checkUserToken(secret: string, token: string): Account | null {
  const m = /^u1\.([A-Za-z0-9_-]{1,1400})\.([A-Za-z0-9_-]{32})$/.exec(token);
  if (m === null || !same(mac(secret, `user\u0000${m[1]}`), m[2]!)) return null;
  try {
    const [userId, createdAt, paymentVerified] = JSON.parse(Buffer.from(m[1]!, 'base64url').toString('utf8')) as [
      string,
      number,
      boolean,
    ];
    return { userId, createdAt, paymentVerified };
  } catch {
    return null;
  }
}

/** The account-farm defence: older than 30 days and a verified payment method. */
export function eligible(account: Account, now: number): boolean {
  return account.paymentVerified && now - account.createdAt >= MIN_ACCOUNT_AGE_MS;
}
