/**
 * One fetch of an object from the next tier up (the regional cache for an edge, the object store for the
 * regional one), its failures turned into the errors a viewer sees: the upstream unreachable or failing -> 502,
 * too slow -> 504, no such object -> 404. An upstream's own 502/504 (the origin down behind the regional tier)
 * passes through unchanged, so an edge says what went wrong two tiers up.
 */
import { createHash } from 'node:crypto';
import { Agent, request, type Dispatcher } from 'undici';
import { HttpError, notFound } from '@raftkit/http';
import { contentTypeOf, etagOf } from './keys.js';
import type { CachedObject } from './store.js';

export interface UpstreamOptions {
  /** Base URL the key is appended to, e.g. http://127.0.0.1:8641/media or the object store's GET-by-key base. */
  baseUrl: string;
  /**
   * More base URLs holding the same objects (the object store's other replicas), tried in turn when one is
   * unreachable, fails, has no such key or serves bytes that do not match its `x-content-sha256`.
   */
  alternates?: readonly string[];
  /** Presented as a bearer token (the cluster token: tiers and the origin trust each other, viewers do not sign). */
  token: string;
  timeoutMs: number;
  maxObjectBytes: number;
}

function objectUrl(baseUrl: string, key: string): string {
  return `${baseUrl.replace(/\/+$/, '')}/${key.split('/').map(encodeURIComponent).join('/')}`;
}

/**
 * Keep-alive connections to the upstream, shared by every fetch of the process (undici's request: the global
 * fetch costs noticeably more per call, and a miss path is a chain of them).
 */
const upstreamAgent = new Agent({ connections: 256, keepAliveTimeout: 30_000 });

export async function fetchObject(o: UpstreamOptions, key: string): Promise<CachedObject> {
  const bases = [o.baseUrl, ...(o.alternates ?? [])];
  let error: HttpError | null = null;
  for (const base of bases) {
    try {
      return await fetchFrom(o, base, key);
    } catch (e) {
      const h = e instanceof HttpError ? e : new HttpError(502, 'upstream_error', String(e));
      // A 404 from one replica is not the answer while another may hold the key; any other failure is kept in
      // preference to a 404 (the key exists somewhere that failed).
      if (error === null || error.status === 404) error = h;
    }
  }
  throw error!;
}

async function fetchFrom(o: UpstreamOptions, baseUrl: string, key: string): Promise<CachedObject> {
  const url = objectUrl(baseUrl, key);
  let response: Dispatcher.ResponseData;
  try {
    response = await request(url, {
      headers: { authorization: `Bearer ${o.token}` },
      dispatcher: upstreamAgent,
      headersTimeout: o.timeoutMs,
      bodyTimeout: o.timeoutMs,
    });
  } catch (e) {
    throw failure(e, key, o.timeoutMs);
  }
  const status = response.statusCode;
  if (status === 404) {
    await response.body.dump();
    throw notFound(`no object ${key}`, { key });
  }
  if (status !== 200) {
    const text = await response.body.text().catch(() => '');
    throw (
      passThrough(status, text) ??
      new HttpError(502, 'upstream_error', `the upstream answered ${status} for ${key}`, {
        key,
        upstream_status: status,
      })
    );
  }
  const length = Number(response.headers['content-length'] ?? NaN);
  if (length > o.maxObjectBytes) {
    await response.body.dump();
    throw new HttpError(
      502,
      'object_too_large',
      `${key} is ${length} bytes, over the ${o.maxObjectBytes} a cache keeps`,
      { key },
    );
  }
  let body: Buffer;
  try {
    body = Buffer.from(await response.body.arrayBuffer());
  } catch (e) {
    throw failure(e, key, o.timeoutMs);
  }
  const sha = response.headers['x-content-sha256'];
  if (typeof sha === 'string' && createHash('sha256').update(body).digest('hex') !== sha)
    throw new HttpError(502, 'upstream_corrupt', `the bytes of ${key} do not match their sha256`, { key });
  const type = response.headers['content-type'];
  return {
    key,
    body,
    contentType: typeof type === 'string' && type !== 'application/octet-stream' ? type : contentTypeOf(key),
    etag: etagOf(body),
  };
}

function failure(e: unknown, key: string, timeoutMs: number): HttpError {
  const code = (e as { code?: unknown })?.code;
  if (code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT') {
    return new HttpError(504, 'upstream_timeout', `the upstream did not answer for ${key} within ${timeoutMs} ms`, {
      key,
    });
  }
  return new HttpError(
    502,
    'upstream_unavailable',
    `the upstream could not be reached for ${key}: ${(e as Error)?.message ?? String(e)}`,
    { key },
  );
}

/** An upstream tier's 502/503/504 JSON error, kept as it is. */
function passThrough(status: number, text: string): HttpError | null {
  if (![502, 503, 504].includes(status)) return null;
  try {
    const error = (JSON.parse(text) as { error?: { code?: unknown; message?: unknown } }).error;
    if (typeof error?.code === 'string' && typeof error.message === 'string') {
      return new HttpError(status === 503 ? 502 : status, error.code, `upstream: ${error.message}`);
    }
  } catch {
    // not JSON: a generic 502 below
  }
  return null;
}
