/**
 * The pipeline worker role (`pipeline`): everything between finalize and playable except the transcodes themselves
 * (transcoder.ts). It polls the members' to-do list (`/internal/video/work`) and:
 *   - probes each finalized source (packages/lib/media's probe: zero-byte, truncated, malformed, non-video files are
 *     rejected with a reason, and the video ends `failed` at stage `probe`), runs the moderation hook on the
 *     metadata, and queues the plan's (30-s segment, quality) tasks (qualities never above the source);
 *   - writes the manifests (HLS variant playlists, the master, the DASH MPD) whenever a quality has all its segments
 *     done, then marks it published: the video is `playable` after the first, the others join the master as they
 *     complete (the master's old copy is purged from the delivery tiers: it is the one object of a revision that
 *     changes, see README);
 *   - after playable, asynchronously: the five thumbnails, the captions (speech-to-text into WebVTT) and the
 *     moderation hook on the caption text;
 *   - sweeps the storage tiers every 30 s with its clock, and deletes raw sources 30 days after transcode;
 *   - drives the store's moves between the storage classes from the records (the machine's transitions, whoever's
 *     clock made them): a video the sweep sent cold is packed into its archive, the edges' copies purged, and the
 *     step recorded (`storage packed`); a video being restored is unpacked and verified, purged again (no edge
 *     keeps a miss from the cold time) and recorded (`storage unpacked`: warm). Each store step is idempotent and
 *     the record only moves after it, so a crash at any point is finished by the next poll.
 * Idempotent throughout: a pipeline process killed halfway leaves work the next poll (or another process) redoes.
 */
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, rename, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { pipeline as pump } from 'node:stream/promises';
import {
  buildDashMpd,
  buildHlsMaster,
  buildHlsVariant,
  buildSubtitlePlaylist,
  makeCaptions,
  makeThumbnails,
  moderate,
  planTranscode,
  probe,
  type DashVariantInput,
  type QualityName,
  type VariantInput,
} from '@raftkit/media';
import { serveWorkerHttp, type Logger, type RunningWorker, type WorkerOptions, type WorkerRole } from '@raftkit/http';
import { MetaClient, StoreClient, storeEndpoints } from '../../internal-client.js';
import { majority, storesOf } from '../../placement.js';
import type { QualitySpec, SegmentRecord, Video } from '../../machine.js';
import { STORE_ROLE } from '../store/server.js';
import { REGIONAL_ROLE } from '../delivery/index.js';
import { forUsers, pipelineLimits } from './limits.js';

export const PIPELINE_ROLE = 'pipeline';
const POLL_MS = 500;
const SWEEP_MS = 30_000;

export const pipelineRole: WorkerRole = { role: PIPELINE_ROLE, count: 1, start: startPipeline };

/** The object keys of a video revision (the layout packages/lib/media's README suggests, under videos/<id>/r<rev>/). */
export function revisionPrefix(videoId: string, revision: number): string {
  return `videos/${videoId}/r${revision}`;
}

/** A source's local copy: fetched once from the store per process, reused by every step that needs the bytes. */
export async function localSource(
  store: StoreClient,
  dir: string,
  v: Pick<Video, 'video_id' | 'raw_path' | 'source_size' | 'stores'>,
): Promise<string | null> {
  const path = join(dir, v.video_id);
  try {
    if ((await stat(path)).size === v.source_size) return path;
  } catch {
    // not here yet
  }
  await mkdir(dir, { recursive: true });
  const body = await store.get(v.raw_path, v.stores);
  if (body === null) return null;
  const tmp = `${path}.part-${process.pid}`;
  await pump(body, createWriteStream(tmp));
  await rename(tmp, path);
  return path;
}

export async function startPipeline(options: WorkerOptions): Promise<RunningWorker> {
  const token = options.tokens[0]!;
  const meta = new MetaClient(options.members, token);
  const stores = storeEndpoints(options.workers, STORE_ROLE);
  if (stores.length === 0) throw new Error('the pipeline needs an object store worker (role store)');
  const store = new StoreClient(stores, token);
  const regional = options.workers.find((w) => w.role === REGIONAL_ROLE);
  const sources = join(options.dataDir, 'sources');
  const scratch = join(options.dataDir, 'scratch');
  const stats = {
    probed: 0,
    rejected: 0,
    published: 0,
    thumbnails: 0,
    captions: 0,
    sweeps: 0,
    packed: 0,
    unpacked: 0,
    errors: 0,
  };
  const log: Logger = options.logger;
  let stopped = false;
  const extrasDone = new Set<string>();
  const limits = pipelineLimits(options.settings);

  const probeOne = async (v: Video): Promise<void> => {
    const path = await localSource(store, sources, v);
    if (path === null) {
      await meta.command({
        op: 'fail',
        videoId: v.video_id,
        stage: 'probe',
        reason: 'unreadable: the raw source is missing from the store',
        now: Date.now(),
      });
      return;
    }
    const result = await probe(path, limits.source);
    if (!result.ok) {
      stats.rejected++;
      await meta.command({
        op: 'fail',
        videoId: v.video_id,
        stage: 'probe',
        reason: forUsers(`${result.reason}: ${result.message}`).slice(0, 1000),
        now: Date.now(),
      });
      await rm(path, { force: true });
      return;
    }
    const info = result.info;
    const plan = planTranscode(info);
    const verdict = moderate({
      probe: info,
      title: v.title,
      description: v.description,
      tags: v.tags,
      caption_text: '',
    });
    if (verdict.decision !== 'ok') {
      await meta.command({
        op: 'moderate',
        videoId: v.video_id,
        action: verdict.decision,
        reason: verdict.reasons
          .map((r) => `${r.rule}: ${r.reason}`)
          .join('; ')
          .slice(0, 1000),
        now: Date.now(),
      });
      // A re-encode's probe: the previous revision was playing from the delivery tiers until now.
      await purge(`videos/${v.video_id}/`);
    }
    const qualities: QualitySpec[] = plan.qualities.map((q) => ({
      name: q.name,
      width: q.width,
      height: q.height,
      bandwidth: (q.video_kbps + q.audio_kbps) * 1000,
    }));
    await meta.command({
      op: 'probed',
      videoId: v.video_id,
      durationS: info.duration_s,
      codec: info.source_codec.slice(0, 64),
      width: info.width,
      height: info.height,
      fps: plan.tasks[0]?.fps ?? info.fps_rational,
      hasAudio: info.has_audio,
      qualities,
      segmentS: 30,
      segments: plan.segments.length,
      now: Date.now(),
      // The uploader's budget, decided by the machine in log order (so two pipelines cannot both spend its last part).
      ...(limits.budget !== null ? { budget: limits.budget } : {}),
    });
    stats.probed++;
  };

  /** Writes every manifest for the complete qualities of `v`, then records them published. */
  const publish = async (v: Video): Promise<void> => {
    const prefix = revisionPrefix(v.video_id, v.revision);
    const complete = v.qualities.filter((q) => !q.failed && q.done >= q.segments);
    if (complete.length === 0) return;
    const variants: VariantInput[] = [];
    const dash: DashVariantInput[] = [];
    for (const q of complete) {
      const { segments } = await meta.get<{ segments: SegmentRecord[] }>(
        `/internal/video/videos/${v.video_id}/segments/${q.name}`,
      );
      if (segments.length < q.segments) return; // a record not visible yet: the next poll
      const refs = segments.flatMap((s) =>
        s.parts.map((p) => ({ uri: p.name, duration_s: p.duration_ms / 1000, size_bytes: p.size_bytes })),
      );
      const codecs = segments[0]!.codecs;
      await store.put(
        `${prefix}/${q.name}/index.m3u8`,
        buildHlsVariant({ init_uri: 'init.mp4', segments: refs }),
        v.stores,
      );
      variants.push({
        quality: q.name as QualityName,
        width: q.width,
        height: q.height,
        codecs,
        playlist_uri: `${q.name}/index.m3u8`,
        init_uri: 'init.mp4',
        segments: refs,
        nominal_bandwidth: q.bandwidth,
      });
      dash.push({
        quality: q.name as QualityName,
        width: q.width,
        height: q.height,
        codecs,
        init_uri: `${q.name}/init.mp4`,
        media_template: `${q.name}/seg-$Number%05d$.m4s`,
        segments: refs.map((r) => ({ ...r, uri: `${q.name}/${r.uri}` })),
        nominal_bandwidth: q.bandwidth,
      });
    }
    const duration = v.duration_s ?? 0;
    let subtitles: { playlist_uri: string; language: string; name: string } | undefined;
    if (v.captions_path !== null) {
      await store.put(
        `${prefix}/captions/en.m3u8`,
        buildSubtitlePlaylist({ vtt_uri: 'en.vtt', duration_s: duration }),
        v.stores,
      );
      subtitles = { playlist_uri: 'captions/en.m3u8', language: 'en', name: 'English' };
    }
    await store.put(
      `${prefix}/master.m3u8`,
      buildHlsMaster({ variants, ...(subtitles !== undefined ? { subtitles } : {}) }),
      v.stores,
    );
    await store.put(
      `${prefix}/manifest.mpd`,
      buildDashMpd({
        duration_s: duration,
        variants: dash,
        ...(v.captions_path !== null ? { subtitles: { vtt_uri: 'captions/en.vtt', language: 'en' } } : {}),
      }),
      v.stores,
    );
    const r = await meta.command({
      op: 'published',
      videoId: v.video_id,
      revision: v.revision,
      qualities: complete.map((q) => q.name),
      manifestPath: `${prefix}/master.m3u8`,
      now: Date.now(),
    });
    stats.published++;
    // The master and the MPD of a revision are rewritten as qualities join: purge their cached copies (the regional
    // tier fans the purge out to the edges). Segments and variant playlists never change. After the record says
    // published: a purge also drops the tiers' copy of the record, and one read before the command would keep
    // "not yet published" for the record's TTL.
    await purge(`${prefix}/master.m3u8`);
    await purge(`${prefix}/manifest.mpd`);
    if (r.ok && v.revision > 1) {
      // A re-encode's explicit invalidation: the previous revision leaves the caches and the store once the new one
      // plays (its keys differ, so nothing could serve it by mistake; this frees the space and the cache). The
      // previous one is the record's (a failed re-encode in between skipped a number).
      const old = `${revisionPrefix(v.video_id, v.previous?.revision ?? v.revision - 1)}/`;
      await purge(old);
      await store
        .json('POST', '/internal/objects/delete-prefix', { prefix: old }, 60_000, v.stores)
        .catch(() => undefined);
    }
  };

  const purge = async (key: string): Promise<void> => {
    if (regional === undefined) return;
    await fetch(`http://${regional.httpAddress}/api/delivery/purge`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ prefix: key }),
      signal: AbortSignal.timeout(10_000),
    })
      .then((r) => r.body?.cancel())
      .catch(() => undefined);
  };

  /** Thumbnails, captions and the caption-text moderation, after playable (asynchronous to the critical path). */
  const extras = async (v: Video): Promise<void> => {
    const path = await localSource(store, sources, v);
    if (path === null || v.duration_s === null) return;
    const prefix = revisionPrefix(v.video_id, v.revision);
    const dir = join(scratch, v.video_id);
    const thumbs = await makeThumbnails(path, v.duration_s, join(dir, 'thumbs'));
    const keys: string[] = [];
    for (const t of thumbs) {
      const key = `${prefix}/thumbs/${t.file}`;
      await store.put(key, () => createReadStream(t.path), v.stores);
      keys.push(key);
    }
    await meta.command({ op: 'thumbnails', videoId: v.video_id, paths: keys });
    stats.thumbnails++;
    const captions = await makeCaptions(path, v.has_audio ?? false).catch((error: unknown) => {
      log.log('warn', 'captions failed', { video_id: v.video_id, error: String(error) });
      return null;
    });
    if (captions !== null) {
      await store.put(`${prefix}/captions/en.vtt`, captions.vtt, v.stores);
      await meta.command({ op: 'captions', videoId: v.video_id, path: `${prefix}/captions/en.vtt` });
      stats.captions++;
      const verdict = moderate({
        probe: {
          duration_s: v.duration_s,
          width: v.source_width ?? 0,
          height: v.source_height ?? 0,
          has_audio: v.has_audio ?? false,
        },
        title: v.title,
        description: v.description,
        tags: v.tags,
        caption_text: captions.text,
      });
      if (verdict.decision !== 'ok') {
        await meta.command({
          op: 'moderate',
          videoId: v.video_id,
          action: verdict.decision,
          reason: verdict.reasons
            .map((r) => `${r.rule}: ${r.reason}`)
            .join('; ')
            .slice(0, 1000),
          now: Date.now(),
        });
        // Playable until now: every delivery tier drops it at once (as the operator's moderation call does).
        await purge(`videos/${v.video_id}/`);
      }
      // The master gains its subtitle rendition.
      const fresh = await meta.get<Video>(`/internal/video/videos/${v.video_id}`);
      if (fresh.status === 'playable' || fresh.status === 'flagged') await publish(fresh);
    }
    await rm(dir, { recursive: true, force: true });
  };

  /** One store move a record asks for (pack a cold video, unpack a restoring one), then the step recorded. */
  const moveTier = async (v: Video): Promise<void> => {
    const id = v.video_id;
    if (v.tier === 'cold' && v.storage === 'packing') {
      // Packed on every replica of the video: the record says archived only when none keeps warm copies beside it
      // (a replica down holds the move at `packing`; the step is idempotent and re-run).
      const packed = await onReplicas(v, `/internal/cold/${id}/pack`, v.stores?.length ?? 1);
      await purge(`videos/${id}/`);
      await meta.command({
        op: 'storage',
        videoId: id,
        step: 'packed',
        objects: packed.objects,
        bytes: packed.bytes,
        now: Date.now(),
      });
      stats.packed++;
      log.log('info', 'video moved to cold storage', { video_id: id, objects: packed.objects, bytes: packed.bytes });
    } else if (v.tier === 'restoring') {
      const started = Date.now();
      // Unpacked on a majority of the replicas (a viewer waits): the others get the warm copies by anti-entropy.
      const unpacked = await onReplicas(v, `/internal/cold/${id}/unpack`, majority(v.stores?.length ?? 1));
      await purge(`videos/${id}/`);
      await meta.command({
        op: 'storage',
        videoId: id,
        step: 'unpacked',
        objects: unpacked.objects,
        bytes: unpacked.bytes,
        now: Date.now(),
      });
      stats.unpacked++;
      log.log('info', 'video restored from cold storage', {
        video_id: id,
        objects: unpacked.objects,
        bytes: unpacked.bytes,
        ms: Date.now() - started,
      });
    }
  };

  /** POSTs a cold step to every replica of `v`; fails unless `need` of them did it. The largest answer is kept. */
  const onReplicas = async (v: Video, path: string, need: number): Promise<{ objects: number; bytes: number }> => {
    const placement = storesOf(v);
    const answers = await Promise.allSettled(
      store.stores
        .filter((s) => placement.includes(s.id))
        .map((s) => store.jsonAt<{ objects: number; bytes: number }>(s.url, 'POST', path, {})),
    );
    const ok = answers.flatMap((a) => (a.status === 'fulfilled' ? [a.value] : []));
    if (ok.length < need) {
      const failed = answers.find((a) => a.status === 'rejected');
      throw failed?.status === 'rejected' ? failed.reason : new Error(`${path}: ${ok.length} of ${need} replicas`);
    }
    return ok.reduce((best, a) => (a.objects > best.objects ? a : best), ok[0]!);
  };

  const sweep = async (): Promise<void> => {
    const r = await meta.command({ op: 'sweep', now: Date.now() });
    stats.sweeps++;
    for (const raw of r.rawDeleted) {
      await store.json('DELETE', `/objects/${raw.raw_path}`, undefined, 60_000).catch(() => undefined);
      await rm(join(sources, raw.video_id), { force: true });
    }
  };

  const loop = async (): Promise<void> => {
    let lastSweep = 0;
    while (!stopped) {
      try {
        type Work = { probe: Video[]; publish: Video[]; raw: Video[]; tiers: Video[] };
        // A member's own copy first (no round of heartbeats, so an idle group stays quiesced); only when it holds
        // work is the list read again linearizably and acted on. Work it has not applied yet is seen next poll.
        const glance = await meta.get<Work>('/internal/video/work?consistency=serializable');
        const idle = glance.probe.length + glance.publish.length + glance.raw.length + glance.tiers.length === 0;
        const work = idle ? glance : await meta.get<Work>('/internal/video/work');
        // Restores first: a viewer is waiting on those.
        for (const v of [...work.tiers].sort(
          (a, b) => Number(b.tier === 'restoring') - Number(a.tier === 'restoring'),
        )) {
          await moveTier(v).catch((error: unknown) => {
            stats.errors++;
            log.log('warn', 'storage move failed (retried next poll)', {
              video_id: v.video_id,
              tier: v.tier,
              error: String(error),
            });
          });
        }
        for (const v of work.probe) await probeOne(v);
        for (const v of work.publish) await publish(v);
        for (const v of work.raw) {
          // Per revision: a re-encoded video needs its own thumbnails and captions (keyed by video, r2 got none).
          const done = `${v.video_id}:r${v.revision}`;
          if (extrasDone.has(done)) continue;
          extrasDone.add(done);
          void extras(v).catch((error: unknown) => {
            stats.errors++;
            extrasDone.delete(done);
            log.log('warn', 'thumbnails/captions failed', { video_id: v.video_id, error: String(error) });
          });
        }
        if (Date.now() - lastSweep >= SWEEP_MS) {
          lastSweep = Date.now();
          await sweep();
        }
      } catch (error) {
        stats.errors++;
        log.log('warn', 'pipeline step failed', { error: String(error) });
      }
      await new Promise((r) => setTimeout(r, POLL_MS));
    }
  };

  const http = await serveWorkerHttp(options, { health: () => ({ ...stats }) });
  void loop();
  return {
    httpPort: http.port,
    stop: async () => {
      stopped = true;
      await http.close();
      await meta.close();
      await store.close();
    },
  };
}
