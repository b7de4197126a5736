/**
 * video: the video service (packages/services/video) under faults, through its public API: uploads by the signed
 * chunk URLs the app tier hands out, finalize, playback through an edge. Five members (the metadata's one Raft
 * group), three object stores (every object on all three, majority-acknowledged writes), one regional cache and one
 * edge, one app server, the pipeline and one transcoder; the kill, pause and wipe nemeses also hit one store each
 * time (`faultWorkers`; a wipe deletes its data folder: its objects, uploads and archives, which read repair and
 * anti-entropy bring back from the two others).
 *
 * Setup makes CLIPS small clips with ffmpeg (160x90, 10 fps, 1 to 3 s: only the 144p quality, a few hundred ms of
 * transcoding each). Clients: 15% of steps upload (POST /api/videos/upload with a fresh idempotency key, the clip
 * PUT in two chunks to the signed URL, finalize with its SHA-256); an upload whose outcome is unknown (a timeout, a
 * reset, a 5xx, at any step) is taken up again in the client's next step and after the heal with the SAME key (the
 * answer lists the chunks the store holds; the others are sent again) until finalize answers. The other steps read
 * an acknowledged video's record (`status`). After the heal the final reads wait until every acknowledged video is
 * playable with every quality published (or a deadline), then play it as a viewer does: playback, the HLS master
 * from the edge, every variant playlist, its init segment and every media segment, each hashed and compared with
 * the stores' SHA-256 of that object (the first store holding it); and the raw source assembled from the chunks, hashed against the clip.
 * Checks: video-checks.ts.
 *
 * History: `upload` (key = idempotency key; invoke value {clip, sha256, size}; ok value {video_id, upload_id});
 * `status` ({video_id}; ok {status, stage}); `final-play` ({video_id}; ok {status, stage, raw_sha256, master,
 * variants, objects: [[key, served_sha256, store_sha256]...], errors: [...]}).
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { request } from 'undici';
import type { HistoryEvent } from '../history.js';
import { callJson, errorCode, readFailure, writeFailure, type HttpOutcome } from './http.js';
import { checkVideo, parsePlaylist } from './video-checks.js';
import type { CheckResult, Completion, FinalContext, Worker, WorkerContext, Workload } from './workload.js';

const CLIPS = 3;
/**
 * Share of steps that upload. Transcoding is the cost (one transcoder on 2 shared cores): the final reads wait for
 * every acknowledged video, so more uploads make the run longer, not the check stronger (README: the figures).
 */
const UPLOAD_SHARE = 0.15;
/** The object stores: every object on 3 of them (the service's default `object_replicas`), each a fault target. */
const STORES = 3;
/** How long the final reads wait for acknowledged videos to be transcoded and published. */
const FINAL_MS = 120_000;

interface Clip {
  name: string;
  bytes: Buffer;
  sha256: string;
}

interface Upload {
  key: string;
  clip: Clip;
}

export class VideoWorkload implements Workload {
  readonly service = 'video';
  /** No register to check (modelEvents is empty): the video checks carry the verdict. */
  readonly model = 'register' as const;
  readonly workers = { store: STORES, regional: 1, edge: 1, app: 1, pipeline: 1, transcoder: 1 };
  readonly faultWorkers?: string;
  private clips: Clip[] = [];
  private readonly acked = new Map<string, string>();
  private readonly unfinished: Upload[] = [];
  /** video_id -> upload_id of acknowledged uploads. */
  private readonly uploads = new Map<string, string>();

  /**
   * `faultStore` false (`video-members`): the kill, pause and wipe nemeses hit members only, never the object stores
   * (it isolates the metadata group's faults from the stores' when a run of `video` fails).
   */
  constructor(
    faultStore = true,
    readonly name = 'video',
  ) {
    if (faultStore) this.faultWorkers = 'store';
  }

  describe(): string {
    return `uploads (${UPLOAD_SHARE * 100}%) of ${CLIPS} small clips in two chunks each, retried with their idempotency key until finalized, and reads of acknowledged videos; then every video played through the edge, every segment hashed against the store`;
  }

  private url(urls: readonly string[], role: string): string {
    return this.urls(urls, role)[0]!;
  }

  /** Every worker URL of a role, in start order (the workers start role by role, as `workers` lists them). */
  private urls(urls: readonly string[], role: string): string[] {
    const order = Object.entries(this.workers).flatMap(([r, n]) => Array.from({ length: n }, () => r));
    return urls.filter((_, i) => order[i] === role);
  }

  /** Where setup makes the clips; removed by close(). */
  private readonly clipDir = join(tmpdir(), `jepsen-like-video-${process.pid}`);

  async setup(): Promise<void> {
    const dir = this.clipDir;
    mkdirSync(dir, { recursive: true });
    const run = promisify(execFile);
    for (let i = 0; i < CLIPS; i++) {
      const file = join(dir, `clip${i}.mp4`);
      const s = i + 1;
      await run('ffmpeg', [
        ...['-nostdin', '-v', 'error', '-y', '-f', 'lavfi', '-i', `testsrc2=size=160x90:rate=10:duration=${s}`],
        ...['-f', 'lavfi', '-i', `sine=frequency=${440 + 110 * i}:duration=${s}`, '-c:v', 'libx264'],
        ...['-preset', 'ultrafast', '-pix_fmt', 'yuv420p', '-c:a', 'aac', '-shortest', file],
      ]);
      const bytes = readFileSync(file);
      this.clips.push({ name: `clip${i}`, bytes, sha256: createHash('sha256').update(bytes).digest('hex') });
    }
  }

  /** One upload from the start (or resumed: the same key answers the same upload and the chunks held). */
  private async upload(app: string, token: string, u: Upload, timeoutMs: number): Promise<Completion> {
    const created = await callJson(`${app}/api/videos/upload`, {
      method: 'POST',
      token,
      body: { user_id: 'jepsen', title: u.key, privacy: 'unlisted', idempotency_key: u.key },
      timeoutMs,
    });
    if (created.kind !== 'response' || (created.status !== 200 && created.status !== 201)) return failure(created);
    const answer = created.body as {
      upload_id: string;
      chunk_ack: { received?: Array<{ index: number; sha256: string }> };
      /** Null once the upload is finalized: finalize again answers the same video. */
      upload: { url: string } | null;
    };
    const half = Math.ceil(u.clip.bytes.length / 2);
    const chunks = [u.clip.bytes.subarray(0, half), u.clip.bytes.subarray(half)];
    const held = new Map((answer.chunk_ack.received ?? []).map((c) => [c.index, c.sha256]));
    for (const [index, chunk] of answer.upload === null ? [] : chunks.entries()) {
      const sha = createHash('sha256').update(chunk).digest('hex');
      if (held.get(index) === sha) continue;
      const put = await putChunk(answer.upload!.url.replace('{index}', String(index)), chunk, sha, timeoutMs);
      // A chunk not stored decided nothing yet: the upload is taken up again (its outcome stays open).
      if (put.kind !== 'response' || put.status !== 200) return { ...failure(put), type: 'info' };
    }
    const fin = await callJson(`${app}/api/videos/${answer.upload_id}/finalize`, {
      method: 'POST',
      token,
      body: { total_chunks: chunks.length, checksum: u.clip.sha256 },
      timeoutMs,
    });
    if (fin.kind === 'response' && fin.status === 200) {
      const b = fin.body as { video_id: string; size: number; checksum: string };
      return {
        type: 'ok',
        value: { video_id: b.video_id, upload_id: answer.upload_id, size: b.size, checksum: b.checksum },
      };
    }
    return { ...writeFailure(fin), type: 'info' };
  }

  private async attempt(perform: WorkerContext['perform'], app: string, token: string, u: Upload, ms: number) {
    const out = await perform(
      { f: 'upload', key: u.key, value: { clip: u.clip.name, sha256: u.clip.sha256, size: u.clip.bytes.length } },
      () => this.upload(app, token, u, ms),
    );
    if (out.type === 'ok') {
      const v = out.value as { video_id: string; upload_id: string };
      this.acked.set(u.key, v.video_id);
      this.uploads.set(v.video_id, v.upload_id);
    }
    return out;
  }

  createWorker(ctx: WorkerContext): Worker {
    const app = this.url(ctx.workerUrls, 'app');
    let n = 0;
    let pending: Upload | null = null;
    return {
      step: async () => {
        if (pending !== null || ctx.rng.chance(UPLOAD_SHARE)) {
          pending ??= { key: `v${ctx.worker}.${n++}`, clip: this.clips[ctx.rng.int(0, CLIPS - 1)]! };
          const out = await this.attempt(ctx.perform, app, ctx.token, pending, ctx.opTimeoutMs);
          // Certainly not created (refused before anything was stored): a later upload takes a fresh key.
          if (out.type !== 'info') pending = null;
          else await ctx.sleep(300);
          return;
        }
        const ids = [...this.acked.values()];
        if (ids.length === 0) return void (await ctx.sleep(100));
        const id = ids[ctx.rng.int(0, ids.length - 1)]!;
        await readStatus(ctx.perform, app, ctx.token, id, ctx.opTimeoutMs);
        await ctx.sleep(200);
      },
      finish: async () => {
        if (pending !== null) this.unfinished.push(pending);
        pending = null;
      },
    };
  }

  async finalReads(ctx: FinalContext): Promise<void> {
    const app = this.url(ctx.workerUrls, 'app');
    const stores = this.urls(ctx.workerUrls, 'store');
    const deadline = Math.max(ctx.deadline, Date.now() + FINAL_MS);
    for (const u of this.unfinished)
      while (Date.now() < deadline) {
        const out = await this.attempt(ctx.perform, app, ctx.token, u, ctx.opTimeoutMs);
        if (out.type === 'ok') break;
        await ctx.sleep(500);
      }
    // Wait until every acknowledged video is finished (playable, every quality published) or has failed.
    const ids = [...this.acked.values()];
    const state = new Map<string, { status: string; stage: string | null }>();
    while (Date.now() < deadline) {
      for (const id of ids) {
        const s = state.get(id);
        if (s !== undefined && s.stage === null && s.status !== 'transcoding') continue;
        const out = await readStatus(ctx.perform, app, ctx.token, id, ctx.opTimeoutMs);
        if (out.type === 'ok') state.set(id, out.value as { status: string; stage: string | null });
      }
      if (ids.every((id) => state.get(id)?.stage === null && state.get(id)?.status !== 'transcoding')) break;
      await ctx.sleep(1_000);
    }
    for (const [key, id] of this.acked)
      await ctx.perform({ f: 'final-play', key, value: { video_id: id } }, () => this.play(app, stores, ctx, id));
  }

  /** Plays a video as a viewer would, hashing every object served against the store's copy. */
  private async play(app: string, stores: readonly string[], ctx: FinalContext, id: string): Promise<Completion> {
    const timeoutMs = ctx.opTimeoutMs;
    const errors: string[] = [];
    const objects: Array<[string, string | null, string | null]> = [];
    const info = await callJson(`${app}/api/videos/${id}`, { method: 'GET', token: ctx.token, timeoutMs });
    if (info.kind !== 'response') return readFailure(info);
    if (info.status === 404) return { type: 'ok', value: { video_id: id, status: 'missing', errors, objects } };
    if (info.status !== 200) return readFailure(info);
    const video = info.body as { status: string; stage: string | null; failure?: unknown };
    const value: Record<string, unknown> = { video_id: id, status: video.status, stage: video.stage };
    if (video.failure !== undefined && video.failure !== null) value.failure = video.failure;
    const play = await callJson(`${app}/api/videos/${id}/playback`, { method: 'GET', token: ctx.token, timeoutMs });
    if (play.kind !== 'response' || play.status !== 200)
      return { type: 'ok', value: { ...value, errors: [`playback: ${describe(play)}`], objects } };
    const masterUrl = (play.body as { manifest_url: string }).manifest_url;
    const fetchObject = async (url: string): Promise<Buffer | null> => {
      const got = await fetchBytes(url, null, timeoutMs);
      if (typeof got === 'string') {
        errors.push(`${new URL(url).pathname}: ${got}`);
        return null;
      }
      const key = new URL(url).pathname.replace(/^.*?\/media\//, '');
      const stored = await storeSha(stores, key, ctx.token, timeoutMs);
      objects.push([
        key,
        createHash('sha256').update(got).digest('hex'),
        typeof stored === 'string' ? null : stored.toString(),
      ]);
      return got;
    };
    const master = await fetchObject(masterUrl);
    if (master === null) return { type: 'ok', value: { ...value, errors, objects } };
    const parsed = parsePlaylist(master.toString('utf8'));
    value.master = parsed.kind === 'master' ? parsed.uris.length : parsed.kind;
    if (parsed.kind !== 'master')
      errors.push(`master: ${parsed.kind === 'invalid' ? parsed.reason : 'not a master playlist'}`);
    const variants: number[] = [];
    for (const uri of parsed.kind === 'master' ? parsed.uris : []) {
      const variantUrl = new URL(uri, masterUrl).toString();
      const body = await fetchObject(variantUrl);
      if (body === null) continue;
      const media = parsePlaylist(body.toString('utf8'));
      if (media.kind !== 'media') {
        errors.push(`${uri}: ${media.kind === 'invalid' ? media.reason : 'not a media playlist'}`);
        continue;
      }
      variants.push(media.uris.length);
      for (const s of [...(media.map !== null ? [media.map] : []), ...media.uris])
        await fetchObject(new URL(s, variantUrl).toString());
    }
    value.variants = variants;
    // The raw source the store assembled from the chunks (kept 30 days after the last quality).
    const upload = this.uploadOf(id);
    if (upload !== undefined) {
      const raw = await storeSha(stores, `raw/${upload}`, ctx.token, timeoutMs);
      value.raw_sha256 = typeof raw === 'string' ? null : raw.toString();
      if (typeof raw === 'string') errors.push(`raw/${upload}: ${raw}`);
    }
    return { type: 'ok', value: { ...value, errors, objects } };
  }

  private uploadOf(videoId: string): string | undefined {
    return this.uploads.get(videoId);
  }

  check(events: readonly HistoryEvent[]): CheckResult[] {
    return checkVideo(events);
  }

  async close(): Promise<void> {
    rmSync(this.clipDir, { recursive: true, force: true });
  }

  modelEvents(): readonly HistoryEvent[] {
    return [];
  }
}

/** Reads a video's record (`status`: recorded, so the checks see when it turned playable). */
function readStatus(
  perform: WorkerContext['perform'],
  app: string,
  token: string,
  id: string,
  timeoutMs: number,
): Promise<Completion> {
  return perform({ f: 'status', value: { video_id: id } }, async () => {
    const out = await callJson(`${app}/api/videos/${id}`, { method: 'GET', token, timeoutMs });
    if (out.kind === 'response' && out.status === 200) {
      const b = out.body as { status: string; stage: string | null };
      return { type: 'ok', value: { video_id: id, status: b.status, stage: b.stage } };
    }
    return readFailure(out);
  });
}

function failure(out: HttpOutcome): Completion {
  const f = writeFailure(out);
  return out.kind === 'response' ? { ...f, error: errorCode(out.body) ?? f.error } : f;
}

function describe(out: HttpOutcome): string {
  return out.kind === 'response' ? `${out.status} ${errorCode(out.body) ?? ''}`.trim() : out.error;
}

async function putChunk(url: string, chunk: Buffer, sha: string, timeoutMs: number): Promise<HttpOutcome> {
  try {
    const res = await request(url, {
      method: 'PUT',
      headers: { 'x-chunk-sha256': sha, 'content-type': 'application/octet-stream' },
      body: chunk,
      signal: AbortSignal.timeout(timeoutMs),
    });
    const text = await res.body.text();
    let body: unknown = text;
    try {
      body = JSON.parse(text);
    } catch {
      // not JSON
    }
    return { kind: 'response', status: res.statusCode, body, retryAfter: null };
  } catch (e) {
    const code = (e as { code?: string }).code ?? (e as Error).name;
    return code === 'ECONNREFUSED' ? { kind: 'not-sent', error: code } : { kind: 'unknown', error: code };
  }
}

/**
 * The stores' SHA-256 of an object: the first store that answers 200 (a store that is no replica of it answers
 * 404, as may one being repaired); the last store's failure when none has it.
 */
async function storeSha(
  stores: readonly string[],
  key: string,
  token: string,
  timeoutMs: number,
): Promise<Buffer | string> {
  let last: Buffer | string = 'no store';
  for (const store of stores) {
    last = await fetchBytes(`${store}/objects/${key}`, token, timeoutMs, true);
    if (typeof last !== 'string') return last;
  }
  return last;
}

/**
 * GETs an object: its bytes, or (`shaOnly`, a HEAD with the cluster token at the store) the store's SHA-256 of it
 * as a Buffer of hex; a string says why not.
 */
async function fetchBytes(
  url: string,
  token: string | null,
  timeoutMs: number,
  shaOnly = false,
): Promise<Buffer | string> {
  try {
    const res = await request(url, {
      method: shaOnly ? 'HEAD' : 'GET',
      headers: token !== null ? { authorization: `Bearer ${token}` } : {},
      signal: AbortSignal.timeout(timeoutMs),
    });
    const body = Buffer.from(await res.body.arrayBuffer());
    if (res.statusCode !== 200) return `HTTP ${res.statusCode}`;
    if (!shaOnly) return body;
    const sha = res.headers['x-content-sha256'];
    return typeof sha === 'string' ? Buffer.from(sha) : 'no x-content-sha256';
  } catch (e) {
    return (e as { code?: string }).code ?? (e as Error).name;
  }
}
