/**
 * Every error a service returns has an HTTP status and the JSON body
 * `{ "error": { "code": "...", "message": "...", ...details } }`.
 */
export class HttpError extends Error {
  override name = 'HttpError';
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details: Record<string, unknown> = {},
    /** Extra response headers (Retry-After, Allow, WWW-Authenticate). */
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }

  body(): { error: Record<string, unknown> } {
    return { error: { code: this.code, message: this.message, ...this.details } };
  }
}

export const badRequest = (code: string, message: string, details: Record<string, unknown> = {}): HttpError =>
  new HttpError(400, code, message, details);

export const notFound = (message: string, details: Record<string, unknown> = {}): HttpError =>
  new HttpError(404, 'not_found', message, details);

export const conflict = (code: string, message: string, details: Record<string, unknown> = {}): HttpError =>
  new HttpError(409, code, message, details);

/** No leader, no quorum, or an outcome we cannot vouch for: the client should retry later. Never a guess. */
export const unavailable = (message: string, retryAfterSeconds = 1, details: Record<string, unknown> = {}): HttpError =>
  new HttpError(503, 'unavailable', message, details, { 'retry-after': String(retryAfterSeconds) });

export const unauthorized = (message: string): HttpError =>
  new HttpError(401, 'unauthorized', message, {}, { 'www-authenticate': 'Bearer' });

/** The token is valid but proves the wrong kind of principal for this endpoint; `message` names what is required. */
export const forbidden = (message: string, details: Record<string, unknown> = {}): HttpError =>
  new HttpError(403, 'forbidden', message, details);
