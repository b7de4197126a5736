/**
 * A cache tier as a process: the worker HTTP side (health, metrics, routes) with the tier's `/media/` fast path,
 * and the edge and regional worker roles `cluster up` starts (the regional one first: edges fetch from it).
 */
import { join } from 'node:path';
import {
  MetricsRegistry,
  serveWorkerHttp,
  type RunningWorker,
  type WorkerOptions,
  type WorkerRole,
} from '@raftkit/http';
import { MetaClient } from '../../internal-client.js';
import type { Video } from '../../machine.js';
import { PublishedCheck } from './published.js';
import { CacheTier, videoPrefix, type Downstream, type TierConfig } from './tier.js';
import { registerPageApi, type AppTier } from './api-proxy.js';
import { registerWatchPage } from './watch.js';

export const EDGE_ROLE = 'edge';
export const REGIONAL_ROLE = 'regional';

export interface RunningTier extends RunningWorker {
  tier: CacheTier;
}

export async function startTierProcess(
  options: WorkerOptions,
  base: Omit<TierConfig, 'published'>,
  appTier?: AppTier,
): Promise<RunningTier> {
  const metrics = new MetricsRegistry();
  const { published, close } = publishedCheck(options, (videoId) => tier.dropLocal(videoPrefix(videoId)));
  const config: TierConfig = { ...base, published };
  const tier = new CacheTier(config, metrics);
  const http = await serveWorkerHttp(options, {
    metrics,
    // `/media/<key>` has any number of segments, which the router's patterns cannot express; it is open (what a
    // player fetches) and answered here, before routing. Everything else goes through the router.
    fastPath: tier.handle,
    health: () => ({
      tier: config.kind,
      upstream: config.upstream.baseUrl,
      downstream: config.downstream.length,
      publish_check: published === null ? 'off' : 'members',
    }),
  });
  tier.routes(http.router);
  if (config.kind === 'edge') {
    registerWatchPage(http.router);
    // The page an edge serves calls the API on the edge's own origin (api-proxy.ts).
    if (appTier !== undefined) registerPageApi(http.router, appTier);
  }
  return {
    httpPort: http.port,
    tier,
    stop: async () => {
      await http.close();
      await close();
    },
  };
}

/**
 * The check of what viewers may get (published.ts), reading video records from the metadata members
 * (`publish_check_ttl_ms`, default 5 000). `--set publish_check=off` turns it off, for a standalone tier in front
 * of an origin of its own (tests, the benchmark); a tier without members must say so, never fail open by accident.
 */
function publishedCheck(
  options: WorkerOptions,
  onGone: (videoId: string) => void,
): { published: PublishedCheck | null; close: () => Promise<void> } {
  const mode = options.settings['publish_check'] ?? 'members';
  if (mode === 'off') return { published: null, close: async () => undefined };
  if (mode !== 'members') throw new Error(`--set publish_check=${mode}: expected members or off`);
  if (options.members.length === 0)
    throw new Error(
      'a cache tier needs the metadata members to tell published outputs (or --set publish_check=off for a standalone tier)',
    );
  const meta = new MetaClient(options.members, options.tokens[0]!, options.index - 1);
  const published = new PublishedCheck({
    source: (videoId) => meta.find<Video>(`/internal/video/videos/${encodeURIComponent(videoId)}`),
    ttlMs: number(options.settings, 'publish_check_ttl_ms', 5_000),
    onGone,
  });
  return { published, close: () => meta.close() };
}

const MB = 1024 * 1024;

function number(settings: Record<string, string>, name: string, fallback: number): number {
  const raw = settings[name];
  if (raw === undefined) return fallback;
  const n = Number(raw);
  if (!Number.isFinite(n) || n <= 0) throw new Error(`--set ${name}=${raw}: expected a positive number`);
  return n;
}

/** The settings both tiers read: cache_memory_mb, cache_disk_mb, upstream_timeout_ms, max_object_mb. */
function tierConfig(
  options: WorkerOptions,
  kind: 'edge' | 'regional',
  upstreamUrl: string,
  downstream: Downstream[],
  alternates: readonly string[] = [],
): Omit<TierConfig, 'published'> {
  const s = options.settings;
  return {
    id: options.id,
    kind,
    cacheDir: join(options.dataDir, 'cache'),
    upstream: {
      baseUrl: upstreamUrl,
      alternates: [...alternates],
      token: options.tokens[0]!,
      timeoutMs: number(s, 'upstream_timeout_ms', 10_000),
      maxObjectBytes: number(s, 'max_object_mb', 256) * MB,
    },
    downstream,
    memoryBytes: number(s, 'cache_memory_mb', kind === 'edge' ? 128 : 256) * MB,
    diskBytes: number(s, 'cache_disk_mb', kind === 'edge' ? 2048 : 8192) * MB,
  };
}

/**
 * Where the regional tier fetches misses: `--set origin_url=<base>` (object key appended), or else the object
 * store worker's GET by key, `http://<store>/objects`, found by its role name in `origin_role` (default "store").
 */
export function originUrl(options: WorkerOptions): string {
  const explicit = options.settings['origin_url'];
  if (explicit !== undefined) return explicit;
  const role = options.settings['origin_role'] ?? 'store';
  const store = options.workers.find((w) => w.role === role);
  if (store === undefined)
    throw new Error(`regional cache: no origin (set origin_url, or run a worker of role ${role})`);
  return `http://${store.httpAddress}/objects`;
}

/** The other object stores (replicas of the same objects), tried when the first cannot serve a key. */
function originAlternates(options: WorkerOptions): string[] {
  if (options.settings['origin_url'] !== undefined) return [];
  const role = options.settings['origin_role'] ?? 'store';
  return options.workers
    .filter((w) => w.role === role)
    .slice(1)
    .map((w) => `http://${w.httpAddress}/objects`);
}

export const regionalRole: WorkerRole = {
  role: REGIONAL_ROLE,
  count: 1,
  start: (options) => {
    const edges = options.workers
      .filter((w) => w.role === EDGE_ROLE)
      .map((w) => ({ id: w.id, url: `http://${w.httpAddress}` }));
    return startTierProcess(
      options,
      tierConfig(options, 'regional', originUrl(options), edges, originAlternates(options)),
    );
  },
};

export const edgeRole: WorkerRole = {
  role: EDGE_ROLE,
  count: 3,
  start: (options) => {
    const regional = options.workers.find((w) => w.role === REGIONAL_ROLE);
    if (regional === undefined) throw new Error('edge cache: no regional cache worker to fetch from');
    const apps = options.workers
      .filter((w) => w.role === (options.settings['app_role'] ?? 'app'))
      .map((w) => w.httpAddress);
    return startTierProcess(options, tierConfig(options, 'edge', `http://${regional.httpAddress}/media`, []), {
      addresses: apps,
      timeoutMs: number(options.settings, 'upstream_timeout_ms', 10_000),
    });
  },
};
