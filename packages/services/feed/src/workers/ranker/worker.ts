/**
 * The ranker process (worker role `ranker`): answers rank, affinity and stats calls over the framed RPC on its tcp
 * address, serves /healthz and /metrics on HTTP, and keeps its features in memory, fed asynchronously by the
 * `feed-engagement` topic of the event log. Ranking never waits for the feed: it scores with whatever has arrived.
 *
 * Features are not persisted: a ranker that starts (or restarts) reads the topic from the start of its retention
 * with a consumer group of its own that never commits, so every ranker rebuilds the same features from the same
 * events, and the topic's retention is what bounds the replay.
 */
import {
  clusterUrl,
  serveWorkerHttp,
  type Logger,
  type RunningWorker,
  type WorkerOptions,
  type WorkerRole,
} from '@raftkit/http';
import { LogClient } from '@raftkit/log';
import { serveRpc } from '@raftkit/rpc';
import { fingerprint, RecentRankings } from './cache.js';
import { ENGAGEMENT_TOPIC, parseEngagement } from './engagement.js';
import { FeatureStore } from './features.js';
import { rank } from './score.js';
import { parseRankerRequest, type RankAnswer, type RankerRequest, type RankerStats } from './wire.js';

/** The engagement feed: reads the topic forever, applying each event, until stopped; survives a log outage. */
class EngagementFeed {
  private stopped = false;
  private readonly done: Promise<void>;
  malformed = 0;
  failures = 0;

  constructor(
    client: LogClient,
    private readonly features: FeatureStore,
    group: string,
    private readonly logger: Logger,
  ) {
    // One consumer for the process's life: its positions are the only record of what was applied, so a fresh
    // consumer after an error would apply events twice.
    const consumer = client.consumer(ENGAGEMENT_TOPIC, group, { maxRecords: 1_000, waitMs: 500 });
    this.done = (async () => {
      while (!this.stopped) {
        try {
          const records = await consumer.poll();
          for (const record of records) {
            const event = parseEngagement(record.value);
            if (event === null) this.malformed++;
            else this.features.apply(event);
          }
        } catch (error) {
          // The topic not created yet, or the log electing: retry; the features just stay a little stale.
          if (this.failures++ % 30 === 0)
            this.logger.log('warn', 'engagement feed: poll failed, retrying', {
              error: String(error),
              failures: this.failures,
            });
          await new Promise((r) => setTimeout(r, 1_000));
        }
      }
    })();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    // A long poll in flight ends by itself within its wait; do not hold shutdown much longer than that.
    await Promise.race([this.done, new Promise((r) => setTimeout(r, 2_000).unref())]);
  }
}

export interface RankerCore {
  features: FeatureStore;
  recent: RankedCache;
  handle(request: RankerRequest): RankAnswer | RankerStats | ReturnType<FeatureStore['affinity']> | null;
}

type RankedCache = RecentRankings;

/** The request handling without sockets (the worker wires it to the RPC server). */
export function rankerCore(
  features: FeatureStore,
  recent: RecentRankings,
  malformed: () => number,
  clock: () => number = Date.now,
): RankerCore {
  return {
    features,
    recent,
    handle(request) {
      switch (request.op) {
        case 'rank': {
          const at = clock();
          const print = fingerprint(request.candidates);
          if (request.fresh !== true) {
            const hit = recent.get(request.viewer, print, at);
            if (hit !== undefined) return { ranked: hit.ranked, cached: true, ranked_at: hit.rankedAt };
          }
          const ranked = rank(request.viewer, request.candidates, features, request.now ?? at);
          recent.put(request.viewer, print, ranked, at);
          return { ranked, cached: false, ranked_at: at };
        }
        case 'affinity':
          return features.affinity(request.viewer, request.author) ?? null;
        case 'stats':
          return {
            events_applied: features.applied,
            events_malformed: malformed(),
            pairs: features.pairCount,
            posts: features.postCount,
            cached_viewers: recent.size,
            cache_hits: recent.hits,
            cache_misses: recent.misses,
          };
      }
    },
  };
}

async function startRanker(options: WorkerOptions): Promise<RunningWorker> {
  const features = new FeatureStore();
  const recent = new RecentRankings();
  const log = new LogClient({
    endpoints: options.members.map((m) => clusterUrl(m.httpAddress)),
    token: options.tokens[0]!,
    timeoutMs: 10_000,
  });
  const feed = new EngagementFeed(log, features, `ranker-${options.id}-${Date.now()}`, options.logger);
  const core = rankerCore(features, recent, () => feed.malformed);

  const http = await serveWorkerHttp(options, {
    health: () => ({
      events_applied: features.applied,
      pairs: features.pairCount,
      posts: features.postCount,
      cached_viewers: recent.size,
    }),
  });
  http.metrics
    .gauge('feed_ranker_events_applied', 'Engagement events applied to the features since start')
    .set(() => features.applied);
  http.metrics.gauge('feed_ranker_pairs', 'Viewer-author affinities held').set(() => features.pairCount);
  http.metrics.gauge('feed_ranker_posts', 'Posts with an engagement velocity held').set(() => features.postCount);
  http.metrics.gauge('feed_ranker_cache_hits', 'Rank calls answered with the recent ranking').set(() => recent.hits);
  http.metrics.gauge('feed_ranker_cache_misses', 'Rank calls ranked afresh').set(() => recent.misses);
  const latency = http.metrics.histogram('feed_ranker_rank_seconds', 'Time to rank one request in the ranker');

  const wire = await serveRpc({
    address: options.tcpAddress,
    tokens: options.tokens,
    logger: options.logger,
    name: 'feed_ranker',
    // The app tier holds the cluster token; users' client keys have no business ranking others' feeds.
    admits: 'cluster',
    metrics: http.metrics,
    // 5,000 candidates of long ids fit; the default 1 MiB would refuse some.
    maxFrameBytes: 4 << 20,
    parse: parseRankerRequest,
    handler: (request) => {
      if (request.op !== 'rank') return core.handle(request);
      const start = performance.now();
      const answer = core.handle(request);
      latency.observe((performance.now() - start) / 1000);
      return answer;
    },
  });
  options.logger.log('info', 'ranker ready', { tcp: `${options.tcpAddress}`, rpc_port: wire.port });

  return {
    httpPort: http.port,
    stop: async () => {
      await feed.stop();
      await Promise.all([wire.close(), http.close(), log.close()]);
    },
  };
}

export const rankerRole: WorkerRole = { role: 'ranker', count: 1, start: startRanker };
