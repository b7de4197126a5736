/**
 * The analytics worker: consumes the partitions of the click topic it owns (partition.ts, click-log.ts), each from
 * its own offset (kept in that partition's LevelDB with its aggregates and written in the same batch, see store.ts,
 * so the counts and the offset move together), in batches of up to `analytics_batch` records
 * (default 1,000; a record is a block of clicks) or whatever arrived within `analytics_wait_ms` (default 200),
 * and serves GET /internal/stats/:code (for the codes of its partitions) and POST /internal/replay.
 * Settings: analytics_batch, analytics_wait_ms, analytics_max_referers, analytics_cache_keys, analytics_flush_ms.
 */
import { join } from 'node:path';
import {
  badRequest,
  HttpError,
  serveWorkerHttp,
  unavailable,
  type Logger,
  type RequestContext,
  type MetricsRegistry,
  type RunningWorker,
  type WorkerOptions,
} from '@raftkit/http';
import type { LogClient } from '@raftkit/log';
import { CODE } from './aggregate.js';
import {
  analyticsReplicas,
  CLICK_TOPIC,
  clickLogClient,
  clickLogEndpoints,
  clickPartitions,
  decodeValue,
  ensureClickTopic,
} from './click-log.js';
import { ownedPartitions, partitionOf, workersOf } from './partition.js';
import { positiveIntSetting } from './settings.js';
import { AnalyticsStore, DEFAULT_FLUSH_MS } from './store.js';
import { decodeRecord } from './wire.js';

const RETRY_MIN_MS = 100;
const RETRY_MAX_MS = 2_000;
/** Bytes per fetch: a record is a block of up to 500 clicks. */
const FETCH_BYTES = 4 << 20;

/** One fetch of a partition: records from `offset` (past `from` when retention dropped some), and the log's end. */
interface FetchResult {
  offset: number;
  records: Uint8Array[];
  end: number;
}

/** The counters every consumer of a worker adds to (a registry renders each name once). */
interface ConsumerMetrics {
  counted: { inc(n: number): void };
  duplicates: { inc(n: number): void };
  invalid: { inc(n: number): void };
  skipped: { inc(n: number): void };
}

function consumerMetrics(m: MetricsRegistry): ConsumerMetrics {
  return {
    counted: m.counter('analytics_clicks_counted_total', 'Clicks added to the aggregates'),
    duplicates: m.counter('analytics_duplicates_total', 'Clicks skipped as already counted (at-least-once redelivery)'),
    invalid: m.counter('analytics_invalid_records_total', 'Clicks or records that are not well formed (skipped)'),
    skipped: m.counter(
      'analytics_records_lost_to_retention_total',
      'Records deleted by the click log retention before they were consumed',
    ),
  };
}

/** Pulls batches of one partition from the click log into its store until stopped; a replay wipes the store between two batches. */
class ClickConsumer {
  private running = true;
  private loop: Promise<void> | undefined;
  private replayWaiters: Array<() => void> = [];
  private wake: (() => void) | undefined;
  /** The partition's end (committed records) at the last answer (for lag), null before the first. */
  private streamEnd: number | null = null;
  private readonly client: LogClient;
  private readonly partition: number;
  private readonly counted;
  private readonly duplicates;
  private readonly invalid;
  private readonly skipped;

  constructor(
    private readonly store: AnalyticsStore,
    source: { log: LogClient; partition: number },
    private readonly options: { batch: number; waitMs: number; logger: Logger; metrics: ConsumerMetrics },
  ) {
    this.client = source.log;
    this.partition = source.partition;
    ({
      counted: this.counted,
      duplicates: this.duplicates,
      invalid: this.invalid,
      skipped: this.skipped,
    } = options.metrics);
  }

  /** The partition's end at the last fetch, null before the first. */
  get end(): number | null {
    return this.streamEnd;
  }

  get lag(): number | null {
    return this.streamEnd === null ? null : Math.max(0, this.streamEnd - this.store.committedOffset);
  }

  start(): void {
    this.loop = this.run();
  }

  /** Resolves once the aggregates were wiped; consumption then restarts from offset 0. */
  replay(): Promise<void> {
    return new Promise((resolve) => {
      this.replayWaiters.push(resolve);
      this.wake?.();
    });
  }

  async stop(): Promise<void> {
    this.running = false;
    this.wake?.();
    await this.loop;
  }

  private async run(): Promise<void> {
    let failures = 0;
    // While there is a backlog, the next batch is fetched while this one is written to LevelDB.
    let prefetched: { from: number; answer: Promise<FetchResult> } | undefined;
    while (this.running) {
      if (this.replayWaiters.length > 0) {
        await this.store.wipe();
        this.streamEnd = null;
        this.options.logger.log('info', 'replay: aggregates wiped, consuming from offset 0');
        for (const resolve of this.replayWaiters.splice(0)) resolve();
      }
      const from = this.store.nextOffset;
      try {
        const answer = prefetched?.from === from ? prefetched.answer : this.fetch(from);
        prefetched = undefined;
        const result = await answer;
        failures = 0;
        this.streamEnd = result.end;
        if (result.offset > from) {
          this.skipped.inc(result.offset - from);
          this.options.logger.log('warn', 'records lost to the click log retention', { from, resumed: result.offset });
        }
        // A replay asked during the fetch must not be overtaken by this (pre-wipe) batch.
        if (this.replayWaiters.length > 0 || !this.running) continue;
        if (result.records.length === 0 && result.offset === from) continue;
        const next = result.offset + result.records.length;
        // A backlog (the log already holds more): fetch the next batch while this one is written. Records are
        // blocks of clicks, so a fetch is often cut by its byte bound before it reaches `batch` records.
        if (next < result.end) prefetched = { from: next, answer: this.fetch(next) };
        const batch = await this.store.apply(result.records.flatMap(decodeRecord), next);
        this.counted.inc(batch.accepted);
        this.duplicates.inc(batch.duplicates);
        this.invalid.inc(batch.invalid);
      } catch (e) {
        prefetched = undefined;
        if (this.store.failed) {
          this.options.logger.log('error', 'aggregates write failed; resuming from what is on disk', {
            error: (e as Error).message,
          });
          await this.store.recover().catch(() => undefined);
        }
        if (!this.running) break;
        failures++;
        if (failures === 1 || failures % 20 === 0)
          this.options.logger.log('warn', 'click log unreachable', { error: (e as Error).message, failures });
        await this.sleep(Math.min(RETRY_MAX_MS, RETRY_MIN_MS * 2 ** Math.min(failures - 1, 10)));
      }
    }
  }

  private fetch(from: number): Promise<FetchResult> {
    const answer = this.client
      .fetch(CLICK_TOPIC, this.partition, from, {
        maxRecords: this.options.batch,
        maxBytes: FETCH_BYTES,
        waitMs: this.options.waitMs,
      })
      .then((a) => ({
        offset: a.records[0]?.offset ?? Math.max(from, a.next_offset),
        records: a.records.map((r) => decodeValue(r.value)),
        end: a.end_offset,
      }));
    // A prefetch may be abandoned (replay, failure); its rejection must not go unhandled.
    answer.catch(() => undefined);
    return answer;
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        resolve();
      }
      this.wake = done;
    });
  }
}

/** One owned partition: its store and consumer. */
interface OwnedPartition {
  partition: number;
  store: AnalyticsStore;
  consumer: ClickConsumer;
}

export async function startAnalyticsWorker(options: WorkerOptions): Promise<RunningWorker> {
  if (clickLogEndpoints(options.workers).length === 0)
    throw new Error('the analytics worker needs the click log workers');
  const partitions = clickPartitions(options.settings);
  const owners = Math.max(1, workersOf(options.workers, 'analytics').length);
  const mine = ownedPartitions(options.index, owners, partitions, analyticsReplicas(options.settings));
  if (mine.length === 0)
    options.logger.log('warn', 'more analytics workers than click partitions: this one owns none', {
      partitions,
      analytics: owners,
    });
  const log = clickLogClient(options.workers, options.tokens[0]!);
  const http = await serveWorkerHttp(options, {
    health: () => {
      const partitions = Object.fromEntries(
        owned.map((o) => [o.partition, { offset: o.store.committedOffset, end: o.consumer.end, lag: o.consumer.lag }]),
      );
      const lags = owned.map((o) => o.consumer.lag);
      return {
        partitions,
        // Sums over the owned partitions (offsets of different partitions only add up as a count of records).
        offset: owned.reduce((n, o) => n + o.store.committedOffset, 0),
        lag: lags.some((l) => l === null) ? null : lags.reduce<number>((n, l) => n + l!, 0),
      };
    },
  });
  const metrics = consumerMetrics(http.metrics);
  const offsetGauge = http.metrics.gauge(
    'analytics_offset',
    'Click log offset up to which the aggregates on disk have counted, per partition',
  );
  const lagGauge = http.metrics.gauge(
    'analytics_lag',
    'Committed click log records (blocks of clicks) not yet counted, per partition',
  );
  const owned: OwnedPartition[] = [];
  for (const partition of mine) {
    const store = await AnalyticsStore.open(join(options.dataDir, `aggregates-p${partition}`), {
      maxReferers: positiveIntSetting(options.settings, 'analytics_max_referers', 200),
      cacheKeys: Math.ceil(positiveIntSetting(options.settings, 'analytics_cache_keys', 200_000) / mine.length),
      flushMs: positiveIntSetting(options.settings, 'analytics_flush_ms', DEFAULT_FLUSH_MS),
    });
    const consumer = new ClickConsumer(
      store,
      { log, partition },
      {
        batch: positiveIntSetting(options.settings, 'analytics_batch', 1_000),
        waitMs: positiveIntSetting(options.settings, 'analytics_wait_ms', 200),
        logger: options.logger,
        metrics,
      },
    );
    offsetGauge.set(() => store.committedOffset, { partition: String(partition) });
    lagGauge.set(() => consumer.lag ?? 0, { partition: String(partition) });
    owned.push({ partition, store, consumer });
  }
  // Internal routes: the cluster token only (client API keys authenticate too, but must not reach here).
  const clusterOnly = (ctx: RequestContext) => {
    if (ctx.principal?.kind !== 'cluster')
      throw new HttpError(403, 'forbidden', 'internal route: cluster token required');
  };
  http.router
    .get('/internal/stats/:code', { admits: 'cluster' }, async (ctx) => {
      clusterOnly(ctx);
      const code = ctx.params.code!;
      if (!CODE.test(code))
        throw badRequest('invalid_code', 'short code must be 1-64 characters of A-Z a-z 0-9 _ -', { field: 'code' });
      const partition = partitionOf(code, partitions);
      const mineToo = owned.find((o) => o.partition === partition);
      // Another worker's partition: answering zeros would pass for "never clicked".
      if (mineToo === undefined)
        throw new HttpError(
          421,
          'wrong_partition',
          `partition ${partition} of ${code} is not consumed by ${options.id}`,
          { partition },
        );
      try {
        return await mineToo.store.stats(code);
      } catch (e) {
        throw unavailable(`aggregates unreadable: ${(e as Error).message}`);
      }
    })
    .post('/internal/replay', { admits: 'cluster' }, async (ctx) => {
      clusterOnly(ctx);
      await Promise.all(owned.map((o) => o.consumer.replay()));
      return { status: 'replaying', from: 0, partitions: owned.map((o) => o.partition) };
    });
  // The topic may not exist yet (the first start of the cluster): fetches of a missing topic fail and are retried,
  // so creating it in the background is enough.
  let stopped = false;
  const created = (async () => {
    for (let attempt = 0; !stopped; attempt++) {
      try {
        return await ensureClickTopic(log, partitions);
      } catch (e) {
        if (attempt % 20 === 0)
          options.logger.log('warn', 'click topic not created yet', { error: (e as Error).message, attempt });
        await new Promise((resolve) => setTimeout(resolve, Math.min(2_000, 100 * 2 ** Math.min(attempt, 5))));
      }
    }
  })();
  for (const o of owned) o.consumer.start();
  return {
    httpPort: http.port,
    stop: async () => {
      stopped = true;
      await Promise.all(owned.map((o) => o.consumer.stop()));
      await created;
      await log.close();
      await http.close();
      await Promise.all(owned.map((o) => o.store.close()));
    },
  };
}
