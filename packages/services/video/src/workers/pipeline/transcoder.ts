/**
 * The transcode worker role (`transcoder`, a pool: `cluster up` starts 2, `--workers transcoder=N` more). Each
 * process loops: claim a task from the members (a lease of `transcode_lease_ms`, default 60 s, stamped with this
 * process's clock, renewed every third of it while the task runs) with, above the lowest quality, the other
 * qualities of its segment (one ffmpeg decode for them all), fetch the source once, run packages/lib/media's
 * transcodeSegment for the 30-s segment, upload
 * the init segment and the 6-s fMP4 segments to the store, report `complete`. A worker that dies holds its lease
 * until it expires; then any worker's claim gets the task (the machine decides by the time in the command). Outputs
 * are deterministic (same input, same bytes), so a task finished twice writes the same objects and the machine keeps
 * the first completion.
 */
import { createReadStream } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { qualitiesFor, sourceSegments, taskId, transcodeSegment, type TranscodeTask } from '@raftkit/media';
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
   * One claim: a task, with the other qualities of its segment the claim leased with it (one ffmpeg process decodes
   * the segment once for them all: packages/lib/media transcodeSegment). Each step that talks to the members or the
   * stores is retried while it fails transiently (a store or member down a few seconds, a 503
   * `replicas_unavailable`, a cut connection), within the lease (renewed while it runs); what still fails
   * transiently at the lease's end is released by loop(), not counted.
   */
  const runClaim = async (tasks: readonly Task[], leaseId: string): Promise<void> => {
    const first = tasks[0]!;
    const deadline = Date.now() + leaseMs;
    const retried = <T>(what: string, step: () => Promise<T>): Promise<T> =>
      retryTransient(step, deadline, (error, waitMs) => {
        stats.retries++;
        options.logger.log('warn', 'transcode step retried', { task: first.key, what, waitMs, error: String(error) });
      });
    const v = await retried('record', () => meta.get<Video>(`/internal/video/videos/${first.video_id}`));
    const source = await retried('source', () => localSource(store, sources, v));
    if (source === null) throw new Error('the raw source is missing from the store');
    const jobs = tasks.map((task) => mediaTask(v, task));
    const outDirs = tasks.map((task) =>
      join(options.dataDir, 'out', `${task.key.replace(/\//g, '_')}-${leaseId.slice(0, 8)}`),
    );
    try {
      const outs = await transcodeSegment(source, jobs, outDirs, {
        onSpawn: (pid) => current !== null && (current.pid = pid),
      });
      for (let i = 0; i < tasks.length; i++) {
        const task = tasks[i]!;
        const out = outs[i]!;
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
      }
    } finally {
      await Promise.all(outDirs.map((dir) => rm(dir, { recursive: true, force: true })));
    }
  };

  const loop = async (): Promise<void> => {
    while (!stopped) {
      let tasks: Task[] = [];
      const leaseId = randomBytes(12).toString('base64url');
      try {
        // A claim is a write to the replicated log (a round and a sync on every member); asking first whether any
        // task is open at all (a member's own copy, no round) keeps an idle cluster from writing twice a second.
        // A task queued since is seen at the next look.
        const { openTasks } = await meta.get<{ openTasks: number }>('/internal/video/status?consistency=serializable');
        if (openTasks > 0) {
          const claimed = await meta.command({
            op: 'claim',
            workerId: options.id,
            leaseId,
            leaseMs,
            now: Date.now(),
            segment: true,
          });
          if (claimed.task !== null) tasks = [claimed.task, ...(claimed.also ?? [])];
        }
      } catch (error) {
        options.logger.log('warn', 'claim failed', { error: String(error) });
      }
      if (tasks.length === 0) {
        await new Promise((r) => setTimeout(r, 300 + Math.random() * 300));
        continue;
      }
      stats.claimed += tasks.length;
      current = { key: tasks.map((x) => x.key).join(' '), lease: leaseId, pid: null };
      // Renewed every third of the lease while the tasks run: a slow task (1080p on a busy machine) keeps its lease,
      // and a dead worker stops renewing, so its tasks are free within one lease.
      const keys = tasks.map((x) => x.key);
      const renew = setInterval(
        () => {
          for (const taskKey of keys)
            void meta.command({ op: 'renew', taskKey, leaseId, leaseMs, now: Date.now() }).catch(() => undefined);
        },
        Math.max(500, Math.floor(leaseMs / 3)),
      );
      try {
        await runClaim(tasks, leaseId);
      } catch (error) {
        // Transient to the end of the lease: released for another attempt (queued again, not counted), so an
        // outage never fails a video; only a failure of the video's own (its source, its plan) counts.
        const transient = isTransient(error);
        if (transient) stats.released += tasks.length;
        else stats.failed += tasks.length;
        options.logger.log('warn', transient ? 'transcode task released' : 'transcode task failed', {
          task: keys.join(' '),
          error: String(error),
        });
        // Every task of the claim (one already completed answers not accepted: it is no longer open).
        for (const taskKey of keys) {
          await meta
            .command({
              op: 'taskFailed',
              taskKey,
              leaseId,
              reason: forUsers(String((error as Error).message ?? error)).slice(0, 1000),
              now: Date.now(),
              ...(transient ? { transient: true } : {}),
            })
            .catch(() => undefined);
        }
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
