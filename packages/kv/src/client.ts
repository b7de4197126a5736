/**
 * A typed client for the key-value service. It talks to any member, moves to another on 503 or a connection
 * error, and sends writes inside a client session so a retried write applies once.
 */
import { request } from 'undici';

export interface KvClientOptions {
  /** Base URLs of the members, e.g. http://127.0.0.1:8001 */
  endpoints: string[];
  token: string;
  /** Give up after this long per call. Default 15 s. */
  timeoutMs?: number;
}

export interface KvValue {
  key: string;
  value: string;
  revision: number;
}

export class KvError extends Error {
  override name = 'KvError';
  constructor(readonly status: number, readonly code: string, message: string, readonly body: unknown) {
    super(message);
  }
}

export class KvClient {
  private next = 0;
  private session: { client: string; seq: number } | null = null;
  private readonly timeoutMs: number;

  constructor(private readonly options: KvClientOptions) {
    if (options.endpoints.length === 0) throw new TypeError('at least one endpoint is needed');
    this.timeoutMs = options.timeoutMs ?? 15_000;
  }

  async put(key: string, value: string): Promise<{ revision: number }> {
    return (await this.write('PUT', kvPath(key), value)) as { revision: number };
  }

  async get(key: string, consistency: 'linearizable' | 'serializable' = 'linearizable'): Promise<KvValue | null> {
    try {
      return (await this.call('GET', `${kvPath(key)}?consistency=${consistency}`)) as KvValue;
    } catch (e) {
      if (e instanceof KvError && e.status === 404) return null;
      throw e;
    }
  }

  async delete(key: string): Promise<boolean> {
    try {
      await this.write('DELETE', kvPath(key));
      return true;
    } catch (e) {
      if (e instanceof KvError && e.status === 404) return false;
      throw e;
    }
  }

  /** Compare-and-set: true when the value was `from` and is now `to`; false on mismatch. */
  async cas(key: string, from: string | null, to: string | null): Promise<boolean> {
    try {
      await this.write('POST', `${kvPath(key)}/cas`, JSON.stringify({ from, to }));
      return true;
    } catch (e) {
      if (e instanceof KvError && e.status === 409 && e.code === 'cas_mismatch') return false;
      throw e;
    }
  }

  private async write(method: string, path: string, body?: string): Promise<unknown> {
    if (this.session === null) {
      const opened = (await this.call('POST', '/v1/client-sessions')) as { client_id: string };
      this.session = { client: opened.client_id, seq: 0 };
    }
    const seq = ++this.session.seq;
    // One request at a time per client, so everything below seq is answered.
    return this.call(method, path, body, { 'client-id': this.session.client, 'client-seq': String(seq), 'client-ack': String(seq - 1) });
  }

  /** One call, retried on other members while the answer is 503 or the connection fails. */
  private async call(method: string, path: string, body?: string, headers: Record<string, string> = {}): Promise<unknown> {
    const deadline = Date.now() + this.timeoutMs;
    let lastError: Error = new Error('no attempt made');
    for (let attempt = 0; Date.now() < deadline; attempt++) {
      const endpoint = this.options.endpoints[this.next % this.options.endpoints.length]!;
      try {
        const res = await request(endpoint + path, {
          method: method as 'GET',
          body,
          headers: { authorization: `Bearer ${this.options.token}`, ...headers },
          headersTimeout: Math.max(1, deadline - Date.now()),
          bodyTimeout: Math.max(1, deadline - Date.now()),
        });
        const text = await res.body.text();
        const parsed: unknown = text.length > 0 ? JSON.parse(text) : null;
        if (res.statusCode < 300) return parsed;
        const err = (parsed as { error?: { code?: string; message?: string } } | null)?.error;
        lastError = new KvError(res.statusCode, err?.code ?? 'unknown', err?.message ?? `HTTP ${res.statusCode}`, parsed);
        if (res.statusCode !== 503) throw lastError;
      } catch (e) {
        if (e instanceof KvError && e.status !== 503) throw e;
        lastError = e as Error;
      }
      this.next++;
      await new Promise((r) => setTimeout(r, Math.min(500, 20 * 2 ** Math.min(attempt, 5))));
    }
    throw lastError;
  }
}

function kvPath(key: string): string {
  return `/v1/kv/${encodeURIComponent(key)}`;
}
