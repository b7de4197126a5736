/**
 * How the app tier and the workers reach the metadata members (ClusterClient: writes to the leader, reads failed
 * over) and the object store (plain HTTP with the cluster token). Non-2xx answers become HttpErrors with the same
 * status and body, so an app-tier handler can let a member's or the store's 4xx through unchanged.
 */
import { clusterUrl, ClusterClient, errorBody, HttpError, unavailable, type PeerAddress } from '@raftkit/http';
import { Agent, request } from 'undici';
import type { Readable } from 'node:stream';
import type { VideoCommand, VideoResult } from './machine.js';

function errorOf(status: number, body: unknown, what: string): HttpError {
  const e = errorBody(body);
  if (e !== undefined && typeof e.code === 'string') {
    const { code, message, ...rest } = e;
    return new HttpError(
      status,
      code,
      String(message ?? `${what} answered ${status}`),
      rest,
      status === 503 ? { 'retry-after': '1' } : {},
    );
  }
  return new HttpError(status >= 500 ? 502 : status, 'upstream_error', `${what} answered ${status}`);
}

/** The result of a command of op K (some results share one shape for several ops). */
export type ResultOf<K extends VideoCommand['op'], R = VideoResult> = R extends { op: infer O }
  ? K extends O
    ? R
    : never
  : never;

export class MetaClient {
  private readonly client: ClusterClient;

  constructor(members: readonly PeerAddress[], token: string, preferred = 0) {
    this.client = new ClusterClient({
      endpoints: members.map((m) => clusterUrl(m.httpAddress)),
      ids: members.map((m) => m.id),
      token,
      preferred,
      timeoutMs: 15_000,
    });
  }

  async command<K extends VideoCommand['op']>(command: Extract<VideoCommand, { op: K }>): Promise<ResultOf<K>> {
    return (await this.call('POST', '/internal/video/commands', command)) as ResultOf<K>;
  }

  async get<T>(path: string): Promise<T> {
    return (await this.call('GET', path)) as T;
  }

  /** GET that answers null for a 404. */
  async find<T>(path: string): Promise<T | null> {
    try {
      return await this.get<T>(path);
    } catch (error) {
      if (error instanceof HttpError && error.status === 404) return null;
      throw error;
    }
  }

  private async call(method: string, path: string, body?: object): Promise<unknown> {
    let answer;
    try {
      answer = await this.client.request(method, path, body);
    } catch (error) {
      throw unavailable(`the metadata members are unreachable: ${(error as Error).message}`, 1);
    }
    if (answer.status >= 300) throw errorOf(answer.status, answer.body, 'the metadata members');
    return answer.body;
  }

  close(): Promise<void> {
    return this.client.close();
  }
}

export class StoreClient {
  private readonly agent = new Agent({ connections: 16, keepAliveTimeout: 10_000 });

  constructor(
    readonly baseUrl: string,
    private readonly token: string,
  ) {}

  async json<T>(method: string, path: string, body?: object, timeoutMs = 300_000): Promise<T> {
    let res;
    try {
      res = await request(this.baseUrl + path, {
        method: method as 'GET',
        headers: {
          authorization: `Bearer ${this.token}`,
          ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
        dispatcher: this.agent,
        headersTimeout: timeoutMs,
        bodyTimeout: timeoutMs,
      });
    } catch (error) {
      throw unavailable(`the object store is unreachable: ${(error as Error).message}`, 1);
    }
    const text = await res.body.text();
    const parsed = text.length > 0 ? (JSON.parse(text) as unknown) : null;
    if (res.statusCode >= 300) throw errorOf(res.statusCode, parsed, 'the object store');
    return parsed as T;
  }

  /** Stores an object (a worker's output) from a stream or bytes. */
  async put(key: string, body: Readable | Buffer | string): Promise<{ key: string; size: number; sha256: string }> {
    const res = await request(`${this.baseUrl}/objects/${key}`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${this.token}` },
      body,
      dispatcher: this.agent,
      headersTimeout: 300_000,
      bodyTimeout: 300_000,
    });
    const text = await res.body.text();
    if (res.statusCode !== 200) throw errorOf(res.statusCode, safe(text), 'the object store');
    return JSON.parse(text) as { key: string; size: number; sha256: string };
  }

  /** An object's bytes as a stream, or null when there is none. */
  async get(key: string): Promise<Readable | null> {
    const res = await request(`${this.baseUrl}/objects/${key}`, {
      method: 'GET',
      headers: { authorization: `Bearer ${this.token}` },
      dispatcher: this.agent,
      headersTimeout: 60_000,
      bodyTimeout: 300_000,
    });
    if (res.statusCode === 404) {
      await res.body.dump();
      return null;
    }
    if (res.statusCode !== 200) throw errorOf(res.statusCode, safe(await res.body.text()), 'the object store');
    return res.body;
  }

  close(): Promise<void> {
    return this.agent.close();
  }
}

function safe(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return null;
  }
}
