/**
 * A typed client for the key-value service. It talks to any member, moves to another on 503 or a connection
 * error, and sends writes inside a client session so a retried write applies once.
 */
import { ClusterClient, ServiceError } from '@raftkit/http';

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

/** An error answer from the service (status, code, message): the shared ServiceError, under the kv name. */
export { ServiceError as KvError };

export class KvClient {
  private session: { client: string; seq: number } | null = null;
  private readonly http: ClusterClient;

  constructor(options: KvClientOptions) {
    this.http = new ClusterClient(options);
  }

  /** Close the connections to the members. */
  close(): Promise<void> {
    return this.http.close();
  }

  async put(key: string, value: string): Promise<{ revision: number }> {
    return (await this.write('PUT', kvPath(key), value)) as { revision: number };
  }

  async get(key: string, consistency: 'linearizable' | 'serializable' = 'linearizable'): Promise<KvValue | null> {
    try {
      return (await this.call('GET', `${kvPath(key)}?consistency=${consistency}`)) as KvValue;
    } catch (e) {
      if (e instanceof ServiceError && e.status === 404) return null;
      throw e;
    }
  }

  async delete(key: string): Promise<boolean> {
    try {
      await this.write('DELETE', kvPath(key));
      return true;
    } catch (e) {
      if (e instanceof ServiceError && e.status === 404) return false;
      throw e;
    }
  }

  /** Compare-and-set: true when the value was `from` and is now `to`; false on mismatch. */
  async cas(key: string, from: string | null, to: string | null): Promise<boolean> {
    try {
      await this.write('POST', `${kvPath(key)}/cas`, JSON.stringify({ from, to }));
      return true;
    } catch (e) {
      if (e instanceof ServiceError && e.status === 409 && e.code === 'cas_mismatch') return false;
      throw e;
    }
  }

  private async write(method: string, path: string, body?: string): Promise<unknown> {
    try {
      return await this.writeInSession(method, path, body);
    } catch (e) {
      if (!(e instanceof ServiceError && e.status === 410 && e.code === 'unknown_session')) throw e;
      // The session expired while this client was idle (the cluster forgets sessions unused for its session
      // timeout, 10 minutes by default). The refused write was not applied: an expired session applies nothing,
      // and a send of this write that did apply would have kept the session alive (retries end well within the
      // timeout). So it goes once more, in a new session.
      this.session = null;
      return this.writeInSession(method, path, body);
    }
  }

  private async writeInSession(method: string, path: string, body?: string): Promise<unknown> {
    if (this.session === null) {
      const opened = (await this.call('POST', '/v1/client-sessions')) as { client_id: string };
      this.session = { client: opened.client_id, seq: 0 };
    }
    const seq = ++this.session.seq;
    // One request at a time per client, so everything below seq is answered.
    return this.call(method, path, body, {
      'client-id': this.session.client,
      'client-seq': String(seq),
      'client-ack': String(seq - 1),
    });
  }

  private call(method: string, path: string, body?: string, headers: Record<string, string> = {}): Promise<unknown> {
    return this.http.call(method, path, body, headers);
  }
}

function kvPath(key: string): string {
  return `/v1/kv/${encodeURIComponent(key)}`;
}
