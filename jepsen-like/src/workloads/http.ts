/**
 * HTTP calls from clients to members, with an overall deadline, and the classification Jepsen clients need:
 * did the request certainly not happen (connection refused), or is its outcome unknown (timeout, reset)?
 */
import { Agent, request } from 'undici';

let agent: Agent | null = null;

function dispatcher(): Agent {
  agent ??= new Agent({ keepAliveTimeout: 10_000, connections: 64, connect: { timeout: 3_000 } });
  return agent;
}

export type HttpOutcome =
  | { kind: 'response'; status: number; body: unknown; retryAfter: string | null }
  | { kind: 'not-sent'; error: string }
  | { kind: 'unknown'; error: string };

export async function callJson(
  url: string,
  options: { method: string; token: string; body?: unknown; rawBody?: string; timeoutMs: number },
): Promise<HttpOutcome> {
  const headers: Record<string, string> = { authorization: `Bearer ${options.token}` };
  let body: string | undefined;
  if (options.rawBody !== undefined) {
    body = options.rawBody;
    headers['content-type'] = 'text/plain; charset=utf-8';
  } else if (options.body !== undefined) {
    body = JSON.stringify(options.body);
    headers['content-type'] = 'application/json';
  }
  try {
    const res = await request(url, {
      method: options.method as 'GET',
      headers,
      body,
      dispatcher: dispatcher(),
      signal: AbortSignal.timeout(options.timeoutMs),
    });
    const text = await res.body.text();
    let parsed: unknown = text;
    try {
      parsed = text.length > 0 ? JSON.parse(text) : null;
    } catch {
      // not JSON: keep the text
    }
    const retryAfter = res.headers['retry-after'];
    return {
      kind: 'response',
      status: res.statusCode,
      body: parsed,
      retryAfter: typeof retryAfter === 'string' ? retryAfter : null,
    };
  } catch (e) {
    const error = e as { name?: string; code?: string; cause?: { code?: string }; message?: string };
    const code = error.code ?? error.cause?.code ?? error.name ?? 'error';
    if (code === 'ECONNREFUSED' || code === 'EHOSTUNREACH' || code === 'ENETUNREACH' || code === 'EADDRNOTAVAIL')
      return { kind: 'not-sent', error: code };
    if (
      error.name === 'TimeoutError' ||
      error.name === 'AbortError' ||
      code === 'UND_ERR_HEADERS_TIMEOUT' ||
      code === 'UND_ERR_BODY_TIMEOUT'
    )
      return { kind: 'unknown', error: 'timeout' };
    return { kind: 'unknown', error: code };
  }
}

/** The error code of a JSON error body ({"error": {"code", "message"}}), if any. */
export function errorCode(body: unknown): string | null {
  const code = (body as { error?: { code?: unknown } } | null)?.error?.code;
  return typeof code === 'string' ? code : null;
}

function errorMessage(body: unknown): string {
  const message = (body as { error?: { message?: unknown } } | null)?.error?.message;
  return typeof message === 'string' ? message : '';
}

/**
 * How a write's failure is recorded: `fail` when the service certainly did not apply it (not sent; a 4xx; a
 * 503 refusing before proposing because no leader is known), `info` when it may have (timeouts, resets, a 503
 * after proposing: "not committed in time", "shutting down").
 */
export function writeFailure(outcome: HttpOutcome): { type: 'fail' | 'info'; error: string } {
  if (outcome.kind === 'not-sent') return { type: 'fail', error: outcome.error };
  if (outcome.kind === 'unknown') return { type: 'info', error: outcome.error };
  const code = errorCode(outcome.body) ?? `http_${outcome.status}`;
  if (outcome.status >= 400 && outcome.status < 500) return { type: 'fail', error: code };
  if (outcome.status === 503 && errorMessage(outcome.body).startsWith('no leader is known'))
    return { type: 'fail', error: 'no_leader' };
  return { type: 'info', error: code };
}

/** Reads change nothing, so any failure to read is recorded as `fail` (Jepsen does the same). */
export function readFailure(outcome: HttpOutcome): { type: 'fail'; error: string } {
  if (outcome.kind !== 'response') return { type: 'fail', error: outcome.error };
  return { type: 'fail', error: errorCode(outcome.body) ?? `http_${outcome.status}` };
}

export async function closeHttp(): Promise<void> {
  const closing = agent;
  agent = null;
  await closing?.destroy().catch(() => {});
}
