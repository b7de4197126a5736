/**
 * The object store worker role (`store`): the bytes of uploads and of everything the pipeline makes, on local disk
 * (disk.ts has the layout). It is the only process that carries video bytes in: clients send chunks (or tus PATCHes)
 * here with the signed URL the app tier handed out; the app tier and the workers call it with the cluster token.
 *
 * Paths (any number of key segments, so answered before the router):
 *   PUT  /uploads/<id>/chunks/<index>   a chunk (<= 16 MiB); answers the ack {upload_id, index, size, sha256};
 *                                       an `x-chunk-sha256` header is checked (422 checksum_mismatch, nothing kept)
 *   GET  /uploads/<id>/chunks           the chunks received: what a resuming client need not send again
 *   OPTIONS|POST /uploads/<id>/tus      tus 1.0 discovery and creation (Upload-Length, Upload-Metadata)
 *   HEAD|PATCH   /uploads/<id>/tus/file tus 1.0 core (Upload-Offset), checksum extension (Upload-Checksum)
 *   GET|HEAD /objects/<key>             an object (Range), by signed URL or cluster token: the edges' origin; its
 *                                       bytes are checked against their sha256 before they are served (a corrupt
 *                                       copy answers 503 replica_corrupt and is repaired from another replica)
 *   PUT|DELETE /objects/<key>           cluster token: the workers' outputs
 * Replication (replication.ts): every write above is forwarded to the other replicas of its placement and
 * acknowledged once a majority holds it; GET /internal/replica/index is a peer's anti-entropy listing.
 * Routes: POST /internal/uploads/:id/assemble {total_chunks, checksum} -> the raw object `raw/<id>`; DELETE
 * /internal/uploads/:id; POST /internal/objects/delete-prefix {prefix}; the cold storage class (README "Storage
 * tiers"): GET /internal/cold/:video_id (the archive's header, verified, and the warm objects left), POST
 * /internal/cold/:video_id/pack and /unpack (both idempotent: the pipeline re-runs them after any crash).
 */
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { rm } from 'node:fs/promises';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Readable } from 'node:stream';
import {
  badRequest,
  HttpError,
  notFound,
  requireInteger,
  requireObject,
  requireString,
  sendError,
  serveWorkerHttp,
  verifyToken,
  bearerToken,
  type RunningWorker,
  type WorkerOptions,
  type WorkerRole,
} from '@raftkit/http';
import { signingSecret, verifySigned, type Access } from '../../signing.js';
import { ArchiveCorruptError } from './archive.js';
import { ChecksumError, CorruptObjectError, DiskStore, TooLargeError, type ChunkInfo } from './disk.js';
import { OBJECT_AT_HEADER, REPLICA_HEADER, Replication, encodeKey, type Peer } from './replication.js';

export const STORE_ROLE = 'store';
/** The largest upload (decided: the spec leaves it open). 10 GiB: hours of 1080p source at consumer bitrates. */
export const MAX_UPLOAD_BYTES = 10 * 1024 ** 3;
/** The chunk size the API hands out ("about 5 MB"), and the largest chunk the store takes. */
export const CHUNK_SIZE = 5 * 1024 * 1024;
export const MAX_CHUNK_BYTES = 16 * 1024 * 1024;
export const MAX_CHUNKS = 10_000;
/** The largest object a worker may PUT (a transcoded segment, a manifest, a thumbnail). */
const MAX_OBJECT_BYTES = 1024 * 1024 * 1024;
export const UPLOAD_ID = /^[A-Za-z0-9_-]{8,64}$/;
// Ids are base64url, so a segment may start with '-' (one video or upload id in 64 does): only a leading dot is
// refused. Refusing '-' too failed the transcode of such a video at its first segment.
const KEY_SEGMENT = /^(?!\.)[A-Za-z0-9._-]{1,128}$/;
const TUS_VERSION = '1.0.0';
/** Objects up to this size are read whole and checked before the first byte is served; larger ones as they stream. */
const VERIFY_WHOLE_BYTES = 64 * 1024 * 1024;

/**
 * Three stores by default (`--workers store=N`), at places 11.. of the worker block so the ports of the other roles
 * (edges, app servers) stay where they were with one store.
 */
export const storeRole: WorkerRole = { role: STORE_ROLE, count: 3, slot: 11, start: startStore };

export function rawKey(uploadId: string): string {
  return `raw/${uploadId}`;
}

export async function startStore(options: WorkerOptions): Promise<RunningWorker> {
  const disk = new DiskStore(options.dataDir);
  await disk.init();
  const secret = signingSecret(options.tokens[0]!);
  const stats = { chunks: 0, resent: 0, objectsServed: 0, bytesIn: 0, tusPatches: 0, uploadsSwept: 0 };
  const replication = new Replication({
    selfId: options.id,
    stores: options.workers.filter((w) => w.role === options.role),
    members: options.members,
    token: options.tokens[0]!,
    disk,
    logger: options.logger,
    syncEveryMs: positiveSetting(options.settings, 'object_sync_ms', 30_000),
    syncBatch: positiveSetting(options.settings, 'object_sync_batch', 500),
  });
  const self = options.id;

  /** A write forwarded by another replica (cluster token and x-replica-of): stored here, forwarded nowhere. */
  const forwarded = (req: IncomingMessage): boolean => {
    if (req.headers[REPLICA_HEADER] === undefined) return false;
    const token = bearerToken(req);
    return token !== null && verifyToken(token, options.tokens).kind === 'cluster';
  };

  /** Who may do `access` on `key`: the cluster token, or a signed URL for that key. */
  const authorize = (req: IncomingMessage, query: URLSearchParams, key: string, access: Access): void => {
    if (bearerToken(req) !== null) {
      const p = verifyToken(bearerToken(req)!, options.tokens);
      if (p.kind === 'cluster') return;
      throw new HttpError(
        403,
        'forbidden',
        'the object store takes the cluster token or a signed URL, not a client token',
      );
    }
    const verdict = verifySigned(secret, query, key, access, Date.now());
    if (!verdict.ok)
      throw new HttpError(
        verdict.code === 'unsigned' ? 401 : 403,
        verdict.code === 'unsigned' ? 'unauthorized' : verdict.code === 'expired' ? 'url_expired' : 'bad_signature',
        verdict.message,
        { reason: verdict.code },
      );
  };

  const fastPath = (req: IncomingMessage, res: ServerResponse): boolean => {
    const url = new URL(req.url ?? '/', 'http://store');
    const parts = url.pathname.split('/').filter((s) => s.length > 0);
    if (parts[0] !== 'uploads' && parts[0] !== 'objects') return false;
    // CORS: browsers (Uppy, the player page) talk to the store directly; the signed URL is the credential.
    res.setHeader('access-control-allow-origin', '*');
    res.setHeader(
      'access-control-expose-headers',
      'Upload-Offset, Upload-Length, Location, Tus-Version, Tus-Resumable, Tus-Max-Size, Tus-Extension, Tus-Checksum-Algorithm, Content-Range, Accept-Ranges, ETag',
    );
    void handle(req, res, url, parts).catch((error: unknown) => {
      if (!res.headersSent) {
        if (error instanceof HttpError) sendError(res, error);
        else {
          options.logger.log('error', 'store request failed', { error: String(error), path: url.pathname });
          sendError(res, new HttpError(500, 'internal', 'internal error'));
        }
      } else res.destroy();
      req.resume();
    });
    return true;
  };

  const handle = async (req: IncomingMessage, res: ServerResponse, url: URL, parts: string[]): Promise<void> => {
    let keySegments: string[];
    try {
      keySegments = parts.map((s) => decodeURIComponent(s));
    } catch {
      throw badRequest('invalid_path', 'the path is not valid percent-encoding');
    }
    if (req.method === 'OPTIONS' && keySegments[2] !== 'tus') {
      // A browser's preflight for a chunk PUT (it sends x-chunk-sha256) or a ranged GET: open, it grants nothing.
      res.writeHead(204, {
        'access-control-allow-methods': 'GET, HEAD, PUT, OPTIONS',
        'access-control-allow-headers': 'Authorization, Content-Type, Range, X-Chunk-Sha256',
        'access-control-max-age': '86400',
      });
      res.end();
      return;
    }
    if (keySegments[0] === 'objects') return objects(req, res, url, keySegments.slice(1));
    const uploadId = keySegments[1] ?? '';
    if (!UPLOAD_ID.test(uploadId))
      throw badRequest('invalid_upload_id', 'an upload id is 8 to 64 of A-Z a-z 0-9 _ -', { field: 'upload_id' });
    const rest = keySegments.slice(2);
    const scopeKey = `uploads/${uploadId}/${rest.join('/')}`;
    if (rest[0] === 'tus') return tus(req, res, url, uploadId, rest.slice(1), scopeKey);
    if (rest[0] !== 'chunks' || rest.length > 2) throw notFound(`no route for ${req.method} ${url.pathname}`);
    if (rest.length === 1) {
      if (req.method !== 'GET')
        throw new HttpError(405, 'method_not_allowed', 'use GET on this path', {}, { allow: 'GET' });
      authorize(req, url.searchParams, scopeKey, 'read');
      const chunks = await disk.chunks(uploadId);
      return json(res, 200, { upload_id: uploadId, chunks, received_bytes: chunks.reduce((n, c) => n + c.size, 0) });
    }
    const indexText = rest[1]!;
    if (!/^\d{1,5}$/.test(indexText) || Number(indexText) >= MAX_CHUNKS)
      throw badRequest('invalid_chunk_index', `a chunk index is an integer from 0 to ${MAX_CHUNKS - 1}`, {
        field: 'index',
      });
    const index = Number(indexText);
    if (req.method !== 'PUT')
      throw new HttpError(405, 'method_not_allowed', 'use PUT on this path', {}, { allow: 'PUT' });
    authorize(req, url.searchParams, scopeKey, 'write');
    const expected = req.headers['x-chunk-sha256'];
    if (expected !== undefined && (typeof expected !== 'string' || !/^[0-9a-f]{64}$/.test(expected)))
      throw badRequest('invalid_checksum', 'x-chunk-sha256 is 64 lowercase hex digits', { field: 'x-chunk-sha256' });
    const declared = Number(req.headers['content-length'] ?? NaN);
    if (declared > MAX_CHUNK_BYTES)
      throw new HttpError(413, 'chunk_too_large', `a chunk is at most ${MAX_CHUNK_BYTES} bytes`, {
        limit: MAX_CHUNK_BYTES,
      });
    const isForward = forwarded(req);
    // The placement is known before the body is read: an unknown upload or unreachable members cost no bytes.
    const replicas = isForward ? [self] : await replication.replicasOf(`uploads/${uploadId}/`);
    const before = await disk.chunks(uploadId);
    const others = before.filter((c) => c.index !== index).reduce((n, c) => n + c.size, 0);
    let received;
    try {
      received = await disk.receive(req, Math.min(MAX_CHUNK_BYTES, MAX_UPLOAD_BYTES - others));
    } catch (error) {
      if (error instanceof TooLargeError)
        throw new HttpError(
          413,
          others + MAX_CHUNK_BYTES > MAX_UPLOAD_BYTES ? 'upload_too_large' : 'chunk_too_large',
          `the chunk would take the upload over its limit (${MAX_UPLOAD_BYTES} bytes in all, ${MAX_CHUNK_BYTES} per chunk)`,
          { limit: MAX_UPLOAD_BYTES },
        );
      throw error;
    }
    if (received.size === 0) throw badRequest('empty_chunk', 'a chunk has at least one byte');
    if (expected !== undefined && expected !== received.sha256) {
      await rm(received.tmp, { force: true });
      throw new HttpError(
        422,
        'checksum_mismatch',
        `chunk ${index} arrived with sha256 ${received.sha256}, not the ${expected} announced; resend it`,
        { index, sha256: received.sha256 },
      );
    }
    const known = before.find((c) => c.index === index);
    if (known !== undefined) stats.resent++;
    const local = replicas.includes(self);
    const info: ChunkInfo = local
      ? await disk.putChunk(uploadId, index, received)
      : { index, size: received.size, sha256: received.sha256 };
    const file = local ? disk.chunkFile(uploadId, index) : received.tmp;
    if (!isForward) {
      const sent = await replication.toMajority(
        replicas,
        local,
        async (peer) => {
          const r = await replication.sendFile(
            peer,
            'PUT',
            `/uploads/${uploadId}/chunks/${index}`,
            () => createReadStream(file),
            { 'x-chunk-sha256': info.sha256 },
          );
          if (r.status !== 200) throw new Error(`answered ${r.status} ${r.text.slice(0, 200)}`);
        },
        `chunk ${index} of ${uploadId}`,
      );
      if (!local) void sent.settled.then(() => rm(file, { force: true }));
    }
    stats.chunks++;
    stats.bytesIn += info.size;
    return json(res, 200, {
      upload_id: uploadId,
      index,
      size: info.size,
      sha256: info.sha256,
      replaced: known !== undefined,
    });
  };

  // ---------------------------------------------------------------- objects

  const objects = async (req: IncomingMessage, res: ServerResponse, url: URL, segments: string[]): Promise<void> => {
    if (segments.length === 0 || segments.join('/').length > 512 || !segments.every((s) => KEY_SEGMENT.test(s))) {
      throw badRequest(
        'invalid_key',
        'an object key is 1 to 512 characters of /-separated segments of A-Z a-z 0-9 . _ - (not starting with a dot)',
        { field: 'key' },
      );
    }
    const key = segments.join('/');
    if (req.method === 'PUT') {
      authorizeCluster(req);
      return json(res, 200, await putObject(req, key));
    }
    if (req.method === 'DELETE') {
      authorizeCluster(req);
      const deleted = await disk.deleteObject(key, true);
      if (!forwarded(req)) await replication.broadcast('DELETE', `/objects/${encodeKey(key)}`);
      return json(res, 200, { key, deleted });
    }
    if (req.method !== 'GET' && req.method !== 'HEAD')
      throw new HttpError(
        405,
        'method_not_allowed',
        'use GET, HEAD, PUT or DELETE on objects',
        {},
        { allow: 'GET, HEAD, PUT, DELETE' },
      );
    authorize(req, url.searchParams, key, 'read');
    let info = await disk.objectInfo(key);
    if (info === null && !forwarded(req) && (await readRepair(key))) info = await disk.objectInfo(key);
    if (info === null) throw notFound(`no object ${key}`, { key });
    // A copy is checked against its sha256 before it is served whole; a corrupt one is refused (the reader tries
    // another replica) and fetched again from a replica whose copy verifies.
    let verified: Buffer | null = null;
    if (info.size <= VERIFY_WHOLE_BYTES && req.method === 'GET') {
      try {
        verified = await disk.readVerified(key, info);
      } catch (error) {
        if (!(error instanceof CorruptObjectError)) throw error;
        replication.queueRepair(key);
        throw new HttpError(503, 'replica_corrupt', `this replica's copy of ${key} failed its checksum: ask another`, {
          key,
        });
      }
    }
    const range = parseRange(req.headers.range, info.size);
    if (range === 'unsatisfiable') {
      res.writeHead(416, { 'content-range': `bytes */${info.size}`, 'content-type': 'application/json' });
      res.end(
        JSON.stringify({ error: { code: 'range_not_satisfiable', message: `the object has ${info.size} bytes` } }),
      );
      return;
    }
    const headers: Record<string, string> = {
      'content-type': contentTypeOf(key),
      'accept-ranges': 'bytes',
      etag: `"${info.sha256}"`,
      'x-content-sha256': info.sha256,
      [OBJECT_AT_HEADER]: String(disk.indexed(key)?.at ?? 0),
      // Objects are immutable (outputs carry the revision in their key): caches may keep them for good.
      'cache-control': key.startsWith('raw/') ? 'private, no-store' : 'public, max-age=31536000, immutable',
    };
    stats.objectsServed++;
    if (range === null) {
      res.writeHead(200, { ...headers, 'content-length': String(info.size) });
      if (req.method === 'HEAD' || info.size === 0) return void res.end();
      if (verified !== null) return void res.end(verified);
      // Too large to hold: hashed as it streams, and the connection cut (the reader sees a short body and tries
      // another replica) when the copy turns out corrupt.
      const hash = createHash('sha256');
      disk
        .readObject(key)
        .on('data', (chunk) => hash.update(chunk))
        .on('error', () => res.destroy())
        .on('end', () => {
          if (hash.digest('hex') === info.sha256) return res.end();
          replication.queueRepair(key);
          res.destroy();
        })
        .pipe(res, { end: false });
      return;
    }
    res.writeHead(206, {
      ...headers,
      'content-length': String(range.end - range.start + 1),
      'content-range': `bytes ${range.start}-${range.end}/${info.size}`,
    });
    if (req.method === 'HEAD') return void res.end();
    if (verified !== null) return void res.end(verified.subarray(range.start, range.end + 1));
    // A range of a large object is served as it is on disk (checked by a whole read or a peer's copy only).
    disk
      .readObject(key, range)
      .on('error', () => res.destroy())
      .pipe(res);
  };

  /**
   * A read of a key this store should hold and does not: a write acknowledged by the other replicas that has not
   * reached this one yet (or ever: it was down). The copy is fetched from a replica, verified and kept, then served:
   * a reader never sees a 404 for an acknowledged object from one of its replicas. Not for a key deleted here
   * (tombstone), a store that is not a replica (404: the reader asks the next), nor a peer's own fetch.
   */
  const readRepair = async (key: string): Promise<boolean> => {
    if (!replication.replicated || disk.tombstoneOf(key) !== null) return false;
    const replicas = await replication.replicasOf(key).catch(() => null);
    if (replicas === null || !replicas.includes(self)) return false;
    const from = replication.peers.filter((p) => replicas.includes(p.id));
    return from.length > 0 && replication.fetchFrom(key, from, null);
  };

  /**
   * A worker's object PUT: stored here when this store is a replica of the key, forwarded to the other replicas,
   * acknowledged at a majority. A forwarded PUT is stored here only, checked against the coordinator's sha256.
   */
  const putObject = async (
    req: IncomingMessage,
    key: string,
  ): Promise<{ key: string; size: number; sha256: string }> => {
    const isForward = forwarded(req);
    const replicas = isForward ? [self] : await replication.replicasOf(key);
    let received;
    try {
      received = await disk.receive(req, MAX_OBJECT_BYTES);
    } catch (error) {
      if (error instanceof TooLargeError)
        throw new HttpError(413, 'object_too_large', `an object is at most ${MAX_OBJECT_BYTES} bytes`);
      throw error;
    }
    const expected = req.headers['x-content-sha256'];
    if (typeof expected === 'string' && expected !== received.sha256) {
      await rm(received.tmp, { force: true });
      throw new HttpError(422, 'checksum_mismatch', `${key} arrived with sha256 ${received.sha256}, not ${expected}`);
    }
    const atHeader = Number(req.headers[OBJECT_AT_HEADER]);
    const at = isForward && Number.isSafeInteger(atHeader) && atHeader > 0 ? atHeader : Date.now();
    return replicateReceived(key, received, replicas, isForward, at);
  };

  /** Commits a received object here (when a replica) and, unless forwarded, to a majority of `replicas`. */
  const replicateReceived = async (
    key: string,
    received: { tmp: string; size: number; sha256: string },
    replicas: string[],
    isForward: boolean,
    at: number,
  ): Promise<{ key: string; size: number; sha256: string }> => {
    const local = replicas.includes(self);
    const info = local
      ? await disk.commitObject(key, received, at)
      : { key, size: received.size, sha256: received.sha256 };
    if (isForward) return info;
    const file = local ? disk.objectFile(key) : received.tmp;
    const sent = await replication.toMajority(
      replicas,
      local,
      (peer) => replication.sendObject(peer, key, file, info, at),
      key,
    );
    if (!local) void sent.settled.then(() => rm(file, { force: true }));
    return info;
  };

  const authorizeCluster = (req: IncomingMessage): void => {
    const token = bearerToken(req);
    if (token === null)
      throw new HttpError(
        401,
        'unauthorized',
        'writing objects needs the cluster token',
        {},
        { 'www-authenticate': 'Bearer' },
      );
    if (verifyToken(token, options.tokens).kind !== 'cluster')
      throw new HttpError(403, 'forbidden', 'writing objects needs the cluster token');
  };

  // ---------------------------------------------------------------- tus 1.0

  const tusHeaders = (): Record<string, string> => ({ 'tus-resumable': TUS_VERSION, 'cache-control': 'no-store' });

  const tus = async (
    req: IncomingMessage,
    res: ServerResponse,
    url: URL,
    uploadId: string,
    rest: string[],
    scopeKey: string,
  ): Promise<void> => {
    if (req.method === 'OPTIONS') {
      // Discovery is open (browsers preflight without credentials); it says nothing about any upload.
      res.writeHead(204, {
        ...tusHeaders(),
        'tus-version': TUS_VERSION,
        'tus-extension': 'creation,checksum',
        'tus-max-size': String(MAX_UPLOAD_BYTES),
        'tus-checksum-algorithm': 'sha1,sha256,md5',
        'access-control-allow-methods': 'POST, HEAD, PATCH, OPTIONS',
        'access-control-allow-headers':
          'Authorization, Content-Type, Upload-Length, Upload-Offset, Upload-Metadata, Upload-Checksum, Tus-Resumable, Upload-Defer-Length, X-Requested-With, X-HTTP-Method-Override',
        'access-control-max-age': '86400',
      });
      res.end();
      return;
    }
    if (req.headers['tus-resumable'] !== TUS_VERSION) {
      throw new HttpError(
        412,
        'tus_version_unsupported',
        `this server speaks tus ${TUS_VERSION} (Tus-Resumable header)`,
        {},
        { 'tus-version': TUS_VERSION },
      );
    }
    const method = (req.headers['x-http-method-override'] as string | undefined) ?? req.method;
    if (rest.length === 0) {
      if (method !== 'POST')
        throw new HttpError(
          405,
          'method_not_allowed',
          'POST creates the tus upload; HEAD and PATCH go to its Location',
          {},
          { allow: 'POST, OPTIONS' },
        );
      authorize(req, url.searchParams, scopeKey, 'write');
      const lengthText = req.headers['upload-length'];
      if (typeof lengthText !== 'string' || !/^\d{1,16}$/.test(lengthText))
        throw badRequest('invalid_upload_length', 'Upload-Length is required (Upload-Defer-Length is not supported)', {
          field: 'Upload-Length',
        });
      const length = Number(lengthText);
      if (length > MAX_UPLOAD_BYTES)
        throw new HttpError(413, 'upload_too_large', `an upload is at most ${MAX_UPLOAD_BYTES} bytes`, {
          limit: MAX_UPLOAD_BYTES,
        });
      if ((await disk.chunks(uploadId)).length > 0)
        throw new HttpError(
          409,
          'upload_mode_conflict',
          'this upload already has chunks sent with PUT; use one way per upload',
        );
      const metadata =
        typeof req.headers['upload-metadata'] === 'string' ? req.headers['upload-metadata'].slice(0, 4096) : null;
      const isForward = forwarded(req);
      const replicas = isForward ? [self] : await replication.replicasOf(`uploads/${uploadId}/`);
      await disk.tusCreate(uploadId, length, metadata);
      req.resume();
      if (!isForward)
        await replication.toMajority(
          replicas,
          true,
          async (peer) => {
            const r = await replication.sendFile(peer, 'POST', `/uploads/${uploadId}/tus`, null, {
              'tus-resumable': TUS_VERSION,
              'upload-length': String(length),
              ...(metadata !== null ? { 'upload-metadata': metadata } : {}),
            });
            if (r.status !== 201) throw new Error(`answered ${r.status} ${r.text.slice(0, 200)}`);
          },
          `tus upload ${uploadId}`,
        );
      res.writeHead(201, {
        ...tusHeaders(),
        location: `/uploads/${uploadId}/tus/file?${url.searchParams.toString()}`,
        'upload-offset': '0',
      });
      res.end();
      return;
    }
    if (rest.length !== 1 || rest[0] !== 'file') throw notFound(`no route for ${req.method} ${url.pathname}`);
    authorize(req, url.searchParams, scopeKey, method === 'HEAD' ? 'read' : 'write');
    const isForward = forwarded(req);
    let state = await disk.tusState(uploadId);
    if (state === null && isForward && typeof req.headers['upload-length'] === 'string') {
      // A replica that missed the creation (down then): the coordinator's PATCH carries the length.
      const meta = req.headers['upload-metadata'];
      await disk.tusCreate(uploadId, Number(req.headers['upload-length']), typeof meta === 'string' ? meta : null);
      state = await disk.tusState(uploadId);
    }
    if (state === null) throw notFound(`no tus upload for ${uploadId}`, { upload_id: uploadId });
    if (method === 'HEAD') {
      res.writeHead(200, {
        ...tusHeaders(),
        'upload-offset': String(state.offset),
        'upload-length': String(state.length),
        ...(state.metadata !== null ? { 'upload-metadata': state.metadata } : {}),
      });
      res.end();
      return;
    }
    if (method !== 'PATCH')
      throw new HttpError(
        405,
        'method_not_allowed',
        'use HEAD or PATCH on a tus upload',
        {},
        { allow: 'HEAD, PATCH, OPTIONS' },
      );
    if (req.headers['content-type'] !== 'application/offset+octet-stream')
      throw new HttpError(415, 'unsupported_media_type', 'a PATCH body is application/offset+octet-stream');
    const offsetText = req.headers['upload-offset'];
    if (typeof offsetText !== 'string' || !/^\d{1,16}$/.test(offsetText))
      throw badRequest('invalid_upload_offset', 'Upload-Offset is required', { field: 'Upload-Offset' });
    if (Number(offsetText) !== state.offset)
      throw new HttpError(409, 'offset_mismatch', `the upload is at offset ${state.offset}, not ${offsetText}`, {
        upload_offset: state.offset,
      });
    let expect: { algorithm: 'sha1' | 'sha256' | 'md5'; digest: string } | undefined;
    const checksum = req.headers['upload-checksum'];
    if (typeof checksum === 'string') {
      const m = /^(sha1|sha256|md5) ([A-Za-z0-9+/=]{1,100})$/.exec(checksum);
      if (m === null)
        throw badRequest('unsupported_checksum', 'Upload-Checksum is "<sha1|sha256|md5> <base64 digest>"', {
          field: 'Upload-Checksum',
        });
      expect = { algorithm: m[1] as 'sha1', digest: m[2]! };
    }
    let offset: number;
    try {
      offset = await disk.tusAppend(uploadId, state.offset, state.length, req, expect);
    } catch (error) {
      if (error instanceof TooLargeError) throw new HttpError(413, 'upload_too_large', error.message);
      if (error instanceof ChecksumError) throw new HttpError(460, 'checksum_mismatch', error.message);
      throw error;
    }
    stats.tusPatches++;
    stats.bytesIn += offset - state.offset;
    if (!isForward) {
      const replicas = await replication.replicasOf(`uploads/${uploadId}/`);
      const s = state;
      await replication.toMajority(
        replicas,
        true,
        (peer) => syncTus(peer, uploadId, s.offset, offset, s.length, s.metadata),
        `tus upload ${uploadId} to offset ${offset}`,
      );
    }
    res.writeHead(204, { ...tusHeaders(), 'upload-offset': String(offset) });
    res.end();
  };

  /**
   * Brings a peer's copy of a tus upload to `to` bytes: a PATCH of the bytes from `from` (from this store's file);
   * a peer at another offset (it missed a PATCH) answers it and gets the bytes from there instead.
   */
  const syncTus = async (
    peer: Peer,
    uploadId: string,
    from: number,
    to: number,
    length: number,
    metadata: string | null,
  ): Promise<void> => {
    let start = from;
    for (let attempt = 0; attempt < 3; attempt++) {
      const r = await replication.sendFile(
        peer,
        'PATCH',
        `/uploads/${uploadId}/tus/file`,
        () => (to > start ? createReadStream(disk.tusFile(uploadId), { start, end: to - 1 }) : Readable.from([])),
        {
          'tus-resumable': TUS_VERSION,
          'content-type': 'application/offset+octet-stream',
          'upload-offset': String(start),
          'upload-length': String(length),
          ...(metadata !== null ? { 'upload-metadata': metadata } : {}),
        },
      );
      if (r.status === 204) return;
      const peerOffset = Number(r.headers['upload-offset'] ?? safeOffset(r.text));
      if (r.status !== 409 || !Number.isSafeInteger(peerOffset)) throw new Error(`answered ${r.status}`);
      if (peerOffset >= to) return;
      start = peerOffset;
    }
    throw new Error('the peer kept moving its offset');
  };

  // Abandoned uploads go after `upload_max_age_ms` without a write (default 7 days), checked every
  // `upload_sweep_ms` (default 10 minutes).
  const maxAge = positiveSetting(options.settings, 'upload_max_age_ms', 7 * 86_400_000);
  const sweepEvery = positiveSetting(options.settings, 'upload_sweep_ms', 600_000);
  let sweeping = false;
  const sweeper = setInterval(() => {
    if (sweeping) return;
    sweeping = true;
    disk
      .sweepUploads(Date.now(), maxAge)
      .then((ids) => void (stats.uploadsSwept += ids.length))
      .catch((error: unknown) => options.logger.log('warn', 'upload sweep failed', { error: String(error) }))
      .finally(() => (sweeping = false));
  }, sweepEvery);
  sweeper.unref();

  const http = await serveWorkerHttp(options, { fastPath, health: () => ({ ...stats }) });
  const m = http.metrics;
  m.gauge('video_store_chunks_total', 'Chunks stored (resent ones included)').set(() => stats.chunks);
  m.gauge('video_store_chunks_resent_total', 'Chunks that replaced one already stored').set(() => stats.resent);
  m.gauge('video_store_objects_served_total', 'Objects (or ranges) served').set(() => stats.objectsServed);
  m.gauge('video_store_bytes_in_total', 'Upload bytes received').set(() => stats.bytesIn);
  m.gauge('video_store_replica_writes_total', 'Writes forwarded to another replica and acknowledged').set(
    () => replication.stats.forwarded,
  );
  m.gauge('video_store_replica_write_failures_total', 'Forwarded writes a replica did not take').set(
    () => replication.stats.forwardFailures,
  );
  m.gauge('video_store_corrupt_refused_total', 'Reads refused because the copy failed its checksum').set(
    () => replication.stats.corruptRefused,
  );
  m.gauge('video_store_repaired_total', 'Corrupt copies fetched again from a replica').set(
    () => replication.stats.repaired,
  );
  m.gauge('video_store_sync_copied_total', 'Objects anti-entropy copied from a peer').set(
    () => replication.stats.syncCopied,
  );

  http.router
    .post('/internal/uploads/:id/assemble', { admits: 'cluster' }, async (ctx) => {
      const uploadId = ctx.params.id ?? '';
      if (!UPLOAD_ID.test(uploadId))
        throw badRequest('invalid_upload_id', 'an upload id is 8 to 64 of A-Z a-z 0-9 _ -', { field: 'upload_id' });
      const body = requireObject(await ctx.json());
      const total = requireInteger(body, 'total_chunks', { min: 1, max: MAX_CHUNKS });
      const checksum = normalizeChecksum(requireString(body, 'checksum', { maxLength: 80 }));
      const replicas = await replication.replicasOf(rawKey(uploadId));
      return assemble(disk, uploadId, total, checksum, (key, received) =>
        replicateReceived(key, received, replicas, false, Date.now()),
      );
    })
    .delete('/internal/uploads/:id', { admits: 'cluster' }, async (ctx) => {
      const uploadId = ctx.params.id ?? '';
      if (!UPLOAD_ID.test(uploadId)) throw badRequest('invalid_upload_id', 'bad upload id', { field: 'upload_id' });
      await disk.dropUpload(uploadId);
      if (!forwarded(ctx.req)) await replication.broadcast('DELETE', `/internal/uploads/${uploadId}`);
      return { upload_id: uploadId, dropped: true };
    })
    .get('/internal/replica/index', { admits: 'cluster' }, (ctx) => replication.indexAnswer(ctx.query.get('since')))
    .post('/internal/objects/delete-prefix', { admits: 'cluster' }, async (ctx) => {
      const body = requireObject(await ctx.json());
      const prefix = requireString(body, 'prefix', {
        minLength: 3,
        maxLength: 512,
        pattern: /^(?!\.)[A-Za-z0-9._/-]*\/$/,
      });
      const deleted = await disk.deletePrefix(prefix, true);
      if (!forwarded(ctx.req)) await replication.broadcast('POST', '/internal/objects/delete-prefix', { prefix });
      return { prefix, deleted };
    })
    .get('/internal/cold/:id', { admits: 'cluster' }, async (ctx) => {
      const videoId = coldVideoId(ctx.params.id);
      const archive = await corruptIs409(() => disk.coldArchive(videoId));
      return { video_id: videoId, archive, warm: await disk.listPrefix(`videos/${videoId}/`) };
    })
    .post('/internal/cold/:id/pack', { admits: 'cluster' }, async (ctx) => ({
      video_id: coldVideoId(ctx.params.id),
      ...(await corruptIs409(() => disk.packCold(coldVideoId(ctx.params.id)))),
    }))
    .post('/internal/cold/:id/unpack', { admits: 'cluster' }, async (ctx) => ({
      video_id: coldVideoId(ctx.params.id),
      ...(await corruptIs409(() => disk.unpackCold(coldVideoId(ctx.params.id)))),
    }));

  replication.start();

  return {
    httpPort: http.port,
    stop: async () => {
      clearInterval(sweeper);
      await replication.stop();
      await http.close();
    },
  };
}

function coldVideoId(raw: string | undefined): string {
  const id = raw ?? '';
  if (!/^[A-Za-z0-9_-]{1,128}$/.test(id))
    throw badRequest('invalid_video_id', 'a video id is 1 to 128 of A-Z a-z 0-9 _ -', { field: 'video_id' });
  return id;
}

/** A corrupt archive is a 409 `archive_corrupt` (kept on disk for an operator; nothing restored from it). */
async function corruptIs409<T>(run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (error) {
    if (error instanceof ArchiveCorruptError) throw new HttpError(409, 'archive_corrupt', error.message);
    throw error;
  }
}

function positiveSetting(settings: Record<string, string>, name: string, fallback: number): number {
  const raw = settings[name];
  if (raw === undefined) return fallback;
  const n = Number(raw);
  if (!Number.isSafeInteger(n) || n < 1) throw new Error(`--set ${name}=${raw}: expected a positive integer (ms)`);
  return n;
}

/** `sha256:<hex>` or `<hex>`, lowercased; a 400 otherwise. */
export function normalizeChecksum(text: string): string {
  const hex = text.toLowerCase().replace(/^sha256:/, '');
  if (!/^[0-9a-f]{64}$/.test(hex))
    throw badRequest(
      'invalid_checksum',
      'checksum is the whole file\'s SHA-256: 64 hex digits, optionally prefixed "sha256:"',
      { field: 'checksum' },
    );
  return hex;
}

/**
 * Finalize's check and assembly: every chunk 0..total-1 present and none beyond, each chunk's bytes re-hashed
 * against its ack (the disk may have rotted since), the concatenation's SHA-256 equal to `checksum`; then the raw
 * object `raw/<id>` is written durably. A tus upload (total_chunks 1) is checked complete and hashed the same way.
 */
async function assemble(
  disk: DiskStore,
  uploadId: string,
  total: number,
  checksum: string,
  store: (
    key: string,
    received: { tmp: string; size: number; sha256: string },
  ) => Promise<{ key: string; size: number; sha256: string }>,
): Promise<{ key: string; size: number; sha256: string; chunks: number }> {
  const tus = await disk.tusState(uploadId);
  let files: string[];
  let acks: Array<string | null>;
  if (tus !== null) {
    if (total !== 1)
      throw badRequest('invalid_total_chunks', 'a tus upload is one chunk: finalize it with total_chunks 1', {
        field: 'total_chunks',
      });
    if (tus.offset < tus.length)
      throw new HttpError(409, 'upload_incomplete', `the tus upload has ${tus.offset} of ${tus.length} bytes`, {
        upload_offset: tus.offset,
        upload_length: tus.length,
      });
    files = [disk.tusFile(uploadId)];
    acks = [null];
  } else {
    const chunks = await disk.chunks(uploadId);
    const have = new Set(chunks.map((c) => c.index));
    const missing: number[] = [];
    for (let i = 0; i < total && missing.length < 1000; i++) if (!have.has(i)) missing.push(i);
    if (missing.length > 0)
      throw new HttpError(
        409,
        'chunks_missing',
        `${missing.length} of ${total} chunks are missing: send them, then finalize again`,
        { missing },
      );
    const extra = chunks.filter((c) => c.index >= total).map((c) => c.index);
    if (extra.length > 0)
      throw badRequest(
        'extra_chunks',
        `chunks beyond total_chunks ${total} were sent: ${extra.slice(0, 20).join(', ')}`,
        { field: 'total_chunks', extra },
      );
    files = chunks.map((c) => disk.chunkFile(uploadId, c.index));
    acks = chunks.map((c) => c.sha256);
  }
  const perFile = files.map(() => createHash('sha256'));
  const source = Readable.from(
    (async function* () {
      for (let i = 0; i < files.length; i++) {
        for await (const chunk of createReadStream(files[i]!) as AsyncIterable<Buffer>) {
          perFile[i]!.update(chunk);
          yield chunk;
        }
        const digest = perFile[i]!.digest('hex');
        if (acks[i] !== null && digest !== acks[i])
          throw new HttpError(409, 'chunk_corrupt', `chunk ${i} no longer matches its acknowledged sha256: resend it`, {
            index: i,
          });
      }
    })(),
  );
  const received = await disk.receive(source, MAX_UPLOAD_BYTES);
  if (received.sha256 !== checksum) {
    await rm(received.tmp, { force: true });
    throw new HttpError(
      422,
      'checksum_mismatch',
      `the uploaded bytes have sha256 ${received.sha256}, not the checksum given`,
      { sha256: received.sha256, size: received.size },
    );
  }
  // A zero-byte upload is kept: the probe rejects it with a clear status (the spec's rule 5), like any bad file.
  const key = rawKey(uploadId);
  const info = await store(key, received);
  return { key, size: info.size, sha256: info.sha256, chunks: total };
}

function safeOffset(text: string): number {
  try {
    return Number((JSON.parse(text) as { error?: { upload_offset?: unknown } }).error?.upload_offset);
  } catch {
    return NaN;
  }
}

type Range = { start: number; end: number };

/** One `bytes=` range of an object of `size` bytes: null for none (or a multi-range, answered whole), or unsatisfiable. */
export function parseRange(header: string | undefined, size: number): Range | null | 'unsatisfiable' {
  if (header === undefined) return null;
  const m = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (m === null) return null;
  const [, a, b] = m;
  if (a === '' && b === '') return null;
  let start: number;
  let end: number;
  if (a === '') {
    const n = Number(b);
    if (n === 0) return 'unsatisfiable';
    start = Math.max(0, size - n);
    end = size - 1;
  } else {
    start = Number(a);
    end = b === '' ? size - 1 : Math.min(Number(b), size - 1);
  }
  if (start >= size || start > end) return 'unsatisfiable';
  return { start, end };
}

const TYPES: Record<string, string> = {
  m3u8: 'application/vnd.apple.mpegurl',
  mpd: 'application/dash+xml',
  m4s: 'video/iso.segment',
  mp4: 'video/mp4',
  ts: 'video/mp2t',
  vtt: 'text/vtt; charset=utf-8',
  jpg: 'image/jpeg',
  png: 'image/png',
  json: 'application/json',
};

function contentTypeOf(key: string): string {
  const dot = key.lastIndexOf('.');
  return (dot >= 0 ? TYPES[key.slice(dot + 1).toLowerCase()] : undefined) ?? 'application/octet-stream';
}

function json(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(text)) });
  res.end(text);
}
