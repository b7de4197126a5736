/**
 * The video service's replicated metadata: uploads, videos, transcode tasks (with leases) and their outputs
 * (segment records), storage tiers. Pure: no sockets, no clocks. Every time the machine needs ("now", lease expiry,
 * tier ages) comes in the command, stamped by the process that proposes it, so the same log gives the same state
 * on every member and tests drive it with any clock they like.
 *
 * States (README.md has the table and the reasons):
 * - upload: `uploading` (chunks arriving at the store) -> `uploaded` (finalize verified every chunk and the checksum).
 * - video: created at finalize in `transcoding` (stage `probe`, then `transcode` once tasks are queued) -> `playable`
 *   (a manifest for at least one quality written) or `failed` (reason and stage kept); moderation moves a video to
 *   `flagged` (held for review: not watchable) or `taken_down` (final), and `clear` returns a flagged one.
 * - task per (video, quality, transcode segment): `queued` -> `leased` (worker, lease id, until) -> `done`; an
 *   expired lease is claimable again (a dead worker's task goes to another); a late `complete` from an old lease
 *   of a task already done is ignored (same input, same output: either copy is the answer).
 * - tier: `warm` -> `cold` (90 days old and few views, by a sweep carrying `now`) -> `restoring` (on access) -> `warm`
 *   once the store has unpacked the archive (`storage` says which step of the move the store has done: the
 *   pipeline drives it and records each step, README "Storage tiers"). `restore_ready_at` is the promise given to
 *   players (about a minute). The raw source is deleted 30 days after transcode.
 * - a re-encode that fails (probe, or every new quality) leaves the previous revision playing, with
 *   `reencode_failure` saying why; the video is never `failed` by it.
 */
import {
  arrayField,
  booleanField,
  commandOf,
  CommandShapeError,
  integerField,
  nullableIntegerField,
  numberField,
  objectField,
  stringArrayField,
  stringField,
} from '@raftkit/http';
import type { ApplyContext, StateMachine } from '@raftkit/raft';

export const PRIVACY = ['public', 'unlisted', 'private'] as const;
export type Privacy = (typeof PRIVACY)[number];
export type UploadStatus = 'uploading' | 'uploaded';
export type VideoStatus = 'transcoding' | 'playable' | 'failed' | 'flagged' | 'taken_down';
export type Stage = 'probe' | 'transcode' | 'manifest';
export type Tier = 'warm' | 'cold' | 'restoring';
/**
 * Where the video's objects are: `warm` (the warm layout), `packing` (the sweep sent the video cold; the store's
 * move to the archive is not confirmed yet: warm copies may be partly gone), `archived` (one verified archive in
 * the cold class holds them all, the warm copies and the edges' copies are gone).
 */
export type Storage = 'warm' | 'packing' | 'archived';
type TaskStatus = 'queued' | 'leased' | 'done';

/** Limits and periods of the spec (ms), overridable per machine for tests of the machine alone. */
export interface VideoLimits {
  coldAfterMs: number;
  /** At most this many views in total keeps a video "low views" for the cold move. */
  lowViews: number;
  rawRetentionMs: number;
  restoreMs: number;
  /** A task failing this many times fails the video (or only its quality once the video is playable). */
  maxAttempts: number;
}

const DAY = 86_400_000;
export const DEFAULT_LIMITS: VideoLimits = {
  coldAfterMs: 90 * DAY,
  lowViews: 100,
  rawRetentionMs: 30 * DAY,
  restoreMs: 60_000,
  maxAttempts: 3,
};

export interface Upload {
  upload_id: string;
  uploader_id: string;
  idempotency_key: string;
  title: string;
  description: string;
  tags: string[];
  privacy: Privacy;
  status: UploadStatus;
  /** Declared at creation (may be null), the assembled size after finalize. */
  total_size: number | null;
  received_chunks: number;
  started_at: number;
  video_id: string | null;
  /**
   * The object-store workers holding this upload's chunks and raw object (and then its video's outputs), chosen at
   * creation (README "Object replication"). Null in records from before replication: the one store, `store1`.
   */
  stores: string[] | null;
}

export interface QualitySpec {
  name: string;
  width: number;
  height: number;
  /** Bits per second, video and audio, for the master playlist's BANDWIDTH. */
  bandwidth: number;
}

export interface QualityState extends QualitySpec {
  segments: number;
  done: number;
  failed: boolean;
  /** The quality's playlist is written (the manifest step), and it is in the master. */
  published: boolean;
}

export interface Video {
  video_id: string;
  uploader_id: string;
  upload_id: string;
  title: string;
  description: string;
  tags: string[];
  privacy: Privacy;
  status: VideoStatus;
  stage: Stage | null;
  failure: { stage: Stage; reason: string } | null;
  moderation: { action: 'flag' | 'take_down'; reason: string } | null;
  duration_s: number | null;
  source_codec: string | null;
  source_width: number | null;
  source_height: number | null;
  /** The output frame rate every task uses (ffmpeg's rational, e.g. "30000/1001"), so all share one init segment. */
  source_fps: string | null;
  has_audio: boolean | null;
  source_size: number;
  source_sha256: string;
  raw_path: string;
  raw_deleted_at: number | null;
  created_at: number;
  made_public_at: number | null;
  transcoded_at: number | null;
  playable_at: number | null;
  manifest_path: string | null;
  poster_path: string | null;
  thumbnails: string[];
  captions_path: string | null;
  qualities: QualityState[];
  /** Transcode segment length (s); the source is cut into ceil(duration / this) tasks per quality. */
  segment_s: number;
  view_count_estimate: number;
  tier: Tier;
  tier_changed_at: number;
  restore_ready_at: number | null;
  storage: Storage;
  /** The archive's figures once packed (kept after a restore: the last move's). */
  archive: { objects: number; bytes: number; packed_at: number } | null;
  /** The last re-encode that failed: the previous revision kept playing. Null when none failed. */
  reencode_failure: { revision: number; stage: Stage; reason: string; at: number } | null;
  /** What a running re-encode replaces: restored if it fails before its first quality is published. */
  previous: {
    revision: number;
    qualities: QualityState[];
    thumbnails: string[];
    poster_path: string | null;
    captions_path: string | null;
    transcoded_at: number | null;
    stage: Stage | null;
  } | null;
  /** Bumped by a re-encode: output paths carry it, so caches of the old outputs are never served as new. */
  revision: number;
  /** Its upload's placement: every object of the video (raw source, outputs) lives on these stores. */
  stores: string[] | null;
}

export interface Task {
  key: string;
  video_id: string;
  quality: string;
  segment_index: number;
  start_s: number;
  duration_s: number;
  status: TaskStatus;
  lease: { id: string; worker: string; until: number } | null;
  /** Every lease id issued for this task: a worker whose lease expired may still finish it first. */
  lease_ids: string[];
  attempts: number;
  last_error: string | null;
  revision: number;
}

/** What a transcode task produced: the segment record of the spec (one per task: its playback segments share a prefix). */
export interface SegmentRecord {
  video_id: string;
  quality: string;
  segment_index: number;
  storage_path: string;
  size_bytes: number;
  duration_ms: number;
  /** RFC 6381 codecs of the quality ("avc1.4D400C,mp4a.40.2"), read from the task's init segment. */
  codecs: string;
  /** The playback (6 s) segment files under storage_path, in order, with their durations and sizes. */
  parts: Array<{ name: string; duration_ms: number; size_bytes: number }>;
  /** Leases the task took (above 1: a worker died or was too slow, and another finished it). */
  attempts: number;
}

/**
 * The per-user transcode budget a `probed` command is checked against: at most `seconds` of source per uploader
 * in any `windowMs` ending at the command's `now`. It travels in the command (the proposer's settings), so every
 * member decides alike; absent, no budget applies.
 */
export interface TranscodeBudget {
  seconds: number;
  windowMs: number;
}

export type VideoCommand =
  | {
      op: 'createUpload';
      uploadId: string;
      uploaderId: string;
      idempotencyKey: string;
      title: string;
      description: string;
      tags: string[];
      privacy: Privacy;
      totalSize: number | null;
      now: number;
      /** The placement of the upload's objects (absent: a single-store cluster's `store1`). */
      stores?: string[];
    }
  | {
      op: 'finalize';
      uploadId: string;
      videoId: string;
      totalChunks: number;
      size: number;
      sha256: string;
      rawPath: string;
      now: number;
    }
  | {
      op: 'probed';
      videoId: string;
      durationS: number;
      codec: string;
      width: number;
      height: number;
      fps: string;
      hasAudio: boolean;
      qualities: QualitySpec[];
      segmentS: number;
      segments: number;
      now: number;
      budget?: TranscodeBudget;
    }
  | { op: 'fail'; videoId: string; stage: Stage; reason: string; now: number }
  | {
      op: 'claim';
      workerId: string;
      leaseId: string;
      leaseMs: number;
      now: number;
      /**
       * Also lease, under the same lease id, the claimable tasks of the same segment of the same video and revision
       * in its other qualities above the lowest (`also` in the answer), so one ffmpeg decodes that segment once for
       * them all (packages/lib/media transcodeSegment). The lowest quality is always claimed alone: it makes the
       * video playable, and goes first.
       */
      segment?: boolean;
    }
  | { op: 'renew'; taskKey: string; leaseId: string; leaseMs: number; now: number }
  | {
      op: 'complete';
      taskKey: string;
      leaseId: string;
      output: Omit<SegmentRecord, 'video_id' | 'quality' | 'segment_index' | 'attempts'>;
      now: number;
    }
  | {
      op: 'taskFailed';
      taskKey: string;
      leaseId: string;
      reason: string;
      now: number;
      /**
       * The attempt met only unavailable dependencies (a store or member down, a 5xx, a timeout), not a fault of the
       * source: the task is queued again and the attempt not counted, so an outage never fails a video.
       */
      transient?: boolean;
    }
  | { op: 'reencode'; videoId: string; now: number }
  | { op: 'published'; videoId: string; revision: number; qualities: string[]; manifestPath: string; now: number }
  | { op: 'thumbnails'; videoId: string; paths: string[] }
  | { op: 'choosePoster'; videoId: string; index: number }
  | { op: 'captions'; videoId: string; path: string }
  | { op: 'moderate'; videoId: string; action: 'flag' | 'take_down' | 'clear'; reason: string; now: number }
  | { op: 'views'; videoId: string; count: number }
  | { op: 'restore'; videoId: string; now: number }
  | { op: 'storage'; videoId: string; step: 'packed' | 'unpacked'; objects: number; bytes: number; now: number }
  | { op: 'sweep'; now: number };

export type VideoResult =
  | { op: 'createUpload'; created: boolean; upload: Upload }
  | { op: 'finalize'; ok: true; video: Video; created: boolean }
  | { op: 'finalize'; ok: false; code: 'upload_not_found' | 'already_finalized_other'; message: string }
  | {
      op:
        | 'probed'
        | 'fail'
        | 'reencode'
        | 'published'
        | 'thumbnails'
        | 'choosePoster'
        | 'captions'
        | 'moderate'
        | 'views'
        | 'restore'
        | 'storage';
      ok: boolean;
      video: Video | null;
      message?: string;
    }
  | { op: 'claim'; task: Task | null; also?: Task[] }
  | { op: 'renew'; renewed: boolean; until: number | null }
  | { op: 'complete' | 'taskFailed'; accepted: boolean; task: Task | null; video: Video | null }
  | { op: 'sweep'; cold: string[]; rawDeleted: Array<{ video_id: string; raw_path: string }> };

export const VIDEO_OPS = [
  'createUpload',
  'finalize',
  'probed',
  'fail',
  'claim',
  'renew',
  'complete',
  'taskFailed',
  'reencode',
  'published',
  'thumbnails',
  'choosePoster',
  'captions',
  'moderate',
  'views',
  'restore',
  'storage',
  'sweep',
] as const;

const ID_MAX = 128;
const TEXT_MAX = 5_000;
const TIME_MAX = 8.64e15;
const STAGES: readonly Stage[] = ['probe', 'transcode', 'manifest'];

/** Throws CommandShapeError unless `value` is a command this machine knows, with fields of the right types. */
export function checkVideoCommand(value: unknown): asserts value is VideoCommand {
  const c = commandOf(value, VIDEO_OPS);
  const id = (k: string): string => stringField(c, k, ID_MAX);
  const time = (k: string): number => integerField(c, k, 0, TIME_MAX);
  switch (c.op) {
    case 'createUpload':
      id('uploadId'),
        id('uploaderId'),
        id('idempotencyKey'),
        stringField(c, 'title', 500),
        stringField(c, 'description', TEXT_MAX, 0);
      stringArrayField(c, 'tags', 50, 100);
      if (!PRIVACY.includes(c.privacy as Privacy))
        throw new CommandShapeError('privacy must be one of ' + PRIVACY.join(', '));
      nullableIntegerField(c, 'totalSize', 0), time('now');
      if (c.stores !== undefined) stringArrayField(c, 'stores', 16, 64);
      return;
    case 'finalize':
      id('uploadId'),
        id('videoId'),
        integerField(c, 'totalChunks', 1),
        integerField(c, 'size', 0),
        stringField(c, 'sha256', 64, 64),
        stringField(c, 'rawPath', 512),
        time('now');
      return;
    case 'probed': {
      id('videoId'),
        numberField(c, 'durationS', 0, 1e7),
        stringField(c, 'codec', 64),
        integerField(c, 'width', 1, 1e5),
        integerField(c, 'height', 1, 1e5);
      arrayField(c, 'qualities', (q, at) => qualitySpec(q, at), 16),
        integerField(c, 'segmentS', 1, 3600),
        integerField(c, 'segments', 1, 100_000),
        time('now');
      stringField(c, 'fps', 32), booleanField(c, 'hasAudio');
      if (c.budget !== undefined) {
        const b = objectField(c, 'budget');
        numberField(b, 'seconds', 0, 1e9), integerField(b, 'windowMs', 1, 366 * 86_400_000);
      }
      return;
    }
    case 'fail':
      id('videoId'), stringField(c, 'reason', 1000);
      if (!STAGES.includes(c.stage as Stage)) throw new CommandShapeError('stage must be one of ' + STAGES.join(', '));
      time('now');
      return;
    case 'claim':
      id('workerId'), id('leaseId'), integerField(c, 'leaseMs', 1, 86_400_000), time('now');
      if (c.segment !== undefined) booleanField(c, 'segment');
      return;
    case 'renew':
      stringField(c, 'taskKey', 300), id('leaseId'), integerField(c, 'leaseMs', 1, 86_400_000), time('now');
      return;
    case 'complete': {
      stringField(c, 'taskKey', 300), id('leaseId'), time('now');
      const o = objectField(c, 'output');
      stringField(o, 'storage_path', 512),
        integerField(o, 'size_bytes', 0),
        integerField(o, 'duration_ms', 0),
        stringField(o, 'codecs', 200);
      arrayField(
        o,
        'parts',
        (p, at) => {
          if (typeof p !== 'object' || p === null) throw new CommandShapeError(`${at} must be an object`);
          const f = p as Record<string, unknown>;
          stringField(f, 'name', 128), integerField(f, 'duration_ms', 0), integerField(f, 'size_bytes', 0);
          return f;
        },
        10_000,
      );
      return;
    }
    case 'taskFailed':
      stringField(c, 'taskKey', 300), id('leaseId'), stringField(c, 'reason', 1000), time('now');
      if (c.transient !== undefined) booleanField(c, 'transient');
      return;
    case 'reencode':
      id('videoId'), time('now');
      return;
    case 'published':
      id('videoId'),
        integerField(c, 'revision', 0),
        stringArrayField(c, 'qualities', 16, 32),
        stringField(c, 'manifestPath', 512),
        time('now');
      return;
    case 'thumbnails':
      id('videoId'), stringArrayField(c, 'paths', 5, 512);
      return;
    case 'choosePoster':
      id('videoId'), integerField(c, 'index', 0, 4);
      return;
    case 'captions':
      id('videoId'), stringField(c, 'path', 512);
      return;
    case 'moderate':
      id('videoId'), stringField(c, 'reason', 1000, 0), time('now');
      if (!['flag', 'take_down', 'clear'].includes(c.action as string))
        throw new CommandShapeError('action must be flag, take_down or clear');
      return;
    case 'views':
      id('videoId'), integerField(c, 'count', 1, 1e9);
      return;
    case 'restore':
      id('videoId'), time('now');
      return;
    case 'storage':
      id('videoId'), integerField(c, 'objects', 0), integerField(c, 'bytes', 0), time('now');
      if (c.step !== 'packed' && c.step !== 'unpacked') throw new CommandShapeError('step must be packed or unpacked');
      return;
    case 'sweep':
      time('now');
      return;
  }
}

function qualitySpec(q: unknown, at: string): QualitySpec {
  if (typeof q !== 'object' || q === null || Array.isArray(q)) throw new CommandShapeError(`${at} must be an object`);
  const f = q as Record<string, unknown>;
  return {
    name: stringField(f, 'name', 32),
    width: integerField(f, 'width', 1, 1e5),
    height: integerField(f, 'height', 1, 1e5),
    bandwidth: integerField(f, 'bandwidth', 1),
  };
}

export function taskKey(videoId: string, revision: number, quality: string, segment: number): string {
  return `${videoId}/r${revision}/${quality}/${segment}`;
}

interface Snapshot {
  uploads: Upload[];
  videos: Video[];
  tasks: Task[];
  segments: Array<[string, SegmentRecord]>;
  /** Absent in snapshots from before the transcode budget. */
  usage?: Array<[string, Array<[number, number]>]>;
}

export class VideoMachine implements StateMachine<VideoCommand, VideoResult> {
  private uploads = new Map<string, Upload>();
  /** `${uploader}\n${idempotency key}` -> upload id. */
  private byKey = new Map<string, string>();
  private videos = new Map<string, Video>();
  /** Unfinished tasks, in queue order (insertion); done tasks leave this map (their segment records stay). */
  private open = new Map<string, Task>();
  private segments = new Map<string, SegmentRecord>();
  /** video id -> its task keys (open or done), for counting and re-encodes. */
  private videoTasks = new Map<string, Set<string>>();
  /** uploader -> [entry time, seconds of source] of each source accepted for transcoding, oldest first. */
  private usage = new Map<string, Array<[number, number]>>();

  constructor(readonly limits: VideoLimits = DEFAULT_LIMITS) {}

  apply(command: VideoCommand, _context: ApplyContext): VideoResult {
    checkVideoCommand(command);
    switch (command.op) {
      case 'createUpload':
        return this.createUpload(command);
      case 'finalize':
        return this.finalize(command);
      case 'probed':
        return this.probed(command);
      case 'fail': {
        const v = this.videos.get(command.videoId);
        if (v === undefined) return { op: 'fail', ok: false, video: null, message: 'no such video' };
        if (v.previous !== null && v.stage !== null) {
          // A re-encode's probe failed: the previous revision keeps playing.
          this.failReencode(v, command.stage, command.reason, command.now);
          return { op: 'fail', ok: true, video: v };
        }
        if (v.status !== 'transcoding') return { op: 'fail', ok: false, video: v, message: `the video is ${v.status}` };
        this.failVideo(v, command.stage, command.reason);
        return { op: 'fail', ok: true, video: v };
      }
      case 'claim': {
        const task = this.claim(command);
        if (task === null || command.segment !== true) return { op: 'claim', task };
        return { op: 'claim', task, also: this.claimSiblings(task, command) };
      }
      case 'renew': {
        // Only the current holder, before its lease ran out: once expired the task may be someone else's.
        const task = this.open.get(command.taskKey);
        if (
          task === undefined ||
          task.lease === null ||
          task.lease.id !== command.leaseId ||
          task.lease.until <= command.now
        )
          return { op: 'renew', renewed: false, until: null };
        task.lease.until = command.now + command.leaseMs;
        return { op: 'renew', renewed: true, until: task.lease.until };
      }
      case 'complete':
        return this.complete(command);
      case 'taskFailed':
        return this.taskFailed(command);
      case 'reencode':
        return this.reencode(command.videoId);
      case 'published':
        return this.published(command);
      case 'thumbnails':
        return this.onVideo(command, (v) => {
          v.thumbnails = [...command.paths];
          // The default poster is the middle frame (50%: packages/lib/media's DEFAULT_POSTER_PERCENT), unless chosen.
          v.poster_path = v.thumbnails[Math.floor(v.thumbnails.length / 2)] ?? null;
          return true;
        });
      case 'choosePoster':
        return this.onVideo(command, (v) => {
          const p = v.thumbnails[command.index];
          if (p === undefined) return false;
          v.poster_path = p;
          return true;
        });
      case 'captions':
        return this.onVideo(command, (v) => ((v.captions_path = command.path), true));
      case 'moderate':
        return this.onVideo(command, (v) => this.moderate(v, command.action, command.reason, command.now));
      case 'views':
        return this.onVideo(command, (v) => ((v.view_count_estimate += command.count), true));
      case 'restore':
        return this.onVideo(command, (v) => {
          if (v.tier !== 'cold') return v.tier === 'restoring' || v.tier === 'warm';
          v.tier = 'restoring';
          v.tier_changed_at = command.now;
          v.restore_ready_at = command.now + this.limits.restoreMs;
          return true;
        });
      case 'storage':
        return this.onVideo(command, (v) => {
          if (command.step === 'packed') {
            // Only the move the sweep started; a late copy after a restore began still records the archive.
            if (v.storage !== 'packing') return v.storage === 'archived';
            v.storage = 'archived';
            v.archive = { objects: command.objects, bytes: command.bytes, packed_at: command.now };
            return true;
          }
          if (v.tier !== 'restoring') return v.tier === 'warm';
          v.storage = 'warm';
          v.tier = 'warm';
          v.tier_changed_at = command.now;
          v.restore_ready_at = null;
          return true;
        });
      case 'sweep':
        return this.sweep(command.now);
    }
  }

  // ---------------------------------------------------------------- uploads

  private createUpload(c: Extract<VideoCommand, { op: 'createUpload' }>): VideoResult {
    const keyed = `${c.uploaderId}\n${c.idempotencyKey}`;
    const known = this.byKey.get(keyed);
    if (known !== undefined) return { op: 'createUpload', created: false, upload: this.uploads.get(known)! };
    const existing = this.uploads.get(c.uploadId);
    if (existing !== undefined) return { op: 'createUpload', created: false, upload: existing };
    const upload: Upload = {
      upload_id: c.uploadId,
      uploader_id: c.uploaderId,
      idempotency_key: c.idempotencyKey,
      title: c.title,
      description: c.description,
      tags: [...c.tags],
      privacy: c.privacy,
      status: 'uploading',
      total_size: c.totalSize,
      received_chunks: 0,
      started_at: c.now,
      video_id: null,
      stores: c.stores === undefined ? null : [...c.stores],
    };
    this.uploads.set(upload.upload_id, upload);
    this.byKey.set(keyed, upload.upload_id);
    return { op: 'createUpload', created: true, upload };
  }

  private finalize(c: Extract<VideoCommand, { op: 'finalize' }>): VideoResult {
    const u = this.uploads.get(c.uploadId);
    if (u === undefined)
      return { op: 'finalize', ok: false, code: 'upload_not_found', message: `no upload ${c.uploadId}` };
    if (u.status === 'uploaded') {
      // A retried finalize: the same video (its id was chosen by the first).
      return { op: 'finalize', ok: true, video: this.videos.get(u.video_id!)!, created: false };
    }
    if (this.videos.has(c.videoId))
      return { op: 'finalize', ok: false, code: 'already_finalized_other', message: `video id ${c.videoId} is taken` };
    u.status = 'uploaded';
    u.total_size = c.size;
    u.received_chunks = c.totalChunks;
    u.video_id = c.videoId;
    const v: Video = {
      video_id: c.videoId,
      uploader_id: u.uploader_id,
      upload_id: u.upload_id,
      title: u.title,
      description: u.description,
      tags: [...u.tags],
      privacy: u.privacy,
      status: 'transcoding',
      stage: 'probe',
      failure: null,
      moderation: null,
      duration_s: null,
      source_codec: null,
      source_width: null,
      source_height: null,
      source_fps: null,
      has_audio: null,
      source_size: c.size,
      source_sha256: c.sha256,
      raw_path: c.rawPath,
      raw_deleted_at: null,
      created_at: c.now,
      made_public_at: u.privacy === 'public' ? c.now : null,
      transcoded_at: null,
      playable_at: null,
      manifest_path: null,
      poster_path: null,
      thumbnails: [],
      captions_path: null,
      qualities: [],
      segment_s: 30,
      view_count_estimate: 0,
      tier: 'warm',
      tier_changed_at: c.now,
      restore_ready_at: null,
      storage: 'warm',
      archive: null,
      reencode_failure: null,
      previous: null,
      revision: 1,
      stores: u.stores,
    };
    this.videos.set(v.video_id, v);
    return { op: 'finalize', ok: true, video: v, created: true };
  }

  // ---------------------------------------------------------------- pipeline

  private probed(c: Extract<VideoCommand, { op: 'probed' }>): VideoResult {
    const v = this.videos.get(c.videoId);
    if (v === undefined) return { op: 'probed', ok: false, video: null, message: 'no such video' };
    // A second probe result (a pipeline worker retried after a crash) changes nothing: tasks are queued once.
    if (v.stage !== 'probe' || v.status === 'failed' || v.status === 'taken_down')
      return { op: 'probed', ok: false, video: v, message: 'already probed' };
    if (c.qualities.length === 0) {
      if (v.previous !== null) this.failReencode(v, 'probe', 'no quality fits the source', c.now);
      else this.failVideo(v, 'probe', 'no quality fits the source');
      return { op: 'probed', ok: true, video: v };
    }
    if (c.budget !== undefined) {
      const used = this.transcodeUsage(v.uploader_id, c.now, c.budget.windowMs);
      if (used.seconds + c.durationS > c.budget.seconds) {
        const hours = c.budget.windowMs / 3_600_000;
        const retry =
          used.freesAt === null
            ? ''
            : `; the oldest counted source leaves the window at ${new Date(used.freesAt).toISOString()}`;
        const why = `over_budget: ${c.durationS.toFixed(1)} s of source would bring ${v.uploader_id} to ${(used.seconds + c.durationS).toFixed(1)} s transcoded in ${hours} h, over the budget of ${c.budget.seconds} s${retry}`;
        if (v.previous !== null) this.failReencode(v, 'probe', why, c.now);
        else this.failVideo(v, 'probe', why);
        return { op: 'probed', ok: true, video: v };
      }
      // Entries out of this window are dropped here, in apply, so every member drops the same ones.
      const entries = (this.usage.get(v.uploader_id) ?? []).filter((e) => e[0] > c.now - c.budget!.windowMs);
      entries.push([c.now, c.durationS]);
      this.usage.set(v.uploader_id, entries);
    }
    v.duration_s = c.durationS;
    v.source_codec = c.codec;
    v.source_width = c.width;
    v.source_height = c.height;
    v.source_fps = c.fps;
    v.has_audio = c.hasAudio;
    v.segment_s = c.segmentS;
    v.stage = 'transcode';
    // The count is the planner's (packages/lib/media): a last sliver under half a second joins the segment before it.
    const segments = c.segments;
    v.qualities = c.qualities.map((q) => ({ ...q, segments, done: 0, failed: false, published: false }));
    const keys = new Set<string>();
    // Queue order is the claim order: the lowest quality's segments first, so one quality completes (playable)
    // before any worker starts on a higher one of the same video.
    const ordered = [...v.qualities].sort((a, b) => a.height - b.height);
    for (const q of ordered) {
      for (let s = 0; s < segments; s++) {
        const key = taskKey(v.video_id, v.revision, q.name, s);
        const start = s * c.segmentS;
        const task: Task = {
          key,
          video_id: v.video_id,
          quality: q.name,
          segment_index: s,
          start_s: start,
          duration_s: s === segments - 1 ? Math.max(0, c.durationS - start) : c.segmentS,
          status: 'queued',
          lease: null,
          lease_ids: [],
          attempts: 0,
          last_error: null,
          revision: v.revision,
        };
        this.open.set(key, task);
        keys.add(key);
      }
    }
    this.videoTasks.set(v.video_id, keys);
    return { op: 'probed', ok: true, video: v };
  }

  /** The first task queued or whose lease has expired at `now`; leased to the caller. */
  private claim(c: Extract<VideoCommand, { op: 'claim' }>): Task | null {
    for (const task of this.open.values()) {
      if (task.status === 'leased' && task.lease !== null && task.lease.until > c.now) continue;
      const v = this.videos.get(task.video_id);
      if (v === undefined || v.status === 'failed' || v.status === 'taken_down') continue;
      task.status = 'leased';
      task.lease = { id: c.leaseId, worker: c.workerId, until: c.now + c.leaseMs };
      task.lease_ids = [...task.lease_ids.slice(-15), c.leaseId];
      task.attempts++;
      return task;
    }
    return null;
  }

  /** The claimable tasks of `task`'s segment in the video's other qualities above the lowest, leased with it. */
  private claimSiblings(task: Task, c: Extract<VideoCommand, { op: 'claim' }>): Task[] {
    const v = this.videos.get(task.video_id);
    if (v === undefined) return [];
    const lowest = [...v.qualities].sort((a, b) => a.height - b.height)[0]?.name;
    if (task.quality === lowest) return [];
    const also: Task[] = [];
    for (const q of v.qualities) {
      if (q.name === lowest || q.name === task.quality) continue;
      const sibling = this.open.get(taskKey(v.video_id, task.revision, q.name, task.segment_index));
      if (sibling === undefined) continue;
      if (sibling.status === 'leased' && sibling.lease !== null && sibling.lease.until > c.now) continue;
      sibling.status = 'leased';
      sibling.lease = { id: c.leaseId, worker: c.workerId, until: c.now + c.leaseMs };
      sibling.lease_ids = [...sibling.lease_ids.slice(-15), c.leaseId];
      sibling.attempts++;
      also.push(sibling);
    }
    return also;
  }

  private complete(c: Extract<VideoCommand, { op: 'complete' }>): VideoResult {
    const task = this.open.get(c.taskKey);
    if (task === undefined) {
      // Already done (a late copy from an expired lease: same input, same output) or unknown.
      return { op: 'complete', accepted: false, task: null, video: null };
    }
    // Any holder of a lease of this task may complete it, even an expired one, as long as no other worker finished
    // first: its output is as good as the next one's. A lease id never issued for it is refused.
    if (!task.lease_ids.includes(c.leaseId)) {
      return { op: 'complete', accepted: false, task, video: null };
    }
    task.status = 'done';
    task.lease = null;
    this.open.delete(task.key);
    const o = c.output;
    this.segments.set(task.key, {
      video_id: task.video_id,
      quality: task.quality,
      segment_index: task.segment_index,
      storage_path: o.storage_path,
      size_bytes: o.size_bytes,
      duration_ms: o.duration_ms,
      codecs: o.codecs,
      parts: o.parts.map((p) => ({ name: p.name, duration_ms: p.duration_ms, size_bytes: p.size_bytes })),
      attempts: task.attempts,
    });
    const v = this.videos.get(task.video_id) ?? null;
    if (v !== null && v.revision === task.revision) {
      const q = v.qualities.find((x) => x.name === task.quality);
      if (q !== undefined) q.done++;
      if (v.qualities.every((x) => x.done >= x.segments || x.failed)) v.transcoded_at ??= c.now;
    }
    return { op: 'complete', accepted: true, task, video: v };
  }

  private taskFailed(c: Extract<VideoCommand, { op: 'taskFailed' }>): VideoResult {
    const task = this.open.get(c.taskKey);
    if (task === undefined || task.lease === null || task.lease.id !== c.leaseId)
      return { op: 'taskFailed', accepted: false, task: task ?? null, video: null };
    task.last_error = c.reason;
    task.lease = null;
    task.status = 'queued';
    if (c.transient === true) {
      // Released, not failed: the claim that counted this attempt is given back.
      task.attempts = Math.max(0, task.attempts - 1);
      return { op: 'taskFailed', accepted: true, task, video: this.videos.get(task.video_id) ?? null };
    }
    const v = this.videos.get(task.video_id) ?? null;
    if (task.attempts >= this.limits.maxAttempts && v !== null) {
      this.open.delete(task.key);
      const q = v.qualities.find((x) => x.name === task.quality);
      if (q !== undefined) q.failed = true;
      // Before playable a failed task fails the video (its source could not be transcoded); after, only its quality.
      const why = `segment ${task.segment_index} of ${task.quality}: ${c.reason}`;
      if (v.previous !== null && task.revision === v.revision && v.qualities.every((x) => x.failed)) {
        // Every quality of a re-encode failed before any was published: back to the previous revision.
        this.failReencode(v, 'transcode', why, c.now);
        return { op: 'taskFailed', accepted: true, task, video: v };
      }
      if (v.status === 'transcoding' && v.qualities.every((x) => x.failed || x.done < x.segments)) {
        if (v.qualities.every((x) => x.failed)) this.failVideo(v, 'transcode', why);
      }
      if (v.qualities.every((x) => x.done >= x.segments || x.failed)) v.transcoded_at ??= c.now;
    }
    return { op: 'taskFailed', accepted: true, task, video: v };
  }

  /**
   * A re-encode: a new revision (new object keys, so no cache can serve the old outputs as the new), probed and
   * transcoded again from the raw source. The previous revision's manifest keeps playing until the new one is
   * published; then the pipeline purges the old revision from the delivery tiers and the store (the explicit
   * invalidation). Only a finished video with its raw source still kept can be re-encoded.
   */
  private reencode(videoId: string): VideoResult {
    const v = this.videos.get(videoId);
    if (v === undefined) return { op: 'reencode', ok: false, video: null, message: 'no such video' };
    if ((v.status !== 'playable' && v.status !== 'flagged') || v.stage !== null)
      return {
        op: 'reencode',
        ok: false,
        video: v,
        message: `the video is ${v.status}${v.stage !== null ? ` (stage ${v.stage})` : ''}: only a finished video is re-encoded`,
      };
    if (v.raw_deleted_at !== null)
      return { op: 'reencode', ok: false, video: v, message: 'the raw source was deleted (30 days after transcode)' };
    if (v.tier !== 'warm' || v.storage !== 'warm')
      return {
        op: 'reencode',
        ok: false,
        video: v,
        message: `the video is in the ${v.tier} tier: only a warm video is re-encoded`,
      };
    for (const key of this.videoTasks.get(v.video_id) ?? []) this.open.delete(key);
    v.previous = {
      revision: v.revision,
      qualities: v.qualities,
      thumbnails: v.thumbnails,
      poster_path: v.poster_path,
      captions_path: v.captions_path,
      transcoded_at: v.transcoded_at,
      stage: v.stage,
    };
    // Never a number used before: a failed re-encode's partial outputs (and any cached copy) keep their own keys.
    v.revision = Math.max(v.revision, v.reencode_failure?.revision ?? 0) + 1;
    v.stage = 'probe';
    v.qualities = [];
    v.thumbnails = [];
    v.poster_path = null;
    v.captions_path = null;
    v.transcoded_at = null;
    return { op: 'reencode', ok: true, video: v };
  }

  private published(c: Extract<VideoCommand, { op: 'published' }>): VideoResult {
    const v = this.videos.get(c.videoId);
    if (v === undefined) return { op: 'published', ok: false, video: null, message: 'no such video' };
    if (v.revision !== c.revision) return { op: 'published', ok: false, video: v, message: 'an older revision' };
    if (v.status === 'failed' || v.status === 'taken_down')
      return { op: 'published', ok: false, video: v, message: `the video is ${v.status}` };
    for (const name of c.qualities) {
      const q = v.qualities.find((x) => x.name === name);
      if (q === undefined || q.done < q.segments)
        return { op: 'published', ok: false, video: v, message: `quality ${name} is not complete` };
    }
    for (const q of v.qualities) q.published = c.qualities.includes(q.name);
    v.manifest_path = c.manifestPath;
    // The new revision plays: the re-encode can no longer fall back (the pipeline deletes the old one now).
    v.previous = null;
    if (v.status === 'transcoding') {
      v.status = v.moderation?.action === 'flag' ? 'flagged' : 'playable';
      v.playable_at = c.now;
    }
    if (v.qualities.every((q) => q.published || q.failed)) v.stage = null;
    else v.stage = 'transcode';
    return { op: 'published', ok: true, video: v };
  }

  private moderate(v: Video, action: 'flag' | 'take_down' | 'clear', reason: string, now: number): boolean {
    if (v.status === 'taken_down') return action === 'take_down';
    if (action === 'clear') {
      v.moderation = null;
      if (v.status === 'flagged') {
        v.status = v.manifest_path !== null ? 'playable' : 'transcoding';
        v.playable_at ??= now;
      }
      return true;
    }
    v.moderation = { action, reason };
    if (action === 'take_down') {
      v.status = 'taken_down';
      for (const key of this.videoTasks.get(v.video_id) ?? []) this.open.delete(key);
    } else if (v.status === 'playable') v.status = 'flagged';
    return true;
  }

  /** A re-encode failed before publishing: the previous revision (still in the store) is the video again. */
  private failReencode(v: Video, stage: Stage, reason: string, now: number): void {
    const p = v.previous!;
    for (const key of this.videoTasks.get(v.video_id) ?? []) this.open.delete(key);
    v.reencode_failure = { revision: v.revision, stage, reason, at: now };
    v.revision = p.revision;
    v.qualities = p.qualities;
    v.thumbnails = p.thumbnails;
    v.poster_path = p.poster_path;
    v.captions_path = p.captions_path;
    v.transcoded_at = p.transcoded_at;
    v.stage = p.stage;
    v.previous = null;
  }

  private failVideo(v: Video, stage: Stage, reason: string): void {
    v.status = 'failed';
    v.failure = { stage, reason };
    v.stage = null;
    for (const key of this.videoTasks.get(v.video_id) ?? []) this.open.delete(key);
  }

  private onVideo(c: { op: VideoCommand['op']; videoId: string }, change: (v: Video) => boolean): VideoResult {
    const v = this.videos.get(c.videoId);
    if (v === undefined) return { op: c.op, ok: false, video: null, message: 'no such video' } as VideoResult;
    return { op: c.op, ok: change(v), video: v } as VideoResult;
  }

  // ---------------------------------------------------------------- tiers

  private sweep(now: number): VideoResult {
    const cold: string[] = [];
    const rawDeleted: Array<{ video_id: string; raw_path: string }> = [];
    for (const v of this.videos.values()) {
      // Back to warm is not the sweep's: only the store's unpack, recorded by the `storage` command, warms a video.
      if (
        v.tier === 'warm' &&
        (v.status === 'playable' || v.status === 'flagged') &&
        v.stage === null &&
        now - v.created_at >= this.limits.coldAfterMs &&
        now - v.tier_changed_at >= this.limits.coldAfterMs &&
        v.view_count_estimate <= this.limits.lowViews
      ) {
        // Both ages: a video restored last week is not sent back to cold by the next sweep.
        v.tier = 'cold';
        v.tier_changed_at = now;
        v.storage = 'packing';
        cold.push(v.video_id);
      }
      const doneAt = v.transcoded_at ?? (v.status === 'failed' ? v.created_at : null);
      if (v.raw_deleted_at === null && doneAt !== null && now - doneAt >= this.limits.rawRetentionMs) {
        v.raw_deleted_at = now;
        rawDeleted.push({ video_id: v.video_id, raw_path: v.raw_path });
      }
    }
    return { op: 'sweep', cold, rawDeleted };
  }

  // ---------------------------------------------------------------- reads

  /**
   * Seconds of source accepted for `userId` in the `windowMs` ending at `now`, and when the oldest of them leaves
   * the window (null when none counts). A pure read: entries are dropped only by applied commands.
   */
  transcodeUsage(userId: string, now: number, windowMs: number): { seconds: number; freesAt: number | null } {
    let seconds = 0;
    let freesAt: number | null = null;
    for (const [at, s] of this.usage.get(userId) ?? []) {
      if (at <= now - windowMs) continue;
      seconds += s;
      freesAt ??= at + windowMs;
    }
    return { seconds, freesAt };
  }

  /**
   * The ids of the uploads and videos whose objects `storeId` holds by their placement (a record without one is
   * `store1`'s): what that store's anti-entropy copies from its peers. A pure read.
   */
  placementOf(storeId: string): { uploads: string[]; videos: string[] } {
    const on = (stores: string[] | null): boolean => (stores ?? ['store1']).includes(storeId);
    return {
      uploads: [...this.uploads.values()].filter((u) => on(u.stores)).map((u) => u.upload_id),
      videos: [...this.videos.values()].filter((v) => on(v.stores)).map((v) => v.video_id),
    };
  }

  getUpload(uploadId: string): Upload | null {
    return this.uploads.get(uploadId) ?? null;
  }

  getVideo(videoId: string): Video | null {
    return this.videos.get(videoId) ?? null;
  }

  task(key: string): Task | null {
    return this.open.get(key) ?? null;
  }

  openTasks(videoId?: string): Task[] {
    return [...this.open.values()].filter((t) => videoId === undefined || t.video_id === videoId);
  }

  segmentsOf(videoId: string, quality: string): SegmentRecord[] {
    const v = this.videos.get(videoId);
    if (v === undefined) return [];
    const out: SegmentRecord[] = [];
    const q = v.qualities.find((x) => x.name === quality);
    for (let s = 0; s < (q?.segments ?? 0); s++) {
      const r = this.segments.get(taskKey(videoId, v.revision, quality, s));
      if (r !== undefined) out.push(r);
    }
    return out;
  }

  /** Videos whose next pipeline step is the probe, or a manifest to (re)write: the pipeline worker's to-do list. */
  pipelineWork(limit = 100): { probe: Video[]; publish: Video[]; raw: Video[]; tiers: Video[] } {
    const probe: Video[] = [];
    const publish: Video[] = [];
    const raw: Video[] = [];
    const tiers: Video[] = [];
    for (const v of this.videos.values()) {
      // A store move to do: pack a video the sweep sent cold, unpack one being restored.
      if ((v.tier === 'cold' && v.storage === 'packing') || v.tier === 'restoring') tiers.push(v);
      if (v.stage === 'probe' && v.status !== 'failed' && v.status !== 'taken_down') probe.push(v);
      else if (
        (v.status === 'transcoding' || v.status === 'playable' || v.status === 'flagged') &&
        v.qualities.some((q) => !q.published && !q.failed && q.done >= q.segments)
      )
        publish.push(v);
      if (
        (v.status === 'playable' || v.status === 'flagged') &&
        v.tier === 'warm' &&
        v.thumbnails.length === 0 &&
        v.raw_deleted_at === null
      )
        raw.push(v);
      if (probe.length + publish.length >= limit) break;
    }
    return { probe, publish, raw, tiers };
  }

  /** A user's videos, newest first, after `cursor` (created_at, video_id of the last one returned). */
  library(
    userId: string,
    limit: number,
    after: { createdAt: number; videoId: string } | null,
    includePrivate: boolean,
  ): Video[] {
    const mine = [...this.videos.values()].filter(
      (v) => v.uploader_id === userId && (includePrivate || v.privacy === 'public') && v.status !== 'taken_down',
    );
    mine.sort(
      (a, b) => b.created_at - a.created_at || (a.video_id < b.video_id ? -1 : a.video_id > b.video_id ? 1 : 0),
    );
    const start =
      after === null
        ? 0
        : mine.findIndex(
            (v) => v.created_at < after.createdAt || (v.created_at === after.createdAt && v.video_id > after.videoId),
          );
    return start < 0 ? [] : mine.slice(start, start + limit);
  }

  counts(): { uploads: number; videos: number; openTasks: number; segments: number } {
    return {
      uploads: this.uploads.size,
      videos: this.videos.size,
      openTasks: this.open.size,
      segments: this.segments.size,
    };
  }

  // ---------------------------------------------------------------- snapshots

  snapshot(): Uint8Array {
    const s: Snapshot = {
      uploads: [...this.uploads.values()],
      videos: [...this.videos.values()],
      tasks: [...this.open.values()],
      segments: [...this.segments.entries()],
      usage: [...this.usage.entries()],
    };
    return Buffer.from(JSON.stringify(s));
  }

  restore(data: Uint8Array): void {
    const s = JSON.parse(Buffer.from(data).toString('utf8')) as Snapshot;
    // Snapshots from before object replication lack `stores` (the one store held everything).
    this.uploads = new Map(s.uploads.map((u) => [u.upload_id, { ...u, stores: u.stores ?? null }]));
    this.byKey = new Map(s.uploads.map((u) => [`${u.uploader_id}\n${u.idempotency_key}`, u.upload_id]));
    // Snapshots from before the cold storage class and re-encode fallbacks lack these fields.
    this.videos = new Map(
      s.videos.map((v) => [
        v.video_id,
        {
          ...v,
          storage: v.storage ?? (v.tier === 'warm' ? 'warm' : 'archived'),
          archive: v.archive ?? null,
          reencode_failure: v.reencode_failure ?? null,
          previous: v.previous ?? null,
          stores: v.stores ?? null,
        },
      ]),
    );
    this.open = new Map(s.tasks.map((t) => [t.key, t]));
    this.segments = new Map(s.segments);
    this.usage = new Map(s.usage ?? []);
    this.videoTasks = new Map();
    for (const key of [...this.open.keys(), ...this.segments.keys()]) {
      const id = key.split('/')[0]!;
      let set = this.videoTasks.get(id);
      if (set === undefined) this.videoTasks.set(id, (set = new Set()));
      set.add(key);
    }
  }
}
