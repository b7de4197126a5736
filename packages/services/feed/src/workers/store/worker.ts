/**
 * The store worker role (`cluster up` starts STORE_COUNT): with N store workers the users are split into N
 * partitions (by hash of user id, `partitionOf`), and this worker holds a replica of 3 of them (store-placement.ts:
 * partition p on workers p, p+1, p+2 mod N), each in its own LevelDB, fed from the `feed-store` log (replica.ts).
 * It serves StoreCalls to the app tier and the fan-out workers (`?partition=p` names the replica), a replica's copy
 * to a wiped peer, and proposes its preferred partitions' background ops: followers_count folds (spec rule 3:
 * asynchronously) and the retention sweep of old month buckets.
 */
import { join } from 'node:path';
import { once } from 'node:events';
import {
  clusterUrl,
  HttpError,
  serveWorkerHttp,
  type RequestContext,
  type RunningWorker,
  type WorkerOptions,
  type WorkerRole,
} from '@raftkit/http';
import { LogClient } from '@raftkit/log';
import { FeedStore } from './store.js';
import { ensureStoreTopic, StoreReplica } from './replica.js';
import { readCall } from './ops.js';
import { isWrite, parseStoreCall, type StoreCall } from '../../store-protocol.js';
import { partitionsOfWorker, replicaWorkers } from '../../store-placement.js';
import { settingNumber } from '../../settings.js';

export const STORE_ROLE = 'store';
export const STORE_COUNT = 4;
/** How often each replica looks whether a fold is due. */
const FOLD_EVERY_MS = 100;
/** A replica other than the preferred one proposes a fold that has been due this long (the preferred one is down). */
const FOLD_TAKEOVER_MS = 2_000;
/** The preferred replica proposes a sweep this long after it is ready, then this often. */
const FIRST_SWEEP_MS = 60_000;
const SWEEP_EVERY_MS = 3_600_000;
/** Month buckets kept by the sweep: the two a read uses plus one of slack. */
const DEFAULT_RETENTION_MONTHS = 3;

export const storeRole: WorkerRole = { role: STORE_ROLE, count: STORE_COUNT, start: startStore };

export async function startStore(options: WorkerOptions): Promise<RunningWorker> {
  const token = options.tokens[0]!;
  const threshold = settingNumber(options.settings, 'threshold', 'FEED_THRESHOLD', 1_000_000);
  const keepMonths = settingNumber(
    options.settings,
    'bucket_retention_months',
    'FEED_BUCKET_RETENTION_MONTHS',
    DEFAULT_RETENTION_MONTHS,
  );
  if (!Number.isSafeInteger(keepMonths) || keepMonths < 2)
    throw new Error('bucket_retention_months must be an integer of at least 2 (reads use two months)');
  const storeWorkers = options.workers.filter((w) => w.role === STORE_ROLE);
  const me = options.index - 1;
  const count = storeWorkers.length;
  const log = new LogClient({
    endpoints: options.members.map((m) => clusterUrl(m.httpAddress)),
    token,
    timeoutMs: 10_000,
  });
  const replicas = new Map<number, StoreReplica>();
  for (const p of partitionsOfWorker(me, count)) {
    const store = await FeedStore.open(join(options.dataDir, 'store', `p${p}`), threshold);
    const peers = replicaWorkers(p, count)
      .filter((w) => w !== me)
      .map((w) => storeWorkers[w]!.httpAddress);
    replicas.set(p, new StoreReplica(p, store, { log, peers, token, logger: options.logger }));
  }
  const preferred = (r: StoreReplica): boolean => replicaWorkers(r.partition, count)[0] === me;

  const http = await serveWorkerHttp(options, {
    health: () => ({
      partitions: [...replicas.values()].map((r) => ({
        partition: r.partition,
        state: r.state,
        applied: r.applied,
        fold_pending: r.foldPending,
        threshold: r.store.threshold,
        ...r.stats,
        ...r.store.stats,
      })),
    }),
  });
  const sum = (f: (r: StoreReplica) => number) => () => [...replicas.values()].reduce((n, r) => n + f(r), 0);
  http.metrics
    .gauge('feed_store_inbox_writes_total', 'Inbox entries written on this worker (every replica)')
    .set(sum((r) => r.store.stats.inboxWrites));
  http.metrics
    .gauge('feed_store_hot_hits_total', 'Inbox reads served by the hot cache')
    .set(sum((r) => r.store.stats.hotHits));
  http.metrics
    .gauge('feed_store_applied_total', 'Log records applied by this worker (every replica)')
    .set(sum((r) => r.stats.records));

  const replicaOf = (ctx: RequestContext): StoreReplica => {
    const text = ctx.query.get('partition');
    const p = text === null ? Number.NaN : Number(text);
    if (!Number.isSafeInteger(p) || p < 0 || p >= count)
      throw new HttpError(400, 'invalid_query', `partition must be 0..${count - 1}`, { field: 'partition' });
    const r = replicas.get(p);
    if (r === undefined)
      throw new HttpError(421, 'misdirected', `no replica of partition ${p} here`, {
        workers: replicaWorkers(p, count).map((w) => storeWorkers[w]!.id),
      });
    return r;
  };

  http.router.post('/internal/store/call', { admits: 'cluster' }, async (ctx) => {
    const replica = replicaOf(ctx);
    const call: StoreCall = parseStoreCall(await ctx.json());
    if (isWrite(call)) return replica.submit(call);
    const min = Number(ctx.query.get('min_offset') ?? 0);
    await replica.readable(Number.isSafeInteger(min) ? min : 0);
    return readCall(replica.store, call);
  });

  // A wiped peer's copy of one replica: newline-separated JSON [key, value], cfg/applied among them, then {end: rows}.
  http.router.get('/internal/store/copy', { admits: 'cluster' }, async (ctx) => {
    const replica = replicaOf(ctx);
    if (replica.state === 'copying' || replica.state === 'starting' || (await replica.store.appliedOffset()) === null)
      throw new HttpError(409, 'no_copy', `partition ${replica.partition} has no applied state here`);
    ctx.res.writeHead(200, { 'content-type': 'application/x-ndjson' });
    let count = 0;
    for await (const row of replica.store.exportAll()) {
      count++;
      if (ctx.res.destroyed) return undefined; // the copier went away
      if (!ctx.res.write(`${JSON.stringify(row)}\n`))
        await Promise.race([once(ctx.res, 'drain'), once(ctx.res, 'close')]);
    }
    // The trailer: the copier refuses a stream without it (cut short).
    ctx.res.end(`${JSON.stringify({ end: count })}\n`);
    return undefined;
  });

  let stopped = false;
  void ensureStoreTopic(log, count).then(
    () => {
      if (!stopped) for (const r of replicas.values()) r.start();
    },
    (e: unknown) => options.logger.log('error', 'the store topic could not be made', { error: String(e) }),
  );

  // Background ops, proposed through the log like any write (every replica applies them at the same offset).
  const folding = new Set<number>();
  const readyAt = new Map<number, number>();
  const lastSweep = new Map<number, number>();
  const propose = (r: StoreReplica, call: StoreCall, busy: Set<number>): void => {
    busy.add(r.partition);
    r.submit(call)
      .catch((e: unknown) =>
        options.logger.log('warn', `${call.op} not applied`, { partition: r.partition, e: String(e) }),
      )
      .finally(() => busy.delete(r.partition));
  };
  const sweeping = new Set<number>();
  const timer = setInterval(() => {
    const now = Date.now();
    for (const r of replicas.values()) {
      if (r.state !== 'ready') continue;
      if (r.foldPending && !folding.has(r.partition) && (preferred(r) || now - r.foldPendingSince > FOLD_TAKEOVER_MS))
        propose(r, { op: 'fold', max: 2_000 }, folding);
      if (!preferred(r) || sweeping.has(r.partition)) continue;
      if (!readyAt.has(r.partition)) readyAt.set(r.partition, now);
      const last = lastSweep.get(r.partition) ?? readyAt.get(r.partition)! - SWEEP_EVERY_MS + FIRST_SWEEP_MS;
      if (now - last < SWEEP_EVERY_MS) continue;
      lastSweep.set(r.partition, now);
      propose(r, { op: 'sweep', now, keep_months: keepMonths }, sweeping);
    }
  }, FOLD_EVERY_MS);
  return {
    httpPort: http.port,
    async stop() {
      stopped = true;
      clearInterval(timer);
      await http.close();
      for (const r of replicas.values()) r.stop();
      await log.close();
      await Promise.all([...replicas.values()].map((r) => r.store.close()));
    },
  };
}
