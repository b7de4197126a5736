/**
 * ratelimit: the rate limiter under faults. Five members (the rule store), two counter stores and three check
 * instances; the kill, pause and wipe nemeses hit a counter store besides the members they pick (`faultWorkers`), and
 * a partition also cuts one counter store off from one to all three check instances (`partitionWorkers`).
 *
 * Setup registers tenant `jepsen` and one fail-open rule: dimension user_id, every endpoint, limit LIMIT per day,
 * so refill is negligible over a run and a key's admissions are bounded by its limit plus what store faults may
 * give back (ratelimit-checks.ts, the service README's "The bound under faults"). Clients send POST /v1/check to
 * their check instance (client i to instance i mod 3) on a few keys at a time, each key used for KEY_CHECKS checks
 * over all clients, then replaced by a fresh one, so every key is driven far past its limit; and one key, 10% of
 * the checks, for the whole run, so it lives through every store fault (and the allowance each one gives).
 *
 * History: f "check", key = user id; ok value {allowed, remaining, overloaded?}; a timeout or reset is info.
 */
import type { HistoryEvent } from '../history.js';
import { checkRateLimit } from './ratelimit-checks.js';
import { callJson, errorCode } from './http.js';
import type { CheckResult, FinalContext, Worker, WorkerContext, Workload } from './workload.js';

const LIMIT = 10;
const WINDOW_SEC = 86_400;
const STORES = 2;
const CHECKS = 3;
const KEY_CHECKS = 40;
const ACTIVE_KEYS = 3;
/** Share of checks on one key used for the whole run, so that one key lives through every store fault. */
const LONG_KEY_SHARE = 0.1;
const LONG_KEY = 'whole-run';
const RULE_ID = '6a7b1c2d-3e4f-4a5b-8c6d-7e8f9a0b1c2d';

interface RateLimitOptions {
  /**
   * The rule's `expected_instances`, when given. 1 with 3 instances is wrong on purpose (`ratelimit-overshare`):
   * each instance's fallback bucket then holds the whole limit, so a degraded store gives a key 3 x limit back.
   */
  expectedInstances?: number;
}

export class RateLimitWorkload implements Workload {
  readonly service = 'ratelimit';
  /** No register to check (modelEvents is empty); the bound check carries the verdict. */
  readonly model = 'register' as const;
  readonly workers = { store: STORES, check: CHECKS };
  readonly faultWorkers = 'store';
  readonly partitionWorkers = { clients: 'check', servers: 'store' } as const;
  private checkKey = '';
  private readonly keys: Array<{ name: string; used: number }> = [];
  private nextKey = 0;

  constructor(
    private readonly options: RateLimitOptions = {},
    readonly name = 'ratelimit',
  ) {}

  describe(): string {
    return `checks on ${ACTIVE_KEYS} user ids at a time (${KEY_CHECKS} checks each) and one for the whole run (${LONG_KEY_SHARE * 100}%) through ${CHECKS} check instances over ${STORES} counter stores; rule: limit ${LIMIT} per ${WINDOW_SEC} s, fail-open`;
  }

  async setup(ctx: FinalContext): Promise<void> {
    const member = ctx.url(ctx.nodes[0]!);
    const call = async (url: string, token: string, body?: unknown): Promise<unknown> => {
      for (;;) {
        const out = await callJson(url, { method: 'PUT', token, body, timeoutMs: ctx.opTimeoutMs });
        if (out.kind === 'response' && out.status === 200) return out.body;
        if (Date.now() > ctx.deadline) throw new Error(`setup: PUT ${url} failed: ${JSON.stringify(out)}`);
        await ctx.sleep(300);
      }
    };
    const tenant = (await call(`${member}/v1/tenants/jepsen`, ctx.token)) as { admin_key: string; check_key: string };
    this.checkKey = tenant.check_key;
    await call(`${member}/v1/rules/${RULE_ID}`, tenant.admin_key, {
      service_id: 'jepsen',
      dimension: 'user_id',
      endpoint_pattern: '*',
      limit: LIMIT,
      window_sec: WINDOW_SEC,
      ...(this.options.expectedInstances !== undefined ? { expected_instances: this.options.expectedInstances } : {}),
    });
    // Every check instance must know the rule before the clients start (it polls the rule set about once a second).
    for (const url of this.checkUrls(ctx.workerUrls)) {
      for (;;) {
        const out = await callJson(`${url}/v1/check`, {
          method: 'POST',
          token: this.checkKey,
          body: { service_id: 'jepsen', endpoint: '/setup', identifiers: { user_id: 'setup' } },
          timeoutMs: ctx.opTimeoutMs,
        });
        if (out.kind === 'response' && out.status === 200 && (out.body as { rules?: number }).rules === 1) break;
        if (Date.now() > ctx.deadline) throw new Error(`setup: ${url} never learned the rule: ${JSON.stringify(out)}`);
        await ctx.sleep(300);
      }
    }
  }

  /** The check instances' URLs: the workers start in the order of `workers`, stores first. */
  private checkUrls(workerUrls: readonly string[]): readonly string[] {
    return workerUrls.slice(STORES, STORES + CHECKS);
  }

  private pickKey(pick: (n: number) => number): string {
    while (this.keys.length < ACTIVE_KEYS) this.keys.push({ name: `u${this.nextKey++}`, used: 0 });
    const i = pick(this.keys.length);
    const key = this.keys[i]!;
    key.used++;
    if (key.used >= KEY_CHECKS) this.keys.splice(i, 1);
    return key.name;
  }

  createWorker(ctx: WorkerContext): Worker {
    const urls = this.checkUrls(ctx.workerUrls);
    const url = `${urls[ctx.worker % urls.length]!}/v1/check`;
    return {
      step: async () => {
        const key = ctx.rng.float() < LONG_KEY_SHARE ? LONG_KEY : this.pickKey((n) => ctx.rng.int(0, n - 1));
        await ctx.perform({ f: 'check', key }, async () => {
          const out = await callJson(url, {
            method: 'POST',
            token: this.checkKey,
            body: { service_id: 'jepsen', endpoint: '/jepsen', identifiers: { user_id: key } },
            timeoutMs: ctx.opTimeoutMs,
          });
          if (out.kind === 'response' && out.status === 200) {
            const b = out.body as { allowed: boolean; remaining: number; overloaded?: boolean };
            return {
              type: 'ok',
              value: { allowed: b.allowed, remaining: b.remaining, ...(b.overloaded ? { overloaded: true } : {}) },
            };
          }
          if (out.kind === 'response') return { type: 'fail', error: errorCode(out.body) ?? `http_${out.status}` };
          return { type: out.kind === 'not-sent' ? 'fail' : 'info', error: out.error };
        });
      },
      finish: async () => {},
    };
  }

  async finalReads(): Promise<void> {
    // Nothing to read back: the history's answers are what the bound is about.
  }

  check(events: readonly HistoryEvent[]): CheckResult[] {
    return [
      checkRateLimit(events, { limit: LIMIT, windowSec: WINDOW_SEC, instances: CHECKS, failOpenGraceMs: 10_000 }),
    ];
  }

  modelEvents(): readonly HistoryEvent[] {
    return [];
  }
}
