/**
 * A check request as it arrives over HTTP (JSON) or the binary protocol (a tuple), validated into a CheckRequest.
 * Identifiers are bounded so a caller cannot make counter keys of unbounded size.
 */
import { badRequest, requireObject, requireString } from '@raftkit/http';
import { SERVICE_ID } from '../../rules.js';
import type { CheckAnswer, CheckRequest, Identifiers } from './decide.js';

const MAX_ENDPOINT = 1024;
const MAX_IDENTIFIER = 256;
const IDENTIFIERS = ['ip', 'user_id', 'api_key'] as const;

function identifier(value: unknown, field: string): string | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string' || Buffer.byteLength(value) > MAX_IDENTIFIER) {
    throw badRequest('invalid_field', `${field} must be a string of at most ${MAX_IDENTIFIER} bytes`, { field });
  }
  return value;
}

/** The body of POST /v1/check: `{service_id, endpoint, identifiers: {ip?, user_id?, api_key?}}`. */
export function parseCheckBody(input: unknown): CheckRequest {
  const body = requireObject(input);
  const serviceId = requireString(body, 'service_id', { pattern: SERVICE_ID });
  const endpoint = requireString(body, 'endpoint', { minLength: 1, maxLength: MAX_ENDPOINT });
  const ids = body.identifiers === undefined ? {} : requireObject(body.identifiers, 'identifiers');
  const identifiers: Identifiers = {};
  for (const name of IDENTIFIERS) {
    const v = identifier(ids[name], `identifiers.${name}`);
    if (v !== undefined) identifiers[name] = v;
  }
  return { serviceId, endpoint, identifiers };
}

/** Binary protocol request: [service_id, endpoint, ip, user_id, api_key] (null for an identifier not given). */
export type CheckTuple = [string, string, string | null, string | null, string | null];
/** Binary protocol answer: [allowed 1/0, remaining, retry_after_ms (-1 when allowed), reset_ms]. */
/** [allowed, remaining, retryAfterMs (-1 when allowed), resetMs, overloaded (1, only when so)] */
export type AnswerTuple = [0 | 1, number, number, number, 1?];

/** A string of at most `maxBytes` UTF-8 bytes for sure, without encoding it: a UTF-16 unit is at most 3 bytes. */
function surelyShort(value: string, maxBytes: number): boolean {
  return value.length * 3 <= maxBytes;
}

function plainIdentifier(value: unknown): boolean {
  return value === null || value === undefined || (typeof value === 'string' && surelyShort(value, MAX_IDENTIFIER));
}

export function parseCheckTuple(input: unknown): CheckRequest {
  if (!Array.isArray(input) || input.length !== 5)
    throw badRequest('invalid_body', 'a check is [service_id, endpoint, ip, user_id, api_key]');
  const [serviceId, endpoint, ip, userId, apiKey] = input as unknown[];
  // Every binary check comes through here: the ordinary case is accepted without building the JSON-shaped body.
  // Whatever this does not accept at a glance takes the general path, which accepts or names the bad field.
  if (
    typeof serviceId === 'string' &&
    SERVICE_ID.test(serviceId) &&
    typeof endpoint === 'string' &&
    endpoint.length > 0 &&
    surelyShort(endpoint, MAX_ENDPOINT) &&
    plainIdentifier(ip) &&
    plainIdentifier(userId) &&
    plainIdentifier(apiKey)
  ) {
    const identifiers: Identifiers = {};
    if (typeof ip === 'string') identifiers.ip = ip;
    if (typeof userId === 'string') identifiers.user_id = userId;
    if (typeof apiKey === 'string') identifiers.api_key = apiKey;
    return { serviceId, endpoint, identifiers };
  }
  return parseCheckBody({ service_id: serviceId, endpoint, identifiers: { ip, user_id: userId, api_key: apiKey } });
}

export function checkTuple(request: CheckRequest): CheckTuple {
  const ids = request.identifiers;
  return [request.serviceId, request.endpoint, ids.ip ?? null, ids.user_id ?? null, ids.api_key ?? null];
}

export function answerTuple(answer: CheckAnswer): AnswerTuple {
  const tuple: AnswerTuple = [answer.allowed ? 1 : 0, answer.remaining, answer.retryAfterMs ?? -1, answer.resetMs];
  // A fifth element only when overloaded: the usual answer stays four numbers, and older clients ignore it.
  if (answer.overloaded === true) tuple.push(1);
  return tuple;
}

export function answerFromTuple(tuple: AnswerTuple): Omit<CheckAnswer, 'rules'> {
  const [allowed, remaining, retryAfterMs, resetMs, overloaded] = tuple;
  const answer: Omit<CheckAnswer, 'rules'> =
    allowed === 1 ? { allowed: true, remaining, resetMs } : { allowed: false, remaining, retryAfterMs, resetMs };
  if (overloaded === 1) answer.overloaded = true;
  return answer;
}

/** The JSON answer of POST /v1/check (the spec's fields, plus reset_ms and how many rules matched). */
export function answerBody(answer: CheckAnswer): Record<string, unknown> {
  const body: Record<string, unknown> = { allowed: answer.allowed, remaining: answer.remaining };
  if (answer.retryAfterMs !== undefined) body.retry_after_ms = answer.retryAfterMs;
  body.reset_ms = answer.resetMs;
  body.rules = answer.rules;
  if (answer.overloaded === true) body.overloaded = true;
  return body;
}
