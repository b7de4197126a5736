/**
 * The app tier (worker role `app`): the public `/api` surface of the spec. It authenticates (bearer tokens: a client
 * token `client.<user_id>.<mac>` acts for that user, the cluster token for anyone), validates, writes the metadata
 * through the members and hands out signed URLs of the object store. It never carries video bytes: an upload gets a
 * signed destination on the store (chunk PUTs or tus), and finalize asks the store to verify and assemble.
 *
 * Stateless: any app process answers any call. README.md has every field and error.
 */
import { randomBytes } from 'node:crypto';
import {
  badRequest,
  forbidden,
  HttpError,
  notFound,
  requireObject,
  Reply,
  requireString,
  serveWorkerHttp,
  type JsonObject,
  type Principal,
  type RequestContext,
  type RunningWorker,
  type WorkerOptions,
  type WorkerRole,
} from '@raftkit/http';
import { EDGE_ROLE, pickEdge, prefillVideo, purgeVideo, REGIONAL_ROLE, registerWatchPage } from '../delivery/index.js';
import { MetaClient, StoreClient, storeEndpoints, type StoreEndpoint } from '../../internal-client.js';
import { placeReplicas, replicaCount, storesOf } from '../../placement.js';
import { PRIVACY, type Privacy, type Upload, type Video } from '../../machine.js';
import { signingSecret, signQuery } from '../../signing.js';
import { CHUNK_SIZE, MAX_CHUNKS, MAX_UPLOAD_BYTES, normalizeChecksum, STORE_ROLE, UPLOAD_ID } from '../store/server.js';

export const APP_ROLE = 'app';
/** How long an upload destination stays valid (a 10 GiB upload on a slow line takes hours; resuming re-signs). */
export const UPLOAD_URL_TTL_MS = 24 * 3600_000;
/** The playback answer's ttl_seconds: how long a player may reuse the manifest URL before asking again. */
export const PLAYBACK_TTL_S = 3600;
const USER_ID = /^[A-Za-z0-9._-]{1,64}$/;
const VIDEO_ID = /^[A-Za-z0-9_-]{1,128}$/;
const KEY = /^[\x21-\x7e]{1,128}$/;

export const appRole: WorkerRole = { role: APP_ROLE, count: 2, start: startApp };

/** The public view of a video (GET /api/videos/{id} and the library's items). */
export interface VideoBody {
  video_id: string;
  uploader_id: string;
  title: string;
  description: string;
  tags: string[];
  privacy: Privacy;
  status: Video['status'];
  stage: Video['stage'];
  failure: Video['failure'];
  duration: number | null;
  source_codec: string | null;
  manifest_url: string | null;
  dash_manifest_url: string | null;
  poster_url: string | null;
  thumbnails: string[];
  captions_url: string | null;
  qualities: Array<{ name: string; width: number; height: number; bandwidth: number; ready: boolean }>;
  created_at: string;
  view_count_estimate: number;
  tier: Video['tier'];
  /** ISO time the restore of a cold video is promised for (about a minute after it was asked); null otherwise. */
  restore_ready_at: string | null;
  /** The last failed re-encode (the previous revision kept playing), or null. */
  reencode_failure: { revision: number; stage: string; reason: string; at: string } | null;
}

export async function startApp(options: WorkerOptions): Promise<RunningWorker> {
  const token = options.tokens[0]!;
  const meta = new MetaClient(options.members, token, options.index - 1);
  const stores = storeEndpoints(options.workers, STORE_ROLE);
  if (stores.length === 0) throw new Error('the app tier needs an object store worker (role store)');
  const store = new StoreClient(stores, token);
  const replicas = replicaCount(options.settings, stores.length);
  /** The replicas of a record, in placement order, as endpoints. */
  const replicaEndpoints = (record: { stores: string[] | null }): StoreEndpoint[] => {
    const placement = storesOf(record);
    return placement.flatMap((id) => stores.filter((s) => s.id === id));
  };
  const secret = signingSecret(token);
  const edges = options.workers
    .filter((w) => w.role === EDGE_ROLE)
    .map((w) => ({ id: w.id, url: `http://${w.httpAddress}` }));
  const views = new Map<string, number>();

  /** Where a viewer fetches an object: the edge that owns the video (delivery/), or the store by signed URL. */
  const mediaUrl = (videoId: string, key: string | null, placement?: string[] | null): string | null => {
    if (key === null) return null;
    if (edges.length > 0) return `${pickEdge(videoId, edges).url}/media/${key}`;
    const scope = `${key.split('/').slice(0, 2).join('/')}/`;
    // Without delivery tiers (a small setup): the video's first replica (any replica accepts the signature).
    const origin = (placement !== undefined ? replicaEndpoints({ stores: placement })[0] : undefined) ?? stores[0]!;
    return `${origin.url}/objects/${key}?${signQuery(secret, 'read', scope, Date.now() + PLAYBACK_TTL_S * 1000)}`;
  };

  const body = (v: Video): VideoBody => ({
    video_id: v.video_id,
    uploader_id: v.uploader_id,
    title: v.title,
    description: v.description,
    tags: v.tags,
    privacy: v.privacy,
    status: v.status,
    stage: v.stage,
    failure: v.failure,
    duration: v.duration_s,
    source_codec: v.source_codec,
    manifest_url: watchable(v) ? mediaUrl(v.video_id, v.manifest_path, v.stores) : null,
    dash_manifest_url:
      watchable(v) && v.manifest_path !== null
        ? mediaUrl(v.video_id, v.manifest_path.replace(/master\.m3u8$/, 'manifest.mpd'), v.stores)
        : null,
    poster_url: mediaUrl(v.video_id, v.poster_path, v.stores),
    thumbnails: v.thumbnails.map((k) => mediaUrl(v.video_id, k, v.stores)!),
    captions_url: mediaUrl(v.video_id, v.captions_path, v.stores),
    qualities: v.qualities.map((q) => ({
      name: q.name,
      width: q.width,
      height: q.height,
      bandwidth: q.bandwidth,
      ready: q.published,
    })),
    created_at: new Date(v.created_at).toISOString(),
    view_count_estimate: v.view_count_estimate,
    tier: v.tier,
    restore_ready_at: v.restore_ready_at === null ? null : new Date(v.restore_ready_at).toISOString(),
    reencode_failure:
      v.reencode_failure === null ? null : { ...v.reencode_failure, at: new Date(v.reencode_failure.at).toISOString() },
  });

  /** A video the caller may see: private ones only to their uploader (and the cluster token); 404 otherwise. */
  const visible = async (ctx: RequestContext, videoId: string): Promise<Video> => {
    if (!VIDEO_ID.test(videoId))
      throw badRequest('invalid_video_id', 'a video id is 1 to 128 of A-Z a-z 0-9 _ -', { field: 'video_id' });
    const v = await meta.find<Video>(`/internal/video/videos/${videoId}`);
    const p = ctx.principal!;
    if (
      v === null ||
      (v.privacy === 'private' && !actsFor(p, v.uploader_id)) ||
      (v.status === 'taken_down' && p.kind !== 'cluster')
    ) {
      throw notFound(`no video ${videoId}`, { video_id: videoId });
    }
    return v;
  };

  /**
   * The signed destination on `storeUrl`: a replica of the upload that answered just now (the first in placement
   * order that is up), so an upload starts while one replica is down. Any replica accepts the signature, and the
   * one reached forwards every chunk and PATCH to the others.
   */
  const uploadDestination = (uploadId: string, storeUrl: string): Record<string, unknown> => {
    const expires = Date.now() + UPLOAD_URL_TTL_MS;
    const q = signQuery(secret, 'write', `uploads/${uploadId}/`, expires);
    return {
      method: 'PUT',
      url: `${storeUrl}/uploads/${uploadId}/chunks/{index}?${q}`,
      chunks_url: `${storeUrl}/uploads/${uploadId}/chunks?${q}`,
      tus_url: `${storeUrl}/uploads/${uploadId}/tus?${q}`,
      chunk_size: CHUNK_SIZE,
      max_chunks: MAX_CHUNKS,
      max_size: MAX_UPLOAD_BYTES,
      checksum_header: 'x-chunk-sha256',
      expires_at: new Date(expires).toISOString(),
    };
  };

  /**
   * The store's acknowledgement of what it holds for an upload: the chunks (index, size, sha256), from the first
   * replica that answers (which the destination then names). A chunk that replica missed is sent again.
   */
  const chunkAck = async (
    u: Upload,
    descriptor: ChunkDescriptor | null,
  ): Promise<{ ack: Record<string, unknown>; storeUrl: string }> => {
    type Listing = { chunks: Array<{ index: number; size: number; sha256: string }>; received_bytes: number };
    let listing: Listing | null = null;
    let storeUrl = '';
    let failure: unknown = null;
    for (const replica of replicaEndpoints(u)) {
      try {
        listing = await store.jsonAt<Listing>(replica.url, 'GET', `/uploads/${u.upload_id}/chunks`, undefined, 10_000);
        storeUrl = replica.url;
        break;
      } catch (error) {
        failure = error;
      }
    }
    if (listing === null) throw failure ?? new HttpError(503, 'unavailable', 'no replica of the upload answers');
    return { ack: ackOf(listing, descriptor), storeUrl };
  };

  const ackOf = (
    listing: { chunks: Array<{ index: number; size: number; sha256: string }>; received_bytes: number },
    descriptor: ChunkDescriptor | null,
  ): Record<string, unknown> => {
    if (descriptor !== null) {
      const c = listing.chunks.find((x) => x.index === descriptor.index);
      return {
        index: descriptor.index,
        received: c !== undefined && c.size === descriptor.size && c.sha256 === descriptor.sha256,
        size: c?.size ?? null,
        sha256: c?.sha256 ?? null,
      };
    }
    return {
      received: listing.chunks.map((c) => ({ index: c.index, size: c.size, sha256: c.sha256 })),
      received_bytes: listing.received_bytes,
    };
  };

  const choosePoster = async (ctx: RequestContext<Principal>): Promise<VideoBody> => {
    const v = await visible(ctx, ctx.params.id ?? '');
    if (!actsFor(ctx.principal, v.uploader_id)) throw forbidden('only the uploader chooses the poster');
    const b = requireObject(await ctx.json());
    const index = b.index;
    if (typeof index !== 'number' || !Number.isInteger(index) || index < 0 || index >= Math.max(1, v.thumbnails.length))
      throw badRequest(
        'invalid_field',
        `index is a thumbnail index from 0 to ${Math.max(0, v.thumbnails.length - 1)}`,
        { field: 'index' },
      );
    const r = await meta.command({ op: 'choosePoster', videoId: v.video_id, index });
    if (!r.ok) throw new HttpError(409, 'no_thumbnails', 'the thumbnails are not made yet');
    return body(r.video!);
  };

  /**
   * Finalize's assembly on a replica that holds every chunk: the first in placement order that is up; one that
   * missed a chunk (or holds a copy gone bad, or a tus file behind) passes to the next. The replica that assembles
   * writes `raw/<id>` to a majority of the replicas before it answers.
   */
  const assembleOnReplica = async (
    u: Upload,
    total: number,
    checksum: string,
  ): Promise<{ key: string; size: number; sha256: string }> => {
    let first: unknown = null;
    for (const replica of replicaEndpoints(u)) {
      try {
        return await store.jsonAt<{ key: string; size: number; sha256: string }>(
          replica.url,
          'POST',
          `/internal/uploads/${u.upload_id}/assemble`,
          { total_chunks: total, checksum },
        );
      } catch (error) {
        const retry =
          !(error instanceof HttpError) ||
          error.status >= 500 ||
          ['chunks_missing', 'chunk_corrupt', 'upload_incomplete'].includes(error.code);
        if (!retry) throw error;
        // The first replica's answer is the one reported when none can assemble (its missing chunks, say).
        first ??= error;
      }
    }
    throw first ?? new HttpError(503, 'unavailable', 'no replica of the upload answers');
  };

  const http = await serveWorkerHttp(options, {
    health: () => ({ stores: stores.map((s) => s.id), object_replicas: replicas, edges: edges.length }),
  });
  // The player page, so its API calls are same-origin (the edges serve it too).
  registerWatchPage(http.router);
  const counter = http.metrics.counter('video_uploads_created_total', 'Uploads created by this app process');
  const finalized = http.metrics.counter('video_uploads_finalized_total', 'Uploads finalized by this app process');

  http.router
    .post('/api/videos/upload', { admits: 'authenticated' }, async (ctx) => {
      const b = requireObject(await ctx.json());
      const userId = requireString(b, 'user_id', { pattern: USER_ID });
      if (!actsFor(ctx.principal, userId))
        throw forbidden(`this token acts for ${ctx.principal.name}, not ${userId}`, { field: 'user_id' });
      const title = requireString(b, 'title', { minLength: 1, maxLength: 500 });
      const description = optionalString(b, 'description', 5000);
      const tags = optionalTags(b);
      const idempotencyKey = requireString(b, 'idempotency_key', { pattern: KEY });
      const privacy = optionalPrivacy(b);
      const totalSize = optionalSize(b);
      const descriptor = chunkDescriptor(b.multipart_chunk);
      const uploadId = randomBytes(16).toString('base64url');
      const result = await meta.command({
        op: 'createUpload',
        uploadId,
        uploaderId: userId,
        idempotencyKey,
        title,
        description,
        tags,
        privacy,
        totalSize,
        now: Date.now(),
        stores: placeReplicas(
          uploadId,
          stores.map((s) => s.id),
          replicas,
        ),
      });
      const u = result.upload;
      const ack = u.status === 'uploaded' ? null : await chunkAck(u, descriptor);
      if (result.created) counter.inc();
      const status = result.created ? 201 : 200;
      return new Reply(status, {
        upload_id: u.upload_id,
        status: u.status,
        video_id: u.video_id,
        created: result.created,
        chunk_ack: ack === null ? { received: [], finalized: true } : ack.ack,
        upload: ack === null ? null : uploadDestination(u.upload_id, ack.storeUrl),
      });
    })
    .post('/api/videos/:id/finalize', { admits: 'authenticated' }, async (ctx) => {
      const uploadId = ctx.params.id ?? '';
      if (!UPLOAD_ID.test(uploadId))
        throw badRequest('invalid_upload_id', 'an upload id is 8 to 64 of A-Z a-z 0-9 _ -', { field: 'upload_id' });
      const b = requireObject(await ctx.json());
      const total = b.total_chunks;
      if (typeof total !== 'number' || !Number.isSafeInteger(total) || total < 1 || total > MAX_CHUNKS)
        throw badRequest('invalid_field', `total_chunks is an integer from 1 to ${MAX_CHUNKS}`, {
          field: 'total_chunks',
        });
      const checksum = normalizeChecksum(requireString(b, 'checksum', { maxLength: 80 }));
      const u = await meta.find<Upload>(`/internal/video/uploads/${uploadId}`);
      if (u === null || !actsFor(ctx.principal, u.uploader_id))
        throw notFound(`no upload ${uploadId}`, { upload_id: uploadId });
      if (u.status === 'uploaded') {
        const v = await meta.get<Video>(`/internal/video/videos/${u.video_id}`);
        return { video_id: v.video_id, status: v.status, upload_id: uploadId };
      }
      const assembled = await assembleOnReplica(u, total, checksum);
      if (u.total_size !== null && assembled.size !== u.total_size) {
        // The upload declared its size: bytes missing or extra are refused (the chunks stay, so the client can
        // resend the right ones and finalize again; the assembled object is dropped, nothing refers to it).
        void store.json('DELETE', `/objects/${assembled.key}`, undefined, 60_000, u.stores).catch(() => undefined);
        throw badRequest(
          'size_mismatch',
          `the upload declared total_size ${u.total_size} bytes and its chunks assemble to ${assembled.size}`,
          { field: 'total_size', declared: u.total_size, assembled: assembled.size },
        );
      }
      const r = await meta.command({
        op: 'finalize',
        uploadId,
        videoId: randomBytes(12).toString('base64url'),
        totalChunks: total,
        size: assembled.size,
        sha256: assembled.sha256,
        rawPath: assembled.key,
        now: Date.now(),
      });
      if (!r.ok) throw new HttpError(409, r.code, r.message);
      finalized.inc();
      // The chunks are now one raw object: the per-chunk copies go (best effort: the store's sweep is the backstop).
      void store.json('DELETE', `/internal/uploads/${uploadId}`, undefined, 60_000, u.stores).catch(() => undefined);
      return {
        video_id: r.video.video_id,
        status: r.video.status,
        upload_id: uploadId,
        size: assembled.size,
        checksum: `sha256:${assembled.sha256}`,
      };
    })
    .get('/api/videos/:id', { admits: 'authenticated' }, async (ctx) => body(await visible(ctx, ctx.params.id ?? '')))
    .get('/api/videos/:id/playback', { admits: 'authenticated' }, async (ctx) => {
      const v = await visible(ctx, ctx.params.id ?? '');
      if (!watchable(v) || v.manifest_path === null) {
        throw new HttpError(
          409,
          'not_playable',
          v.status === 'failed'
            ? `the video failed at ${v.failure?.stage}: ${v.failure?.reason}`
            : `the video is ${v.status}; poll GET /api/videos/${v.video_id}`,
          { status: v.status },
          v.status === 'transcoding' ? { 'retry-after': '5' } : {},
        );
      }
      if (v.tier !== 'warm') {
        const restored =
          v.tier === 'cold' ? (await meta.command({ op: 'restore', videoId: v.video_id, now: Date.now() })).video : v;
        // Retry-After is the record's promise (restore_ready_at, about a minute after the first request); past it
        // (a big archive still unpacking) players poll every 5 s.
        const readyAt = restored?.restore_ready_at ?? null;
        const retry = readyAt === null ? 60 : readyAt > Date.now() ? Math.ceil((readyAt - Date.now()) / 1000) : 5;
        throw new HttpError(
          503,
          'restoring',
          'the video is in cold storage and is being restored (about a minute)',
          { tier: 'restoring', restore_ready_at: readyAt === null ? null : new Date(readyAt).toISOString() },
          { 'retry-after': String(retry) },
        );
      }
      views.set(v.video_id, (views.get(v.video_id) ?? 0) + 1);
      return { manifest_url: mediaUrl(v.video_id, v.manifest_path), ttl_seconds: PLAYBACK_TTL_S };
    })
    .put('/api/videos/:id/poster', { admits: 'authenticated' }, choosePoster)
    .post('/api/videos/:id/poster', { admits: 'authenticated' }, choosePoster)
    .post('/api/videos/:id/reencode', { admits: 'authenticated' }, async (ctx) => {
      const v = await visible(ctx, ctx.params.id ?? '');
      if (!actsFor(ctx.principal, v.uploader_id))
        throw forbidden('only the uploader (or the operator) re-encodes a video');
      const r = await meta.command({ op: 'reencode', videoId: v.video_id, now: Date.now() });
      if (!r.ok)
        throw new HttpError(409, 'cannot_reencode', r.message ?? 'the video cannot be re-encoded now', {
          status: v.status,
        });
      return new Reply(202, { ...body(r.video!), revision: r.video!.revision });
    })
    // Pre-population of a chosen (popular, high-subscriber) video at every edge: the operator's call.
    .post('/api/videos/:id/prefill', { admits: 'cluster' }, async (ctx) => {
      const v = await visible(ctx, ctx.params.id ?? '');
      if (!watchable(v) || v.manifest_path === null)
        throw new HttpError(409, 'not_playable', 'only a playable video can be pre-populated', { status: v.status });
      if (v.tier !== 'warm')
        throw new HttpError(409, 'not_playable', `the video is in the ${v.tier} tier: play it to restore it first`, {
          status: v.status,
          tier: v.tier,
        });
      const regional = options.workers.find((w) => w.role === REGIONAL_ROLE);
      if (regional === undefined) throw new HttpError(409, 'no_delivery_tier', 'this cluster runs no regional cache');
      return prefillVideo(`http://${regional.httpAddress}`, token, {
        manifest_path: v.manifest_path,
        thumbnails: v.thumbnails,
        captions_path: v.captions_path,
      });
    })
    .post('/api/videos/:id/moderation', { admits: 'cluster' }, async (ctx) => {
      const videoId = ctx.params.id ?? '';
      if (!VIDEO_ID.test(videoId)) throw badRequest('invalid_video_id', 'bad video id', { field: 'video_id' });
      const b = requireObject(await ctx.json());
      const action = requireString(b, 'action', { pattern: /^(flag|take_down|clear)$/ }) as
        | 'flag'
        | 'take_down'
        | 'clear';
      const reason = optionalString(b, 'reason', 1000);
      const r = await meta.command({ op: 'moderate', videoId, action, reason, now: Date.now() });
      if (r.video === null) throw notFound(`no video ${videoId}`, { video_id: videoId });
      if (action === 'clear') return body(r.video);
      // A video taken down or flagged leaves every delivery tier now: the regional tier purges it and fans out to
      // the edges (which also drop the record they checked it by). `delivery_purged` false: some tier did not
      // answer, and it refuses the video once its record expires (publish_check_ttl_ms, 5 s).
      const regional = options.workers.find((w) => w.role === REGIONAL_ROLE);
      const purged = regional === undefined ? true : await purgeVideo(`http://${regional.httpAddress}`, token, videoId);
      return { ...body(r.video), delivery_purged: purged };
    })
    .get('/api/users/:id/library', { admits: 'authenticated' }, async (ctx) => {
      const userId = ctx.params.id ?? '';
      if (!USER_ID.test(userId))
        throw badRequest('invalid_user_id', 'a user id is 1 to 64 of A-Z a-z 0-9 . _ -', { field: 'user_id' });
      const limitText = ctx.query.get('limit') ?? '20';
      if (!/^\d{1,3}$/.test(limitText) || Number(limitText) < 1 || Number(limitText) > 100)
        throw badRequest('invalid_query', 'limit is an integer from 1 to 100', { field: 'limit' });
      const limit = Number(limitText);
      const cursor = ctx.query.get('cursor');
      const after = cursor === null ? null : decodeCursor(cursor);
      const own = actsFor(ctx.principal, userId);
      const q = new URLSearchParams({ limit: String(limit + 1), private: own ? '1' : '0' });
      if (after !== null) q.set('after_created', String(after.c)), q.set('after_id', after.v);
      const { videos } = await meta.get<{ videos: Video[] }>(`/internal/video/users/${userId}/library?${q}`);
      const page = videos.slice(0, limit);
      const last = page[page.length - 1];
      return {
        videos: page.map(body),
        next_cursor:
          videos.length > limit && last !== undefined ? encodeCursor({ c: last.created_at, v: last.video_id }) : null,
      };
    });

  // Views are counted here and written in batches: the estimate is eventually consistent (the spec says so), and a
  // Raft entry per view would cost more than the view.
  const flush = setInterval(() => {
    for (const [videoId, count] of views) {
      views.delete(videoId);
      void meta.command({ op: 'views', videoId, count }).catch(() => undefined);
    }
  }, 2_000);
  flush.unref();

  return {
    httpPort: http.port,
    stop: async () => {
      clearInterval(flush);
      await http.close();
      await meta.close();
      await store.close();
    },
  };
}

function watchable(v: Video): boolean {
  return v.status === 'playable' && v.manifest_path !== null;
}

function actsFor(p: Principal | null, userId: string): boolean {
  return p !== null && (p.kind === 'cluster' || p.name === userId);
}

interface ChunkDescriptor {
  index: number;
  size: number;
  sha256: string;
}

/** `multipart_chunk`: absent/null, or a descriptor {index, size, sha256} (never bytes: those go to the store). */
function chunkDescriptor(value: unknown): ChunkDescriptor | null {
  if (value === undefined || value === null) return null;
  if (typeof value !== 'object' || Array.isArray(value))
    throw badRequest(
      'invalid_field',
      'multipart_chunk is a descriptor {index, size, sha256}; the bytes go to the signed upload URL',
      { field: 'multipart_chunk' },
    );
  const c = value as JsonObject;
  const index = c.index;
  const size = c.size;
  const sha = c.sha256;
  if (typeof index !== 'number' || !Number.isSafeInteger(index) || index < 0 || index >= MAX_CHUNKS)
    throw badRequest('invalid_field', `multipart_chunk.index is 0 to ${MAX_CHUNKS - 1}`, {
      field: 'multipart_chunk.index',
    });
  if (typeof size !== 'number' || !Number.isSafeInteger(size) || size < 1)
    throw badRequest('invalid_field', 'multipart_chunk.size is a positive integer', { field: 'multipart_chunk.size' });
  if (typeof sha !== 'string' || !/^[0-9a-f]{64}$/.test(sha))
    throw badRequest('invalid_field', 'multipart_chunk.sha256 is 64 lowercase hex digits', {
      field: 'multipart_chunk.sha256',
    });
  return { index, size, sha256: sha };
}

function optionalString(b: JsonObject, field: string, max: number): string {
  const v = b[field];
  if (v === undefined || v === null) return '';
  if (typeof v !== 'string' || v.length > max)
    throw badRequest('invalid_field', `${field} is a string of at most ${max} characters`, { field });
  return v;
}

function optionalTags(b: JsonObject): string[] {
  const v = b.tags;
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v) || v.length > 50 || !v.every((t) => typeof t === 'string' && t.length >= 1 && t.length <= 100))
    throw badRequest('invalid_field', 'tags is an array of at most 50 strings of 1 to 100 characters', {
      field: 'tags',
    });
  return v as string[];
}

function optionalPrivacy(b: JsonObject): Privacy {
  const v = b.privacy;
  if (v === undefined || v === null) return 'public';
  if (typeof v !== 'string' || !PRIVACY.includes(v as Privacy))
    throw badRequest('invalid_field', `privacy is one of ${PRIVACY.join(', ')}`, { field: 'privacy' });
  return v as Privacy;
}

function optionalSize(b: JsonObject): number | null {
  const v = b.total_size;
  if (v === undefined || v === null) return null;
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0)
    throw badRequest('invalid_field', 'total_size is a byte count', { field: 'total_size' });
  if (v > MAX_UPLOAD_BYTES)
    throw new HttpError(413, 'upload_too_large', `an upload is at most ${MAX_UPLOAD_BYTES} bytes (10 GiB)`, {
      field: 'total_size',
      limit: MAX_UPLOAD_BYTES,
    });
  return v;
}

function encodeCursor(c: { c: number; v: string }): string {
  return Buffer.from(JSON.stringify(c)).toString('base64url');
}

function decodeCursor(text: string): { c: number; v: string } {
  try {
    if (text.length > 400) throw new Error('long');
    const c = JSON.parse(Buffer.from(text, 'base64url').toString('utf8')) as { c?: unknown; v?: unknown };
    if (typeof c.c === 'number' && Number.isSafeInteger(c.c) && typeof c.v === 'string' && VIDEO_ID.test(c.v))
      return { c: c.c, v: c.v };
  } catch {
    // fall through
  }
  throw badRequest('invalid_cursor', 'cursor is the next_cursor of a previous page, unchanged', { field: 'cursor' });
}
