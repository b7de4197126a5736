/**
 * The application server (worker role "app"): the public API. Redirects are answered on the fast path from the
 * edge cache, else from a member's shared cache or store (a local read: no consensus, no disk write); the click
 * is emitted after the 302 is sent. Creates take a code from this server's leased id batch (or the alias), go to
 * the store in batches with the other creates of the moment (group commit), and answer only once the link is
 * committed on a majority.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  deriveClientToken,
  MetricsRegistry,
  requirePrincipal,
  HttpError,
  notFound,
  Reply,
  requireObject,
  requireString,
  sendJson,
  serveWorkerHttp,
  unavailable,
  type Principal,
  type RequestContext,
  type RunningWorker,
  type WorkerOptions,
  type WorkerRole,
} from '@raftkit/http';
import type { BatchItemResult, LinkRecord } from '../../members/api.js';
import { CodeAllocator, type Batch } from './allocator.js';
import { BATCH_DEFAULTS, CreateBatcher } from './create-batcher.js';
import { ALIAS, GENERATED_CODE, RESERVED_CODES } from '../../codes.js';
import { EdgeCache, MISSING, type Lookup } from './edge-cache.js';
import { isHeaderSafeUrl, parseCreate, shortCodeParam, USER } from '../../input.js';
import { CreateLimits } from './limits.js';
import { appSettings, unknownSettings, type AppSettings } from './settings.js';
import { LinkStoreClient } from './store-client.js';

/** One redirect, as the click path takes it. */
export interface Click {
  short_code: string;
  timestamp: number;
  referer: string | null;
  country: string | null;
  user_agent: string | null;
}

/** The click and analytics side, as the app server uses it (src/workers/clicks provides it; tests may record). */
export interface ClickSide {
  emitter(options: WorkerOptions, metrics: MetricsRegistry): { emit(click: Click): void; stop(): Promise<void> };
  countryOf(req: IncomingMessage, settings: Record<string, string>): string | null;
  stats(options: WorkerOptions, code: string): Promise<unknown>;
}

export const DEFAULT_APP_COUNT = 3;
/** The user recorded as creator of links made with the cluster token (no API key is issued under this name). */
const CLUSTER_USER = 'cluster';
const MAX_REDIRECT_PATH = 65;
const REDIRECT_FROM_EDGE = { outcome: 'redirect', cache: 'edge' };
const REDIRECT_FROM_STORE = { outcome: 'redirect', cache: 'store' };
/** Longest delay before answered redirects show in shortlink_redirects_total (a scrape flushes them at once). */
const COUNT_FLUSH_MS = 100;

export function appRole(clicks: ClickSide): WorkerRole {
  // Place 3 on: the app servers' ports (7643-7645 by default) are the service's public endpoints.
  return { role: 'app', count: DEFAULT_APP_COUNT, slot: 3, start: (options) => startApp(options, clicks) };
}

export async function startApp(options: WorkerOptions, clickSide: ClickSide): Promise<RunningWorker> {
  const settings = appSettings(options.settings, options.httpAddress);
  const ignored = unknownSettings(options.settings);
  if (ignored.length > 0) options.logger.log('info', 'settings not read by the app server', { keys: ignored });
  const clusterToken = options.tokens[0]!;
  const store = new LinkStoreClient(options.members, clusterToken, options.index - 1);
  const allocator = new CodeAllocator(async () => {
    const answer = await store.call('POST', '/internal/leases', { server: options.id });
    if (answer.status !== 201) throw storeError(answer.status, answer.body);
    return answer.body as Batch;
  });
  const edge = new EdgeCache({
    ttlMs: settings.edgeTtlMs,
    negativeTtlMs: settings.negativeTtlMs,
    max: settings.edgeEntries,
  });
  const limits = new CreateLimits(settings.perKey, settings.perIp);
  const inFlight = new Map<string, Promise<Lookup>>();

  const metrics = new MetricsRegistry();
  const clicks = clickSide.emitter(options, metrics);
  // Registered before shortlink_redirects_total, so a scrape flushes the pending counts before rendering them.
  metrics
    .gauge(
      'shortlink_redirect_counts_pending',
      'Redirects not yet added to shortlink_redirects_total (flushed at every scrape)',
    )
    .set(() => {
      flushCounts();
      return 0;
    });
  const redirects = metrics.counter(
    'shortlink_redirects_total',
    'Redirect requests by outcome and the cache that answered',
  );
  const creates = metrics.counter('shortlink_creates_total', 'Create requests by outcome');
  const batchSizes = metrics.histogram(
    'shortlink_create_batch_size',
    'Links per create batch sent to the link store',
    [1, 2, 4, 8, 16, 32, 64, 128, 256],
  );
  const batcher = new CreateBatcher<BatchItemResult>(
    async (links) => {
      const answer = await store.call('POST', '/internal/link-batches', { links });
      if (answer.status !== 200) throw storeError(answer.status, answer.body);
      return (answer.body as { results: BatchItemResult[] }).results;
    },
    { ...BATCH_DEFAULTS, maxLinks: settings.createBatchMax },
    (size) => batchSizes.observe(size),
  );

  /** A member's answer for `code`; concurrent misses for one code share one request. */
  const lookup = (code: string, consistency: 'serializable' | 'linearizable'): Promise<Lookup> => {
    const fetchOne = async (): Promise<Lookup> => {
      const answer = await store.call('GET', `/internal/links/${code}?consistency=${consistency}`, undefined, 5000);
      if (answer.status === 200) return answer.body as LinkRecord;
      if (answer.status === 404) return MISSING;
      throw storeError(answer.status, answer.body);
    };
    if (consistency === 'linearizable') return fetchOne();
    let pending = inFlight.get(code);
    if (pending === undefined) {
      pending = fetchOne().finally(() => inFlight.delete(code));
      inFlight.set(code, pending);
    }
    return pending;
  };

  /**
   * Redirects answered since the counts were last added to shortlink_redirects_total: a labelled increment costs
   * more than the rest of a cache hit's bookkeeping, so the counts are added at most every COUNT_FLUSH_MS (and
   * before /metrics renders), two plain additions per redirect meanwhile.
   */
  const pending = { edge: 0, store: 0 };
  let countTimer: NodeJS.Timeout | undefined;
  const flushCounts = (): void => {
    clearTimeout(countTimer);
    countTimer = undefined;
    if (pending.edge > 0) redirects.inc(pending.edge, REDIRECT_FROM_EDGE);
    if (pending.store > 0) redirects.inc(pending.store, REDIRECT_FROM_STORE);
    pending.edge = 0;
    pending.store = 0;
  };

  const answerRedirect = (
    code: string,
    found: Lookup,
    cache: 'edge' | 'store',
    req: IncomingMessage,
    res: ServerResponse,
    now: number,
  ): void => {
    if (found === MISSING || (found as LinkRecord).expires_at <= now) {
      redirects.inc(1, { outcome: 'not_found', cache });
      sendJson(
        res,
        404,
        { error: { code: 'not_found', message: `no link ${code} (never created, expired or deleted)` } },
        { 'cache-control': 'no-store' },
      );
      return;
    }
    const location = (found as LinkRecord).long_url;
    // Edge entries were checked when they entered the cache (a corrupt link is never cached, see `redirect`).
    if (cache !== 'edge' && !isHeaderSafeUrl(location)) {
      redirects.inc(1, { outcome: 'corrupt', cache });
      options.logger.log('error', 'a stored link cannot be sent as a Location header', { code });
      sendJson(
        res,
        502,
        { error: { code: 'corrupt_link', message: `the link ${code} holds a URL that cannot be redirected to` } },
        { 'cache-control': 'no-store' },
      );
      return;
    }
    res.writeHead(302, { location, 'cache-control': 'private, max-age=0', 'content-length': '0' });
    res.end();
    pending[cache]++;
    countTimer ??= setTimeout(flushCounts, COUNT_FLUSH_MS);
    if (req.method === 'HEAD') return;
    // The 302 is queued on its socket (written when Node uncorks it, before any timer): emitting only appends the
    // click to an open block (encoded and sent later, see clicks/emitter.ts), so the click path costs the
    // redirect no I/O and cannot fail it.
    clicks.emit({
      short_code: code,
      timestamp: now,
      referer: rawHeader(req.rawHeaders, 'referer'),
      country: clickSide.countryOf(req, options.settings),
      user_agent: rawHeader(req.rawHeaders, 'user-agent'),
    });
  };

  const redirect = (req: IncomingMessage, res: ServerResponse): boolean => {
    if (req.method !== 'GET' && req.method !== 'HEAD') return false;
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const path = q < 0 ? url : url.slice(0, q);
    if (path.length < 8 || path.length > MAX_REDIRECT_PATH || path.indexOf('/', 1) >= 0) return false;
    const code = path.slice(1);
    const now = Date.now();
    // The edge cache first: only well-formed, unreserved codes ever enter it (looked up below after the check, or
    // created, or deleted through this server), so a hit needs no pattern tests (three regular expressions and a
    // Set lookup were a few percent of an app server's CPU under redirect load).
    const cached = edge.get(code);
    if (cached !== undefined) {
      answerRedirect(code, cached, 'edge', req, res, now);
      return true;
    }
    if (RESERVED_CODES.has(code) || !(GENERATED_CODE.test(code) || ALIAS.test(code))) return false;
    lookup(code, 'serializable').then(
      (found) => {
        // A link whose URL cannot be a Location header (only a bug could store one) is not cached: it is answered
        // 502 from here, and edge hits skip the check.
        if (found === MISSING || isHeaderSafeUrl((found as LinkRecord).long_url)) edge.set(code, found, now);
        answerRedirect(code, found, 'store', req, res, Date.now());
      },
      (error: unknown) => {
        redirects.inc(1, { outcome: 'unavailable', cache: 'none' });
        const e = error instanceof HttpError ? error : unavailable('the link store is unreachable', 1);
        if (!res.headersSent) sendJson(res, e.status, e.body(), e.headers);
      },
    );
    return true;
  };

  const http = await serveWorkerHttp(options, {
    metrics,
    fastPath: redirect,
    health: () => ({ leases: allocator.status().batches.length }),
  });

  const userOf = (p: Principal): string => (p.kind === 'cluster' ? CLUSTER_USER : p.name);
  /** The live link, for its creator or the cluster only. */
  const ownedLink = async (ctx: RequestContext): Promise<LinkRecord> => {
    const code = shortCodeParam(ctx.params.code);
    const found = await lookup(code, 'linearizable');
    if (found === MISSING)
      throw notFound(`no link ${code} (never created, expired or deleted)`, { field: 'short_code' });
    const link = found as LinkRecord;
    const who = requirePrincipal(ctx);
    if (who.kind !== 'cluster' && who.name !== link.created_by)
      throw new HttpError(403, 'forbidden', 'only the creator of a link may see it');
    return link;
  };

  http.router
    .post('/api/urls', { admits: 'authenticated' }, async (ctx) => {
      const who = requirePrincipal(ctx);
      const now = Date.now();
      const decision = limits.check(who.hash, ctx.req.socket.remoteAddress ?? 'unknown', now);
      if (!decision.allowed) {
        creates.inc(1, { outcome: 'rate_limited' });
        const seconds = Math.max(1, Math.ceil(decision.retryAfterMs / 1000));
        throw new HttpError(
          429,
          'rate_limited',
          `too many creates for this ${decision.dimension === 'ip' ? 'address' : 'API key'}`,
          { retry_after_ms: decision.retryAfterMs, dimension: decision.dimension },
          { 'retry-after': String(seconds) },
        );
      }
      const request = parseCreate(await ctx.json(), now);
      const code = request.alias ?? (await allocator.nextCode());
      const command = {
        code,
        long_url: request.long_url,
        created_at: now,
        expires_at: request.expires_at,
        created_by: userOf(who),
        alias: request.alias !== null,
      };
      const outcome = await batcher.create(command);
      if (outcome.status === 'taken' && request.alias !== null) {
        creates.inc(1, { outcome: 'alias_taken' });
        throw new HttpError(409, 'alias_taken', `the alias ${code} is already taken`, { field: 'custom_alias' });
      }
      if (outcome.status !== 'created' && outcome.status !== 'retried') {
        throw new HttpError(
          502,
          'store_error',
          `the link store refused the link: ${outcome.status === 'invalid' ? JSON.stringify(outcome.error) : outcome.status}`,
        );
      }
      const link = outcome.link;
      // As in `redirect`: only header-safe links enter the edge cache (parseCreate made it so; the store sent it back).
      if (isHeaderSafeUrl(link.long_url)) edge.set(code, link, Date.now());
      creates.inc(1, { outcome: 'created' });
      return new Reply(201, publicLink(settings, link, false), { 'x-ratelimit-remaining': String(decision.remaining) });
    })
    .get('/api/urls/:code', { admits: 'authenticated' }, async (ctx) =>
      publicLink(settings, await ownedLink(ctx), true),
    )
    .get('/api/urls/:code/stats', { admits: 'authenticated' }, async (ctx) => {
      const link = await ownedLink(ctx);
      try {
        return await clickSide.stats(options, link.short_code);
      } catch (error) {
        options.logger.log('warn', 'analytics unreachable', { error: String(error) });
        throw unavailable(
          'analytics is unreachable; the clicks are kept in the click log and counted when it is back',
          5,
        );
      }
    })
    .delete('/api/urls/:code', { admits: 'authenticated' }, async (ctx) => {
      const code = shortCodeParam(ctx.params.code);
      const who = requirePrincipal(ctx);
      const answer = await store.call('DELETE', `/internal/links/${code}`, {
        by: who.kind === 'cluster' ? null : who.name,
      });
      if (answer.status === 200) edge.deleted(code);
      if (answer.status === 404) throw notFound(`no link ${code}`, { field: 'short_code' });
      if (answer.status === 403) throw new HttpError(403, 'forbidden', 'only the creator of a link may delete it');
      if (answer.status !== 200) throw storeError(answer.status, answer.body);
      return { short_code: code, deleted: true };
    })
    .post('/api/keys', { admits: 'cluster' }, async (ctx) => {
      if (requirePrincipal(ctx).kind !== 'cluster')
        throw new HttpError(403, 'forbidden', 'only the cluster token can issue API keys');
      const user = requireString(requireObject(await ctx.json()), 'user', { pattern: USER });
      if (user === CLUSTER_USER)
        throw new HttpError(400, 'invalid_field', `"${CLUSTER_USER}" is the cluster's own name`, { field: 'user' });
      return new Reply(201, { user, api_key: deriveClientToken(clusterToken, user) });
    })
    .get('/internal/leases', { admits: 'cluster' }, (ctx) => {
      if (requirePrincipal(ctx).kind !== 'cluster') throw new HttpError(403, 'forbidden', 'cluster token only');
      return { server: options.id, ...allocator.status() };
    })
    // The public redirect, declared here so the route table (and its admission) lists it: the fast path answers
    // every GET/HEAD of a short code before routing, so what reaches this handler is no short code.
    .get('/:code', { admits: 'open' }, (ctx) => {
      throw notFound(`no link ${ctx.params.code ?? ''} (not a short code)`, { field: 'short_code' });
    });

  options.logger.log('info', 'app server listening', { http: options.httpAddress, public_url: settings.publicUrl });
  return {
    httpPort: http.port,
    stop: async () => {
      flushCounts();
      await http.close();
      await clicks.stop();
      await store.close();
    },
  };
}

function publicLink(settings: AppSettings, link: LinkRecord, withOwner: boolean): Record<string, unknown> {
  return {
    short_url: `${settings.publicUrl}/${link.short_code}`,
    short_code: link.short_code,
    long_url: link.long_url,
    created_at: new Date(link.created_at).toISOString(),
    expires_at: new Date(link.expires_at).toISOString(),
    ...(withOwner ? { created_by: link.created_by } : {}),
  };
}

/**
 * The first value of the header `name` (lower case), as req.headers gives referer and user-agent (a repeated one is
 * ignored there too). Read from rawHeaders because req.headers builds an object of every header on first use,
 * which a bare 302 never pays for.
 */
export function rawHeader(raw: readonly string[], name: string): string | null {
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const key = raw[i]!;
    if (key.length === name.length && key.toLowerCase() === name) return raw[i + 1]!;
  }
  return null;
}

/** An answer of the store the app did not expect: passed on as a 503 if the store is unavailable, else a 502. */
function storeError(status: number, body: unknown): HttpError {
  const message = (body as { error?: { message?: string } } | null)?.error?.message ?? `status ${status}`;
  if (status === 503) return unavailable(`the link store is unavailable: ${message}`, 1);
  return new HttpError(502, 'store_error', `the link store answered ${status}: ${message}`);
}
