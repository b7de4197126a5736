/**
 * auction: the auction service (packages/services/auction, issue 17) under faults. Each client is one bidder with its own
 * bidder token; a few auctions are live at a time (short ones, with a small anti-snipe window, so they close
 * under the faults and new ones are opened as they end). A bidder bids on a random live auction up to a budget
 * of its own for that auction: usually above the price by a few increments with a hidden proxy maximum, now and
 * then at the price (outbid), inside the increment (below_increment), again while already high (a raise of only
 * the maximum), just after close (auction_ended), or its last bid again with the same key (duplicate). A bid whose outcome is unknown (timeout, reset, 503) is sent again with the same idempotency
 * key until answered (also after the heal), as the spec asks bidders to resubmit; the answer is then the first
 * outcome or `duplicate` with it.
 *
 * After the heal the final reads wait for every auction to close and read each from every member that holds it
 * (state, close_at, winner and final price, bid_history: the visible changes with the bid that made each) and its
 * bid log (GET /api/auctions/{id}/log: every bid entry in log order, hidden maxima included). auction-checks.ts
 * checks that log (order, acknowledged bids, a replay through packages/services/auction's machine, close_at never
 * backwards); when no complete log is to be had it rebuilds one from the visible history and the answers.
 *
 * No linearizability model fits an auction as a whole, so the model check gets no events (valid by definition);
 * the four checks above are this workload's verdict.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startGateway } from '@raftkit/auction';
import { jsonLogger } from '@raftkit/http';
import type { HistoryEvent } from '../history.js';
import { checkAuctionHistory, type VisibleChange } from './auction-checks.js';
import { callJson, errorCode, writeFailure, type HttpOutcome } from './http.js';
import type { CheckResult, Completion, FinalContext, Worker, WorkerContext, Workload } from './workload.js';

interface AuctionOptions {
  /** Auctions kept live at a time. */
  live: number;
  /** An auction's initial length, drawn in this range (seconds). */
  lengthS: [number, number];
  antiSnipeWindowS: number;
  startPrice: number;
  minIncrement: number;
  /** A bidder's budget for one auction, drawn in this range: it bids no higher. */
  budget: [number, number];
}

const DEFAULT_AUCTION_OPTIONS: AuctionOptions = {
  live: 3,
  lengthS: [5, 10],
  antiSnipeWindowS: 4,
  startPrice: 100,
  minIncrement: 5,
  budget: [200, 900],
};

const SELLER = 'seller';
/** Gateways the workload runs (as `cluster up` does); client w uses gateway w mod 2 first. */
const GATEWAYS = 2;

interface Known {
  id: string;
  /** The latest close_at a bid answer showed (the writer's), else end_at. */
  closeAt: number;
  high: number | null;
  holder: string | null;
  ended: boolean;
}

interface Pending {
  auction: string;
  amount: number;
  max: number | null;
  key: string;
}

type Answer = Record<string, unknown>;

function obj(v: unknown): Answer {
  return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Answer) : {};
}

export class AuctionWorkload implements Workload {
  readonly name = 'auction';
  readonly service = 'auction';
  readonly model = 'register' as const;
  private readonly auctions = new Map<string, Known>();
  private creating = false;
  private created = 0;
  private readonly gateways: Array<{ url: string; stop: () => Promise<void> }> = [];

  constructor(private readonly options: AuctionOptions = DEFAULT_AUCTION_OPTIONS) {}

  describe(): string {
    const o = this.options;
    return `${o.live} live auctions at a time (${o.lengthS[0]}-${o.lengthS[1]} s, anti-snipe ${o.antiSnipeWindowS} s, increment ${o.minIncrement}); one bidder per client with proxy maxima up to a budget of ${o.budget[0]}-${o.budget[1]}; unknown outcomes resent with the same idempotency key`;
  }

  /**
   * One request through the gateways: a 503 (election, failover: the gateway already waited up to 3 s for a
   * writer) is sent again after its Retry-After with the same body (same idempotency key) until the deadline, on
   * the next gateway. Returns the last outcome.
   */
  private async call(
    first: number,
    method: string,
    path: string,
    token: string,
    body: unknown,
    timeoutMs: number,
  ): Promise<HttpOutcome> {
    const deadline = Date.now() + timeoutMs;
    let last: HttpOutcome = { kind: 'not-sent', error: 'no gateway' };
    for (let attempt = 0; attempt < 8 && Date.now() < deadline; attempt++) {
      const base = this.gateways[(first + attempt) % this.gateways.length]?.url;
      if (base === undefined) return last;
      last = await callJson(base + path, {
        method,
        token,
        ...(body !== undefined ? { body } : {}),
        timeoutMs: Math.max(100, deadline - Date.now()),
      });
      if (last.kind === 'not-sent') continue;
      if (last.kind === 'response' && last.status === 503) {
        const after = Number(last.retryAfter ?? '0.2');
        await new Promise((r) =>
          setTimeout(
            r,
            Math.min(
              1_000,
              Math.max(50, (Number.isFinite(after) ? after : 0.2) * 1000),
              Math.max(0, deadline - Date.now()),
            ),
          ),
        );
        continue;
      }
      return last;
    }
    return last;
  }

  /** Auctions to bid on: not seen ended, and not past close_at by more than a second (late bids: auction_ended). */
  private live(): Known[] {
    const now = Date.now();
    return [...this.auctions.values()].filter((a) => !a.ended && a.closeAt > now - 1_000);
  }

  /** Auctions that count towards the live target (a new one is opened below it). */
  private open(): Known[] {
    const now = Date.now();
    return [...this.auctions.values()].filter((a) => !a.ended && a.closeAt > now);
  }

  private async create(
    perform: WorkerContext['perform'],
    gateway: number,
    token: string,
    timeoutMs: number,
    draw: (lo: number, hi: number) => number,
  ): Promise<void> {
    const o = this.options;
    const now = Date.now();
    const n = this.created++;
    const input = {
      item_id: `item-${n}`,
      seller_id: SELLER,
      start_price: o.startPrice,
      reserve_price: n % 2 === 0 ? null : draw(o.startPrice + 20, o.budget[1]),
      min_increment: o.minIncrement,
      start_at: now - 1_000,
      end_at: now + draw(o.lengthS[0] * 1000, o.lengthS[1] * 1000),
      anti_snipe_window_s: o.antiSnipeWindowS,
    };
    await perform({ f: 'create', value: input }, async () => {
      const out = await this.call(gateway, 'POST', '/api/auctions', token, input, timeoutMs);
      if (out.kind === 'response' && out.status >= 200 && out.status < 300) {
        const id = obj(out.body).auction_id;
        if (typeof id !== 'string') return { type: 'info', error: 'no auction_id in the answer' };
        this.auctions.set(id, { id, closeAt: input.end_at, high: null, holder: null, ended: false });
        return { type: 'ok', value: { auction_id: id } };
      }
      return writeFailure(out);
    });
  }

  /**
   * Starts the gateways (the service's public surface is on its gateway workers, which `cluster up` starts
   * beside the members; here they run in the harness's process, outside the faults, as stateless clients of the
   * members), then the first auctions.
   */
  async setup(ctx: FinalContext): Promise<void> {
    const members = ctx.nodes.map((id) => ({ id, role: 'member', httpAddress: new URL(ctx.url(id)).host }));
    const quiet = jsonLogger(
      () => ({}),
      () => {},
    );
    for (let i = 1; i <= GATEWAYS; i++) {
      const id = `gw${i}`;
      const running = await startGateway({
        id,
        role: 'gateway',
        index: i,
        dataDir: mkdtempSync(join(tmpdir(), 'jl-auction-gw-')),
        httpAddress: '127.0.0.1:0',
        tcpAddress: '127.0.0.1:0',
        members,
        workers: [],
        tokens: [ctx.token],
        settings: {},
        logger: quiet,
      });
      this.gateways.push({ url: `http://127.0.0.1:${running.httpPort}`, stop: () => running.stop() });
    }
    // The first auctions; more are opened by the clients as these end.
    const draw = (lo: number, hi: number): number => lo + Math.floor(Math.random() * (hi - lo + 1));
    while (this.open().length < this.options.live && Date.now() < ctx.deadline) {
      const before = this.auctions.size;
      await this.create(ctx.perform, this.created, ctx.token, Math.max(ctx.opTimeoutMs, 5_000), draw);
      if (this.auctions.size === before) await ctx.sleep(500);
    }
    if (this.open().length === 0) throw new Error('could not create an auction');
  }

  createWorker(ctx: WorkerContext): Worker {
    const o = this.options;
    const bidder = `b${ctx.worker}`;
    const gateway = ctx.worker % GATEWAYS;
    let token: string | null = null;
    let counter = 0;
    let pending: Pending | null = null;
    let last: Pending | null = null;
    const budgets = new Map<string, number>();
    const draw = (lo: number, hi: number): number => ctx.rng.int(lo, hi);

    const register = async (): Promise<void> => {
      await ctx.perform({ f: 'register', value: { bidder_id: bidder } }, async () => {
        const out = await this.call(gateway, 'POST', '/api/bidders', ctx.token, { bidder_id: bidder }, ctx.opTimeoutMs);
        if (out.kind === 'response' && out.status >= 200 && out.status < 300) {
          const t = obj(out.body).bidder_token;
          if (typeof t !== 'string') return { type: 'fail', error: 'no bidder_token in the answer' };
          token = t;
          return { type: 'ok', value: { bidder_id: bidder } };
        }
        return { ...writeFailure(out), type: 'fail' }; // registering twice is harmless: try again
      });
    };

    const bid = async (p: Pending): Promise<Completion> => {
      const body = {
        bidder_id: bidder,
        amount: p.amount,
        ...(p.max !== null ? { max_proxy_amount: p.max } : {}),
        idempotency_key: p.key,
        bidder_token: token,
      };
      const done = await ctx.perform(
        {
          f: 'bid',
          key: p.auction,
          value: {
            auction_id: p.auction,
            bidder_id: bidder,
            amount: p.amount,
            max_proxy_amount: p.max,
            idempotency_key: p.key,
          },
        },
        async () => {
          const out = await this.call(
            gateway,
            'POST',
            `/api/auctions/${encodeURIComponent(p.auction)}/bids`,
            ctx.token,
            body,
            ctx.opTimeoutMs,
          );
          if (out.kind === 'response' && out.status >= 200 && out.status < 300)
            return { type: 'ok', value: { ...obj(out.body), auction_id: p.auction } };
          // A 4xx that is a decision rather than a refusal (some services answer auction_ended with 409/410):
          // recorded as an answer when it carries a status.
          if (out.kind === 'response' && typeof obj(out.body).status === 'string')
            return { type: 'ok', value: { ...obj(out.body), auction_id: p.auction } };
          if (out.kind === 'response' && (out.status === 401 || out.status === 403)) token = null;
          return writeFailure(out);
        },
      );
      if (done.type === 'ok') {
        const a = obj(done.value);
        const known = this.auctions.get(p.auction);
        const answer = a.status === 'duplicate' ? { ...obj(a.original), status: obj(a.original).status } : a;
        if (known !== undefined) {
          const closeAt =
            typeof a.new_close_at === 'number' ? a.new_close_at : typeof a.close_at === 'number' ? a.close_at : null;
          if (closeAt !== null && closeAt > known.closeAt) known.closeAt = closeAt;
          if (typeof a.new_high_bid === 'number' && (known.high === null || a.new_high_bid >= known.high)) {
            known.high = a.new_high_bid;
            known.holder = typeof a.high_bidder_id === 'string' ? a.high_bidder_id : null;
          }
          if (a.status === 'auction_ended' || answer.status === 'auction_ended' || a.status === 'unknown_auction')
            known.ended = true;
        }
      }
      return done;
    };

    return {
      step: async () => {
        if (token === null) {
          await register();
          if (token === null) await ctx.sleep(300);
          return;
        }
        if (pending !== null) {
          const done = await bid(pending);
          if (done.type !== 'info') pending = null;
          else await ctx.sleep(100);
          return;
        }
        if (this.open().length < o.live && !this.creating) {
          this.creating = true;
          try {
            await this.create(ctx.perform, gateway, ctx.token, ctx.opTimeoutMs, draw);
          } finally {
            this.creating = false;
          }
        }
        const live = this.live();
        if (live.length === 0) {
          await ctx.sleep(200);
          return;
        }
        if (last !== null && ctx.rng.float() < 0.05) {
          // A client's retry of its last bid with the same key: answered duplicate with the first outcome.
          const done = await bid(last);
          if (done.type === 'info') pending = last;
          return;
        }
        const a = live[ctx.rng.int(0, live.length - 1)]!;
        if (ctx.rng.float() < 0.08) {
          // A read of the query view (it may lag: not a writer's observation of close_at).
          await ctx.perform({ f: 'read', key: a.id, value: { auction_id: a.id } }, async () => {
            const out = await this.call(
              gateway,
              'GET',
              `/api/auctions/${encodeURIComponent(a.id)}`,
              ctx.token,
              undefined,
              ctx.opTimeoutMs,
            );
            if (out.kind === 'response' && out.status === 200) {
              const b = obj(out.body);
              return {
                type: 'ok',
                value: {
                  auction_id: a.id,
                  state: b.state,
                  close_at: b.close_at,
                  current_high_bid: b.current_high_bid,
                  fresh: false,
                },
              };
            }
            return {
              type: 'fail',
              error: out.kind === 'response' ? (errorCode(out.body) ?? `http_${out.status}`) : out.error,
            };
          });
          return;
        }
        let budget = budgets.get(a.id);
        if (budget === undefined) {
          budget = ctx.rng.int(o.budget[0], o.budget[1]);
          budgets.set(a.id, budget);
        }
        const inc = o.minIncrement;
        const high = a.high ?? o.startPrice - inc;
        const r = ctx.rng.float();
        let amount: number;
        let max: number | null;
        if (a.holder === bidder) {
          // Already high: raise only the hidden maximum (or do nothing when the budget is spent).
          if (r < 0.5) return;
          amount = high + inc;
          max = Math.max(amount, Math.min(budget, high + inc * ctx.rng.int(2, 10)));
        } else if (r < 0.07) {
          amount = Math.max(o.startPrice, high); // at the price: outbid
          max = null;
        } else if (r < 0.14 && inc > 1 && a.high !== null) {
          amount = high + ctx.rng.int(1, inc - 1); // inside the increment: below_increment
          max = null;
        } else {
          amount = Math.max(o.startPrice, high + inc * ctx.rng.int(1, 3));
          if (amount > budget) return; // priced out of this one
          max = ctx.rng.float() < 0.7 ? Math.max(amount, Math.min(budget, amount + inc * ctx.rng.int(0, 12))) : null;
        }
        const p: Pending = { auction: a.id, amount, max, key: `${bidder}.${counter++}` };
        last = p;
        const done = await bid(p);
        if (done.type === 'info') pending = p;
      },
      finish: async () => {
        // After the heal: settle the last unknown bid with the same key, so its outcome is known.
        const deadline = Date.now() + 20_000;
        while (pending !== null && token !== null && Date.now() < deadline) {
          const done = await bid(pending);
          if (done.type !== 'info') pending = null;
          else await ctx.sleep(300);
        }
      },
    };
  }

  /**
   * Waits for every auction to close, then reads each from every member and keeps the most complete view
   * (closed, the highest seq, a history from seq 1): followers' query views trail their logs a little, and a
   * restarted member's view starts from its snapshot.
   */
  async finalReads(ctx: FinalContext): Promise<void> {
    for (const a of [...this.auctions.values()].sort((x, y) => x.closeAt - y.closeAt)) {
      const wait = a.closeAt + 1_500 - Date.now();
      if (wait > 0) await ctx.sleep(Math.min(wait, Math.max(0, ctx.deadline - Date.now())));
      for (;;) {
        const done = await ctx.perform({ f: 'read-log', key: a.id, value: { auction_id: a.id } }, async () => {
          const views: Answer[] = [];
          // Every member's own view (members not holding the auction's group answer 421), and the gateway's.
          const path = `/auctions/${encodeURIComponent(a.id)}?history=all`;
          await Promise.all(
            [
              ...ctx.nodes.map((id) => `${ctx.url(id)}/internal${path}`),
              ...this.gateways.map((g) => `${g.url}/api${path}`),
            ].map(async (url) => {
              const out = await callJson(url, { method: 'GET', token: ctx.token, timeoutMs: ctx.opTimeoutMs });
              if (out.kind === 'response' && out.status === 200) views.push(obj(out.body));
            }),
          );
          if (views.length === 0) return { type: 'fail', error: 'no member answered' };
          // The bid log (every bid entry in log order, hidden maxima included), from every member's view and the
          // gateways' (the writer's): the longest complete one is replayed as it is; without one the checks
          // rebuild the log from the visible history and the answers.
          const logs: Answer[] = [];
          await Promise.all(
            [
              ...ctx.nodes.map((id) => `${ctx.url(id)}/internal/auctions/${encodeURIComponent(a.id)}/log`),
              ...this.gateways.map((g) => `${g.url}/api/auctions/${encodeURIComponent(a.id)}/log`),
            ].map(async (url) => {
              const out = await callJson(url, { method: 'GET', token: ctx.token, timeoutMs: ctx.opTimeoutMs });
              if (
                out.kind === 'response' &&
                out.status === 200 &&
                obj(out.body).complete === true &&
                Array.isArray(obj(out.body).log)
              )
                logs.push(obj(out.body));
            }),
          );
          const lengthOf = (l: Answer): number => (l.log as unknown[]).length;
          const closedFirst = (l: Answer): number => Number(l.state === 'closed');
          logs.sort((x, y) => closedFirst(y) - closedFirst(x) || lengthOf(y) - lengthOf(x));
          const full = logs[0];
          const seqOf = (v: Answer): number => (typeof v.seq === 'number' ? v.seq : -1);
          const fromStart = (v: Answer): boolean => {
            const h = Array.isArray(v.bid_history) ? v.bid_history : [];
            return h.length === 0 || obj(h[0]).seq === 1;
          };
          views.sort(
            (x, y) =>
              Number(y.state === 'closed') - Number(x.state === 'closed') ||
              seqOf(y) - seqOf(x) ||
              Number(fromStart(y)) - Number(fromStart(x)),
          );
          const v = views[0]!;
          const visible: VisibleChange[] = (Array.isArray(v.bid_history) ? v.bid_history : []).map((h) => {
            const e = obj(h);
            return {
              seq: Number(e.seq),
              bid_id: String(e.bid_id),
              bidder_id: String(e.bidder_id),
              amount: Number(e.amount),
              at: Number(e.at),
              kind: e.kind === 'proxy' ? 'proxy' : 'bid',
            };
          });
          return {
            type: 'ok',
            value: {
              auction_id: a.id,
              state: v.state,
              close_at: v.close_at,
              current_high_bid: v.current_high_bid ?? null,
              current_high_bidder_id: v.current_high_bidder_id ?? null,
              winner: v.winner ?? null,
              final_price: v.final_price ?? null,
              now: Date.now(),
              seq: v.seq,
              views: views.length,
              visible,
              ...(full !== undefined
                ? { log: full.log, log_complete: true, log_member: full.member ?? null }
                : { log: null }),
            },
          };
        });
        const closed = done.type === 'ok' && obj(done.value).state === 'closed';
        if (closed || Date.now() > ctx.deadline) break;
        await ctx.sleep(500);
      }
    }
  }

  async close(): Promise<void> {
    await Promise.all(this.gateways.splice(0).map((g) => g.stop().catch(() => undefined)));
  }

  /** No model fits an auction: the model check gets nothing, and the auction checks are the verdict. */
  modelEvents(): readonly HistoryEvent[] {
    return [];
  }

  check(events: readonly HistoryEvent[]): CheckResult[] {
    return checkAuctionHistory(events);
  }
}
