/**
 * shortlink: the short-link service's id allocator and link store, driven the way application servers drive
 * them (the members' /internal endpoints), under faults.
 *
 * Each client plays an application server: it leases a batch of ids (POST /internal/leases), turns ids into
 * generated codes with the service's own permutation, and creates links on them (POST /internal/links). Now and
 * then it abandons its batch half used and leases a new one, as a crashed server would. It also reads links back
 * with linearizable reads (GET /internal/links/{code}?consistency=linearizable).
 *
 * History: f "lease" (ok value [start, end]; outside the register model), f "write" (key = code, value = the long
 * URL: a create; a 409 code_taken is a fail with that error), f "read" (key = code; ok value = the URL, or null on
 * 404). Checked as one register per code, so a read after an acknowledged create must see it.
 *
 * Checks: leases-disjoint (no id is handed out twice: the acknowledged batches never overlap, also across
 * abandoned batches), codes-unique (no create of a leased id found its code taken), acked-links-present (every
 * acknowledged create is read back with its URL after the heal).
 */
import { codeForId } from '@raftkit/shortlink';
import type { HistoryEvent } from '../history.js';
import { callJson, readFailure, writeFailure } from './http.js';
import type { Anomaly, CheckResult, Completion, FinalContext, Worker, WorkerContext, Workload } from './workload.js';

interface ShortlinkOptions {
  /** Chance, per create, that the client abandons the rest of its batch (a crashed application server). */
  abandonProbability: number;
  /** Share of reads among non-lease operations. */
  readShare: number;
}

const DEFAULT_SHORTLINK_OPTIONS: ShortlinkOptions = { abandonProbability: 0.01, readShare: 0.3 };

const DAY_MS = 86_400_000;
const FINAL_READ_CONCURRENCY = 16;

export class ShortlinkWorkload implements Workload {
  readonly name = 'shortlink';
  readonly service = 'shortlink';
  readonly model = 'register' as const;
  /** Codes whose create was acknowledged, with their URL (reads pick from here). */
  private readonly acked = new Map<string, string>();
  private readonly ackedCodes: string[] = [];

  constructor(private readonly options: ShortlinkOptions = DEFAULT_SHORTLINK_OPTIONS) {}

  describe(): string {
    return `application servers leasing id batches and creating generated links on them (reads ${Math.round(this.options.readShare * 100)}%, a batch abandoned with probability ${this.options.abandonProbability} per create)`;
  }

  createWorker(ctx: WorkerContext): Worker {
    const base = ctx.url(ctx.node);
    let batch: { next: number; end: number } | null = null;
    return {
      step: async () => {
        if (batch === null || batch.next >= batch.end || ctx.rng.float() < this.options.abandonProbability) {
          const done = await ctx.perform({ f: 'lease' }, async () => {
            const outcome = await callJson(`${base}/internal/leases`, {
              method: 'POST',
              token: ctx.token,
              body: { server: `jepsen-${ctx.worker}` },
              timeoutMs: ctx.opTimeoutMs,
            });
            if (outcome.kind === 'response' && outcome.status === 201) {
              const { start, end } = outcome.body as { start: number; end: number };
              return { type: 'ok', value: [start, end] };
            }
            return writeFailure(outcome);
          });
          batch = done.type === 'ok' ? { next: (done.value as number[])[0]!, end: (done.value as number[])[1]! } : null;
          if (batch === null) await ctx.sleep(100);
          return;
        }
        if (this.ackedCodes.length > 0 && ctx.rng.float() < this.options.readShare) {
          const code = this.ackedCodes[ctx.rng.int(0, this.ackedCodes.length - 1)]!;
          await ctx.perform({ f: 'read', key: code }, () => read(base, code, ctx.token, ctx.opTimeoutMs));
          return;
        }
        const code = codeForId(batch.next++);
        if (code === null) return; // a reserved word: the service skips that id too
        const url = `https://jepsen.example/${ctx.worker}/${code}`;
        const done = await ctx.perform({ f: 'write', key: code, value: url }, async () => {
          const now = Date.now();
          const body = {
            code,
            alias: false,
            long_url: url,
            created_at: now,
            expires_at: now + DAY_MS,
            created_by: 'jepsen',
          };
          const outcome = await callJson(`${base}/internal/links`, {
            method: 'POST',
            token: ctx.token,
            body,
            timeoutMs: ctx.opTimeoutMs,
          });
          if (outcome.kind === 'response' && (outcome.status === 201 || outcome.status === 200))
            return { type: 'ok', value: url };
          return { ...writeFailure(outcome), value: url };
        });
        if (done.type === 'ok') {
          this.acked.set(code, url);
          this.ackedCodes.push(code);
        }
      },
      finish: async () => {},
    };
  }

  async finalReads(ctx: FinalContext): Promise<void> {
    const codes = [...this.ackedCodes];
    let turn = 0;
    const readOne = async (code: string): Promise<void> => {
      while (Date.now() < ctx.deadline) {
        const node = ctx.nodes[turn++ % ctx.nodes.length]!;
        const done = await ctx.perform({ f: 'read', key: code }, () =>
          read(ctx.url(node), code, ctx.token, ctx.opTimeoutMs),
        );
        if (done.type === 'ok') return;
        await ctx.sleep(200);
      }
    };
    for (let i = 0; i < codes.length; i += FINAL_READ_CONCURRENCY)
      await Promise.all(codes.slice(i, i + FINAL_READ_CONCURRENCY).map(readOne));
  }

  modelEvents(events: readonly HistoryEvent[]): readonly HistoryEvent[] {
    return events.filter((e) => e.f !== 'lease');
  }

  check(events: readonly HistoryEvent[]): CheckResult[] {
    return [checkLeases(events), checkCodes(events), checkAckedLinks(events)];
  }
}

/** Acknowledged batches never overlap: no id is handed out twice. */
export function checkLeases(events: readonly HistoryEvent[]): CheckResult {
  const leases = events
    .filter((e) => e.f === 'lease' && e.type === 'ok' && Array.isArray(e.value))
    .map((e) => ({ start: (e.value as number[])[0]!, end: (e.value as number[])[1]!, time: e.time }))
    .sort((a, b) => a.start - b.start);
  const anomalies: Anomaly[] = [];
  for (let i = 1; i < leases.length; i++) {
    const prev = leases[i - 1]!;
    const cur = leases[i]!;
    if (cur.start < prev.end) {
      anomalies.push({
        check: 'leases-disjoint',
        type: 'overlap',
        description: `ids [${cur.start}, ${cur.end}) and [${prev.start}, ${prev.end}) were both handed out`,
        times: [prev.time, cur.time],
      });
    }
  }
  const ids = leases.reduce((n, l) => n + (l.end - l.start), 0);
  return { name: 'leases-disjoint', valid: anomalies.length === 0, anomalies, stats: { leases: leases.length, ids } };
}

/** A create on a freshly leased id never finds its code taken. */
export function checkCodes(events: readonly HistoryEvent[]): CheckResult {
  const anomalies: Anomaly[] = events
    .filter((e) => e.f === 'write' && e.type === 'fail' && e.error === 'code_taken')
    .map((e) => ({
      check: 'codes-unique',
      type: 'code-taken',
      description: `the generated code ${e.key} was already taken when its leased id was first used`,
      times: [e.time],
    }));
  const created = events.filter((e) => e.f === 'write' && e.type === 'ok').length;
  return { name: 'codes-unique', valid: anomalies.length === 0, anomalies, stats: { created } };
}

/** Every acknowledged create is read back, with its URL, in the final reads. */
export function checkAckedLinks(events: readonly HistoryEvent[]): CheckResult {
  const acked = new Map<string, { url: unknown; time: number }>();
  for (const e of events)
    if (e.f === 'write' && e.type === 'ok' && e.key !== undefined) acked.set(e.key, { url: e.value, time: e.time });
  const finalRead = new Map<string, unknown>();
  for (const e of events)
    if (e.f === 'read' && e.type === 'ok' && e.node === 'final' && e.key !== undefined) finalRead.set(e.key, e.value);
  const anomalies: Anomaly[] = [];
  for (const [code, { url, time }] of acked) {
    if (!finalRead.has(code))
      anomalies.push({
        check: 'acked-links-present',
        type: 'unread',
        description: `acknowledged link ${code} could not be read after the heal`,
        times: [time],
      });
    else if (finalRead.get(code) !== url)
      anomalies.push({
        check: 'acked-links-present',
        type: 'lost',
        description: `acknowledged link ${code} -> ${String(url)} read back as ${JSON.stringify(finalRead.get(code))}`,
        times: [time],
      });
  }
  return {
    name: 'acked-links-present',
    valid: anomalies.length === 0,
    anomalies,
    stats: { acknowledged: acked.size, read_back: finalRead.size },
  };
}

async function read(base: string, code: string, token: string, timeoutMs: number): Promise<Completion> {
  const outcome = await callJson(`${base}/internal/links/${code}?consistency=linearizable`, {
    method: 'GET',
    token,
    timeoutMs,
  });
  if (outcome.kind === 'response' && outcome.status === 200)
    return { type: 'ok', value: (outcome.body as { long_url?: unknown }).long_url ?? null };
  if (outcome.kind === 'response' && outcome.status === 404) return { type: 'ok', value: null };
  return readFailure(outcome);
}
