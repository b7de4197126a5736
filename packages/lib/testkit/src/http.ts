/** HTTP calls and polling for integration tests. */
import { Agent, request } from 'undici';

export interface Answer {
  status: number;
  /** The parsed JSON body; `{ text }` when the body is not JSON; `{}` when empty. */
  body: Record<string, unknown>;
  headers: Record<string, string | string[] | undefined>;
}

export interface CallOptions {
  /** Bearer token; null or absent: no Authorization header. */
  token?: string | null;
  /** Sent as JSON. */
  body?: unknown;
  /** Sent as is, with content-type application/json (malformed-input tests). */
  raw?: string;
  headers?: Record<string, string>;
  timeoutMs?: number;
}

/** Keep-alive connections shared by a test file's calls (redirects are never followed). */
export const agent = new Agent({ connections: 256, keepAliveTimeout: 10_000 });

export async function call(base: string, method: string, path: string, options: CallOptions = {}): Promise<Answer> {
  const headers: Record<string, string> = { ...(options.headers ?? {}) };
  if (options.token !== undefined && options.token !== null) headers.authorization = `Bearer ${options.token}`;
  const payload = options.raw ?? (options.body === undefined ? undefined : JSON.stringify(options.body));
  if (payload !== undefined) headers['content-type'] ??= 'application/json';
  const timeout = options.timeoutMs ?? 30_000;
  const res = await request(base + path, {
    method: method as 'GET',
    headers,
    body: payload,
    dispatcher: agent,
    headersTimeout: timeout,
    bodyTimeout: timeout,
  });
  const text = await res.body.text();
  let body: Record<string, unknown> = {};
  if (text.length > 0) {
    try {
      const parsed = JSON.parse(text) as unknown;
      body = typeof parsed === 'object' && parsed !== null ? (parsed as Record<string, unknown>) : { value: parsed };
    } catch {
      body = { text };
    }
  }
  return { status: res.statusCode, body, headers: res.headers };
}

/** Poll `probe` until it returns something truthy; fail naming `what` after `timeoutMs`. */
export async function until<T>(
  what: string,
  probe: () => Promise<T | null | undefined | false> | T | null | undefined | false,
  timeoutMs = 20_000,
  everyMs = 100,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown = null;
  for (;;) {
    try {
      const v = await probe();
      if (v !== null && v !== undefined && v !== false) return v;
    } catch (e) {
      lastError = e;
    }
    if (Date.now() > deadline)
      throw new Error(
        `timed out after ${timeoutMs} ms waiting for ${what}${lastError ? ` (last error: ${String(lastError)})` : ''}`,
      );
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
