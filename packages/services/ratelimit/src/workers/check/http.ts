/**
 * The check instance's HTTP side: POST /v1/check as an exact route (no route matching), and the rule API forwarded
 * to the rule store with the caller's own token (so callers need one address).
 */
import type { ServerResponse } from 'node:http';
import {
  HttpError,
  Reply,
  sendError,
  sendJson,
  ServiceError,
  unavailable,
  type ClusterClient,
  type ExactHandler,
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
  if (error instanceof UnknownServiceError)
    return new HttpError(404, 'unknown_service', error.message, { field: 'service_id' });
  return null;
}

/**
 * `POST /v1/check` as the router's exact route (Router.exact): the router checks the route's admission (a valid
 * token) and reads the small body, bounded; this parses it, decides and answers.
 */
export function checkExactRoute(decide: Decide, logger: Logger): ExactHandler<Principal> {
  const fail = (res: ServerResponse, error: unknown): void => {
    const known = toHttpError(error);
    if (known !== null) return sendError(res, known);
    logger.log('error', 'check failed', { error: String((error as Error)?.stack ?? error) });
    if (!res.headersSent) sendJson(res, 500, { error: { code: 'internal', message: 'internal error' } });
  };
  return (_req, res, body, principal) => {
    let request: CheckRequest;
    try {
      request = parseCheckBody(parseJsonBody(body === null ? '' : body.toString('utf8')));
    } catch (error) {
      return fail(res, error);
    }
    decide(principal, request).then(
      (answer) => sendJson(res, 200, answerBody(answer)),
      (error: unknown) => fail(res, error),
    );
  };
}

/** `POST /v1/check`'s body bound on the exact route (a check is well under 1 KB). */
export const CHECK_BODY = { maxBytes: MAX_CHECK_BODY };

/** `POST /v1/check` through the general routes: reached only when the exact route did not take it (a query string). */
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
        const {
          code: _code,
          message: _message,
          ...details
        } = ((error.body as { error?: Record<string, unknown> } | null)?.error ?? {}) as Record<string, unknown>;
        throw new HttpError(error.status, error.code, error.message, details);
      }
      throw unavailable('the rule store did not answer', 1);
    }
  };
}
