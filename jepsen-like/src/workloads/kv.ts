/**
 * kv: registers on a few keys of the kv service, with reads (linearizable GET), writes (PUT) and
 * compare-and-set (POST .../cas). Values are small integers so that compare-and-set often matches. Keys rotate
 * as in Jepsen's independent keys: a handful are in use at a time, each for a bounded number of operations,
 * which keeps every key's history small enough to check (the checker partitions by key).
 *
 * History: f "read" (ok value = the integer read, null when the key is missing), "write" (value = the
 * integer), "cas" (value = [from, to]; a 409 cas_mismatch is recorded as fail with error "cas_mismatch", which the
 * checker takes as the observation that the value was not `from`). Checked against one cas-register per key.
 */
import type { HistoryEvent } from '../history.js';
import type { Rng } from '../rng.js';
import { callJson, readFailure, writeFailure, type HttpOutcome } from './http.js';
import type { CheckResult, Completion, FinalContext, Worker, WorkerContext, Workload } from './workload.js';

interface KvOptions {
  /** Keys in use at once. */
  activeKeys: number;
  /** Operations on a key before it is replaced by a fresh one. */
  opsPerKey: number;
  /** Values are 0..maxValue. */
  maxValue: number;
  /**
   * Read with ?consistency=serializable (the member's local state, possibly stale) instead of linearizable
   * reads: not linearizable under partitions, on purpose. The workload "kv-serializable" uses it to show the
   * checker catching stale reads in a real cluster.
   */
  serializableReads: boolean;
}

export const DEFAULT_KV_OPTIONS: KvOptions = { activeKeys: 3, opsPerKey: 120, maxValue: 4, serializableReads: false };

function parseValue(value: unknown): number | string | null {
  if (typeof value !== 'string') return null;
  return /^-?\d+$/.test(value) ? Number(value) : value;
}

export class KvWorkload implements Workload {
  readonly name: string;
  readonly service = 'kv';
  readonly model = 'cas-register' as const;
  private readonly active: { key: string; used: number }[] = [];
  private nextKey = 0;
  private readonly used = new Set<string>();

  constructor(private readonly options: KvOptions = DEFAULT_KV_OPTIONS) {
    this.name = options.serializableReads ? 'kv-serializable' : 'kv';
    for (let i = 0; i < options.activeKeys; i++) this.active.push({ key: this.freshKey(), used: 0 });
  }

  describe(): string {
    return `${this.options.serializableReads ? '(serializable, possibly stale reads) ' : ''}registers on ${this.options.activeKeys} keys at a time (${this.options.opsPerKey} operations each): read 40%, write 30%, cas 30% over values 0..${this.options.maxValue}`;
  }

  private freshKey(): string {
    const key = `k${this.nextKey++}`;
    this.used.add(key);
    return key;
  }

  private pickKey(rng: Rng): string {
    const slot = rng.int(0, this.active.length - 1);
    const entry = this.active[slot]!;
    entry.used++;
    if (entry.used >= this.options.opsPerKey) this.active[slot] = { key: this.freshKey(), used: 0 };
    return entry.key;
  }

  createWorker(ctx: WorkerContext): Worker {
    const { rng } = ctx;
    const url = (key: string): string => `${ctx.url(ctx.node)}/v1/kv/${encodeURIComponent(key)}`;
    const readUrl = (key: string): string =>
      url(key) + (this.options.serializableReads ? '?consistency=serializable' : '');
    return {
      step: async () => {
        const key = this.pickKey(rng);
        const roll = rng.float();
        if (roll < 0.4) {
          await ctx.perform({ f: 'read', key }, () => read(readUrl(key), ctx.token, ctx.opTimeoutMs));
        } else if (roll < 0.7) {
          const value = rng.int(0, this.options.maxValue);
          await ctx.perform({ f: 'write', key, value }, async () => {
            const outcome = await callJson(url(key), {
              method: 'PUT',
              token: ctx.token,
              rawBody: String(value),
              timeoutMs: ctx.opTimeoutMs,
            });
            return isOk(outcome) ? { type: 'ok', value } : { ...writeFailure(outcome), value };
          });
        } else {
          const from = rng.int(0, this.options.maxValue);
          const to = rng.int(0, this.options.maxValue);
          await ctx.perform({ f: 'cas', key, value: [from, to] }, async () => {
            const outcome = await callJson(`${url(key)}/cas`, {
              method: 'POST',
              token: ctx.token,
              body: { from: String(from), to: String(to) },
              timeoutMs: ctx.opTimeoutMs,
            });
            if (isOk(outcome)) return { type: 'ok', value: [from, to] };
            if (outcome.kind === 'response' && outcome.status === 409)
              return { type: 'fail', value: [from, to], error: 'cas_mismatch' };
            return { ...writeFailure(outcome), value: [from, to] };
          });
        }
      },
      finish: async () => {},
    };
  }

  async finalReads(ctx: FinalContext): Promise<void> {
    const keys = [...this.used].sort((a, b) => Number(a.slice(1)) - Number(b.slice(1)));
    let turn = 0;
    for (const key of keys) {
      while (Date.now() < ctx.deadline) {
        const node = ctx.nodes[turn++ % ctx.nodes.length]!;
        const done = await ctx.perform({ f: 'read', key }, () =>
          read(`${ctx.url(node)}/v1/kv/${encodeURIComponent(key)}`, ctx.token, ctx.opTimeoutMs),
        );
        if (done.type === 'ok') break;
        await ctx.sleep(200);
      }
    }
  }

  check(_events: readonly HistoryEvent[]): CheckResult[] {
    return [];
  }
}

function isOk(outcome: HttpOutcome): boolean {
  return outcome.kind === 'response' && outcome.status >= 200 && outcome.status < 300;
}

async function read(url: string, token: string, timeoutMs: number): Promise<Completion> {
  const outcome = await callJson(url, { method: 'GET', token, timeoutMs });
  if (outcome.kind === 'response' && outcome.status === 200)
    return { type: 'ok', value: parseValue((outcome.body as { value?: unknown }).value) };
  if (outcome.kind === 'response' && outcome.status === 404) return { type: 'ok', value: null };
  return readFailure(outcome);
}
