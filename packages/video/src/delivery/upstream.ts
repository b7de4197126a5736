/**
 * One fetch of an object from the next tier up (the regional cache for an edge, the object store for the
 * regional one), its failures turned into the errors a viewer sees: the upstream unreachable or failing -> 502,
 * too slow -> 504, no such object -> 404. An upstream's own 502/504 (the origin down behind the regional tier)
 * passes through unchanged, so an edge says what went wrong two tiers up.
 */
import { HttpError, notFound } from '@raftkit/http';
import { contentTypeOf, etagOf } from './keys.js';
import type { CachedObject } from './store.js';

export interface UpstreamOptions {
  /** Base URL the key is appended to, e.g. http://127.0.0.1:8641/media or the object store's GET-by-key base. */
  baseUrl: string;
  /** Presented as a bearer token (the cluster token: tiers and the origin trust each other, viewers do not sign). */
  token: string;
  timeoutMs: number;
  maxObjectBytes: number;
}

export function objectUrl(baseUrl: string, key: string): string {
  return `${baseUrl.replace(/\/+$/, '')}/${key.split('/').map(encodeURIComponent).join('/')}`;
}

export async function fetchObject(o: UpstreamOptions, key: string): Promise<CachedObject> {
  const url = objectUrl(o.baseUrl, key);
  let response: Response;
  try {
    response = await fetch(url, { headers: { authorization: `Bearer ${o.token}` }, signal: AbortSignal.timeout(o.timeoutMs) });
  } catch (e) {
    throw failure(e, key, o.timeoutMs);
  }
  if (response.status === 404) {
    await response.body?.cancel();
    throw notFound(`no object ${key}`, { key });
  }
  if (response.status !== 200) {
    const passed = await passThrough(response);
    throw passed ?? new HttpError(502, 'upstream_error', `the upstream answered ${response.status} for ${key}`, { key, upstream_status: response.status });
  }
  const length = Number(response.headers.get('content-length') ?? NaN);
  if (length > o.maxObjectBytes) {
    await response.body?.cancel();
    throw new HttpError(502, 'object_too_large', `${key} is ${length} bytes, over the ${o.maxObjectBytes} a cache keeps`, { key });
  }
  let body: Buffer;
  try {
    body = Buffer.from(await response.arrayBuffer());
  } catch (e) {
    throw failure(e, key, o.timeoutMs);
  }
  const type = response.headers.get('content-type');
  return { key, body, contentType: type !== null && type !== 'application/octet-stream' ? type : contentTypeOf(key), etag: etagOf(body) };
}

function failure(e: unknown, key: string, timeoutMs: number): HttpError {
  const name = (e as Error)?.name;
  if (name === 'TimeoutError' || name === 'AbortError') {
    return new HttpError(504, 'upstream_timeout', `the upstream did not answer for ${key} within ${timeoutMs} ms`, { key });
  }
  return new HttpError(502, 'upstream_unavailable', `the upstream could not be reached for ${key}: ${(e as Error)?.message ?? String(e)}`, { key });
}

/** An upstream tier's 502/503/504 JSON error, kept as it is. */
async function passThrough(response: Response): Promise<HttpError | null> {
  const text = await response.text().catch(() => '');
  if (![502, 503, 504].includes(response.status)) return null;
  try {
    const error = (JSON.parse(text) as { error?: { code?: unknown; message?: unknown } }).error;
    if (typeof error?.code === 'string' && typeof error.message === 'string') {
      return new HttpError(response.status === 503 ? 502 : response.status, error.code, `upstream: ${error.message}`);
    }
  } catch {
    // not JSON: a generic 502 below
  }
  return null;
}
