/**
 * A typed client of the event log for other programs: topics, idempotent producers, fetches, and consumer groups
 * whose offsets are committed through the log. Every call about a partition goes straight to the member leading
 * it (GroupRouter), and is retried there or elsewhere while the partition elects a leader.
 */
import { randomUUID } from 'node:crypto';
import { GroupRouter, ServiceError } from '@raftkit/http';
import type { AppendAnswer, FetchAnswer } from './members/rpc-route.js';

export type { AppendAnswer, FetchAnswer };
import { RpcChannels } from './rpc-channels.js';
import { MAX_RECORDS_PER_APPEND } from './machine.js';
import { partitionGroup, partitionOf, type TopicAccess } from './topics.js';

export { ServiceError as LogError };

export interface LogClientOptions {
  /** Base URLs of some members, e.g. http://127.0.0.1:7901 */
  endpoints: string[];
  token: string;
  /** Give up after this long per call. Default 15 s. */
  timeoutMs?: number;
  /**
   * Connections per member (default 16). Requests in flight to one member beyond this wait for a connection, so
   * a program with more concurrent plain appends than this should raise it (LogProducer needs few: it batches).
   */
  connections?: number;
  /**
   * Appends and fetches over the members' binary route (`GET /v1/rpc`, default true): the appends of one turn to a
   * partition's leader leave in one frame, and a fetch's page comes back as msgpack. False keeps every call on HTTP.
   */
  binaryRoute?: boolean;
}

export interface TopicSettings {
  partitions?: number;
  replicas?: number;
  retention?: { max_age_ms?: number; max_bytes?: number };
  /** Who besides the service's own processes may use it (default: the service's; `client_write` on the log's own cluster). */
  access?: TopicAccess;
}

export interface TopicDescription {
  name: string;
  partitions: number;
  replicas: number;
  retention: { max_age_ms: number; max_bytes: number };
  access: TopicAccess;
  partition_groups: Array<{
    partition: number;
    group: string;
    leader: string | null;
    members: Array<{ id: string; url: string | null }>;
  }>;
  created?: boolean;
}

export interface LogRecord {
  offset: number;
  time: number;
  key: string | null;
  value: string;
}

export interface GroupJoin {
  group: string;
  member: string;
  /** Grows on every membership change; offset commits carry it. */
  generation: number;
  /** Live members, sorted. */
  members: string[];
  slots: number;
  /** The slots this member consumes in this generation. */
  assigned: number[];
}

export interface ConsumedRecord extends LogRecord {
  partition: number;
}

const META = 'meta';

export class LogClient {
  readonly router: GroupRouter;
  private readonly partitionCounts = new Map<string, number>();
  private readonly channels: RpcChannels | null;

  constructor(options: LogClientOptions) {
    this.router = new GroupRouter(options);
    this.channels = options.binaryRoute === false ? null : new RpcChannels(this.router, options.token);
  }

  close(): Promise<void> {
    this.channels?.close();
    return this.router.close();
  }

  /** Creates a topic (the cluster token, or the hosting service's own workers); creating it again with the same settings is not an error. */
  async createTopic(name: string, settings: TopicSettings = {}): Promise<TopicDescription> {
    return (await this.router.call(META, 'POST', '/v1/topics', { name, ...settings })) as TopicDescription;
  }

  async topic(name: string): Promise<TopicDescription> {
    const topic = (await this.router.call(META, 'GET', `/v1/topics/${encodeURIComponent(name)}`)) as TopicDescription;
    this.partitionCounts.set(name, topic.partitions);
    return topic;
  }

  async deleteTopic(name: string): Promise<void> {
    await this.router.call(META, 'DELETE', `/v1/topics/${encodeURIComponent(name)}`);
  }

  /** The partition count of a topic (cached). */
  async partitions(topic: string): Promise<number> {
    return this.partitionCounts.get(topic) ?? (await this.topic(topic)).partitions;
  }

  /** The partition a key goes to (the members use the same function). */
  async partitionFor(topic: string, key: string): Promise<number> {
    return partitionOf(key, await this.partitions(topic));
  }

  /** Appends records to one partition; with `producer` and `seq`, a retry of the same sequence is stored once. */
  async append(
    topic: string,
    partition: number,
    records: Array<{ key?: string | null; value: string }>,
    idempotence?: { producer: string; seq: number },
  ): Promise<AppendAnswer> {
    const body = { records: records.map((r) => ({ key: r.key ?? null, value: r.value })), ...(idempotence ?? {}) };
    const group = partitionGroup(topic, partition);
    // The binary route when the leader's is open; null sends the call over HTTP (see RpcChannels).
    const fast =
      this.channels === null ? null : await this.channels.call<AppendAnswer>(group, { topic, partition, ...body });
    if (fast !== null) return fast;
    return (await this.router.call(group, 'POST', `${partitionPath(topic, partition)}/records`, body)) as AppendAnswer;
  }

  /** Records from `offset` on; with `waitMs`, waits that long for one to arrive (a long poll). */
  async fetch(
    topic: string,
    partition: number,
    offset: number,
    options: { maxRecords?: number; maxBytes?: number; waitMs?: number } = {},
  ): Promise<FetchAnswer> {
    const group = partitionGroup(topic, partition);
    const timeoutMs = this.router.timeoutMs + (options.waitMs ?? 0);
    if (this.channels !== null) {
      const call: Record<string, unknown> = { op: 'fetch', topic, partition, offset };
      if (options.maxRecords !== undefined) call.max_records = options.maxRecords;
      if (options.maxBytes !== undefined) call.max_bytes = options.maxBytes;
      if (options.waitMs !== undefined) call.wait_ms = options.waitMs;
      const fast = await this.channels.call<FetchAnswer>(group, call, timeoutMs);
      if (fast !== null) return fast;
    }
    const query = new URLSearchParams({ offset: String(offset) });
    if (options.maxRecords !== undefined) query.set('max_records', String(options.maxRecords));
    if (options.maxBytes !== undefined) query.set('max_bytes', String(options.maxBytes));
    if (options.waitMs !== undefined) query.set('wait_ms', String(options.waitMs));
    return (await this.router.call(group, 'GET', `${partitionPath(topic, partition)}/records?${query}`, undefined, {
      timeoutMs,
    })) as FetchAnswer;
  }

  /**
   * Reads a partition from `from` to its end (as of the reads), page by page, with `pagesInFlight` fetches
   * outstanding (default 2), so the member builds the next page while this program handles the current one.
   * Pages are requested at the offsets they should start at (offsets are contiguous); when a page comes back
   * shorter (the byte limit cut it, retention moved the start, or the end is near), the pages asked for after it
   * are dropped and reading goes on from where it really ended, with that page size from then on. Yields each
   * page's records, in offset order, each record once.
   */
  async *scan(
    topic: string,
    partition: number,
    from: number,
    options: { pageRecords?: number; maxBytes?: number; pagesInFlight?: number } = {},
  ): AsyncGenerator<LogRecord[]> {
    let pageRecords = options.pageRecords ?? 1_000;
    const maxBytes = options.maxBytes ?? 1024 * 1024;
    const inFlight = Math.max(1, options.pagesInFlight ?? 2);
    const pending: Array<{ offset: number; records: number; answer: Promise<FetchAnswer> }> = [];
    let next = from;
    let end = Infinity;
    const drop = (): void => {
      for (const p of pending) p.answer.catch(() => undefined);
      pending.length = 0;
    };
    try {
      for (;;) {
        while (pending.length < inFlight && next < end) {
          pending.push({
            offset: next,
            records: pageRecords,
            answer: this.fetch(topic, partition, next, { maxRecords: pageRecords, maxBytes }),
          });
          next += pageRecords;
        }
        const head = pending.shift();
        if (head === undefined) return;
        const page = await head.answer;
        end = Math.min(end, page.end_offset);
        if (page.records.length > 0) yield page.records;
        if (page.next_offset >= page.end_offset || page.records.length === 0) {
          drop();
          return;
        }
        if (page.next_offset !== head.offset + head.records) {
          drop();
          if (page.records.length < pageRecords && page.records[0]!.offset === head.offset)
            pageRecords = page.records.length;
          next = page.next_offset;
        }
      }
    } finally {
      drop();
    }
  }

  /**
   * Commits a consumer group's next offset for a partition. With `expect`, only if the committed offset is still
   * `expect` (else a LogError 409 `offset_conflict` whose body names the current one): two consumers of one group
   * on one partition cannot both move it.
   */
  async commit(
    topic: string,
    partition: number,
    group: string,
    offset: number,
    expect?: number,
    generation?: number,
  ): Promise<void> {
    await this.router.call(
      partitionGroup(topic, partition),
      'POST',
      `${partitionPath(topic, partition)}/offsets/${encodeURIComponent(group)}`,
      { offset, ...(expect !== undefined ? { expect } : {}), ...(generation !== undefined ? { generation } : {}) },
    );
  }

  /**
   * Joins a consumer group coordinated by `topic`'s partition 0, or renews `member`'s lease for `ttlMs`: the answer
   * is the group's generation, its live members and the slots (of `slots`) this member is assigned.
   */
  async joinGroup(topic: string, group: string, member: string, slots: number, ttlMs?: number): Promise<GroupJoin> {
    return (await this.router.call(partitionGroup(topic, 0), 'POST', memberPath(topic, group, member), {
      slots,
      ...(ttlMs !== undefined ? { ttl_ms: ttlMs } : {}),
    })) as GroupJoin;
  }

  /** Leaves a consumer group at once (its slots go to the others at their next heartbeat). */
  async leaveGroup(topic: string, group: string, member: string): Promise<void> {
    await this.router.call(partitionGroup(topic, 0), 'DELETE', memberPath(topic, group, member));
  }

  /** A consumer group's committed offset for a partition (linearizable), or null when it never committed. */
  async committed(topic: string, partition: number, group: string): Promise<number | null> {
    const answer = (await this.router.call(
      partitionGroup(topic, partition),
      'GET',
      `${partitionPath(topic, partition)}/offsets/${encodeURIComponent(group)}`,
    )) as { offset: number | null };
    return answer.offset;
  }

  producer(
    topic: string,
    options: { id?: string; deliveryTimeoutMs?: number } & ProducerBufferOptions = {},
  ): LogProducer {
    return new LogProducer(this, topic, options.id ?? randomUUID(), options.deliveryTimeoutMs, options);
  }

  consumer(topic: string, group: string, options: LogConsumerOptions = {}): LogConsumer {
    return new LogConsumer(this, topic, group, options);
  }
}

/** A record a producer was asked to send and the caller waiting for its offset. */
interface QueuedRecord {
  record: { key: string | null; value: string };
  bytes: number;
  resolve: (offset: number) => void;
  reject: (error: unknown) => void;
}

/**
 * The producer's memory bound (Kafka's buffer.memory and max.block.ms): records waiting to be acknowledged may hold
 * at most `maxBufferedBytes`; a `send()` past it waits for room, and fails with 503 `producer_buffer_full` after
 * `maxBlockMs`, so a producer faster than the log slows down instead of growing without bound.
 */
interface ProducerBufferOptions {
  maxBufferedBytes?: number;
  maxBlockMs?: number;
}

const DEFAULT_PRODUCER_BUFFER_BYTES = 32 * 1024 * 1024;
const DEFAULT_PRODUCER_MAX_BLOCK_MS = 60_000;

/** What one batch may carry: the partition's limit in records, and well under a request body's 1 MiB. */
const BATCH_RECORDS = MAX_RECORDS_PER_APPEND;
const BATCH_BYTES = 512 * 1024;

/**
 * An idempotent producer: a producer id and, per partition, a sequence number that grows by one a batch. A batch
 * is retried with its sequence until it is acknowledged, so it is stored once whatever fails in between; batches to
 * one partition go one at a time, in order.
 *
 * `send()` batches by itself (as Kafka's producer does): records sent while a partition's batch is in flight wait
 * and leave together in the next one, so many concurrent senders cost one request and one Raft entry per round
 * trip instead of one each. A lone sender waits for nothing but the end of its turn of the event loop.
 */
export class LogProducer {
  private readonly seqs = new Map<number, number>();
  private readonly tails = new Map<number, Promise<unknown>>();
  private readonly queues = new Map<number, QueuedRecord[]>();
  private readonly flushing = new Set<number>();
  private failed: Error | null = null;
  /** Bytes of records queued or in flight, not yet acknowledged or failed. */
  private bufferedBytes = 0;
  /** Senders waiting for room in the buffer, oldest first (room is handed out in order). */
  private readonly waitingForRoom: Array<{ bytes: number; admit: () => void }> = [];
  private readonly maxBufferedBytes: number;
  private readonly maxBlockMs: number;

  constructor(
    private readonly client: LogClient,
    readonly topic: string,
    readonly id: string,
    /** How long one batch is retried before the producer gives up for good (its next sequence is unknowable). */
    private readonly deliveryTimeoutMs = 120_000,
    buffer: ProducerBufferOptions = {},
  ) {
    this.maxBufferedBytes = buffer.maxBufferedBytes ?? DEFAULT_PRODUCER_BUFFER_BYTES;
    this.maxBlockMs = buffer.maxBlockMs ?? DEFAULT_PRODUCER_MAX_BLOCK_MS;
  }

  /** Bytes held by records not yet acknowledged (queued or in flight); never above `maxBufferedBytes` but for one record. */
  get buffered(): number {
    return this.bufferedBytes;
  }

  /** Waits until `bytes` more fit in the buffer (a record larger than the whole buffer is let in alone). */
  private async reserve(bytes: number): Promise<void> {
    const fits = (): boolean => this.bufferedBytes === 0 || this.bufferedBytes + bytes <= this.maxBufferedBytes;
    if (this.waitingForRoom.length === 0 && fits()) {
      this.bufferedBytes += bytes;
      return;
    }
    await new Promise<void>((resolve, reject) => {
      const waiter = {
        bytes,
        admit: () => {
          clearTimeout(timer);
          this.bufferedBytes += bytes;
          resolve();
        },
      };
      const timer = setTimeout(() => {
        this.waitingForRoom.splice(this.waitingForRoom.indexOf(waiter), 1);
        reject(
          new ServiceError(
            503,
            'producer_buffer_full',
            `the producer's ${this.maxBufferedBytes} buffered bytes stayed full for ${this.maxBlockMs} ms: the log is slower than this producer`,
            null,
          ),
        );
        this.admitWaiting();
      }, this.maxBlockMs);
      this.waitingForRoom.push(waiter);
    });
  }

  private release(bytes: number): void {
    this.bufferedBytes -= bytes;
    this.admitWaiting();
  }

  private admitWaiting(): void {
    for (;;) {
      const next = this.waitingForRoom[0];
      if (next === undefined || (this.bufferedBytes !== 0 && this.bufferedBytes + next.bytes > this.maxBufferedBytes))
        return;
      this.waitingForRoom.shift();
      next.admit();
    }
  }

  /** Sends one record; its key (when given) picks the partition, else `partition` does (default 0). */
  async send(
    value: string,
    options: { key?: string; partition?: number } = {},
  ): Promise<{ partition: number; offset: number }> {
    const partition =
      options.partition ?? (options.key !== undefined ? await this.client.partitionFor(this.topic, options.key) : 0);
    const record = { key: options.key ?? null, value };
    const bytes = Buffer.byteLength(value) + (record.key === null ? 0 : Buffer.byteLength(record.key)) + 32;
    await this.reserve(bytes);
    const offset = await new Promise<number>((resolve, reject) => {
      let queue = this.queues.get(partition);
      if (queue === undefined) this.queues.set(partition, (queue = []));
      queue.push({ record, bytes, resolve, reject });
      if (!this.flushing.has(partition)) void this.flush(partition);
    }).finally(() => this.release(bytes));
    return { partition, offset };
  }

  /** Sends a partition's queued records, a batch at a time, until none is left. */
  private async flush(partition: number): Promise<void> {
    this.flushing.add(partition);
    try {
      const queue = this.queues.get(partition)!;
      for (;;) {
        // Records sent in the same turn of the event loop leave together: the batch is cut at the end of the turn,
        // once every send of it has queued, those set off by the previous batch's answers too (each is several
        // promise steps away; cut after one, a batch of 64 senders in a closed loop left with a few of them and
        // the rest waited a whole round trip for the next).
        await new Promise<void>((resolve) => setImmediate(resolve));
        if (queue.length === 0) break;
        let bytes = 0;
        let count = 0;
        while (
          count < queue.length &&
          count < BATCH_RECORDS &&
          (count === 0 || bytes + queue[count]!.bytes <= BATCH_BYTES)
        )
          bytes += queue[count++]!.bytes;
        const batch = queue.splice(0, count);
        try {
          const answer = await this.sendBatch(
            partition,
            batch.map((q) => q.record),
          );
          batch.forEach((q, i) => q.resolve(answer.base_offset + i));
        } catch (e) {
          for (const q of batch) q.reject(e);
        }
      }
      this.queues.delete(partition);
    } finally {
      this.flushing.delete(partition);
    }
  }

  /** Sends records to one partition as one batch (stored once, together, in order). */
  sendBatch(partition: number, records: Array<{ key?: string | null; value: string }>): Promise<AppendAnswer> {
    const previous = this.tails.get(partition) ?? Promise.resolve();
    const run = previous.catch(() => undefined).then(() => this.deliver(partition, records));
    this.tails.set(partition, run);
    return run;
  }

  private async deliver(
    partition: number,
    records: Array<{ key?: string | null; value: string }>,
  ): Promise<AppendAnswer> {
    if (this.failed !== null) throw this.failed;
    const seq = this.seqs.get(partition) ?? 0;
    const deadline = Date.now() + this.deliveryTimeoutMs;
    for (;;) {
      try {
        const answer = await this.client.append(this.topic, partition, records, { producer: this.id, seq });
        this.seqs.set(partition, seq + 1);
        return answer;
      } catch (e) {
        // 503 (no leader, outcome unknown) and 429 (partition behind) are retried with the same sequence, which is
        // what makes the retry safe; anything else is the caller's to see.
        if (e instanceof ServiceError && (e.status === 503 || e.status === 429) && Date.now() < deadline) {
          await new Promise((r) => setTimeout(r, 100));
          continue;
        }
        // Whether the batch was stored is unknown, so no later batch can be numbered: this producer is done.
        if (e instanceof ServiceError && (e.status === 503 || e.status === 429))
          this.failed = new ServiceError(
            503,
            'producer_failed',
            `batch ${seq} of partition ${partition} was not acknowledged in time; create a new producer`,
            e.body,
          );
        throw this.failed ?? e;
      }
    }
  }
}

export interface LogConsumerOptions {
  partitions?: number[];
  maxRecords?: number;
  waitMs?: number;
  /** The group generation its commits carry (a GroupConsumer claim's), so a member moved on from is fenced. */
  generation?: () => number;
}

/**
 * A consumer in a consumer group: it reads its partitions from the group's committed offsets, and `commit()`
 * records its positions through the log, each only if nobody else moved it since (so a record is consumed once per
 * group even when two consumers overlap). After any failover it resumes right after the last committed offset.
 */
export class LogConsumer {
  private readonly positions = new Map<number, number>();
  private readonly committedAt = new Map<number, number>();
  private partitionList: number[] | null;
  private turn = 0;

  constructor(
    private readonly client: LogClient,
    readonly topic: string,
    readonly group: string,
    private readonly options: LogConsumerOptions,
  ) {
    this.partitionList = options.partitions ?? null;
  }

  private async partitions(): Promise<number[]> {
    this.partitionList ??= Array.from({ length: await this.client.partitions(this.topic) }, (_, i) => i);
    return this.partitionList;
  }

  private async position(partition: number): Promise<number> {
    let position = this.positions.get(partition);
    if (position === undefined) {
      const committed = (await this.client.committed(this.topic, partition, this.group)) ?? 0;
      this.committedAt.set(partition, committed);
      position = committed;
      this.positions.set(partition, position);
    }
    return position;
  }

  /** The next records of one of its partitions (round robin; waits up to `waitMs` when there are none). */
  async poll(): Promise<ConsumedRecord[]> {
    const partitions = await this.partitions();
    for (let i = 0; i < partitions.length; i++) {
      const partition = partitions[this.turn++ % partitions.length]!;
      const offset = await this.position(partition);
      const last = i === partitions.length - 1;
      const answer = await this.client.fetch(this.topic, partition, offset, {
        maxRecords: this.options.maxRecords ?? 500,
        waitMs: last ? (this.options.waitMs ?? 1000) : 0,
      });
      // Records before the start were removed by retention: the position moves to the first one held.
      this.positions.set(partition, answer.next_offset);
      if (answer.records.length > 0) return answer.records.map((r) => ({ ...r, partition }));
    }
    return [];
  }

  /** Reads `partition` from `offset` next (a batch that could not be handled is read again). */
  seek(partition: number, offset: number): void {
    this.positions.set(partition, offset);
  }

  /**
   * Forgets every position not committed: the next poll reads from the committed offsets again. A consumer that
   * failed to handle what it polled calls it, so its next commit cannot pass records it never handled.
   */
  rewind(): void {
    this.positions.clear();
    this.committedAt.clear();
  }

  /**
   * Commits every position that moved. A LogError 409 `offset_conflict` means another consumer of the group moved
   * that partition (or, when the router retried this commit after a lost answer, this consumer itself): this
   * consumer forgets its position there and rereads from the committed offset.
   */
  async commit(): Promise<void> {
    for (const [partition, position] of this.positions) {
      const committed = this.committedAt.get(partition);
      if (committed === position) continue;
      try {
        await this.client.commit(this.topic, partition, this.group, position, committed, this.options.generation?.());
        this.committedAt.set(partition, position);
      } catch (e) {
        if (e instanceof ServiceError && e.code === 'offset_conflict') {
          // Even when the current offset is this consumer's position it is a conflict: a retry of this commit whose
          // first attempt applied cannot be told from another consumer of the group that read the same records and
          // committed the same offset first; taking it as ours would have both believe they consumed them (found by
          // jepsen-like's log-same-offset workload). Rereading from the committed offset skips and repeats nothing.
          this.positions.delete(partition);
          this.committedAt.delete(partition);
        }
        throw e;
      }
    }
  }
}

function partitionPath(topic: string, partition: number): string {
  return `/v1/topics/${encodeURIComponent(topic)}/partitions/${partition}`;
}

function memberPath(topic: string, group: string, member: string): string {
  return `/v1/topics/${encodeURIComponent(topic)}/groups/${encodeURIComponent(group)}/members/${encodeURIComponent(member)}`;
}
