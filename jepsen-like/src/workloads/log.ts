/**
 * log: the replicated event log (packages/platform/log) under faults. One topic with several partitions, each its own Raft
 * group on 3 of the 5 processes; clients go through the log's own client (LogClient, whose GroupRouter follows 421
 * answers and leader hints), as applications do.
 *
 * Producers append batches of 1..3 unique values to random partitions with an idempotent producer id and a
 * sequence per partition. A batch whose outcome is unknown (timeout, 503, reset) is sent again with the same
 * producer id, sequence and values in the next step, until acknowledged: after the heal, too (finish()). So every
 * batch must be stored exactly once, whatever failed in between.
 *
 * Consumers belong to two consumer groups; each consumer client is in both, and prefers its share of the
 * partitions but now and then takes one of another consumer's (so two consumers of a group overlap on a
 * partition and the compare-and-set commits decide). A consumer session on (group, partition) reads the
 * committed offset, fetches from there, and commits its position with `expect` = the offset it started from or
 * last committed. A commit that fails or whose outcome is unknown ends the session; now and then a consumer crashes
 * (forgets every session, with whatever it processed but did not commit). After the heal, a final consumer per
 * group drains every partition to its end and commits, and every partition is read whole (linearizable).
 *
 * The committed offset of each (group, partition) is a compare-and-set register (commit = cas [expect, offset],
 * committed = read), checked for linearizability; the rest is checked by log-checks.ts.
 */
import { LogClient, LogError, type FetchAnswer } from '@raftkit/log';
import type { HistoryEvent } from '../history.js';
import { checkLogHistory } from './log-checks.js';
import type { CheckResult, Completion, FinalContext, Worker, WorkerContext, Workload } from './workload.js';

interface LogOptions {
  topic: string;
  partitions: number;
  replicas: number;
  groups: readonly string[];
  /** Chance per consumer step of a crash (every session forgotten, uncommitted work lost). */
  crashProbability: number;
  /** Chance per consumer step of working on a partition that is another consumer's share. */
  foreignProbability: number;
  /** Most records per fetch (small, so there are many commits). */
  maxFetch: number;
  /**
   * Take a refused commit whose current offset is the session's own target as this consumer's success, as
   * LogConsumer.commit does (assuming it was the router's retry of its own commit). Wrong when another consumer of
   * the group committed the same offset: both then believe they consumed the records. The workload
   * "log-same-offset" does it, to show the checker catching it.
   */
  sameOffsetIsOwn: boolean;
  /** Fetch exactly maxFetch records when there are (not 1..maxFetch), so overlapping consumers reach the same offsets. */
  fixedFetch: boolean;
}

export const DEFAULT_LOG_OPTIONS: LogOptions = {
  topic: 'jepsen',
  partitions: 4,
  replicas: 3,
  groups: ['g1', 'g2'],
  crashProbability: 0.03,
  foreignProbability: 0.2,
  maxFetch: 8,
  sameOffsetIsOwn: false,
  fixedFetch: false,
};

/** Workers whose index mod 5 is 3 or 4 consume; the others produce (with 5 clients: 3 producers, 2 consumers). */
function isConsumer(worker: number): boolean {
  return worker % 5 >= 3;
}

type Rec = [number, string];

function recordsOf(answer: FetchAnswer): Rec[] {
  return answer.records.map((r) => [r.offset, r.value]);
}

/** How a failed call is recorded: a 4xx other than 409/429 certainly changed nothing; anything else may have. */
function failure(e: unknown): { type: 'fail' | 'info'; error: string } {
  if (e instanceof LogError) {
    if (e.status >= 400 && e.status < 500 && e.status !== 409 && e.status !== 429 && e.status !== 408)
      return { type: 'fail', error: e.code };
    // The router's message says what it last saw (a 503's reason, a refused connection, a timeout).
    return {
      type: 'info',
      error: e.status === 409 || e.status === 429 ? e.code : `${e.code}: ${e.message.slice(0, 160)}`,
    };
  }
  return { type: 'info', error: (e as Error)?.message ?? String(e) };
}

function conflictCurrent(e: LogError): number | null {
  const current = (e.body as { error?: { current?: unknown } } | null)?.error?.current;
  return typeof current === 'number' ? current : null;
}

export class LogWorkload implements Workload {
  readonly name: string;
  readonly service = 'log';
  readonly model = 'cas-register' as const;
  private readonly clients: LogClient[] = [];
  private consumerCount = 0;

  constructor(private readonly options: LogOptions = DEFAULT_LOG_OPTIONS) {
    this.name = options.sameOffsetIsOwn ? 'log-same-offset' : 'log';
  }

  describe(): string {
    const o = this.options;
    return `topic ${o.topic}: ${o.partitions} partitions of ${o.replicas} replicas; idempotent producers (batches of 1..3, unknown outcomes retried with the same producer id and sequence) and consumers in groups ${o.groups.join(', ')} (fetch, compare-and-set commits, crash ${o.crashProbability * 100}% of steps, overlap ${o.foreignProbability * 100}%)`;
  }

  private client(endpoints: string[], token: string, timeoutMs: number): LogClient {
    const client = new LogClient({ endpoints, token, timeoutMs });
    this.clients.push(client);
    return client;
  }

  /** Creates the topic and commits offset 0 for every group and partition (the registers' initial value). */
  async setup(ctx: FinalContext): Promise<void> {
    const o = this.options;
    const client = this.client(
      ctx.nodes.map((id) => ctx.url(id)),
      ctx.token,
      ctx.opTimeoutMs,
    );
    for (;;) {
      const done = await ctx.perform(
        { f: 'create-topic', value: { topic: o.topic, partitions: o.partitions, replicas: o.replicas } },
        async () => {
          try {
            const t = await client.createTopic(o.topic, { partitions: o.partitions, replicas: o.replicas });
            return {
              type: 'ok',
              value: {
                topic: t.name,
                partitions: t.partitions,
                replicas: t.replicas,
                groups: t.partition_groups.map((g) => g.members.map((m) => m.id).join(' ')),
              },
            };
          } catch (e) {
            return failure(e);
          }
        },
      );
      if (done.type === 'ok') break;
      if (Date.now() > ctx.deadline) throw new Error(`could not create topic ${o.topic}`);
      await ctx.sleep(500);
    }
    for (const group of o.groups) {
      for (let partition = 0; partition < o.partitions; partition++) {
        for (;;) {
          const done = await ctx.perform(
            {
              f: 'commit',
              key: `${group}/${partition}`,
              value: { session: `setup.${group}.${partition}`, group, partition, expect: null, offset: 0 },
            },
            async () => {
              try {
                await client.commit(o.topic, partition, group, 0);
                return { type: 'ok' };
              } catch (e) {
                return failure(e);
              }
            },
          );
          if (done.type === 'ok') break;
          if (Date.now() > ctx.deadline) throw new Error(`could not commit offset 0 of ${group}/${partition}`);
          await ctx.sleep(500);
        }
      }
    }
  }

  createWorker(ctx: WorkerContext): Worker {
    const endpoints = [ctx.url(ctx.node)];
    return isConsumer(ctx.worker) ? this.consumer(ctx, endpoints) : this.producer(ctx, endpoints);
  }

  private producer(ctx: WorkerContext, endpoints: string[]): Worker {
    const o = this.options;
    const client = this.client(endpoints, ctx.token, ctx.opTimeoutMs);
    let incarnation = 0;
    let producer = `w${ctx.worker}-${incarnation}`;
    let counter = 0;
    const seqs = new Map<number, number>();
    /** A batch whose outcome is unknown: sent again, unchanged, until acknowledged. */
    let pending: { partition: number; seq: number; values: string[] } | null = null;
    const send = async (batch: { partition: number; seq: number; values: string[] }): Promise<Completion> =>
      ctx.perform({ f: 'send', key: `p${batch.partition}`, value: { producer, ...batch } }, async () => {
        try {
          const a = await client.append(
            o.topic,
            batch.partition,
            batch.values.map((value) => ({ value })),
            { producer, seq: batch.seq },
          );
          return {
            type: 'ok',
            value: { producer, ...batch, offset: a.base_offset, count: a.count, duplicate: a.duplicate },
          };
        } catch (e) {
          return failure(e);
        }
      });
    const attempt = async (batch: { partition: number; seq: number; values: string[] }): Promise<void> => {
      const done = await send(batch);
      if (done.type === 'ok') {
        seqs.set(batch.partition, batch.seq + 1);
        pending = null;
      } else if (done.error === 'unknown_producer' || done.error === 'out_of_order_sequence') {
        // The partition does not know this producer's last batches (the checker reports it): start a new producer.
        pending = null;
        incarnation++;
        producer = `w${ctx.worker}-${incarnation}`;
        seqs.clear();
      } else if (done.type === 'info') {
        pending = batch;
      } else {
        pending = null; // certainly not stored; its sequence is free again
      }
    };
    return {
      step: async () => {
        if (pending !== null) {
          await attempt(pending);
          if (pending !== null) await ctx.sleep(100);
          return;
        }
        const partition = ctx.rng.int(0, o.partitions - 1);
        const values = Array.from({ length: ctx.rng.int(1, 3) }, () => `w${ctx.worker}.${counter++}`);
        await attempt({ partition, seq: seqs.get(partition) ?? 0, values });
      },
      finish: async () => {
        // After the heal: settle the last unknown batch with the same sequence, so it is known stored once.
        const deadline = Date.now() + 20_000;
        while (pending !== null && Date.now() < deadline) {
          await attempt(pending);
          if (pending !== null) await ctx.sleep(300);
        }
      },
      abort: () => void client.close().catch(() => undefined),
    };
  }

  private consumer(ctx: WorkerContext, endpoints: string[]): Worker {
    const o = this.options;
    const client = this.client(endpoints, ctx.token, ctx.opTimeoutMs);
    const index = this.consumerCount++;
    const consumers = (): number => Math.max(1, this.consumerCount);
    let sessionCounter = 0;
    const sessions = new Map<string, { id: string; expect: number; position: number }>();
    const pickPartition = (): number => {
      const own = Array.from({ length: o.partitions }, (_, p) => p).filter(
        (p) => p % consumers() === index % consumers(),
      );
      if (own.length === 0 || ctx.rng.float() < o.foreignProbability) return ctx.rng.int(0, o.partitions - 1);
      return own[ctx.rng.int(0, own.length - 1)]!;
    };
    return {
      step: async () => {
        if (sessions.size > 0 && ctx.rng.float() < o.crashProbability) {
          await ctx.perform(
            { f: 'crash', value: { consumer: `c${ctx.worker}`, sessions: [...sessions.values()].map((s) => s.id) } },
            async () => ({ type: 'ok' }),
          );
          sessions.clear();
          return;
        }
        const group = o.groups[ctx.rng.int(0, o.groups.length - 1)]!;
        const partition = pickPartition();
        const key = `${group}/${partition}`;
        const s = sessions.get(key);
        if (s === undefined) {
          const id = `c${ctx.worker}.${sessionCounter++}`;
          const done = await ctx.perform(
            { f: 'committed', key, value: { session: id, group, partition } },
            async () => {
              try {
                const offset = (await client.committed(o.topic, partition, group)) ?? 0;
                return { type: 'ok', value: { session: id, group, partition, offset } };
              } catch (e) {
                return { type: 'fail', error: failure(e).error };
              }
            },
          );
          if (done.type === 'ok') {
            const offset = (done.value as { offset: number }).offset;
            sessions.set(key, { id, expect: offset, position: offset });
          }
          return;
        }
        if (s.position > s.expect && (ctx.rng.float() < 0.5 || s.position - s.expect >= 4 * o.maxFetch)) {
          const done = await ctx.perform(
            { f: 'commit', key, value: { session: s.id, group, partition, expect: s.expect, offset: s.position } },
            async () => {
              try {
                await client.commit(o.topic, partition, group, s.position, s.expect);
                return { type: 'ok' };
              } catch (e) {
                if (e instanceof LogError && e.code === 'offset_conflict') {
                  // Our own earlier attempt (retried inside the router) or another consumer's commit of the same
                  // offset: which one cannot be told, so the outcome is unknown.
                  const current = conflictCurrent(e);
                  if (current === s.position && o.sameOffsetIsOwn) return { type: 'ok', value: { taken_as_own: true } };
                  return current === s.position
                    ? { type: 'info', error: 'offset_conflict_same' }
                    : { type: 'fail', error: 'offset_conflict', value: { current } };
                }
                return failure(e);
              }
            },
          );
          if (done.type === 'ok') s.expect = s.position;
          else sessions.delete(key); // start again from the committed offset
          return;
        }
        const from = s.position;
        const done = await ctx.perform(
          { f: 'poll', key, value: { session: s.id, group, partition, from } },
          async () => {
            try {
              const a = await client.fetch(o.topic, partition, from, {
                maxRecords: o.fixedFetch ? o.maxFetch : ctx.rng.int(1, o.maxFetch),
              });
              return {
                type: 'ok',
                value: {
                  session: s.id,
                  group,
                  partition,
                  from,
                  records: recordsOf(a),
                  next: a.next_offset,
                  end: a.end_offset,
                },
              };
            } catch (e) {
              return { type: 'fail', error: failure(e).error };
            }
          },
        );
        if (done.type === 'ok') s.position = (done.value as { next: number }).next;
      },
      finish: async () => {},
      abort: () => void client.close().catch(() => undefined),
    };
  }

  async finalReads(ctx: FinalContext): Promise<void> {
    const o = this.options;
    const client = this.client(
      ctx.nodes.map((id) => ctx.url(id)),
      ctx.token,
      ctx.opTimeoutMs,
    );
    const ends = new Map<number, number>();
    // Every partition read whole, linearizably (a read barrier on its leader first).
    for (let partition = 0; partition < o.partitions; partition++) {
      while (Date.now() < ctx.deadline) {
        const done = await ctx.perform({ f: 'read-log', key: `p${partition}`, value: { partition } }, async () => {
          try {
            const records: Rec[] = [];
            let offset = 0;
            let end = 0;
            for (;;) {
              const path = `/v1/topics/${o.topic}/partitions/${partition}/records?offset=${offset}&max_records=1000&consistency=linearizable`;
              const a = (await client.router.call(`log.${o.topic}.${partition}`, 'GET', path)) as FetchAnswer;
              records.push(...recordsOf(a));
              end = a.end_offset;
              if (a.records.length === 0 || a.next_offset >= a.end_offset) break;
              offset = a.next_offset;
            }
            return { type: 'ok', value: { partition, records, end } };
          } catch (e) {
            return { type: 'fail', error: failure(e).error };
          }
        });
        if (done.type === 'ok') {
          ends.set(partition, (done.value as { end: number }).end);
          break;
        }
        await ctx.sleep(300);
      }
    }
    // A final consumer per group drains every partition to its end and commits: the group's committed offsets
    // must then cover every acknowledged record exactly once.
    for (const group of o.groups) {
      for (let partition = 0; partition < o.partitions; partition++) {
        const end = ends.get(partition);
        if (end === undefined) continue;
        await this.drain(ctx, client, group, partition, end);
      }
    }
  }

  private async drain(
    ctx: FinalContext,
    client: LogClient,
    group: string,
    partition: number,
    end: number,
  ): Promise<void> {
    const o = this.options;
    const key = `${group}/${partition}`;
    let attempt = 0;
    while (Date.now() < ctx.deadline) {
      const session = `final.${group}.${partition}.${attempt++}`;
      const start = await ctx.perform({ f: 'committed', key, value: { session, group, partition } }, async () => {
        try {
          return {
            type: 'ok',
            value: { session, group, partition, offset: (await client.committed(o.topic, partition, group)) ?? 0 },
          };
        } catch (e) {
          return { type: 'fail', error: failure(e).error };
        }
      });
      if (start.type !== 'ok') {
        await ctx.sleep(300);
        continue;
      }
      const expect = (start.value as { offset: number }).offset;
      let position = expect;
      while (position < end && Date.now() < ctx.deadline) {
        const from = position;
        const done = await ctx.perform({ f: 'poll', key, value: { session, group, partition, from } }, async () => {
          try {
            const a = await client.fetch(o.topic, partition, from, { maxRecords: 1000 });
            return {
              type: 'ok',
              value: { session, group, partition, from, records: recordsOf(a), next: a.next_offset, end: a.end_offset },
            };
          } catch (e) {
            return { type: 'fail', error: failure(e).error };
          }
        });
        if (done.type === 'ok') position = (done.value as { next: number }).next;
        else await ctx.sleep(200);
      }
      if (position === expect) return;
      const done = await ctx.perform(
        { f: 'commit', key, value: { session, group, partition, expect, offset: position } },
        async () => {
          try {
            await client.commit(o.topic, partition, group, position, expect);
            return { type: 'ok' };
          } catch (e) {
            if (e instanceof LogError && e.code === 'offset_conflict') {
              const current = conflictCurrent(e);
              return current === position
                ? { type: 'info', error: 'offset_conflict_same' }
                : { type: 'fail', error: 'offset_conflict', value: { current } };
            }
            return failure(e);
          }
        },
      );
      if (done.type === 'ok') return;
      await ctx.sleep(200); // refused or unknown: read the committed offset again and go on from there
    }
  }

  async close(): Promise<void> {
    await Promise.all(this.clients.splice(0).map((c) => c.close().catch(() => undefined)));
  }

  /** The committed-offset registers: commit = cas [expect, offset] (write when unconditional), committed = read. */
  modelEvents(events: readonly HistoryEvent[]): readonly HistoryEvent[] {
    return commitRegisterEvents(events);
  }

  check(events: readonly HistoryEvent[]): CheckResult[] {
    return checkLogHistory(events);
  }
}

/** The history of the committed-offset registers, in the cas-register model's terms. */
export function commitRegisterEvents(events: readonly HistoryEvent[]): HistoryEvent[] {
  const inputs = new Map<number, { expect: number | null; offset: number } | 'read'>();
  const out: HistoryEvent[] = [];
  for (const e of events) {
    if (typeof e.process !== 'number' || (e.f !== 'commit' && e.f !== 'committed')) continue;
    const base = {
      process: e.process,
      time: e.time,
      ...(e.key !== undefined ? { key: e.key } : {}),
      ...(e.node !== undefined ? { node: e.node } : {}),
    };
    if (e.type === 'invoke') {
      const v = (e.value ?? {}) as { expect?: unknown; offset?: unknown };
      if (e.f === 'committed') {
        inputs.set(e.process, 'read');
        out.push({ ...base, type: 'invoke', f: 'read' });
      } else {
        const input = { expect: typeof v.expect === 'number' ? v.expect : null, offset: Number(v.offset) };
        inputs.set(e.process, input);
        out.push(
          input.expect === null
            ? { ...base, type: 'invoke', f: 'write', value: input.offset }
            : { ...base, type: 'invoke', f: 'cas', value: [input.expect, input.offset] },
        );
      }
      continue;
    }
    const input = inputs.get(e.process);
    inputs.delete(e.process);
    if (input === undefined) continue;
    if (input === 'read') {
      const offset = (e.value as { offset?: unknown } | undefined)?.offset;
      out.push({
        ...base,
        type: e.type,
        f: 'read',
        ...(e.type === 'ok' ? { value: typeof offset === 'number' ? offset : 0 } : {}),
        ...(e.error !== undefined ? { error: e.error } : {}),
      });
    } else if (input.expect === null) {
      out.push({
        ...base,
        type: e.type,
        f: 'write',
        value: input.offset,
        ...(e.error !== undefined ? { error: e.error } : {}),
      });
    } else {
      out.push({
        ...base,
        type: e.type,
        f: 'cas',
        value: [input.expect, input.offset],
        ...(e.error === 'offset_conflict'
          ? { error: 'cas_mismatch' }
          : e.error !== undefined
            ? { error: e.error }
            : {}),
      });
    }
  }
  return out;
}
