/**
 * HTTP plumbing for the load generator: one keep-alive undici Pool per endpoint, with one connection per worker
 * that talks to it (closed loop, no pipelining), and a request helper that reads the whole answer and turns a
 * non-2xx status into an OpError named after the status and the error code in the body.
 */
import { Pool } from 'undici';
import { OpError } from './load.js';

export interface HttpRequest {
  method: 'GET' | 'PUT' | 'POST' | 'DELETE';
  path: string;
  headers?: Record<string, string>;
  body?: string | Buffer;
}

export const REQUEST_TIMEOUT_MS = 10_000;

export class Endpoints {
  readonly pools: Pool[];

  /** `origins` like http://127.0.0.1:8001; `workers` is the total number of workers that will share them. */
  constructor(
    readonly origins: string[],
    workers: number,
  ) {
    const perOrigin = Math.max(1, Math.ceil(workers / origins.length));
    this.pools = origins.map(
      (origin) =>
        new Pool(origin, {
          connections: perOrigin,
          pipelining: 1,
          keepAliveTimeout: 30_000,
          headersTimeout: REQUEST_TIMEOUT_MS,
          bodyTimeout: REQUEST_TIMEOUT_MS,
          connectTimeout: REQUEST_TIMEOUT_MS,
        }),
    );
  }

  /** Worker w always talks to the same endpoint: w mod the number of endpoints. */
  forWorker(w: number): Pool {
    return this.pools[w % this.pools.length]!;
  }

  async close(): Promise<void> {
    await Promise.all(this.pools.map((p) => p.destroy().catch(() => undefined)));
  }
}

/** Send one request and read its whole body; non-2xx answers throw OpError("HTTP <status> <code>"). */
export async function send(pool: Pool, req: HttpRequest): Promise<string> {
  const res = await pool.request({ method: req.method, path: req.path, headers: req.headers, body: req.body });
  const text = await res.body.text();
  if (res.statusCode < 200 || res.statusCode > 299)
    throw new OpError(`HTTP ${res.statusCode}${codeIn(text)}`, text.slice(0, 300));
  return text;
}

/** The error code in a JSON error body, ours ({"error": {"code"}}) or grpc-gateway's ({"error": "...", "code": n}). */
function codeIn(text: string): string {
  try {
    const body = JSON.parse(text) as { error?: { code?: unknown } | string; code?: unknown };
    if (typeof body.error === 'object' && typeof body.error?.code === 'string') return ` ${body.error.code}`;
    if (typeof body.error === 'string') return ` ${body.error.slice(0, 60)}`;
  } catch {
    // not JSON
  }
  return '';
}

/** One request outside the measured loop (setup, health checks): a fresh connection, a timeout, no throw on 4xx/5xx. */
export async function fetchJson(
  url: string,
  init: { method?: string; headers?: Record<string, string>; body?: string; timeoutMs?: number } = {},
): Promise<{ status: number; body: unknown }> {
  try {
    const res = await fetch(url, {
      method: init.method ?? 'GET',
      headers: init.headers,
      body: init.body,
      signal: AbortSignal.timeout(init.timeoutMs ?? 2_000),
    });
    const text = await res.text();
    let body: unknown = text;
    try {
      body = JSON.parse(text);
    } catch {
      // keep the text
    }
    return { status: res.status, body };
  } catch {
    return { status: 0, body: null };
  }
}

/** Prometheus text from `url`, as name -> value summed over labels; empty when it does not answer. */
export async function scrapeCounters(url: string): Promise<Record<string, number>> {
  const r = await fetchJson(url, { timeoutMs: 5_000 });
  return typeof r.body === 'string' ? parseMetrics(r.body) : {};
}

export function parseMetrics(text: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{[^}]*\})?\s+(\S+)$/.exec(line);
    if (!m) continue;
    const v = Number(m[2]);
    if (Number.isFinite(v)) out[m[1]!] = (out[m[1]!] ?? 0) + v;
  }
  return out;
}

/**
 * One JSON call on a pool: the parsed 2xx body, or an OpError named after the status and the body's error code
 * (the benchmarks' setup and driver calls; the load generator's hot loop uses Endpoints).
 */
export async function requestJson(
  pool: Pool,
  method: 'GET' | 'POST' | 'PUT' | 'DELETE',
  path: string,
  body: unknown,
  token: string | null,
  timeoutMs = 15_000,
): Promise<Record<string, unknown>> {
  const headers: Record<string, string> = {};
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (token !== null) headers.authorization = `Bearer ${token}`;
  const res = await pool.request({
    method,
    path,
    headers,
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    headersTimeout: timeoutMs,
    bodyTimeout: timeoutMs,
  });
  const text = await res.body.text();
  if (res.statusCode < 200 || res.statusCode > 299) {
    let code = '';
    try {
      code = ` ${String((JSON.parse(text) as { error?: { code?: string } }).error?.code ?? '')}`;
    } catch {
      // not JSON
    }
    throw new OpError(`HTTP ${res.statusCode}${code}`, text.slice(0, 300));
  }
  return JSON.parse(text) as Record<string, unknown>;
}
