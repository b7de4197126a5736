/** A consumer's client: fetch records from an offset and keep consumer offsets on the server. */
import { StreamConnection, StreamError, type RequestBody } from './connection.js';
import type { Response } from './protocol.js';

export interface StreamClientOptions {
  address: string;
  token: string;
  /** Answer deadline for requests other than a fetch's own wait (default 5 s). */
  timeoutMs?: number;
}

export interface FetchResult {
  /** Offset of records[0]: the asked one, or the oldest retained record when the asked one was deleted. */
  offset: number;
  records: Uint8Array[];
  /** The stream's oldest retained offset and durable end when the server answered. */
  start: number;
  end: number;
}

/** Connects on first use and again after a failure; every method rejects with a StreamError when it cannot answer. */
export class StreamClient {
  private connection: Promise<StreamConnection> | undefined;
  private readonly timeoutMs: number;

  constructor(private readonly options: StreamClientOptions) {
    this.timeoutMs = options.timeoutMs ?? 5_000;
  }

  /** Up to `max` records from `offset`, waiting up to `waitMs` for `max` to exist (then answering with what does). */
  async fetch(offset: number, max: number, options: { waitMs?: number; maxBytes?: number } = {}): Promise<FetchResult> {
    const waitMs = options.waitMs ?? 0;
    const answer = await this.call({ t: 'fetch', offset, max, waitMs, ...(options.maxBytes !== undefined ? { maxBytes: options.maxBytes } : {}) }, waitMs + this.timeoutMs);
    return expect(answer, 'records');
  }

  async commit(consumer: string, offset: number): Promise<void> {
    expect(await this.call({ t: 'commit', consumer, offset }, this.timeoutMs), 'committed');
  }

  async committed(consumer: string): Promise<number | null> {
    return expect(await this.call({ t: 'committed', consumer }, this.timeoutMs), 'committed').offset;
  }

  close(): void {
    const connection = this.connection;
    this.connection = undefined;
    void connection?.then((c) => c.destroy(), () => undefined);
  }

  private async call(body: RequestBody, timeoutMs: number): Promise<Response> {
    this.connection ??= StreamConnection.open(this.options.address, this.options.token, this.timeoutMs);
    const pending = this.connection;
    try {
      const connection = await pending;
      if (connection.closed) throw new StreamError('disconnected', 'connection closed');
      return await connection.request(body, timeoutMs);
    } catch (e) {
      const broken = await pending.then((c) => c.closed, () => true);
      if (broken && this.connection === pending) this.connection = undefined;
      throw e instanceof StreamError ? e : new StreamError('disconnected', (e as Error).message);
    }
  }
}

function expect<T extends Response['t']>(response: Response, t: T): Extract<Response, { t: T }> {
  if (response.t !== t) throw new StreamError('bad_answer', `expected ${t}, got ${response.t}`);
  return response as Extract<Response, { t: T }>;
}
