/**
 * A small router on node:http: exact segments and `:param` segments, JSON in and out, every failure turned into
 * a JSON error body. Handlers throw HttpError for client errors; anything else becomes a 500 without crashing.
 *
 * Every route declares who it admits (`{ admits }`, a required argument: a route cannot be registered without
 * one), and the router checks it before the handler runs: 401 without a valid bearer token, 403 naming what is
 * required when the token proves the wrong kind of principal. Services keep their finer checks (tenant, owner)
 * in their handlers.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { authenticate, servicePrincipal, type Principal } from './auth.js';
import { badRequest, forbidden, HttpError, unauthorized } from './errors.js';
import { parseJsonBody } from './json-body.js';

/**
 * Who may call a route:
 * - `open`: anyone, no token read (health, metrics, public redirects);
 * - `authenticated`: any valid token, the cluster token, the service's own service token or a derived client token
 *   (service APIs, whose handlers apply their own finer checks);
 * - `service`: the service's internal callers, the cluster token or its own workers' service token
 *   (`service.<name>`, deriveServiceToken), never a client token whatever its name;
 * - `cluster`: the cluster token only (membership, faults, token issuing, internal endpoints).
 *
 * On every admission but `open`, a service token of another service than the router's is refused (403): a
 * credential of one service's workers is no credential of another's.
 */
export type Admission = 'open' | 'authenticated' | 'service' | 'cluster';

export const ADMISSIONS: readonly Admission[] = ['open', 'authenticated', 'service', 'cluster'];

export interface RouteOptions<A extends Admission = Admission> {
  admits: A;
}

/** The principal a handler sees: none on open routes, always one on the others (the router proved it). */
export type PrincipalFor<A extends Admission> = A extends 'open' ? null : Principal;

export interface RequestContext<P extends Principal | null = Principal | null> {
  req: IncomingMessage;
  /** Who the request proved to be (null on open routes, which read no token). */
  principal: P;
  res: ServerResponse;
  params: Record<string, string>;
  query: URLSearchParams;
  /** Reads the body as text (bounded by the router's maxBodyBytes; 413 beyond). */
  text(): Promise<string>;
  /** Reads and parses a JSON body; 400 naming the problem when it is not JSON. */
  json(): Promise<unknown>;
  bytes(): Promise<Buffer>;
}

/** A handler returns the reply: a body to send as JSON with status 200, or a full Reply, or nothing (it replied). */
export type Handler<P extends Principal | null = Principal | null> = (
  ctx: RequestContext<P>,
) => Promise<Reply | unknown> | Reply | unknown;

export class Reply {
  constructor(
    readonly status: number,
    readonly body: unknown,
    readonly headers: Record<string, string> = {},
  ) {}
}

/**
 * An exact route's handler: the raw request and response, the body read whole (null when the route reads none)
 * and the principal the route's admission proved. It answers by itself (`res`), synchronously or later; a throw or
 * a rejection is answered as a route's (an HttpError's body, else a logged 500).
 */
export type ExactHandler<P extends Principal | null = Principal | null> = (
  req: IncomingMessage,
  res: ServerResponse,
  body: Buffer | null,
  principal: P,
) => void | Promise<void>;

export interface ExactRouteOptions<A extends Admission = Admission> extends RouteOptions<A> {
  /**
   * Read the body before the handler, at most `maxBytes` (the rest is drained unkept); beyond it the handler is
   * not called and `tooLarge` is answered (default: 413 `body_too_large` naming the limit, as routes answer).
   * Without it the body is not read (a GET's handler answers at once).
   */
  body?: { maxBytes: number; tooLarge?: HttpError };
}

interface ExactRoute {
  /** The general route this one answers for (its pattern is what an admission refusal names). */
  info: RouteInfo;
  options: ExactRouteOptions;
  handler: ExactHandler;
}

/** A route as `routes()` lists it (for audits and the test that calls every route with every kind of token). */
export interface RouteInfo {
  method: string;
  pattern: string;
  admits: Admission;
}

interface Route extends RouteInfo {
  segments: string[];
  /** Per segment: the parameter's name for `:name` segments, null for literal ones. */
  params: Array<string | null>;
  handler: Handler;
}

export interface RouterOptions {
  /** Bearer tokens accepted, the cluster token first (derived client tokens are verified against them). */
  tokens: readonly string[];
  /**
   * The service this process serves (`notify`): its workers' service token passes `service` routes. Without it,
   * `service` routes take the cluster token only and every service token is refused.
   */
  service?: string;
  maxBodyBytes?: number;
  /** Called for errors that are not HttpErrors (bugs), for logging. */
  onError?: (error: unknown, req: IncomingMessage) => void;
}

/** The principal of an authenticated request; 401 when it has none (a handler of an open route asked). */
export function requirePrincipal(ctx: RequestContext): Principal {
  if (ctx.principal === null) throw unauthorized('this endpoint needs a bearer token');
  return ctx.principal;
}

/**
 * Checks a route's admission for one request: the principal its handler sees, or a 401/403 HttpError. `service`
 * names the service the router serves (see RouterOptions.service).
 */
export function admit(
  route: RouteInfo,
  req: IncomingMessage,
  tokens: readonly string[],
  service?: string,
): Principal | null {
  if (route.admits === 'open') return null;
  const principal = authenticate(req, tokens);
  if (principal.kind === 'service' && (service === undefined || principal.name !== servicePrincipal(service))) {
    throw forbidden(
      `${principal.name} is the token of another service's workers; ${route.method} ${route.pattern} is ${service === undefined ? 'on no service' : `on ${service}`}`,
      {
        required: route.admits,
      },
    );
  }
  if (route.admits === 'cluster' && principal.kind !== 'cluster') {
    throw forbidden(
      `${route.method} ${route.pattern} requires the cluster token; this request presented a ${principal.kind} token (${principal.name})`,
      {
        required: 'cluster',
      },
    );
  }
  if (route.admits === 'service' && principal.kind === 'client') {
    throw forbidden(
      `${route.method} ${route.pattern} is internal: the cluster token or ${service === undefined ? 'the service' : servicePrincipal(service)}'s own token, not a client token (${principal.name})`,
      {
        required: 'service',
      },
    );
  }
  return principal;
}

/** A request body's limit unless a router is given another (413 `body_too_large` beyond): every member's. */
export const DEFAULT_MAX_BODY_BYTES = 1024 * 1024;

export class Router {
  private readonly table: Route[] = [];
  /**
   * The table's routes by method, then by number of segments, in table order: a request only tries the routes
   * that could match it (the whole table is scanned only to answer 404 or 405).
   */
  private readonly index = new Map<string, Route[][]>();
  private readonly maxBodyBytes: number;
  /** Exact routes by method, then by the request target exactly as sent (see `exact`). */
  private readonly exactRoutes = new Map<string, Map<string, ExactRoute>>();

  constructor(private readonly options: RouterOptions) {
    this.maxBodyBytes = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  }

  /** The bearer tokens this router accepts: a binary listener beside it (@raftkit/rpc) verifies its hellos with them. */
  get tokens(): readonly string[] {
    return this.options.tokens;
  }

  on<A extends Admission>(
    method: string,
    pattern: string,
    options: RouteOptions<A>,
    handler: Handler<PrincipalFor<A>>,
  ): this {
    // Checked at run time too: JavaScript callers and casts could pass anything, and an unknown value must not
    // fall through to "open".
    if (!ADMISSIONS.includes(options?.admits))
      throw new TypeError(`${method} ${pattern}: admits must be one of ${ADMISSIONS.join(', ')}`);
    const segments = pattern.split('/').filter((s) => s.length > 0);
    const params = segments.map((s) => (s.startsWith(':') ? s.slice(1) : null));
    const route: Route = {
      method,
      pattern: '/' + segments.join('/'),
      admits: options.admits,
      segments,
      params,
      handler: handler as Handler,
    };
    this.table.push(route);
    let byLength = this.index.get(method);
    if (byLength === undefined) this.index.set(method, (byLength = []));
    (byLength[segments.length] ??= []).push(route);
    return this;
  }

  get<A extends Admission>(pattern: string, options: RouteOptions<A>, handler: Handler<PrincipalFor<A>>): this {
    return this.on('GET', pattern, options, handler);
  }
  post<A extends Admission>(pattern: string, options: RouteOptions<A>, handler: Handler<PrincipalFor<A>>): this {
    return this.on('POST', pattern, options, handler);
  }
  put<A extends Admission>(pattern: string, options: RouteOptions<A>, handler: Handler<PrincipalFor<A>>): this {
    return this.on('PUT', pattern, options, handler);
  }
  delete<A extends Admission>(pattern: string, options: RouteOptions<A>, handler: Handler<PrincipalFor<A>>): this {
    return this.on('DELETE', pattern, options, handler);
  }

  /**
   * A fast route for one method and one exact request target (`/v1/check`, `/api/flash/d1/attempt`): looked up in
   * a Map before any matching, for the few hot requests a service answers by the thousand. It only speeds up a
   * route already declared: the general route that would answer `path` must exist and admit the same, or this
   * throws (a TypeError). What it skips, and why that is safe: URL splitting and percent-decoding (only the exact
   * target matches; one with a query, an encoded byte or another spelling goes to the general route, which
   * answers it the same way), the route table walk, the per-request context object and promise, and
   * processHttp's request counter and latency histogram (http_requests_total, http_request_seconds do not count
   * these requests). Admission is checked exactly as on the general route, before the body is read. Not listed by
   * `routes()` (the general route is). A second registration of the same method and target throws.
   */
  exact<A extends Admission>(
    method: string,
    path: string,
    options: ExactRouteOptions<A>,
    handler: ExactHandler<PrincipalFor<A>>,
  ): this {
    if (!ADMISSIONS.includes(options?.admits))
      throw new TypeError(`${method} ${path}: admits must be one of ${ADMISSIONS.join(', ')}`);
    const segments = path.split('/').filter((s) => s.length > 0);
    if ('/' + segments.join('/') !== path || /[?#%]/.test(path) || segments.some((s) => s === '.' || s === '..')) {
      throw new TypeError(
        `${method} ${path}: an exact route's path is a plain absolute path (no query, no percent-encoding, no empty, . or .. segment)`,
      );
    }
    let general: Route | undefined;
    for (const route of this.index.get(method)?.[segments.length] ?? []) {
      if (match(route, segments) !== null) {
        general = route;
        break;
      }
    }
    if (general === undefined)
      throw new TypeError(`${method} ${path}: no route declares it; an exact route only speeds up a declared one`);
    if (general.admits !== options.admits)
      throw new TypeError(
        `${method} ${path}: admits ${options.admits}, but ${general.method} ${general.pattern} admits ${general.admits}`,
      );
    let byPath = this.exactRoutes.get(method);
    if (byPath === undefined) this.exactRoutes.set(method, (byPath = new Map()));
    if (byPath.has(path)) throw new TypeError(`${method} ${path}: an exact route is already registered`);
    byPath.set(path, {
      info: { method: general.method, pattern: general.pattern, admits: general.admits },
      options,
      handler: handler as ExactHandler,
    });
    return this;
  }

  /** Removes an exact route; its requests go to the general route again. False when there was none. */
  dropExact(method: string, path: string): boolean {
    return this.exactRoutes.get(method)?.delete(path) ?? false;
  }

  /**
   * Answers the request if an exact route matches it (true), else leaves it untouched (false). processHttp calls
   * it before counting a request; `listener` calls it first too.
   */
  serveExact(req: IncomingMessage, res: ServerResponse): boolean {
    const byPath = this.exactRoutes.get(req.method ?? '');
    if (byPath === undefined) return false;
    const route = byPath.get(req.url ?? '');
    if (route === undefined) return false;
    let principal: Principal | null;
    try {
      principal = admit(route.info, req, this.options.tokens, this.options.service);
    } catch (error) {
      req.resume();
      this.exactFailed(req, res, error);
      return true;
    }
    const body = route.options.body;
    if (body === undefined) {
      this.runExact(route, req, res, null, principal);
      return true;
    }
    // The body whole, bounded; past the bound the rest is read and dropped (the connection stays usable).
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size <= body.maxBytes) chunks.push(chunk);
    });
    req.on('end', () => {
      if (size > body.maxBytes)
        return this.exactFailed(
          req,
          res,
          body.tooLarge ??
            new HttpError(413, 'body_too_large', `the body is over ${body.maxBytes} bytes`, { limit: body.maxBytes }),
        );
      this.runExact(route, req, res, chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks), principal);
    });
    req.on('error', () => res.destroy());
    return true;
  }

  private runExact(
    route: ExactRoute,
    req: IncomingMessage,
    res: ServerResponse,
    body: Buffer | null,
    principal: Principal | null,
  ): void {
    let out: void | Promise<void>;
    try {
      out = route.handler(req, res, body, principal);
    } catch (error) {
      return this.exactFailed(req, res, error);
    }
    if (out instanceof Promise) out.catch((error: unknown) => this.exactFailed(req, res, error));
  }

  private exactFailed(req: IncomingMessage, res: ServerResponse, error: unknown): void {
    if (error instanceof HttpError) {
      if (!res.headersSent) sendError(res, error);
      return;
    }
    this.options.onError?.(error, req);
    if (!res.headersSent) sendJson(res, 500, { error: { code: 'internal', message: 'internal error' } });
    else res.destroy();
  }

  /** Every route registered, in matching order, with whom it admits. */
  routes(): RouteInfo[] {
    return this.table.map(({ method, pattern, admits }) => ({ method, pattern, admits }));
  }

  /** The node:http request listener: an exact route if one matches, else the general routes. */
  readonly listener = (req: IncomingMessage, res: ServerResponse): void => {
    if (!this.serveExact(req, res)) this.routedListener(req, res);
  };

  /** The general routes only (processHttp asks `serveExact` first itself, before it counts the request). */
  readonly routedListener = (req: IncomingMessage, res: ServerResponse): void => {
    void this.handle(req, res).catch((error: unknown) => {
      this.options.onError?.(error, req);
      if (!res.headersSent) sendJson(res, 500, { error: { code: 'internal', message: 'internal error' } });
      else res.destroy();
    });
  };

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    // Split the raw path: URL parsing would collapse "." and ".." segments (%2E too) before a handler could
    // answer them with its own error. The query is parsed on its own, and only when a handler reads it: a whole
    // URL object per request showed in the hot path's profile, and most requests have no query at all.
    const target = req.url ?? '/';
    const q = target.indexOf('?');
    const rawPath = q < 0 ? target : target.slice(0, q);
    const segments = pathSegments(rawPath);
    if (segments === null) {
      sendError(res, badRequest('invalid_path', 'the path is not valid percent-encoding'));
      return;
    }
    const candidates = this.index.get(req.method ?? '')?.[segments.length];
    if (candidates !== undefined) {
      for (const route of candidates) {
        const params = match(route, segments);
        if (params === null) continue;
        const ctx = new Context(req, res, params, q < 0 ? null : target.slice(q + 1), this.maxBodyBytes);
        try {
          ctx.principal = admit(route, req, this.options.tokens, this.options.service);
          const out = await route.handler(ctx);
          if (res.headersSent || res.writableEnded) return;
          if (out instanceof Reply) sendJson(res, out.status, out.body, out.headers);
          else if (out === undefined) sendJson(res, 204, undefined);
          else sendJson(res, 200, out);
        } catch (error) {
          if (error instanceof HttpError) {
            if (!res.headersSent) sendError(res, error);
            return;
          }
          throw error;
        } finally {
          // Drain an unread body so the connection can be reused.
          if (!req.readableEnded) req.resume();
        }
        return;
      }
    }
    const allowed: string[] = [];
    for (const route of this.table)
      if (route.method !== req.method && match(route, segments) !== null) allowed.push(route.method);
    if (allowed.length > 0) {
      sendError(
        res,
        new HttpError(
          405,
          'method_not_allowed',
          `use ${allowed.join(', ')} on this path`,
          {},
          { allow: allowed.join(', ') },
        ),
      );
    } else {
      sendError(res, new HttpError(404, 'not_found', `no route for ${req.method} ${rawPath}`));
    }
  }
}

/** What a handler sees of one request; its methods live on the prototype, not in closures made per request. */
class Context implements RequestContext {
  principal: Principal | null = null;
  private body: Promise<Buffer> | null = null;
  private parsedQuery: URLSearchParams | null = null;

  constructor(
    readonly req: IncomingMessage,
    readonly res: ServerResponse,
    readonly params: Record<string, string>,
    /** The text after "?", or null without one. */
    private readonly rawQuery: string | null,
    private readonly maxBodyBytes: number,
  ) {}

  get query(): URLSearchParams {
    return (this.parsedQuery ??= new URLSearchParams(this.rawQuery === null ? '' : queryText(this.rawQuery)));
  }

  bytes(): Promise<Buffer> {
    return (this.body ??= readBody(this.req, this.maxBodyBytes));
  }

  async text(): Promise<string> {
    return (await this.bytes()).toString('utf8');
  }

  async json(): Promise<unknown> {
    const text = (await this.bytes()).toString('utf8');
    if (text.length === 0) throw badRequest('invalid_body', 'a JSON body is required');
    return parseJsonBody(text);
  }
}

/** The path's non-empty segments, percent-decoded; null when a segment is not valid percent-encoding. */
function pathSegments(rawPath: string): string[] | null {
  const out: string[] = [];
  for (const s of rawPath.split('/')) {
    if (s.length === 0) continue;
    if (s.indexOf('%') < 0) {
      out.push(s);
      continue;
    }
    try {
      out.push(decodeURIComponent(s));
    } catch {
      return null;
    }
  }
  return out;
}

/** The query string without a fragment (a request target should carry none; URL parsing dropped it too). */
function queryText(afterQuestionMark: string): string {
  const hash = afterQuestionMark.indexOf('#');
  return hash < 0 ? afterQuestionMark : afterQuestionMark.slice(0, hash);
}

/** The route's parameters for `path` (whose length the caller checked or will check), or null when it does not match. */
function match(route: Route, path: string[]): Record<string, string> | null {
  const { segments, params: names } = route;
  if (segments.length !== path.length) return null;
  // Literal segments first: most routes fail there, before any object is made.
  for (let i = 0; i < segments.length; i++) if (names[i] === null && segments[i] !== path[i]) return null;
  const params: Record<string, string> = {};
  for (let i = 0; i < segments.length; i++) {
    const name = names[i];
    if (name !== null && name !== undefined) params[name] = path[i]!;
  }
  return params;
}

function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        reject(new HttpError(413, 'body_too_large', `the body is over ${limit} bytes`, { limit }));
        req.resume();
        return;
      }
      chunks.push(chunk);
    });
    // A small body is one chunk: no copy of it.
    req.on('end', () => resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

const NO_HEADERS: Record<string, string> = Object.freeze({});

export function sendJson(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = NO_HEADERS,
): void {
  if (status === 204 || body === undefined) {
    res.writeHead(status === 200 ? 204 : status, headers);
    res.end();
    return;
  }
  const text = JSON.stringify(body);
  const length = Buffer.byteLength(text);
  res.writeHead(
    status,
    headers === NO_HEADERS
      ? { 'content-type': 'application/json', 'content-length': length }
      : { 'content-type': 'application/json', 'content-length': length, ...headers },
  );
  res.end(text);
}

export function sendError(res: ServerResponse, error: HttpError): void {
  sendJson(res, error.status, error.body(), error.headers);
}
