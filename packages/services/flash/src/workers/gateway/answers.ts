/**
 * The gateway's answers and refusals, and the bytes they are written as: the attempt's field rules, the refusals
 * built once (immutable, no stack per request), the local sold out, and `wireOf`, which serialises an answer or a
 * refusal once per object so the rejection path neither stringifies JSON nor builds headers per request.
 */
import type { ServerResponse } from 'node:http';
import { badRequest, HttpError, ServiceError } from '@raftkit/http';
import type { ReservationView } from '../../machine.js';

export const DEAL_ID = /^[A-Za-z0-9_-]{1,64}$/;
export const USER_ID = /^[A-Za-z0-9._:@-]{1,128}$/;
export const KEY_MAX = 200;
/** The attempt's field rules, made once (the fast path checks every attempt with them). */
export const KEY_RULE = { minLength: 1, maxLength: KEY_MAX };
export const USER_RULE = { pattern: USER_ID };
/** An attempt body's bound on the fast path (a real one is about 200 bytes). */
export const MAX_ATTEMPT_BODY = 16 * 1024;
export const NO_STORE = { 'cache-control': 'no-store' };
/** The cookie holding the anti-bot token (the spec's "held in a cookie"). */
export const BOT_COOKIE = 'flash_bot';
/** Cache-Control of the state answer (the spec's CDN gate: a short TTL). */
export const STATE_CACHE_CONTROL = 'public, max-age=1';
export const STATE_HEADERS = { 'content-type': 'application/json', 'cache-control': STATE_CACHE_CONTROL };
/** The bot check's refusals, made once: they are immutable, and an Error's stack capture per request would show. */
export const BOT_REQUIRED = new HttpError(
  429,
  'bot_check_required',
  'solve the challenge (POST .../challenge, then .../challenge/answer) first',
  {},
  { 'retry-after': '1' },
);
export const BOT_FAILED = new HttpError(
  429,
  'bot_check_failed',
  'the anti-bot token is not valid for this user and deal',
  {},
  { 'retry-after': '1' },
);
const rateLimitErrors = new Map<string, HttpError>();
export const MISSING_KEY = badRequest(
  'missing_idempotency_key',
  'idempotency_key is required: a retry with the same key never reserves a second unit',
  { field: 'idempotency_key' },
);
export const SYNTHETIC_FORBIDDEN = new HttpError(403, 'forbidden', 'synthetic attempts need the cluster token');
export const BODY_TOO_LARGE = new HttpError(413, 'body_too_large', `an attempt is at most ${MAX_ATTEMPT_BODY} bytes`);
/** The local sold-out answer (pool or bitmap): one object, so its bytes are serialised once (`answerWire`). */
export const SOLD_OUT: AttemptAnswer = Object.freeze({ status: 'lost', reason: 'sold_out' });
/** The pool's share spent (and re-issued once this refresh) while units remain unreserved: shed, not sold out. */
export const ADMISSION_BUSY = new HttpError(
  429,
  'admission_busy',
  "this gateway's admission tokens are spent for now while units remain; retry",
  { limit: 'admission' },
  { 'retry-after': '1' },
);

export type AttemptAnswer =
  | { status: 'won'; reservation_id: string; expires_at: string }
  | { status: 'lost'; reason?: 'sold_out' }
  | { status: 'queued' };

/** An attempt's answer as `Gateway.attempt` gives it (a synthetic one names the shard it would have tried). */
export type AttemptResult = AttemptAnswer & { synthetic?: true; shard?: number };

/** The per-request parts of an attempt, after the body checks. */
export interface AttemptInput {
  dealId: string;
  userId: string;
  key: string;
  botToken: string | null;
  /** The bearer token presented (a user token; checked after the bot check and the rate limits). */
  bearer: string | null;
  ip: string;
  synthetic: boolean;
}

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
    wire = {
      status,
      headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers },
      body: text,
    };
    wires.set(key, wire);
  }
  return wire;
}

export function answerWire(answer: AttemptAnswer): Wire {
  return wireOf(answer, answer.status === 'queued' ? 202 : 200, answer, NO_STORE);
}

export function errorWire(error: HttpError): Wire {
  return wireOf(error, error.status, error.body(), error.headers);
}

export function writeWire(res: ServerResponse, wire: Wire): void {
  res.writeHead(wire.status, wire.headers);
  res.end(wire.body);
}

/** The rate limit's refusal for a gate and a Retry-After, made once each (immutable, like the bot check's). */
export function rateLimited(gate: 'ip' | 'user', seconds: number): HttpError {
  const key = `${gate}:${seconds}`;
  let error = rateLimitErrors.get(key);
  if (error === undefined) {
    error = new HttpError(
      429,
      'rate_limited',
      `too many attempts from this ${gate === 'ip' ? 'address' : 'user'}; retry after ${seconds} s`,
      { limit: gate },
      { 'retry-after': String(seconds) },
    );
    rateLimitErrors.set(key, error);
  }
  return error;
}

export function wonAnswer(r: ReservationView): AttemptAnswer {
  return { status: 'won', reservation_id: r.reservationId, expires_at: new Date(r.expiresAt).toISOString() };
}

/** A call to the inventory; an unreachable inventory is a 503 (retry), never a guess. */
export async function inventoryCall<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    if (error instanceof HttpError) throw error;
    if (error instanceof ServiceError) {
      if (error.status < 500 && error.status !== 421) throw new HttpError(error.status, error.code, error.message);
      throw new HttpError(
        503,
        'unavailable',
        `the inventory is unavailable: ${error.message}`,
        {},
        { 'retry-after': '1' },
      );
    }
    throw new HttpError(
      503,
      'unavailable',
      `the inventory is unreachable: ${String((error as Error)?.message ?? error)}`,
      {},
      { 'retry-after': '1' },
    );
  }
}

/** The promise's value, or null if it has not settled within `ms` (it keeps running). */
export function promiseWithin<T>(promise: Promise<T>, ms: number): Promise<T | null> {
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
