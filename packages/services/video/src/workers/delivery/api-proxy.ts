/**
 * The player page's three API calls, answered on the edge that served the page by relaying them to the app tier:
 * `GET /api/videos/{id}`, `GET /api/videos/{id}/playback`, `POST|PUT /api/videos/{id}/poster`. A viewer is given
 * one URL (an edge's `/watch/{id}?token=...`) and the page calls its own origin, so the browser needs no
 * cross-origin call and the app tier needs no CORS. Nothing else of the API is relayed (uploads, the library,
 * moderation stay on the app tier: an edge is a cache, not a second front door), and nothing is cached: the
 * answers depend on the caller's token, which is passed through untouched, as the app tier checks it.
 *
 * An app server that refuses the connection or does not answer within the deadline is skipped for the next one
 * (each call starts at a different one); when none answers: 502 `upstream_unavailable`.
 */
import { request } from 'node:http';
import { HttpError, notFound, type RequestContext, type Router } from '@raftkit/http';

export interface AppTier {
  /** host:port of each app server. */
  addresses: string[];
  timeoutMs: number;
}

/** The poster choice is `{index}`: a few bytes. */
const MAX_BODY = 4 * 1024;
/** The app tier's answers to these calls are small JSON (a video's record, its playback URLs): larger is refused. */
const MAX_ANSWER = 1024 * 1024;
const ID = /^[A-Za-z0-9_-]{1,128}$/;

interface Relayed {
  status: number;
  contentType: string;
  body: Buffer;
}

function relayOnce(
  address: string,
  method: string,
  path: string,
  headers: Record<string, string>,
  body: Buffer | null,
  timeoutMs: number,
): Promise<Relayed> {
  return new Promise((resolve, reject) => {
    const colon = address.lastIndexOf(':');
    const req = request(
      {
        host: address.slice(0, colon),
        port: Number(address.slice(colon + 1)),
        method,
        path,
        headers: body === null ? headers : { ...headers, 'content-length': String(body.length) },
      },
      (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (c: Buffer) => {
          size += c.length;
          if (size <= MAX_ANSWER) chunks.push(c);
          else {
            req.destroy();
            reject(new Error(`answer over ${MAX_ANSWER} bytes`));
          }
        });
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 502,
            contentType: String(res.headers['content-type'] ?? 'application/json'),
            body: Buffer.concat(chunks),
          }),
        );
        res.on('error', reject);
      },
    );
    req.setTimeout(timeoutMs, () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.end(body ?? undefined);
  });
}

let turn = 0;

async function relay(tier: AppTier, ctx: RequestContext, method: string, path: string): Promise<void> {
  if (!ID.test(ctx.params['id']!)) throw notFound('no such video');
  if (tier.addresses.length === 0)
    throw new HttpError(502, 'upstream_unavailable', 'this edge knows no app server to ask');
  const headers: Record<string, string> = { accept: 'application/json' };
  const auth = ctx.req.headers.authorization;
  if (typeof auth === 'string') headers.authorization = auth;
  let body: Buffer | null = null;
  if (method !== 'GET') {
    // Refused by its declared length before anything is read; a body without one is read up to the router's limit.
    if (Number(ctx.req.headers['content-length'] ?? 0) > MAX_BODY)
      throw new HttpError(413, 'body_too_large', `at most ${MAX_BODY} bytes`);
    body = await ctx.bytes();
    if (body.length > MAX_BODY) throw new HttpError(413, 'body_too_large', `at most ${MAX_BODY} bytes`);
    headers['content-type'] = 'application/json';
  }
  const start = turn++ % tier.addresses.length;
  let lastError = '';
  for (let i = 0; i < tier.addresses.length; i++) {
    const address = tier.addresses[(start + i) % tier.addresses.length]!;
    try {
      const r = await relayOnce(address, method, path, headers, body, tier.timeoutMs);
      ctx.res.writeHead(r.status, {
        'content-type': r.contentType,
        'content-length': r.body.length,
        'cache-control': 'no-store',
      });
      ctx.res.end(r.body);
      return;
    } catch (e) {
      lastError = `${address}: ${(e as Error).message}`;
    }
  }
  throw new HttpError(502, 'upstream_unavailable', `no app server answered (${lastError})`);
}

/** Registers the relayed routes on an edge's router. Open at the edge: the app tier checks the token it carries. */
export function registerPageApi(router: Router, tier: AppTier): void {
  const id = (ctx: RequestContext): string => encodeURIComponent(ctx.params['id']!);
  router
    .get('/api/videos/:id', { admits: 'open' }, (ctx) => relay(tier, ctx, 'GET', `/api/videos/${id(ctx)}`))
    .get('/api/videos/:id/playback', { admits: 'open' }, (ctx) =>
      relay(tier, ctx, 'GET', `/api/videos/${id(ctx)}/playback`),
    )
    .post('/api/videos/:id/poster', { admits: 'open' }, (ctx) =>
      relay(tier, ctx, 'POST', `/api/videos/${id(ctx)}/poster`),
    )
    .put('/api/videos/:id/poster', { admits: 'open' }, (ctx) =>
      relay(tier, ctx, 'PUT', `/api/videos/${id(ctx)}/poster`),
    );
}
