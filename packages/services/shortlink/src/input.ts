/**
 * The rules for what a create may carry (the spec leaves them open; README.md documents them). Pure: the clock
 * reading comes in as `now`. Every failure is a 400 naming the field.
 */
import { badRequest, requireObject, type JsonObject } from '@raftkit/http';
import { ALIAS, GENERATED_CODE } from './codes.js';

/** A user name: who created a link (API keys are issued per user). */
export const USER = /^[A-Za-z0-9._-]{1,64}$/;

/** Longer URLs are refused: 2,048 characters is what every browser, proxy and log pipeline handles. */
export const MAX_URL_LENGTH = 2048;
const DEFAULT_EXPIRY_YEARS = 5;
const MAX_EXPIRY_YEARS = 100;

interface CreateRequest {
  long_url: string;
  alias: string | null;
  expires_at: number;
}

export function parseCreate(body: unknown, now: number): CreateRequest {
  const obj = requireObject(body);
  for (const key of Object.keys(obj)) {
    if (key !== 'long_url' && key !== 'custom_alias' && key !== 'expiry') {
      throw badRequest('unknown_field', `unknown field ${key}: a create takes long_url, custom_alias and expiry`, {
        field: key,
      });
    }
  }
  return { long_url: parseLongUrl(obj.long_url), alias: parseAlias(obj), expires_at: parseExpiry(obj.expiry, now) };
}

/** The URL as the redirect will send it (normalised by the WHATWG parser, so the Location header is ASCII). */
export function parseLongUrl(value: unknown): string {
  const field = 'long_url';
  if (typeof value !== 'string' || value.length === 0)
    throw badRequest('invalid_url', 'long_url must be a non-empty string', { field });
  if (value.length > MAX_URL_LENGTH)
    throw badRequest('invalid_url', `long_url must be at most ${MAX_URL_LENGTH} characters`, { field });
  // new URL() silently strips these; a URL that needed them is not the URL the user meant.
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what this test looks for
  if (/[\s\u0000-\u001f\u007f]/.test(value))
    throw badRequest('invalid_url', 'long_url must not contain whitespace or control characters', { field });
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw badRequest('invalid_url', 'long_url is not a valid absolute URL', { field });
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw badRequest('invalid_url', 'long_url must be an http or https URL', { field });
  }
  if (url.hostname.length === 0) throw badRequest('invalid_url', 'long_url must name a host', { field });
  if (url.href.length > MAX_URL_LENGTH) {
    throw badRequest('invalid_url', `long_url is over ${MAX_URL_LENGTH} characters once percent-encoded`, { field });
  }
  // The link store refuses a URL that cannot be a Location header: say so here, as a 400, rather than propose it.
  if (!isHeaderSafeUrl(url.href))
    throw badRequest('invalid_url', 'long_url cannot be sent as a Location header once normalised', { field });
  return url.href;
}

function parseAlias(obj: JsonObject): string | null {
  const value = obj.custom_alias;
  if (value === undefined || value === null) return null;
  if (typeof value !== 'string' || !ALIAS.test(value)) {
    throw badRequest('invalid_alias', 'custom_alias must be 8 to 64 characters of A-Z a-z 0-9 _ -', {
      field: 'custom_alias',
    });
  }
  return value;
}

const TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})$/;
const DURATION = /^P(?!$)(?:(\d+)Y)?(?:(\d+)M)?(?:(\d+)W)?(?:(\d+)D)?(?:T(?=\d)(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)S)?)?$/;

/**
 * expiry: absent or null for the default (5 years); an ISO-8601 timestamp with a zone (2031-01-01T00:00:00Z); or
 * an ISO-8601 duration of whole units (P30D, PT12H, P1Y6M) added to `now` (years and months on the UTC calendar).
 * The result must be in the future and at most 100 years away.
 */
export function parseExpiry(value: unknown, now: number): number {
  const field = 'expiry';
  if (value === undefined || value === null) return addCalendar(now, DEFAULT_EXPIRY_YEARS, 0);
  if (typeof value !== 'string')
    throw badRequest('invalid_expiry', 'expiry must be an ISO-8601 timestamp or duration string', { field });
  let at: number;
  if (TIMESTAMP.test(value)) {
    at = Date.parse(value);
    if (Number.isNaN(at) || !realDate(value))
      throw badRequest('invalid_expiry', 'expiry is not a real date and time', { field });
  } else {
    const m = DURATION.exec(value);
    if (m === null) {
      throw badRequest(
        'invalid_expiry',
        'expiry must be an ISO-8601 timestamp with a zone (2031-01-01T00:00:00Z) or duration (P30D, PT12H)',
        { field },
      );
    }
    const [years, months, weeks, days, hours, minutes, seconds] = m
      .slice(1)
      .map((part) => (part === undefined ? 0 : Number(part)));
    if (years! > MAX_EXPIRY_YEARS || months! > MAX_EXPIRY_YEARS * 12) throw tooFar();
    at =
      addCalendar(now, years!, months!) +
      ((((weeks! * 7 + days!) * 24 + hours!) * 60 + minutes!) * 60 + seconds!) * 1000;
  }
  if (!Number.isSafeInteger(at) || at > addCalendar(now, MAX_EXPIRY_YEARS, 0)) throw tooFar();
  if (at <= now) throw badRequest('invalid_expiry', 'expiry must be in the future', { field });
  return at;
}

/** Date.parse rolls 2031-02-30 over to March: check the day exists in its month. */
function realDate(timestamp: string): boolean {
  const [y, m, d] = timestamp.slice(0, 10).split('-').map(Number) as [number, number, number];
  const date = new Date(Date.UTC(y, m - 1, d));
  return date.getUTCMonth() === m - 1 && date.getUTCDate() === d;
}

function tooFar() {
  return badRequest('invalid_expiry', `expiry must be at most ${MAX_EXPIRY_YEARS} years away`, { field: 'expiry' });
}

function addCalendar(now: number, years: number, months: number): number {
  const d = new Date(now);
  d.setUTCFullYear(d.getUTCFullYear() + years, d.getUTCMonth() + months);
  return d.getTime();
}

/** A code in a path: generated (7 base62 characters) or an alias; anything else cannot exist, so 400. */
export function shortCodeParam(code: string | undefined): string {
  if (code === undefined || !(GENERATED_CODE.test(code) || ALIAS.test(code))) {
    throw badRequest('invalid_code', 'a short code is 7 base62 characters or an alias of 8 to 64 of A-Z a-z 0-9 _ -', {
      field: 'short_code',
    });
  }
  return code;
}

/**
 * Whether a stored long_url can go out as a Location header: a normalised URL is printable ASCII (new URL()
 * percent-encodes the rest). A value from anywhere else (an old entry, a bug, a forged command) that is not, would
 * make Node throw ERR_INVALID_CHAR while answering a redirect.
 */
export function isHeaderSafeUrl(value: unknown): value is string {
  return (
    typeof value === 'string' && value.length > 0 && value.length <= MAX_URL_LENGTH && /^[\x21-\x7e]+$/.test(value)
  );
}
