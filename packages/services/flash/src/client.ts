/**
 * A small client of the flash-deal surface (the gateways), for tests, the jepsen-like workload and the benchmark.
 * Each call goes to one gateway (`gateway` index, default round robin) and returns the status and parsed body as they
 * came: callers check answers, this client does not hide them. `solve` runs the bot check (challenge, proof of work,
 * answer) and keeps the anti-bot token for the user's later attempts.
 */
import { Agent, request } from 'undici';
import { solveChallenge } from './workers/gateway/tokens.js';

export interface FlashClientOptions {
  /** Gateways' base URLs (http://host:port). */
  gateways: string[];
  /** The cluster token (admin calls). */
  token: string;
  timeoutMs?: number;
  connections?: number;
}

export interface FlashAnswer {
  status: number;
  body: Record<string, unknown>;
  headers: Record<string, string | string[] | undefined>;
}

export interface CallOptions {
  /** Which gateway (index into `gateways`); default round robin. */
  gateway?: number;
  /** Bearer token; default none. */
  bearer?: string | null;
  headers?: Record<string, string>;
}

export class FlashClient {
  private readonly agent: Agent;
  private next = 0;
  /** (deal, user) -> anti-bot token. */
  private readonly botTokens = new Map<string, string>();

  constructor(private readonly options: FlashClientOptions) {
    if (options.gateways.length === 0) throw new TypeError('at least one gateway is needed');
    this.agent = new Agent({ connections: options.connections ?? 64, keepAliveTimeout: 10_000 });
  }

  async call(method: string, path: string, body?: unknown, opts: CallOptions = {}): Promise<FlashAnswer> {
    const gateways = this.options.gateways;
    const base = gateways[opts.gateway ?? this.next++ % gateways.length]!;
    const headers: Record<string, string> = { ...(opts.headers ?? {}) };
    if (opts.bearer !== undefined && opts.bearer !== null) headers.authorization = `Bearer ${opts.bearer}`;
    const payload = body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body);
    if (payload !== undefined) headers['content-type'] = 'application/json';
    const timeout = this.options.timeoutMs ?? 30_000;
    const res = await request(base + path, {
      method: method as 'GET',
      headers,
      body: payload,
      dispatcher: this.agent,
      headersTimeout: timeout,
      bodyTimeout: timeout,
    });
    const text = await res.body.text();
    let parsed: Record<string, unknown> = {};
    if (text.length > 0) {
      try {
        const v = JSON.parse(text) as unknown;
        parsed = typeof v === 'object' && v !== null ? (v as Record<string, unknown>) : { value: v };
      } catch {
        parsed = { text };
      }
    }
    return { status: res.statusCode, body: parsed, headers: res.headers };
  }

  /** POST /api/flash/deals (cluster token): the new deal's id. */
  async createDeal(deal: {
    sku_id: string;
    total_inventory: number;
    start_at: string | number;
    end_at: string | number;
    shards: number;
  }): Promise<string> {
    const a = await this.call('POST', '/api/flash/deals', deal, { bearer: this.options.token });
    if (a.status !== 201) throw new Error(`create deal: ${a.status} ${JSON.stringify(a.body)}`);
    return a.body.deal_id as string;
  }

  /** PUT /api/flash/accounts/{user_id} (cluster token): the user's bearer token. */
  async register(userId: string, createdAt: number | string, paymentVerified: boolean): Promise<string> {
    const a = await this.call(
      'PUT',
      `/api/flash/accounts/${encodeURIComponent(userId)}`,
      { created_at: createdAt, payment_verified: paymentVerified },
      { bearer: this.options.token },
    );
    if (a.status !== 200) throw new Error(`register: ${a.status} ${JSON.stringify(a.body)}`);
    return a.body.user_token as string;
  }

  /** The bot check: challenge, proof of work, answer. Returns the anti-bot token (also kept for `attempt`). */
  async solve(dealId: string, userId: string, opts: CallOptions = {}): Promise<string> {
    const c = await this.call('POST', `/api/flash/${dealId}/challenge`, { user_id: userId }, opts);
    if (c.status !== 200) throw new Error(`challenge: ${c.status} ${JSON.stringify(c.body)}`);
    const challenge = c.body.challenge as string;
    const nonce = solveChallenge(challenge, c.body.difficulty as number);
    const a = await this.call(
      'POST',
      `/api/flash/${dealId}/challenge/answer`,
      { user_id: userId, challenge, nonce },
      opts,
    );
    if (a.status !== 200) throw new Error(`answer: ${a.status} ${JSON.stringify(a.body)}`);
    const token = a.body.anti_bot_token as string;
    this.botTokens.set(`${dealId}\u0000${userId}`, token);
    return token;
  }

  /** POST /api/flash/{deal_id}/attempt with the user's token and the anti-bot token `solve` kept. */
  attempt(
    dealId: string,
    userId: string,
    key: string,
    userToken: string,
    opts: CallOptions = {},
  ): Promise<FlashAnswer> {
    const botToken = this.botTokens.get(`${dealId}\u0000${userId}`);
    return this.call(
      'POST',
      `/api/flash/${dealId}/attempt`,
      { user_id: userId, idempotency_key: key, anti_bot_token: botToken },
      { bearer: userToken, ...opts },
    );
  }

  checkout(
    dealId: string,
    reservationId: string,
    key: string,
    userToken: string,
    paymentMethod = 'card',
    opts: CallOptions = {},
  ): Promise<FlashAnswer> {
    return this.call(
      'POST',
      `/api/flash/${dealId}/checkout`,
      { reservation_id: reservationId, payment_method: paymentMethod, idempotency_key: key },
      { bearer: userToken, ...opts },
    );
  }

  state(dealId: string, opts: CallOptions = {}): Promise<FlashAnswer> {
    return this.call('GET', `/api/flash/${dealId}/state`, undefined, opts);
  }

  reservation(dealId: string, reservationId: string, bearer: string, opts: CallOptions = {}): Promise<FlashAnswer> {
    return this.call('GET', `/api/flash/${dealId}/reservations/${encodeURIComponent(reservationId)}`, undefined, {
      bearer,
      ...opts,
    });
  }

  async close(): Promise<void> {
    await this.agent.close();
  }
}
