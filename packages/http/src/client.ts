/**
 * The HTTP side of every service client: calls any member with the bearer token, and on a 503 or a connection
 * failure moves on to the next member with backoff, until a deadline. Other errors come back as ServiceError.
 */
import { request } from 'undici';

export interface ClusterClientOptions {
  /** Base URLs of the members, e.g. http://127.0.0.1:7101 */
  endpoints: string[];
  token: string;
  /** Give up after this long per call. Default 15 s. */
  timeoutMs?: number;
}

export class ServiceError extends Error {
  override name = 'ServiceError';
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly body: unknown,
  ) {
    super(message);
  }
}

export class ClusterClient {
  private next = 0;
  readonly timeoutMs: number;

  constructor(private readonly options: ClusterClientOptions) {
    if (options.endpoints.length === 0) throw new TypeError('at least one endpoint is needed');
    this.timeoutMs = options.timeoutMs ?? 15_000;
  }

  /** One call, retried on other members while the answer is 503 or the connection fails. */
  async call(method: string, path: string, body?: string | object, headers: Record<string, string> = {}, timeoutMs = this.timeoutMs): Promise<unknown> {
    const deadline = Date.now() + timeoutMs;
    const payload = body === undefined || typeof body === 'string' ? body : JSON.stringify(body);
    let lastError: Error = new Error('no attempt made');
    for (let attempt = 0; Date.now() < deadline; attempt++) {
      const endpoint = this.options.endpoints[this.next % this.options.endpoints.length]!;
      try {
        const remaining = Math.max(1, deadline - Date.now());
        const res = await request(endpoint + path, {
          method: method as 'GET',
          body: payload,
          headers: { authorization: `Bearer ${this.options.token}`, ...(payload !== undefined && typeof body === 'object' ? { 'content-type': 'application/json' } : {}), ...headers },
          headersTimeout: remaining,
          bodyTimeout: remaining,
        });
        const text = await res.body.text();
        const parsed: unknown = text.length > 0 ? safeJson(text) : null;
        if (res.statusCode < 300) return parsed;
        const err = (parsed as { error?: { code?: string; message?: string } } | null)?.error;
        lastError = new ServiceError(res.statusCode, err?.code ?? 'unknown', err?.message ?? `HTTP ${res.statusCode}`, parsed);
        if (res.statusCode !== 503) throw lastError;
      } catch (e) {
        if (e instanceof ServiceError && e.status !== 503) throw e;
        lastError = e as Error;
      }
      this.next++;
      await new Promise((r) => setTimeout(r, Math.min(500, 20 * 2 ** Math.min(attempt, 5))));
    }
    throw lastError;
  }
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}
