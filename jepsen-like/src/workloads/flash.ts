/**
 * flash: the flash-deal service under faults, driven through its public surface (issue 16 item 9) as a crowd of
 * users would: thousands of accounts registered (PUT /api/flash/accounts/{user}, cluster token), each solves the
 * bot check before go-live (POST .../challenge, then .../challenge/answer: a nonce whose SHA-256 of
 * `challenge:nonce` starts with `difficulty` zero bits; the deal is created with a low `challenge_bits` setting),
 * then at go-live every user attempts (POST /api/flash/{deal}/attempt with their idempotency key, bearer token and
 * anti-bot token) through the gateway processes, while the nemeses kill, pause and partition the inventory members
 * (the shard groups' leaders among them).
 *
 * A user whose attempt has an unknown outcome (timeout, reset, 5xx) retries the SAME key through ANOTHER gateway
 * until answered; a refused attempt (a 429 "busy"/rate limit) is retried with the same key later. Now and then an
 * answered key is sent again through another gateway (it must get the same answer), and now and then a winner
 * tries again with a fresh key (it must get its one reservation back, never a second). After the heal every key
 * still unknown (or `queued`) is sent again until answered, every acknowledged win is read back
 * (GET /api/flash/{deal}/reservations/{id}) and the deal state read.
 *
 * The checks (flash-checks.ts): no oversell, one reservation per user, acknowledged wins present, one answer per
 * key. The variant `flash-async-inventory` runs the gateways on a deliberately broken inventory that answers a
 * decrement before it commits (../variants/answer-before-commit.ts, as the spec's rule 8 warns): the checks must
 * catch it overselling.
 */
import { createHash } from 'node:crypto';
import { Agent, request } from 'undici';
import type { HistoryEvent } from '../history.js';
import { checkFlashHistory } from './flash-checks.js';
import type { CheckResult, Completion, FinalContext, Worker, WorkerContext, Workload } from './workload.js';

interface FlashOptions {
  users: number;
  totalInventory: number;
  shards: number;
  gateways: number;
  /** Bot-check difficulty (zero bits); low so thousands of users solve it in the setup. */
  challengeBits: number;
  /** Chance, after an answer, of sending the same key again through another gateway. */
  resendProbability: number;
  /** Chance, after a win, of the winner trying again with a fresh key. */
  freshKeyProbability: number;
  /** Give a user up after this many refused (4xx) attempts in a row. */
  maxRefusals: number;
  /** Extra settings for the gateways. */
  settings: Readonly<Record<string, string>>;
  /** The gateways' entry script instead of the cluster's worker.js (the broken variant's), or null. */
  gatewayScript: string | null;
}

export const DEFAULT_FLASH_OPTIONS: FlashOptions = {
  users: 2000,
  totalInventory: 400,
  shards: 8,
  gateways: 2,
  challengeBits: 4,
  resendProbability: 0.1,
  freshKeyProbability: 0.1,
  maxRefusals: 50,
  settings: {},
  gatewayScript: null,
};

/** How many setup calls run at once (registration, challenges). */
const SETUP_CONCURRENCY = 32;
const DEAL_HOURS = 2;

interface User {
  id: string;
  /** Bearer token from the registration. */
  token: string;
  antiBotToken: string;
  /** The simulated client address (the gateway's per-IP limit sees many IPs, as in a real crowd). */
  ip: string;
  /** The key being attempted, and how many keys the user has used. */
  key: string;
  keys: number;
  /** The last answer to `key` is not known (info) or was `queued`: the key must be sent again. */
  unresolved: boolean;
  refusals: number;
  done: boolean;
  reservation: string | null;
  lastGateway: number;
}

type Reply =
  | { kind: 'response'; status: number; body: unknown; setCookie: string[] }
  | { kind: 'not-sent'; error: string }
  | { kind: 'unknown'; error: string };

/** The error code of a JSON error body, or http_STATUS. */
function codeOf(reply: Reply & { kind: 'response' }): string {
  const code = (reply.body as { error?: { code?: unknown } } | null)?.error?.code;
  return typeof code === 'string' ? code : `http_${reply.status}`;
}

/** Nonce (decimal) such that SHA-256(challenge + ":" + nonce) starts with `bits` zero bits. */
export function solveChallenge(challenge: string, bits: number): string {
  for (let nonce = 0; ; nonce++) {
    const digest = createHash('sha256').update(`${challenge}:${nonce}`).digest();
    if (leadingZeroBits(digest) >= bits) return String(nonce);
  }
}

function leadingZeroBits(digest: Buffer): number {
  let bits = 0;
  for (const byte of digest) {
    if (byte === 0) {
      bits += 8;
      continue;
    }
    return bits + Math.clz32(byte) - 24;
  }
  return bits;
}

async function pool<T>(items: readonly T[], concurrency: number, work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(concurrency, items.length) }, async () => {
      while (next < items.length) await work(items[next++]!);
    }),
  );
}

export class FlashWorkload implements Workload {
  readonly name: string;
  readonly service = 'flash';
  /** No register to check for linearizability (modelEvents is empty); the flash checks carry the verdict. */
  readonly model = 'register' as const;
  readonly workers: Readonly<Record<string, number>>;
  readonly settings: Readonly<Record<string, string>>;
  readonly workerScript?: string;
  private readonly users: User[] = [];
  private dealId: string | null = null;
  private agent: Agent | null = null;

  constructor(
    private readonly options: FlashOptions = DEFAULT_FLASH_OPTIONS,
    name = 'flash',
  ) {
    this.name = name;
    this.workers = { gateway: options.gateways };
    // The clients come from one host: the gateway takes each simulated user's address from X-Forwarded-For
    // (trust_proxy), so the per-IP limit sees a crowd; the smoke load before go-live is kept small.
    this.settings = {
      challenge_bits: String(options.challengeBits),
      trust_proxy: '1',
      expected_peak_rps: '200',
      ...options.settings,
    };
    if (options.gatewayScript !== null) this.workerScript = options.gatewayScript;
  }

  describe(): string {
    const o = this.options;
    const extra = Object.entries(o.settings)
      .map(([k, v]) => `${k}=${v}`)
      .join(' ');
    return `${o.users} users, one deal of ${o.totalInventory} units in ${o.shards} shards, ${o.gateways} gateways, challenge ${o.challengeBits} bits; unknown outcomes retried with the same key through another gateway, ${o.resendProbability * 100}% of answers re-sent, ${o.freshKeyProbability * 100}% of winners try a fresh key${extra ? `; ${extra}` : ''}${o.gatewayScript !== null ? `; gateways: ${o.gatewayScript.split('/').pop()}` : ''}`;
  }

  private dispatcher(): Agent {
    this.agent ??= new Agent({ keepAliveTimeout: 10_000, connections: 256, connect: { timeout: 3_000 } });
    return this.agent;
  }

  /** One JSON call; the outcome classified as sent-and-answered, certainly not sent, or unknown. */
  private async call(
    url: string,
    o: { method: string; token: string; body?: unknown; timeoutMs: number; cookie?: string; ip?: string },
  ): Promise<Reply> {
    const headers: Record<string, string> = { authorization: `Bearer ${o.token}` };
    if (o.body !== undefined) headers['content-type'] = 'application/json';
    if (o.cookie !== undefined) headers.cookie = o.cookie;
    if (o.ip !== undefined) headers['x-forwarded-for'] = o.ip;
    try {
      const res = await request(url, {
        method: o.method as 'GET',
        headers,
        body: o.body === undefined ? undefined : JSON.stringify(o.body),
        dispatcher: this.dispatcher(),
        signal: AbortSignal.timeout(o.timeoutMs),
      });
      const text = await res.body.text();
      let body: unknown = text;
      try {
        body = text.length > 0 ? JSON.parse(text) : null;
      } catch {
        // not JSON: keep the text
      }
      const sc = res.headers['set-cookie'];
      return {
        kind: 'response',
        status: res.statusCode,
        body,
        setCookie: sc === undefined ? [] : Array.isArray(sc) ? sc : [sc],
      };
    } catch (e) {
      const error = e as { name?: string; code?: string; cause?: { code?: string } };
      const code = error.code ?? error.cause?.code ?? error.name ?? 'error';
      if (code === 'ECONNREFUSED' || code === 'EHOSTUNREACH' || code === 'ENETUNREACH')
        return { kind: 'not-sent', error: code };
      return {
        kind: 'unknown',
        error: error.name === 'TimeoutError' || error.name === 'AbortError' ? 'timeout' : code,
      };
    }
  }

  /** A setup call retried until it answers 2xx (setup runs before any fault). */
  private async must(
    ctx: FinalContext,
    what: string,
    url: string,
    o: Parameters<FlashWorkload['call']>[1],
  ): Promise<Reply & { kind: 'response' }> {
    let last = '';
    while (Date.now() < ctx.deadline) {
      const r = await this.call(url, o);
      if (r.kind === 'response' && r.status >= 200 && r.status < 300) return r;
      last = r.kind === 'response' ? `${r.status} ${JSON.stringify(r.body).slice(0, 200)}` : r.error;
      if (r.kind === 'response' && r.status >= 400 && r.status < 500 && r.status !== 429 && r.status !== 421)
        throw new Error(`${what}: ${last}`);
      await ctx.sleep(200);
    }
    throw new Error(`${what}: no answer before the setup deadline (last: ${last})`);
  }

  private gateway(ctx: { workerUrls: readonly string[] }, index: number): string {
    if (ctx.workerUrls.length === 0) throw new Error('the flash workload needs gateway workers');
    return ctx.workerUrls[index % ctx.workerUrls.length]!;
  }

  /**
   * Registers the accounts (older than 30 days, payment verified), creates the deal going live once every user has
   * solved the bot check, solves it for every user, and waits for go-live: the clients start at go-live.
   */
  async setup(ctx: FinalContext): Promise<void> {
    const o = this.options;
    const t0 = Date.now();
    const accountAge = new Date(Date.now() - 60 * 86_400_000).toISOString();
    const gw = (i: number): string => this.gateway(ctx, i);
    for (let i = 0; i < o.users; i++) {
      const id = `u${i}`;
      this.users.push({
        id,
        token: '',
        antiBotToken: '',
        ip: `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`,
        key: `${id}-k0`,
        keys: 1,
        unresolved: false,
        refusals: 0,
        done: false,
        reservation: null,
        lastGateway: i,
      });
    }
    await pool(this.users, SETUP_CONCURRENCY, async (u) => {
      const r = await this.must(ctx, `register ${u.id}`, `${gw(u.lastGateway)}/api/flash/accounts/${u.id}`, {
        method: 'PUT',
        token: ctx.token,
        body: { created_at: accountAge, payment_verified: true },
        timeoutMs: ctx.opTimeoutMs,
      });
      const token = (r.body as { user_token?: unknown }).user_token;
      if (typeof token !== 'string') throw new Error(`register ${u.id}: no user_token in ${JSON.stringify(r.body)}`);
      u.token = token;
    });
    const registerMs = Date.now() - t0;
    // Go-live after the challenges: they take about as long as the registration did (two calls each), with room.
    const start = Date.now() + Math.max(15_000, 4 * registerMs + 10_000);
    const dealBody = {
      sku_id: 'jepsen-sku',
      total_inventory: o.totalInventory,
      start_at: new Date(start).toISOString(),
      end_at: new Date(start + DEAL_HOURS * 3_600_000).toISOString(),
      shards: o.shards,
    };
    const created = await ctx.perform({ f: 'setup-deal', value: dealBody }, async (): Promise<Completion> => {
      const r = await this.call(`${gw(0)}/api/flash/deals`, {
        method: 'POST',
        token: ctx.token,
        body: dealBody,
        timeoutMs: 10_000,
      });
      if (r.kind === 'response' && (r.status === 201 || r.status === 200)) {
        const dealId = (r.body as { deal_id?: unknown }).deal_id;
        if (typeof dealId === 'string')
          return {
            type: 'ok',
            value: {
              deal_id: dealId,
              total_inventory: o.totalInventory,
              shards: o.shards,
              start_at: dealBody.start_at,
            },
          };
      }
      return {
        type: 'fail',
        error: r.kind === 'response' ? `${r.status} ${JSON.stringify(r.body).slice(0, 300)}` : r.error,
      };
    });
    if (created.type !== 'ok') throw new Error(`could not create the deal: ${created.error ?? ''}`);
    const dealId = (created.value as { deal_id: string }).deal_id;
    this.dealId = dealId;
    await pool(this.users, SETUP_CONCURRENCY, async (u) => {
      const url = gw(u.lastGateway);
      const c = await this.must(ctx, `challenge ${u.id}`, `${url}/api/flash/${dealId}/challenge`, {
        method: 'POST',
        token: u.token,
        body: { user_id: u.id },
        timeoutMs: ctx.opTimeoutMs,
        ip: u.ip,
      });
      const { challenge, difficulty } = c.body as { challenge?: unknown; difficulty?: unknown };
      if (typeof challenge !== 'string' || typeof difficulty !== 'number')
        throw new Error(`challenge ${u.id}: ${JSON.stringify(c.body)}`);
      const nonce = solveChallenge(challenge, difficulty);
      const a = await this.must(ctx, `answer ${u.id}`, `${url}/api/flash/${dealId}/challenge/answer`, {
        method: 'POST',
        token: u.token,
        body: { user_id: u.id, challenge, nonce },
        timeoutMs: ctx.opTimeoutMs,
        ip: u.ip,
      });
      const token = (a.body as { anti_bot_token?: unknown }).anti_bot_token;
      if (typeof token !== 'string') throw new Error(`answer ${u.id}: ${JSON.stringify(a.body)}`);
      u.antiBotToken = token;
    });
    if (Date.now() > start)
      throw new Error(
        `the challenges took past go-live (${((Date.now() - start) / 1000).toFixed(1)} s late): raise the margin`,
      );
    await ctx.sleep(start - Date.now());
  }

  private attemptOnce(
    user: User,
    gatewayIndex: number,
    ctx: { workerUrls: readonly string[]; opTimeoutMs: number },
  ): () => Promise<Completion> {
    return async () => {
      const body = { user_id: user.id, idempotency_key: user.key, anti_bot_token: user.antiBotToken };
      const r = await this.call(`${this.gateway(ctx, gatewayIndex)}/api/flash/${this.dealId!}/attempt`, {
        method: 'POST',
        token: user.token,
        body,
        timeoutMs: ctx.opTimeoutMs,
        cookie: `flash_bot=${user.antiBotToken}`,
        ip: user.ip,
      });
      if (r.kind === 'not-sent') return { type: 'fail', error: r.error };
      if (r.kind === 'unknown') return { type: 'info', error: r.error };
      if (r.status === 200 || r.status === 201 || r.status === 202) {
        const v = r.body as { status?: unknown; reservation_id?: unknown; expires_at?: unknown; reason?: unknown };
        if (v.status === 'won' || v.status === 'lost' || v.status === 'queued') return { type: 'ok', value: v };
        return { type: 'info', error: `unexpected answer ${JSON.stringify(r.body).slice(0, 200)}` };
      }
      // A 4xx decided nothing (missing proof, rate limit, busy); a 5xx may have been decided behind the gateway.
      return r.status >= 400 && r.status < 500
        ? { type: 'fail', error: codeOf(r) }
        : { type: 'info', error: codeOf(r) };
    };
  }

  /** Records the answer on the user: done once its key is decided, unresolved while its outcome is unknown. */
  private settle(user: User, done: Completion): void {
    if (done.type === 'info') {
      user.unresolved = true;
      return;
    }
    if (done.type === 'fail') {
      user.refusals++;
      if (user.refusals >= this.options.maxRefusals && !user.unresolved) user.done = true;
      return;
    }
    user.refusals = 0;
    const v = done.value as { status: string; reservation_id?: unknown };
    if (v.status === 'queued') {
      user.unresolved = true;
      return;
    }
    user.unresolved = false;
    user.done = true;
    if (v.status === 'won' && typeof v.reservation_id === 'string') {
      user.reservation = v.reservation_id;
      this.wins.set(v.reservation_id, user);
    }
  }

  /**
   * Users not yet answered, shared by every client thread: a thread takes the first, sends its key once and puts
   * it back at the end if it still needs sending, so no user has two attempts in flight and every user is served
   * in turn (the crowd at go-live).
   */
  private queue: User[] = [];

  createWorker(ctx: WorkerContext): Worker {
    const o = this.options;
    if (ctx.worker === 0 || this.queue.length === 0) this.queue = this.users.filter((u) => !u.done);
    const gateways = Math.max(1, ctx.workerUrls.length);
    const send = (user: User, f = 'attempt'): Promise<Completion> => {
      // Every send goes through the next gateway: a retry never through the one that just failed.
      const g = (user.lastGateway + 1) % gateways;
      user.lastGateway = g;
      return ctx.perform(
        { f, key: `${user.id}/${user.key}`, value: { user: user.id, key: user.key, gateway: g } },
        this.attemptOnce(user, g, ctx),
      );
    };
    return {
      step: async () => {
        const user = this.queue.shift();
        if (user === undefined) {
          // Everyone is answered: re-send an answered key, or a winner tries a fresh key.
          const u = this.users[ctx.rng.int(0, this.users.length - 1)];
          if (u === undefined || u.unresolved || this.busy.has(u)) return ctx.sleep(100);
          this.busy.add(u);
          try {
            if (u.reservation !== null && ctx.rng.chance(o.freshKeyProbability)) {
              u.key = `${u.id}-k${u.keys++}`;
              this.settle(u, await send(u));
            } else if (ctx.rng.chance(o.resendProbability)) {
              this.settle(u, await send(u));
            } else await ctx.sleep(100);
          } finally {
            this.busy.delete(u);
            if (!u.done || u.unresolved) this.queue.push(u);
          }
          return;
        }
        this.busy.add(user);
        try {
          this.settle(user, await send(user));
          if (user.done && ctx.rng.chance(o.resendProbability)) this.settle(user, await send(user));
          if (user.done && user.reservation !== null && ctx.rng.chance(o.freshKeyProbability)) {
            user.key = `${user.id}-k${user.keys++}`;
            this.settle(user, await send(user));
          }
        } finally {
          this.busy.delete(user);
          if (!user.done || user.unresolved) this.queue.push(user);
        }
      },
      finish: async () => {},
    };
  }

  /** Users with an attempt in flight (the fresh-key and re-send steps pick among all users). */
  private readonly busy = new Set<User>();

  async finalReads(ctx: FinalContext): Promise<void> {
    if (this.dealId === null) return;
    const dealId = this.dealId;
    // Every key whose outcome is unknown (or queued) is sent again, same key, until answered.
    const unresolved = this.users.filter((u) => u.unresolved);
    await pool(unresolved, 16, async (u) => {
      let g = u.lastGateway;
      while (u.unresolved && Date.now() < ctx.deadline) {
        g++;
        const done = await ctx.perform(
          {
            f: 'final-attempt',
            key: `${u.id}/${u.key}`,
            value: { user: u.id, key: u.key, gateway: g % Math.max(1, ctx.workerUrls.length) },
          },
          this.attemptOnce(u, g, ctx),
        );
        this.settle(u, done);
        if (u.unresolved || done.type === 'fail') await ctx.sleep(300);
        if (done.type === 'fail' && !u.unresolved) break;
      }
    });
    // Every win anyone was told of, read back.
    await pool([...this.wins], 16, async ([rid, u]) => {
      let g = 0;
      while (Date.now() < ctx.deadline) {
        const done = await ctx.perform(
          { f: 'read-reservation', key: u.id, value: { user: u.id, reservation_id: rid } },
          async (): Promise<Completion> => {
            const r = await this.call(
              `${this.gateway(ctx, g++)}/api/flash/${dealId}/reservations/${encodeURIComponent(rid)}`,
              { method: 'GET', token: u.token, timeoutMs: ctx.opTimeoutMs, ip: u.ip },
            );
            if (r.kind !== 'response') return { type: 'fail', error: r.error };
            if (r.status === 200) {
              const v = r.body as { reservation_id?: unknown; user_id?: unknown; status?: unknown };
              return {
                type: 'ok',
                value: { reservation_id: v.reservation_id ?? rid, user_id: v.user_id, status: v.status },
              };
            }
            return { type: 'fail', error: r.status === 404 ? 'not_found' : codeOf(r) };
          },
        );
        if (done.type === 'ok' || done.error === 'not_found') return;
        await ctx.sleep(300);
      }
    });
    // The deal state, after the state cache's short TTL has surely passed.
    await ctx.sleep(3_000);
    for (let i = 0; i < 2 && Date.now() < ctx.deadline; i++) {
      await ctx.perform({ f: 'read-state', value: { deal_id: dealId } }, async (): Promise<Completion> => {
        const r = await this.call(`${this.gateway(ctx, i)}/api/flash/${dealId}/state`, {
          method: 'GET',
          token: ctx.token,
          timeoutMs: ctx.opTimeoutMs,
        });
        if (r.kind !== 'response') return { type: 'fail', error: r.error };
        return r.status === 200 ? { type: 'ok', value: r.body } : { type: 'fail', error: codeOf(r) };
      });
      await ctx.sleep(1_500);
    }
  }

  /** Every reservation anyone was told they won, and to whom (a bug could tell one user two). */
  private readonly wins = new Map<string, User>();

  async close(): Promise<void> {
    const a = this.agent;
    this.agent = null;
    await a?.destroy().catch(() => undefined);
  }

  modelEvents(): readonly HistoryEvent[] {
    return [];
  }

  check(events: readonly HistoryEvent[]): CheckResult[] {
    return checkFlashHistory(events);
  }
}
