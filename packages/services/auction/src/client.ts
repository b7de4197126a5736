/**
 * A client of the auction service's public surface (the gateways): create auctions, issue bidder tokens, bid,
 * read, list, watch. Used by the tests, the jepsen-like workload and the benchmark. It spreads calls over the
 * gateways it is given and moves to the next one when a gateway does not answer; `bid` resubmits a 503 (writer
 * failing over) with the same idempotency key until its deadline, as the spec tells bidders to.
 */
import { Pool } from 'undici';
import WebSocket from 'ws';
import { ServiceError } from '@raftkit/http';
import type { AuctionBody, BidBody, ServerMessage } from './wire.js';

export interface AuctionClientOptions {
  /** Gateway base URLs, e.g. http://127.0.0.1:8441 */
  endpoints: string[];
  /** The cluster token (needed for createAuction and registerBidder only). */
  token?: string;
  /** Per call, retries included. Default 15 s. */
  timeoutMs?: number;
  connections?: number;
}

export interface CreateAuctionRequest {
  item_id: string;
  seller_id: string;
  start_price: number;
  reserve_price?: number | null;
  min_increment?: number;
  /** Epoch ms or ISO-8601. */
  start_at: number | string;
  end_at: number | string;
  anti_snipe_window_s: number;
}

export interface BidRequest {
  bidder_id: string;
  bidder_token: string;
  amount: number;
  max_proxy_amount?: number | null;
  idempotency_key: string;
}

/** One HTTP answer as it came (the proof tools want the 503s and 429s too). */
export interface Answer<T = unknown> {
  http: number;
  body: T;
  retryAfter: string | null;
}

export interface Watch {
  /** Every message received, in order. */
  readonly messages: ServerMessage[];
  /** The first message (from the start) matching `pred`, waiting up to `timeoutMs` for it. */
  next(pred: (m: ServerMessage) => boolean, timeoutMs?: number): Promise<ServerMessage>;
  close(): void;
}

export class AuctionClient {
  private readonly pools: Pool[];
  private turn = 0;
  readonly timeoutMs: number;

  constructor(private readonly options: AuctionClientOptions) {
    if (options.endpoints.length === 0) throw new TypeError('at least one gateway endpoint is needed');
    this.pools = options.endpoints.map(
      (u) => new Pool(u, { connections: options.connections ?? 16, keepAliveTimeout: 30_000 }),
    );
    this.timeoutMs = options.timeoutMs ?? 15_000;
  }

  async registerBidder(bidderId: string): Promise<string> {
    const body = (await this.ok('POST', '/api/bidders', { bidder_id: bidderId }, true)) as { bidder_token: string };
    return body.bidder_token;
  }

  async createAuction(req: CreateAuctionRequest): Promise<AuctionBody & { auction_id: string }> {
    return (await this.ok('POST', '/api/auctions', req, true)) as AuctionBody;
  }

  /** One bid; a 503 is resubmitted with the same key until the deadline. Non-2xx answers throw ServiceError. */
  async bid(auctionId: string, req: BidRequest): Promise<BidBody> {
    const deadline = Date.now() + this.timeoutMs;
    for (;;) {
      const a = await this.bidOnce(auctionId, req).catch(
        (e: unknown) =>
          ({ http: 0, body: { error: { code: 'unreachable', message: String(e) } }, retryAfter: '1' }) as Answer,
      );
      if (a.http >= 200 && a.http < 300) return a.body as BidBody;
      if ((a.http === 503 || a.http === 0) && Date.now() < deadline) {
        await sleep(Math.min(1000, Number(a.retryAfter ?? '1') * 250));
        continue;
      }
      throw errorOf(a);
    }
  }

  /** One bid, one attempt, the answer as it came. */
  bidOnce(auctionId: string, req: BidRequest): Promise<Answer> {
    return this.request('POST', `/api/auctions/${encodeURIComponent(auctionId)}/bids`, req, false);
  }

  async get(auctionId: string, options: { history?: 'all' } = {}): Promise<AuctionBody> {
    return (await this.ok(
      'GET',
      `/api/auctions/${encodeURIComponent(auctionId)}${options.history === 'all' ? '?history=all' : ''}`,
    )) as AuctionBody;
  }

  async list(state?: 'live' | 'closed' | 'scheduled'): Promise<AuctionBody[]> {
    const body = (await this.ok('GET', `/api/auctions${state === undefined ? '' : `?state=${state}`}`)) as {
      auctions: AuctionBody[];
    };
    return body.auctions;
  }

  /** Opens /ws/auctions/{id} on a gateway (round robin, or `gateway`), subscribes, and records every message. */
  watch(auctionId: string, gateway?: number): Promise<Watch> {
    const base = this.options.endpoints[gateway ?? this.turn++ % this.options.endpoints.length]!;
    const ws = new WebSocket(`${base.replace(/^http/, 'ws')}/ws/auctions/${encodeURIComponent(auctionId)}`);
    const messages: ServerMessage[] = [];
    const waiters = new Set<() => void>();
    ws.on('message', (data) => {
      try {
        messages.push(JSON.parse(String(data)) as ServerMessage);
      } catch {
        return;
      }
      for (const w of waiters) w();
    });
    return new Promise((resolve, reject) => {
      ws.once('error', reject);
      ws.once('open', () => {
        ws.send(JSON.stringify({ type: 'subscribe' }));
        resolve({
          messages,
          next(pred, timeoutMs = 20_000) {
            return new Promise((res, rej) => {
              const check = (): boolean => {
                const found = messages.find(pred);
                if (found === undefined) return false;
                waiters.delete(probe);
                clearTimeout(timer);
                res(found);
                return true;
              };
              const probe = (): void => void check();
              const timer = setTimeout(() => {
                waiters.delete(probe);
                rej(
                  new Error(
                    `no matching message on ${auctionId} within ${timeoutMs} ms (got ${JSON.stringify(messages).slice(0, 500)})`,
                  ),
                );
              }, timeoutMs);
              waiters.add(probe);
              check();
            });
          },
          close: () => ws.terminate(),
        });
      });
    });
  }

  async close(): Promise<void> {
    await Promise.all(this.pools.map((p) => p.close()));
  }

  private async ok(method: string, path: string, body?: object, auth = false): Promise<unknown> {
    const deadline = Date.now() + this.timeoutMs;
    for (;;) {
      let a: Answer;
      try {
        a = await this.request(method, path, body, auth);
      } catch (error) {
        if (Date.now() >= deadline) throw error;
        await sleep(200);
        continue;
      }
      if (a.http >= 200 && a.http < 300) return a.body;
      if (a.http === 503 && Date.now() < deadline) {
        await sleep(250);
        continue;
      }
      throw errorOf(a);
    }
  }

  /** One attempt on the next gateway (a connection failure moves on to the others before giving up). */
  private async request(method: string, path: string, body: object | undefined, auth: boolean): Promise<Answer> {
    let last: unknown = null;
    for (let i = 0; i < this.pools.length; i++) {
      const pool = this.pools[this.turn++ % this.pools.length]!;
      const headers: Record<string, string> = {};
      if (auth && this.options.token !== undefined) headers.authorization = `Bearer ${this.options.token}`;
      if (body !== undefined) headers['content-type'] = 'application/json';
      try {
        const res = await pool.request({
          method: method as 'GET',
          path,
          headers,
          body: body === undefined ? undefined : JSON.stringify(body),
          headersTimeout: this.timeoutMs,
          bodyTimeout: this.timeoutMs,
        });
        const text = await res.body.text();
        const retry = res.headers['retry-after'];
        return {
          http: res.statusCode,
          body: text.length > 0 ? (JSON.parse(text) as unknown) : null,
          retryAfter: typeof retry === 'string' ? retry : null,
        };
      } catch (error) {
        last = error;
      }
    }
    throw last;
  }
}

function errorOf(a: Answer): ServiceError {
  const e = (a.body as { error?: { code?: string; message?: string } } | null)?.error;
  return new ServiceError(a.http, e?.code ?? 'unknown', e?.message ?? `HTTP ${a.http}`, a.body);
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
