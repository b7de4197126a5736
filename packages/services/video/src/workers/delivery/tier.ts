/**
 * One cache tier (an edge or the regional cache): GET and HEAD of `/media/<key>` answered from its ObjectCache,
 * misses fetched from the next tier up once per key however many requests wait (Coalescer), stored, and served
 * as immutable (one-year max-age, `immutable`), with an ETag, byte ranges and CORS for players on other origins.
 * Purge and prefill are cluster-token calls that a tier applies to itself and then fans out to the tiers below it
 * (the regional cache to its edges).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  badRequest,
  HttpError,
  notFound,
  requireObject,
  sendError,
  sendJson,
  type MetricsRegistry,
  type Router,
} from '@raftkit/http';
import { Coalescer } from './coalesce.js';
import { checkKey, checkPrefix, parseKey } from './keys.js';
import { playlistReferences } from './playlist.js';
import type { PublishedCheck } from './published.js';
import { ObjectCache, type CachedObject } from './store.js';
import { fetchObject, type UpstreamOptions } from './upstream.js';

export const MEDIA_PREFIX = '/media/';
export const IMMUTABLE = 'public, max-age=31536000, immutable';
/** Most keys one prefill may name or find (a video of hundreds of segments per quality fits many times over). */
export const MAX_PREFILL_KEYS = 20_000;

/** Every object of one video lives under this prefix in the object store (the layout agreed with the app tier). */
export function videoPrefix(videoId: string): string {
  return `videos/${videoId}/`;
}

export interface Downstream {
  id: string;
  /** Base URL of its HTTP API, e.g. http://127.0.0.1:8642. */
  url: string;
}

export interface TierConfig {
  id: string;
  kind: 'edge' | 'regional';
  /** Cache folder (objects and their metadata). */
  cacheDir: string;
  upstream: UpstreamOptions;
  /** Tiers that purges and prefills fan out to (a regional cache's edges); empty for an edge. */
  downstream: readonly Downstream[];
  memoryBytes: number;
  diskBytes: number;
  /**
   * Decides which keys viewers may get (published.ts); null only for a standalone tier in front of an origin of its
   * own (tests, the benchmark: `publish_check=off`), which still serves nothing outside `videos/`.
   */
  published: PublishedCheck | null;
}

export interface TierStats {
  id: string;
  kind: 'edge' | 'regional';
  requests: number;
  hits: number;
  /** Requests that found nothing and started the upstream fetch. */
  misses: number;
  /** Requests that found a fetch of their key in flight and waited for it. */
  coalesced: number;
  upstreamFetches: number;
  upstreamFailures: number;
  purged: number;
  cache: ReturnType<ObjectCache['stats']>;
  /** The published check's record fetches, refusals and failed fetches; null when off. */
  published: PublishedCheck['counts'] | null;
}

type Outcome = 'hit' | 'miss' | 'coalesced';

export class CacheTier {
  private readonly cache: ObjectCache;
  private readonly coalescer = new Coalescer<CachedObject>();
  private readonly counts = {
    requests: 0,
    hits: 0,
    misses: 0,
    coalesced: 0,
    upstreamFetches: 0,
    upstreamFailures: 0,
    purged: 0,
  };
  /** Bumped by every purge: a fetch that started before one is served but not stored (it may be of purged bytes). */
  private purgeEpoch = 0;
  private readonly requestsMetric;
  private readonly hitSeries;
  private readonly fetchesMetric;
  /** A cached object's whole-object HIT answer headers (name, value, ...), built at its first hit. */
  private readonly hitHeaders = new WeakMap<CachedObject, string[]>();

  constructor(
    readonly config: TierConfig,
    metrics: MetricsRegistry,
  ) {
    this.cache = new ObjectCache(config.cacheDir, { memoryBytes: config.memoryBytes, diskBytes: config.diskBytes });
    this.requestsMetric = metrics.counter(
      'video_cache_requests_total',
      'Object requests by outcome: hit, miss (started an upstream fetch), coalesced (waited on one)',
    );
    this.hitSeries = this.requestsMetric.series({ outcome: 'hit' });
    this.fetchesMetric = metrics.counter(
      'video_cache_upstream_fetches_total',
      'Fetches from the next tier up, by result',
    );
    const gauge = metrics.gauge('video_cache_bytes', 'Bytes cached, by place');
    gauge.set(() => this.cache.stats().memoryBytes, { place: 'memory' });
    gauge.set(() => this.cache.stats().diskBytes, { place: 'disk' });
  }

  stats(): TierStats {
    const p = this.config.published;
    return {
      id: this.config.id,
      kind: this.config.kind,
      ...this.counts,
      cache: this.cache.stats(),
      published: p === null ? null : { ...p.counts },
    };
  }

  /** Drops every cached object under `prefix` here only (a record said the video is gone; no fan-out). */
  dropLocal(prefix: string): number {
    this.purgeEpoch++;
    const n = this.cache.purge(prefix).length;
    this.counts.purged += n;
    return n;
  }

  /** The object of `key`, from the cache or fetched once from upstream, and how it was found. */
  async object(key: string): Promise<{ object: CachedObject; outcome: Outcome }> {
    this.counts.requests++;
    const cached = this.cache.get(key);
    if (cached !== undefined) {
      this.counts.hits++;
      this.requestsMetric.inc(1, { outcome: 'hit' });
      return { object: cached, outcome: 'hit' };
    }
    let outcome: Outcome = 'miss';
    const object = await this.coalescer.run(
      key,
      () => this.fetchAndStore(key),
      () => {
        outcome = 'coalesced';
      },
    );
    this.counts[outcome === 'miss' ? 'misses' : 'coalesced']++;
    this.requestsMetric.inc(1, { outcome });
    return { object, outcome };
  }

  private async fetchAndStore(key: string): Promise<CachedObject> {
    const epoch = this.purgeEpoch;
    this.counts.upstreamFetches++;
    try {
      const object = await fetchObject(this.config.upstream, key);
      this.fetchesMetric.inc(1, { result: 'ok' });
      if (epoch === this.purgeEpoch) this.cache.put(object);
      return object;
    } catch (e) {
      this.counts.upstreamFailures++;
      this.fetchesMetric.inc(1, { result: e instanceof HttpError ? e.code : 'error' });
      throw e;
    }
  }

  /** The process's fast path for `/media/...`; false for every other path (the router answers those). */
  readonly handle = (req: IncomingMessage, res: ServerResponse): boolean => {
    const url = req.url ?? '/';
    if (!url.startsWith(MEDIA_PREFIX)) return false;
    let reading: Promise<void> | undefined;
    try {
      const hit = this.serveHit(req, res, url);
      if (hit === true) return true;
      reading = hit === false ? undefined : hit;
    } catch (e) {
      this.fail(res, e);
      return true;
    }
    void this.serve(req, res, url, reading).catch((e: unknown) => this.fail(res, e));
    return true;
  };

  private fail(res: ServerResponse, e: unknown): void {
    if (res.headersSent) {
      res.destroy();
      return;
    }
    // A refusal from the hit path comes before serve() set these: errors are readable cross-origin as before.
    for (let i = 0; i < CORS_HEADERS.length; i += 2) res.setHeader(CORS_HEADERS[i]!, CORS_HEADERS[i + 1]!);
    const error = e instanceof HttpError ? e : new HttpError(500, 'internal', 'internal error');
    sendError(res, error);
  }

  /**
   * The hot path, synchronous: a whole-object GET or HEAD of a cached object, by its raw path (a cached key was
   * checked when it was stored, so finding one needs no decoding or key check), answered with the object's header
   * list built once. True when answered; false, or the published check's pending read, for serve() to finish
   * (a miss, a range, a conditional request, an escaped path, a preflight). Throws the published check's refusal.
   */
  private serveHit(req: IncomingMessage, res: ServerResponse, url: string): boolean | Promise<void> {
    const method = req.method;
    if (method !== 'GET' && method !== 'HEAD') return false;
    const query = url.indexOf('?');
    const key = url.slice(MEDIA_PREFIX.length, query < 0 ? url.length : query);
    if (key.includes('%') || !this.cache.has(key) || conditional(req.rawHeaders)) return false;
    if (this.config.published !== null) {
      const reading = this.config.published.check(key);
      if (reading !== undefined) return reading;
    } else if (!key.startsWith('videos/')) return false;
    const object = this.cache.get(key);
    if (object === undefined) return false;
    this.counts.requests++;
    this.counts.hits++;
    this.hitSeries.inc();
    let headers = this.hitHeaders.get(object);
    if (headers === undefined) {
      headers = [
        ...CORS_HEADERS,
        'content-type',
        object.contentType,
        'cache-control',
        IMMUTABLE,
        'etag',
        object.etag,
        'accept-ranges',
        'bytes',
        'x-cache',
        `HIT ${this.config.id}`,
        'content-length',
        String(object.body.length),
      ];
      this.hitHeaders.set(object, headers);
    }
    res.writeHead(200, headers);
    res.end(method === 'HEAD' ? undefined : object.body);
    return true;
  }

  private async serve(req: IncomingMessage, res: ServerResponse, url: string, started?: Promise<void>): Promise<void> {
    // Players on another origin (the app tier's page) read these; a preflight is answered here too.
    for (let i = 0; i < CORS_HEADERS.length; i += 2) res.setHeader(CORS_HEADERS[i]!, CORS_HEADERS[i + 1]!);
    if (req.method === 'OPTIONS') {
      res.writeHead(204, {
        'access-control-allow-methods': 'GET, HEAD, OPTIONS',
        'access-control-allow-headers': 'range, if-none-match',
        'access-control-max-age': '86400',
      });
      res.end();
      return;
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      throw new HttpError(405, 'method_not_allowed', 'use GET or HEAD on /media/', {}, { allow: 'GET, HEAD, OPTIONS' });
    }
    const key = parseKey(url.slice(MEDIA_PREFIX.length).split('?')[0]!);
    // Published outputs only: never a raw upload, an unpublished rendition, or a video taken down.
    if (started !== undefined) await started;
    else if (this.config.published !== null) {
      const reading = this.config.published.check(key);
      if (reading !== undefined) await reading;
    } else if (!key.startsWith('videos/')) throw notFound(`no published object ${key}`, { key });
    const { object, outcome } = await this.object(key);
    const headers: Record<string, string> = {
      'content-type': object.contentType,
      'cache-control': IMMUTABLE,
      etag: object.etag,
      'accept-ranges': 'bytes',
      'x-cache': `${outcome.toUpperCase()} ${this.config.id}`,
    };
    const inm = req.headers['if-none-match'];
    if (typeof inm === 'string' && inm.split(',').some((t) => t.trim() === object.etag || t.trim() === '*')) {
      res.writeHead(304, headers);
      res.end();
      return;
    }
    const size = object.body.length;
    const range = parseRange(req.headers.range, size);
    if (range === 'unsatisfiable') {
      sendJson(
        res,
        416,
        { error: { code: 'range_not_satisfiable', message: `the object is ${size} bytes`, size } },
        { ...headers, 'content-range': `bytes */${size}` },
      );
      return;
    }
    const [start, end] = range ?? [0, size - 1];
    const body = range === null ? object.body : object.body.subarray(start, end + 1);
    if (range !== null) headers['content-range'] = `bytes ${start}-${end}/${size}`;
    headers['content-length'] = String(body.length);
    res.writeHead(range === null ? 200 : 206, headers);
    res.end(req.method === 'HEAD' ? undefined : body);
  }

  /** Registers purge, prefill and stats (cluster token: operators and the app tier, never viewers). */
  routes(router: Router): void {
    router
      .get('/api/delivery/stats', { admits: 'cluster' }, () => this.stats())
      .post('/api/delivery/purge', { admits: 'cluster' }, async (ctx) => {
        const body = requireObject(await ctx.json());
        const prefix = purgePrefix(body);
        return this.purge(prefix);
      })
      .post('/api/delivery/prefill', { admits: 'cluster' }, async (ctx) => {
        const body = requireObject(await ctx.json());
        return this.prefill(prefillKeys(body), typeof body['manifest'] === 'string' ? body['manifest'] : null);
      });
  }

  async purge(prefix: string): Promise<{ id: string; purged: number; downstream: unknown[] }> {
    this.purgeEpoch++;
    // The video's record too: a take-down (or a new master) is seen by the next request, not after the TTL.
    this.config.published?.forget(prefix);
    const dropped = this.cache.purge(prefix);
    this.counts.purged += dropped.length;
    const downstream = await this.fanOut('/api/delivery/purge', { prefix });
    return { id: this.config.id, purged: dropped.length, downstream };
  }

  /**
   * Warms this tier with `keys` and every object `manifest` (an HLS playlist key) leads to, then asks each tier
   * below to do the same with the full key list: the edges then fetch from this tier, where every object now is.
   */
  async prefill(keys: string[], manifest: string | null): Promise<Record<string, unknown>> {
    const all = new Set(keys);
    const failed: Array<{ key: string; status: number; code: string }> = [];
    let alreadyCached = 0;
    let fetched = 0;
    const warm = async (key: string): Promise<CachedObject | null> => {
      const had = this.cache.has(key);
      try {
        const { object } = await this.object(key);
        if (had) alreadyCached++;
        else fetched++;
        return object;
      } catch (e) {
        const error = e instanceof HttpError ? e : new HttpError(502, 'upstream_error', String(e));
        failed.push({ key, status: error.status, code: error.code });
        return null;
      }
    };
    if (manifest !== null) {
      // Walk the playlists breadth-first: a master leads to variants, variants to segments and init sections.
      const queue = [manifest];
      const seen = new Set<string>();
      while (queue.length > 0) {
        const key = queue.shift()!;
        if (seen.has(key)) continue;
        seen.add(key);
        all.add(key);
        if (!key.endsWith('.m3u8')) continue;
        const playlist = await warm(key);
        if (playlist === null) continue;
        for (const ref of playlistReferences(key, playlist.body.toString('utf8'))) {
          if (all.size >= MAX_PREFILL_KEYS)
            throw badRequest('too_many_keys', `a prefill warms at most ${MAX_PREFILL_KEYS} objects`);
          all.add(ref);
          if (ref.endsWith('.m3u8')) queue.push(ref);
        }
      }
    }
    const list = [...all];
    const pending = list.filter((k) => !(manifest !== null && k.endsWith('.m3u8') && this.cache.has(k)));
    await inParallel(pending, 8, warm);
    const downstream = await this.fanOut('/api/delivery/prefill', { keys: list });
    return { id: this.config.id, keys: list.length, fetched, already_cached: alreadyCached, failed, downstream };
  }

  private async fanOut(path: string, body: unknown): Promise<unknown[]> {
    return Promise.all(
      this.config.downstream.map(async (d) => {
        try {
          const r = await fetch(`${d.url}${path}`, {
            method: 'POST',
            headers: { authorization: `Bearer ${this.config.upstream.token}`, 'content-type': 'application/json' },
            body: JSON.stringify(body),
            signal: AbortSignal.timeout(120_000),
          });
          const answer = (await r.json().catch(() => null)) as unknown;
          return r.ok ? answer : { id: d.id, error: { status: r.status, body: answer } };
        } catch (e) {
          return { id: d.id, error: { message: (e as Error).message } };
        }
      }),
    );
  }
}

function purgePrefix(body: Record<string, unknown>): string {
  const prefix = body['prefix'];
  const videoId = body['video_id'];
  if ((prefix === undefined) === (videoId === undefined))
    throw badRequest('invalid_body', 'give exactly one of prefix (an object key prefix) and video_id');
  if (videoId !== undefined) {
    if (typeof videoId !== 'string' || !/^[A-Za-z0-9_-]{1,128}$/.test(videoId))
      throw badRequest('invalid_field', 'video_id is 1 to 128 characters of A-Z a-z 0-9 _ -', { field: 'video_id' });
    return videoPrefix(videoId);
  }
  if (typeof prefix !== 'string') throw badRequest('invalid_field', 'prefix must be a string', { field: 'prefix' });
  checkPrefix(prefix);
  return prefix;
}

function prefillKeys(body: Record<string, unknown>): string[] {
  const keys = body['keys'] ?? [];
  const manifest = body['manifest'];
  if (!Array.isArray(keys) || keys.some((k) => typeof k !== 'string'))
    throw badRequest('invalid_field', 'keys must be an array of object keys', { field: 'keys' });
  if (keys.length > MAX_PREFILL_KEYS)
    throw badRequest('too_many_keys', `a prefill names at most ${MAX_PREFILL_KEYS} keys`, { field: 'keys' });
  if (manifest !== undefined) {
    if (typeof manifest !== 'string')
      throw badRequest('invalid_field', 'manifest must be an object key', { field: 'manifest' });
    checkKey(manifest);
    if (!manifest.endsWith('.m3u8'))
      throw badRequest(
        'invalid_field',
        'manifest must be an HLS playlist (.m3u8): its references are what a prefill walks',
        { field: 'manifest' },
      );
  }
  if (keys.length === 0 && manifest === undefined) throw badRequest('invalid_body', 'give keys, manifest or both');
  for (const k of keys as string[]) checkKey(k);
  return keys as string[];
}

/** Headers every media answer carries: players on another origin (the app tier's page) read these. */
const CORS_HEADERS: readonly string[] = [
  'access-control-allow-origin',
  '*',
  'access-control-expose-headers',
  'content-length, content-range, etag, x-cache',
];

/** Whether a request carries Range or If-None-Match (read from the raw list: no headers object is built). */
function conditional(raw: readonly string[]): boolean {
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!;
    if (
      (name.length === 5 && name.toLowerCase() === 'range') ||
      (name.length === 13 && name.toLowerCase() === 'if-none-match')
    )
      return true;
  }
  return false;
}

/** A single `bytes=` range as [start, end] (inclusive); null to send the whole object (no header, several ranges). */
export function parseRange(header: string | undefined, size: number): [number, number] | null | 'unsatisfiable' {
  if (header === undefined) return null;
  const m = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  // Several ranges or another unit: RFC 9110 lets a server ignore Range and send the whole object.
  if (m === null || (m[1] === '' && m[2] === '')) return null;
  if (m[1] === '') {
    const suffix = Number(m[2]);
    if (suffix === 0 || size === 0) return 'unsatisfiable';
    return [Math.max(0, size - suffix), size - 1];
  }
  const start = Number(m[1]);
  const end = m[2] === '' ? size - 1 : Math.min(Number(m[2]), size - 1);
  if (start >= size || start > end) return 'unsatisfiable';
  return [start, end];
}

async function inParallel<T>(items: readonly T[], width: number, work: (item: T) => Promise<unknown>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(width, items.length) }, async () => {
      while (next < items.length) await work(items[next++]!);
    }),
  );
}
