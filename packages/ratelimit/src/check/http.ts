/**
 * The check instance's HTTP side: POST /v1/check on a fast path that skips the router, and the rule API forwarded
 * to the rule store with the caller's own token (so callers need one address).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  authenticate,
  HttpError,
  Reply,
  sendError,
  sendJson,
  ServiceError,
  unavailable,
  type ClusterClient,
  type Logger,
  type Principal,
  type RequestContext,
  parseJsonBody,
} from '@raftkit/http';
import type { CheckAnswer, CheckRequest } from './decide.js';
import { UnknownServiceError } from './engine.js';
import { answerBody, parseCheckBody } from './request.js';

const MAX_CHECK_BODY = 16 * 1024;

/** Decides one authenticated check; refusals are rejections, never throws. */
export type Decide = (principal: Principal, request: CheckRequest) => Promise<CheckAnswer>;

export function toHttpError(error: unknown): HttpError | null {
  if (error instanceof HttpError) return error;
  if (error instanceof UnknownServiceError) return new HttpError(404, 'unknown_service', error.message, { field: 'service_id' });
  return null;
}

/** The fast path for `POST /v1/check` (exact URL): authenticate, read the small body, decide, answer. */
export function checkFastPath(decide: Decide, tokens: readonly string[], logger: Logger): (req: IncomingMessage, res: ServerResponse) => boolean {
  const fail = (res: ServerResponse, error: unknown): void => {
    const known = toHttpError(error);
    if (known !== null) return sendError(res, known);
    logger.log('error', 'check failed', { error: String((error as Error)?.stack ?? error) });
    if (!res.headersSent) sendJson(res, 500, { error: { code: 'internal', message: 'internal error' } });
  };
  return (req, res) => {
    if (req.method !== 'POST' || req.url !== '/v1/check') return false;
    let principal: Principal;
    try {
      principal = authenticate(req, tokens);
    } catch (error) {
      req.resume();
      fail(res, error);
      return true;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size <= MAX_CHECK_BODY) chunks.push(chunk);
    });
    req.on('end', () => {
      if (size > MAX_CHECK_BODY) return fail(res, new HttpError(413, 'body_too_large', `the body is over ${MAX_CHECK_BODY} bytes`, { limit: MAX_CHECK_BODY }));
      let request: CheckRequest;
      try {
        request = parseCheckBody(parseJsonBody(Buffer.concat(chunks).toString('utf8')));
      } catch (error) {
        return fail(res, error);
      }
      decide(principal, request).then(
        (answer) => sendJson(res, 200, answerBody(answer)),
        (error: unknown) => fail(res, error),
      );
    });
    req.on('error', () => res.destroy());
    return true;
  };
}

/** `POST /v1/check` through the router: reached only when the fast path did not take it (a query string). */
export function checkRoute(decide: Decide): (ctx: RequestContext<Principal>) => Promise<unknown> {
  return async (ctx) => {
    const request = parseCheckBody(await ctx.json());
    try {
      return answerBody(await decide(ctx.principal, request));
    } catch (error) {
      throw toHttpError(error) ?? error;
    }
  };
}

/** A route handler that replays the request on the members with the caller's token and relays the answer. */
export function forwardTo(members: ClusterClient): (ctx: RequestContext) => Promise<unknown> {
  return async (ctx) => {
    const body = ctx.req.method === 'PUT' ? await ctx.text() : undefined;
    const headers: Record<string, string> = { authorization: ctx.req.headers.authorization ?? '' };
    if (body !== undefined) headers['content-type'] = 'application/json';
    try {
      const out = await members.call(ctx.req.method ?? 'GET', ctx.req.url ?? '/', body, headers);
      return out === null ? new Reply(204, undefined) : out;
    } catch (error) {
      if (error instanceof ServiceError) {
        const { code: _code, message: _message, ...details } = ((error.body as { error?: Record<string, unknown> } | null)?.error ?? {}) as Record<string, unknown>;
        throw new HttpError(error.status, error.code, error.message, details);
      }
      throw unavailable('the rule store did not answer', 1);
    }
  };
}
