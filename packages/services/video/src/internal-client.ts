/**
 * How the app tier and the workers reach the metadata members (ClusterClient: writes to the leader, reads failed
 * over) and the object store (plain HTTP with the cluster token). Non-2xx answers become HttpErrors with the same
 * status and body, so an app-tier handler can let a member's or the store's 4xx through unchanged.
 */
import { clusterUrl, ClusterClient, errorBody, HttpError, unavailable, type PeerAddress } from '@raftkit/http';
import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import { Agent, request } from 'undici';
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
type ResultOf<K extends VideoCommand['op'], R = VideoResult> = R extends { op: infer O }
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

/** One object-store worker as a client sees it. */
export interface StoreEndpoint {
  id: string;
  url: string;
}

/**
 * The object stores (README "Object replication"): each call goes to one store and, when that one cannot answer
 * (unreachable, a 5xx, a corrupt copy, or a 404 for a read: it may not be a replica of the key), to the next. The
 * store reached coordinates the write to the key's replicas, so a writer needs no placement; a reader is given the
 * placement (`prefer`) to ask the replicas first. Reads are checked against the store's `x-content-sha256`.
 */
export class StoreClient {
  private readonly agent = new Agent({ connections: 16, keepAliveTimeout: 10_000 });
  readonly stores: StoreEndpoint[];
  /** The store that answered last: tried first next time (a dead store costs one refused connection, once). */
  private last = 0;

  constructor(
    stores: string | readonly StoreEndpoint[],
    private readonly token: string,
  ) {
    this.stores = typeof stores === 'string' ? [{ id: 'store1', url: stores }] : [...stores];
    if (this.stores.length === 0) throw new Error('StoreClient: no object store');
  }

  /** The first store's URL (single-store callers). */
  get baseUrl(): string {
    return this.stores[0]!.url;
  }

  /** The stores in the order to try: the preferred ids (a placement) first, then the last that answered. */
  order(prefer?: readonly string[] | null): StoreEndpoint[] {
    const rotated = [...this.stores.slice(this.last), ...this.stores.slice(0, this.last)];
    if (prefer === undefined || prefer === null) return rotated;
    const first = rotated.filter((s) => prefer.includes(s.id));
    return [...first, ...rotated.filter((s) => !prefer.includes(s.id))];
  }

  private answered(store: StoreEndpoint): void {
    this.last = Math.max(0, this.stores.indexOf(store));
  }

  /** A JSON call to one store by URL (no failover): its HttpError as it is. */
  async jsonAt<T>(baseUrl: string, method: string, path: string, body?: object, timeoutMs = 300_000): Promise<T> {
    let res;
    try {
      res = await request(baseUrl + path, {
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
    const parsed = safe(text);
    if (res.statusCode >= 300) throw errorOf(res.statusCode, parsed, 'the object store');
    return parsed as T;
  }

  /**
   * A JSON call to the first store that answers (the next on unreachable or a 5xx; a 4xx is the answer). `prefer`:
   * a placement, tried first.
   */
  async json<T>(
    method: string,
    path: string,
    body?: object,
    timeoutMs = 300_000,
    prefer?: readonly string[] | null,
  ): Promise<T> {
    let last: unknown = null;
    for (const store of this.order(prefer)) {
      try {
        const answer = await this.jsonAt<T>(store.url, method, path, body, timeoutMs);
        this.answered(store);
        return answer;
      } catch (error) {
        if (error instanceof HttpError && error.status < 500) throw error;
        last = error;
      }
    }
    throw last;
  }

  /**
   * Stores an object (a worker's output): the store reached forwards it to the key's replicas and answers once a
   * majority holds it. `body` is a factory so a retry on the next store sends the bytes again.
   */
  async put(
    key: string,
    body: Buffer | string | (() => Readable),
    prefer?: readonly string[] | null,
  ): Promise<{ key: string; size: number; sha256: string }> {
    let last: unknown = null;
    for (const store of this.order(prefer)) {
      try {
        const res = await request(`${store.url}/objects/${key}`, {
          method: 'PUT',
          headers: { authorization: `Bearer ${this.token}` },
          body: typeof body === 'function' ? body() : body,
          dispatcher: this.agent,
          headersTimeout: 300_000,
          bodyTimeout: 300_000,
        });
        const text = await res.body.text();
        if (res.statusCode === 200) {
          this.answered(store);
          return JSON.parse(text) as { key: string; size: number; sha256: string };
        }
        const error = errorOf(res.statusCode, safe(text), 'the object store');
        if (res.statusCode < 500) throw error;
        last = error;
      } catch (error) {
        if (error instanceof HttpError && error.status < 500) throw error;
        last = error;
      }
    }
    throw last instanceof HttpError ? last : unavailable(`no object store took ${key}: ${String(last)}`, 1);
  }

  /**
   * An object's bytes as a stream, or null when no store has it. The stream fails at its end when the bytes do not
   * hash to the store's `x-content-sha256` (a copy gone bad while it streamed; the store repairs it).
   */
  async get(key: string, prefer?: readonly string[] | null): Promise<Readable | null> {
    let failure: unknown = null;
    for (const store of this.order(prefer)) {
      let res;
      try {
        res = await request(`${store.url}/objects/${key}`, {
          method: 'GET',
          headers: { authorization: `Bearer ${this.token}` },
          dispatcher: this.agent,
          headersTimeout: 60_000,
          bodyTimeout: 300_000,
        });
      } catch (error) {
        failure = error;
        continue;
      }
      if (res.statusCode === 404) {
        await res.body.dump();
        continue;
      }
      if (res.statusCode !== 200) {
        failure = errorOf(res.statusCode, safe(await res.body.text()), 'the object store');
        continue;
      }
      this.answered(store);
      const expected = res.headers['x-content-sha256'];
      if (typeof expected !== 'string') return res.body;
      const hash = createHash('sha256');
      const source = res.body;
      return Readable.from(
        (async function* () {
          for await (const chunk of source as AsyncIterable<Buffer>) {
            hash.update(chunk);
            yield chunk;
          }
          if (hash.digest('hex') !== expected) throw new Error(`${key}: the bytes read do not match their sha256`);
        })(),
      );
    }
    if (failure !== null && failure instanceof HttpError) throw failure;
    if (failure !== null) throw unavailable(`the object stores are unreachable: ${String(failure)}`, 1);
    return null;
  }

  close(): Promise<void> {
    return this.agent.close();
  }
}

/** The object stores of a cluster, from a worker's view of it (role `store`, in start order). */
export function storeEndpoints(workers: readonly PeerAddress[], role = 'store'): StoreEndpoint[] {
  return workers.filter((w) => w.role === role).map((w) => ({ id: w.id, url: `http://${w.httpAddress}` }));
}

function safe(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return null;
  }
}
