/**
 * One replica of a store partition: a FeedStore fed from the partition's log partition (`feed-store`, one log
 * partition per store partition, Raft-replicated on the members). A write call is appended to the log and answered
 * with the result of this replica applying it; every replica applies every record in offset order and keeps its
 * next offset in the same LevelDB batch as the record's writes (FeedStore.applying), so a replica killed at any
 * point resumes exactly where its store is.
 *
 * A replica whose store has never applied anything (new, or its disk wiped) first copies a peer replica's store
 * with the offset it holds (one LevelDB iterator on the peer, so the two match) and follows the log from there;
 * with no peer copy to be had it replays the log from offset 0, which is only complete while the log still starts
 * there. A replica that finds the log trimmed past its offset (it was down longer than the log's retention) copies
 * a peer again. Reads are refused (503, the client tries the next replica) until it has caught up with the log's end
 * as it was when it started.
 */
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { request } from 'undici';
import { HttpError, ServiceError, type Logger } from '@raftkit/http';
import type { LogClient, LogRecord } from '@raftkit/log';
import { isWrite, parseStoreCall, type StoreAnswer, type StoreCall } from '../../store-protocol.js';
import { keys } from './keys.js';
import { applyWrite } from './ops.js';
import type { FeedStore } from './store.js';

/** The log topic of the store partitions' writes: partition p of it feeds every replica of store partition p. */
const STORE_TOPIC = 'feed-store';
/**
 * What the log keeps of each partition (in the members' memory): the tail a replica restarted with its disk
 * catches up from. A replica down for longer, or wiped, copies a peer instead, so the log need not keep everything.
 */
const STORE_TOPIC_RETENTION = { max_age_ms: 24 * 3600_000, max_bytes: 32 * 1024 * 1024 };
/** A long poll of the log while caught up: an idle replica costs one request per this long. */
const POLL_MS = 20_000;
const FETCH_RECORDS = 500;
const FETCH_BYTES = 4 * 1024 * 1024;
/** How long a write waits for this replica to apply it, and a read for a given offset, before a 503. */
const APPLY_WAIT_MS = 5_000;
const READ_WAIT_MS = 1_000;
/** Results of applied records kept for the writes waiting on them (a write's append may return after its apply). */
const RESULTS_KEPT = 4_096;

type ReplicaState = 'starting' | 'copying' | 'catching_up' | 'ready' | 'stopped';

interface ReplicaDeps {
  log: LogClient;
  /** host:port of the other replicas' workers, preferred first. */
  peers: readonly string[];
  token: string;
  logger: Logger;
}

export class StoreReplica {
  state: ReplicaState = 'starting';
  /** The next log offset to apply. */
  applied = 0;
  /** Pending followers_count changes may be waiting for a fold (known from the ops applied). */
  foldPending = true;
  foldPendingSince = Date.now();
  readonly stats = { records: 0, copies: 0, replays: 0, copied_keys: 0 };
  private readonly results = new Map<number, StoreAnswer<StoreCall>>();
  private waiters: Array<{ offset: number; wake: () => void }> = [];
  private submitting = 0;
  private running: Promise<void> | null = null;

  constructor(
    readonly partition: number,
    readonly store: FeedStore,
    private readonly deps: ReplicaDeps,
  ) {}

  start(): void {
    this.running ??= this.run();
  }

  /** Stops the loop (a long poll in flight ends with the log client's close). */
  stop(): void {
    this.state = 'stopped';
    for (const w of this.waiters) w.wake();
  }

  /** A write: appended to the log, answered with this replica's apply of it (and its offset). */
  async submit(call: StoreCall): Promise<StoreAnswer<StoreCall>> {
    if (this.state !== 'ready') throw notReady(this);
    this.submitting++;
    try {
      let offset: number;
      try {
        offset = (await this.deps.log.append(STORE_TOPIC, this.partition, [{ value: JSON.stringify(call) }]))
          .base_offset;
      } catch (e) {
        // The log's answer, as this route's: a 503 (the client tries another replica, which appends it again).
        if (!(e instanceof ServiceError)) throw e;
        const status = e.status >= 500 || e.status === 429 ? 503 : e.status;
        throw new HttpError(
          status,
          `log_${e.code}`,
          `partition ${this.partition}: the log refused the write: ${e.message}`,
        );
      }
      await this.until(offset + 1, APPLY_WAIT_MS);
      const result = this.results.get(offset);
      if (result === undefined)
        throw new HttpError(503, 'outcome_unknown', `the write at offset ${offset} is applied; its answer is gone`);
      return { ...result, offset };
    } finally {
      this.submitting--;
    }
  }

  /** Waits until reads may be served with every record before `minOffset` applied (503 otherwise). */
  async readable(minOffset: number): Promise<void> {
    if (this.state !== 'ready') throw notReady(this);
    if (this.applied < minOffset) await this.until(minOffset, READ_WAIT_MS);
  }

  private async until(next: number, ms: number): Promise<void> {
    if (this.applied >= next) return;
    let waiter: { offset: number; wake: () => void } | undefined;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(wake, ms);
      waiter = { offset: next, wake };
      function wake(): void {
        clearTimeout(timer);
        resolve();
      }
      this.waiters.push(waiter);
    });
    // This waiter only, woken by the apply or by its timer: a timed-out one must not stay behind while the replica
    // is stalled, however many reads wait meanwhile.
    this.waiters = this.waiters.filter((w) => w !== waiter);
    if (this.applied < next)
      throw new HttpError(
        503,
        'replica_behind',
        `partition ${this.partition}: offset ${next - 1} not applied here yet`,
      );
  }

  /** A getter, not an inline comparison, so narrowing of `state` across awaits does not hide a stop. */
  private get stopped(): boolean {
    return this.state === 'stopped';
  }

  private async run(): Promise<void> {
    let backoff = 100;
    let restart = false;
    while (!this.stopped) {
      try {
        if (this.state === 'starting') {
          try {
            await this.recover(restart);
          } catch (e) {
            if (!this.stopped) this.state = 'starting';
            throw e;
          }
        }
        restart = false;
        const answer = await this.deps.log.fetch(STORE_TOPIC, this.partition, this.applied, {
          waitMs: this.state === 'ready' ? POLL_MS : 0,
          maxRecords: FETCH_RECORDS,
          maxBytes: FETCH_BYTES,
        });
        if (answer.start_offset > this.applied) {
          this.deps.logger.log('warn', 'the log was trimmed past this replica: copying a peer', {
            partition: this.partition,
            applied: this.applied,
            start: answer.start_offset,
          });
          this.state = 'starting';
          restart = true;
          continue;
        }
        for (const r of answer.records) {
          if (this.stopped) return;
          await this.apply(r);
        }
        if (this.state === 'catching_up') {
          if (this.applied >= answer.end_offset) this.state = 'ready';
          else if (answer.records.length === 0) await sleep(100);
        }
        backoff = 100;
      } catch (e) {
        if (this.stopped) return;
        this.deps.logger.log('warn', 'store replica loop failed; retrying', {
          partition: this.partition,
          state: this.state,
          error: String(e),
        });
        await sleep(backoff);
        backoff = Math.min(2_000, backoff * 2);
      }
    }
  }

  /** Sets `applied` from the store, a peer's copy, or offset 0 of a log that still starts there. */
  private async recover(force: boolean): Promise<void> {
    const have = await this.store.appliedOffset();
    if (have !== null && !force) {
      this.applied = have;
      this.state = 'catching_up';
      return;
    }
    this.state = 'copying';
    for (const peer of this.deps.peers) {
      try {
        const { offset, keys } = await this.copyFrom(peer);
        this.applied = offset;
        this.stats.copies++;
        this.stats.copied_keys = keys;
        this.state = 'catching_up';
        this.deps.logger.log('info', 'store replica copied from a peer', { partition: this.partition, peer, offset });
        return;
      } catch (e) {
        this.deps.logger.log('info', 'no copy from this peer', { partition: this.partition, peer, error: String(e) });
      }
    }
    const head = await this.deps.log.fetch(STORE_TOPIC, this.partition, 0, { maxRecords: 1 });
    if (head.start_offset !== 0) {
      throw new Error(`no peer copy, and the log starts at ${head.start_offset}: waiting for a peer`);
    }
    await this.store.reset();
    this.applied = 0;
    this.stats.replays++;
    this.state = 'catching_up';
  }

  private async copyFrom(peer: string): Promise<{ offset: number; keys: number }> {
    const res = await request(`http://${peer}/internal/store/copy?partition=${this.partition}`, {
      headers: { authorization: `Bearer ${this.deps.token}` },
      headersTimeout: 10_000,
      bodyTimeout: 30_000,
    });
    if (res.statusCode !== 200) {
      const text = await res.body.text();
      throw new Error(`status ${res.statusCode}: ${text.slice(0, 200)}`);
    }
    let offset: number | null = null;
    // Rows, then a trailer with their count: a stream cut short (the peer died) has none, and the copy is refused
    // before its offset is stored.
    async function* rows(): AsyncGenerator<[string, unknown]> {
      let count = 0;
      for await (const line of createInterface({ input: res.body, crlfDelay: Infinity })) {
        if (line === '') continue;
        const row = JSON.parse(line) as [string, unknown] | { end: number };
        if (!Array.isArray(row)) {
          if (row.end !== count) throw new Error(`the copy ended after ${count} rows, not ${row.end}`);
          return;
        }
        count++;
        if (row[0] === keys.applied) offset = row[1] as number;
        yield row;
      }
      throw new Error(`the copy was cut short after ${count} rows`);
    }
    const copied = await this.store.importAll(rows());
    if (offset === null) throw new Error('the copy named no offset');
    return { offset, keys: copied };
  }

  private async apply(record: LogRecord): Promise<void> {
    let call: StoreCall | null = null;
    try {
      const parsed = parseStoreCall(JSON.parse(record.value));
      if (isWrite(parsed)) call = parsed;
    } catch {
      // Not a store write (only this service's processes append here): applied as nothing, on every replica alike.
    }
    const result = await this.store.applying(record.offset, () =>
      call === null ? Promise.resolve(null) : applyWrite(this.store, call),
    );
    this.applied = record.offset + 1;
    this.stats.records++;
    if (call?.op === 'follower' && (result as { changed: boolean }).changed && !this.foldPending) {
      this.foldPending = true;
      this.foldPendingSince = Date.now();
    }
    if (call?.op === 'fold') this.foldPending = (result as { folded: number }).folded >= call.max;
    if (this.submitting > 0 && result !== null) {
      this.results.set(record.offset, result);
      if (this.results.size > RESULTS_KEPT) this.results.delete(this.results.keys().next().value!);
    }
    for (const w of this.waiters) if (w.offset <= this.applied) w.wake();
  }
}

function notReady(r: StoreReplica): HttpError {
  return new HttpError(503, 'replica_not_ready', `partition ${r.partition} replica is ${r.state}`, {
    partition: r.partition,
  });
}

/** Creates the store topic (idempotent), retrying while the members elect and register. */
export async function ensureStoreTopic(log: LogClient, partitions: number, deadlineMs = 600_000): Promise<void> {
  const deadline = Date.now() + deadlineMs;
  for (;;) {
    try {
      await log.createTopic(STORE_TOPIC, { partitions, retention: STORE_TOPIC_RETENTION });
      return;
    } catch (e) {
      if (e instanceof ServiceError && e.code === 'topic_exists') return;
      if (Date.now() > deadline) throw e;
      await sleep(500);
    }
  }
}
