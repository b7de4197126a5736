/**
 * The transcode worker role (`transcoder`, a pool: `cluster up` starts 2, `--workers transcoder=N` more). Each
 * process loops: claim a task from the members (a lease of `transcode_lease_ms`, default 60 s, stamped with this
 * process's clock, renewed every third of it while the task runs), fetch the source once, run packages/lib/media's transcodeTask for the (30-s segment, quality), upload
 * the init segment and the 6-s fMP4 segments to the store, report `complete`. A worker that dies holds its lease
 * until it expires; then any worker's claim gets the task (the machine decides by the time in the command). Outputs
 * are deterministic (same input, same bytes), so a task finished twice writes the same objects and the machine keeps
 * the first completion.
 */
import { createReadStream } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { qualitiesFor, sourceSegments, taskId, transcodeTask, type TranscodeTask } from '@raftkit/media';
import { serveWorkerHttp, type RunningWorker, type WorkerOptions, type WorkerRole } from '@raftkit/http';
import { MetaClient, StoreClient, storeEndpoints } from '../../internal-client.js';
import type { Task, Video } from '../../machine.js';
import { STORE_ROLE } from '../store/server.js';
import { forUsers } from './limits.js';
import { localSource, revisionPrefix } from './pipeline.js';
import { isTransient, retryTransient } from './transient.js';

export const TRANSCODER_ROLE = 'transcoder';
export const DEFAULT_LEASE_MS = 60_000;

export const transcoderRole: WorkerRole = { role: TRANSCODER_ROLE, count: 2, start: startTranscoder };

/**
 * packages/lib/media's task for a queued (video, quality, segment), rebuilt from the probe's facts in the record (the
 * record keeps the plan's output frame rate, already capped, so this equals media's planTask).
 */
export function mediaTask(v: Video, t: Task): TranscodeTask {
  const quality = qualitiesFor(v.source_width ?? 0, v.source_height ?? 0).find((q) => q.name === t.quality);
  const segment = sourceSegments(v.duration_s ?? 0)[t.segment_index];
  if (quality === undefined || segment === undefined) throw new Error(`task ${t.key} does not fit the video's plan`);
  return {
    task_id: taskId(t.segment_index, quality.name),
    segment,
    quality,
    fps: v.source_fps ?? '30',
    has_audio: v.has_audio ?? false,
  };
}

export async function startTranscoder(options: WorkerOptions): Promise<RunningWorker> {
  const token = options.tokens[0]!;
  const meta = new MetaClient(options.members, token, options.index - 1);
  const stores = storeEndpoints(options.workers, STORE_ROLE);
  if (stores.length === 0) throw new Error('the transcoder needs an object store worker (role store)');
  const store = new StoreClient(stores, token);
  const leaseText = options.settings['transcode_lease_ms'];
  const leaseMs = leaseText === undefined ? DEFAULT_LEASE_MS : Number(leaseText);
  if (!Number.isSafeInteger(leaseMs) || leaseMs < 1000)
    throw new Error(`--set transcode_lease_ms=${leaseText}: an integer of at least 1000`);
  const sources = join(options.dataDir, 'sources');
  const stats = { claimed: 0, completed: 0, failed: 0, released: 0, retries: 0, lateCopies: 0 };
  let current: { key: string; lease: string; pid: number | null } | null = null;
  let stopped = false;

  /**
   * One task. Each step that talks to the members or the stores is retried while it fails transiently (a store or
   * member down a few seconds, a 503 `replicas_unavailable`, a cut connection), within the task's lease (renewed
   * while it runs); what still fails transiently at the lease's end is released by loop(), not counted.
   */
  const runOne = async (task: Task, leaseId: string): Promise<void> => {
    const deadline = Date.now() + leaseMs;
    const retried = <T>(what: string, step: () => Promise<T>): Promise<T> =>
      retryTransient(step, deadline, (error, waitMs) => {
        stats.retries++;
        options.logger.log('warn', 'transcode step retried', { task: task.key, what, waitMs, error: String(error) });
      });
    const v = await retried('record', () => meta.get<Video>(`/internal/video/videos/${task.video_id}`));
    const source = await retried('source', () => localSource(store, sources, v));
    if (source === null) throw new Error('the raw source is missing from the store');
    const job = mediaTask(v, task);
    const outDir = join(options.dataDir, 'out', `${task.key.replace(/\//g, '_')}-${leaseId.slice(0, 8)}`);
    try {
      const out = await transcodeTask(source, job, outDir, {
        onSpawn: (pid) => current !== null && (current.pid = pid),
      });
      const prefix = `${revisionPrefix(v.video_id, v.revision)}/${task.quality}`;
      // The init segment is the same for every task of a quality (same encoder settings): any task's copy will do.
      const files = [{ key: `${prefix}/init.mp4`, path: out.init.path }];
      for (const s of out.segments) files.push({ key: `${prefix}/${s.file}`, path: s.path });
      for (const f of files) await retried(f.key, () => store.put(f.key, () => createReadStream(f.path), v.stores));
      const output = {
        storage_path: prefix,
        size_bytes: out.segments.reduce((n, s) => n + s.size_bytes, 0),
        duration_ms: Math.round(out.segments.reduce((n, s) => n + s.duration_s, 0) * 1000),
        codecs: out.codecs,
        parts: out.segments.map((s) => ({
          name: s.file,
          duration_ms: Math.round(s.duration_s * 1000),
          size_bytes: s.size_bytes,
        })),
      };
      // Sent again after an unknown outcome: a completion already applied answers not accepted (a late copy).
      const r = await retried('complete', () =>
        meta.command({ op: 'complete', taskKey: task.key, leaseId, output, now: Date.now() }),
      );
      if (r.accepted) stats.completed++;
      else stats.lateCopies++;
    } finally {
      await rm(outDir, { recursive: true, force: true });
    }
  };

  const loop = async (): Promise<void> => {
    while (!stopped) {
      let task: Task | null = null;
      const leaseId = randomBytes(12).toString('base64url');
      try {
        // A claim is a write to the replicated log (a round and a sync on every member); asking first whether any
        // task is open at all (a member's own copy, no round) keeps an idle cluster from writing twice a second.
        // A task queued since is seen at the next look.
        const { openTasks } = await meta.get<{ openTasks: number }>('/internal/video/status?consistency=serializable');
        if (openTasks > 0)
          task = (await meta.command({ op: 'claim', workerId: options.id, leaseId, leaseMs, now: Date.now() })).task;
      } catch (error) {
        options.logger.log('warn', 'claim failed', { error: String(error) });
      }
      if (task === null) {
        await new Promise((r) => setTimeout(r, 300 + Math.random() * 300));
        continue;
      }
      stats.claimed++;
      current = { key: task.key, lease: leaseId, pid: null };
      // Renewed every third of the lease while the task runs: a slow task (1080p on a busy machine) keeps its lease,
      // and a dead worker stops renewing, so its task is free within one lease.
      const key = task.key;
      const renew = setInterval(
        () => {
          void meta.command({ op: 'renew', taskKey: key, leaseId, leaseMs, now: Date.now() }).catch(() => undefined);
        },
        Math.max(500, Math.floor(leaseMs / 3)),
      );
      try {
        await runOne(task, leaseId);
      } catch (error) {
        // Transient to the end of the lease: released for another attempt (queued again, not counted), so an
        // outage never fails a video; only a failure of the video's own (its source, its plan) counts.
        const transient = isTransient(error);
        if (transient) stats.released++;
        else stats.failed++;
        options.logger.log('warn', transient ? 'transcode task released' : 'transcode task failed', {
          task: task.key,
          error: String(error),
        });
        await meta
          .command({
            op: 'taskFailed',
            taskKey: task.key,
            leaseId,
            reason: forUsers(String((error as Error).message ?? error)).slice(0, 1000),
            now: Date.now(),
            ...(transient ? { transient: true } : {}),
          })
          .catch(() => undefined);
      } finally {
        clearInterval(renew);
        current = null;
      }
    }
  };

  const http = await serveWorkerHttp(options, { health: () => ({ ...stats, lease_ms: leaseMs, current }) });
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
