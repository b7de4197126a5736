// Pure planning: which qualities a source gets and which (segment, quality) transcode tasks make them. No I/O, no
// clock: the same probe result always gives the same plan, so any worker can recompute a task from its id.

/** The five tiers, named by the short side of the frame (a portrait 1080x1920 video is "1080p"). */
export type QualityName = '144p' | '240p' | '360p' | '720p' | '1080p';

export interface Rung {
  name: QualityName;
  /** Short side in pixels. */
  short_side: number;
  video_kbps: number;
  /** Peak for the VBV (x264 maxrate); BANDWIDTH in the master playlist is measured, this is its fallback. */
  max_video_kbps: number;
  audio_kbps: number;
  /** H.264 level that fits the tier's frame size at up to 60 fps. */
  level: string;
}

/**
 * The ladder. Bitrates sit near common streaming ladders for H.264 at 30 fps: low enough that 144p plays on a
 * 2G-class link (~250 kbit/s with audio), 1080p at 4.5 Mbit/s. maxrate is 1.5x (capped VBR) so a 6-s segment
 * never bursts far above the advertised BANDWIDTH.
 */
export const LADDER: readonly Rung[] = [
  { name: '144p', short_side: 144, video_kbps: 160, max_video_kbps: 240, audio_kbps: 64, level: '3.0' },
  { name: '240p', short_side: 240, video_kbps: 350, max_video_kbps: 525, audio_kbps: 64, level: '3.0' },
  { name: '360p', short_side: 360, video_kbps: 700, max_video_kbps: 1050, audio_kbps: 96, level: '3.1' },
  { name: '720p', short_side: 720, video_kbps: 2500, max_video_kbps: 3750, audio_kbps: 128, level: '4.0' },
  { name: '1080p', short_side: 1080, video_kbps: 4500, max_video_kbps: 6750, audio_kbps: 128, level: '4.2' },
];

export const SOURCE_SEGMENT_S = 30;
export const PLAYBACK_SEGMENT_S = 6;
/** Playback segments per full source segment (30 / 6). */
export const PLAYBACK_PER_SOURCE = SOURCE_SEGMENT_S / PLAYBACK_SEGMENT_S;
/** Output frame rate cap: above it we halve nothing, we just resample to 60. */
export const MAX_OUTPUT_FPS = 60;

export interface Quality extends Rung {
  width: number;
  height: number;
}

export interface SourceSegment {
  index: number;
  start_s: number;
  duration_s: number;
  /** Index of this segment's first 6-s playback segment within every quality (index * 5). */
  first_playback_index: number;
}

export interface TranscodeTask {
  /** "s0003-360p": stable, sortable, unique within a video. */
  task_id: string;
  segment: SourceSegment;
  quality: Quality;
  /** ffmpeg -r value (rational), the same for every task of a video so all segments share one init segment. */
  fps: string;
  has_audio: boolean;
}

export interface TranscodePlan {
  duration_s: number;
  segments: SourceSegment[];
  /** Lowest first. */
  qualities: Quality[];
  /** Ordered lowest quality first, then by segment: a pool taking tasks in order makes the video playable soonest. */
  tasks: TranscodeTask[];
}

/** The subset of a probe result the plan depends on. */
export interface PlanInput {
  duration_s: number;
  width: number;
  height: number;
  fps: number;
  fps_rational: string;
  has_audio: boolean;
}

/**
 * Tiers whose short side is at most the source's short side: never upscale. The lowest tier always exists; for a
 * source smaller than 144 px on its short side it keeps the source size (rounded down to even) instead of
 * enlarging it.
 */
export function qualitiesFor(width: number, height: number): Quality[] {
  const short = Math.min(width, height);
  const fitting = LADDER.filter((r) => r.short_side <= short);
  const rungs = fitting.length > 0 ? fitting : [LADDER[0]!];
  return rungs.map((r) => ({ ...r, ...frameSize(width, height, Math.min(r.short_side, even(short))) }));
}

/** Width and height with the short side set and the aspect ratio kept, both even (yuv420p needs even sides). */
export function frameSize(width: number, height: number, shortSide: number): { width: number; height: number } {
  if (width >= height) return { width: even(Math.round((shortSide * width) / height)), height: shortSide };
  return { width: shortSide, height: even(Math.round((shortSide * height) / width)) };
}

export function sourceSegments(duration_s: number): SourceSegment[] {
  const out: SourceSegment[] = [];
  // A sliver under 0.5 s at the end joins the previous segment rather than becoming a task of its own.
  const count = Math.max(1, Math.ceil((duration_s - 0.5) / SOURCE_SEGMENT_S));
  for (let i = 0; i < count; i++) {
    const start = i * SOURCE_SEGMENT_S;
    const end = i === count - 1 ? duration_s : start + SOURCE_SEGMENT_S;
    out.push({
      index: i,
      start_s: start,
      duration_s: round3(end - start),
      first_playback_index: i * PLAYBACK_PER_SOURCE,
    });
  }
  return out;
}

export function outputFps(input: Pick<PlanInput, 'fps' | 'fps_rational'>): string {
  return input.fps > MAX_OUTPUT_FPS ? String(MAX_OUTPUT_FPS) : input.fps_rational;
}

export function taskId(segmentIndex: number, quality: QualityName): string {
  return `s${String(segmentIndex).padStart(4, '0')}-${quality}`;
}

export function planTranscode(input: PlanInput): TranscodePlan {
  const segments = sourceSegments(input.duration_s);
  const qualities = qualitiesFor(input.width, input.height);
  const fps = outputFps(input);
  const tasks: TranscodeTask[] = [];
  for (const quality of qualities) {
    for (const segment of segments) {
      tasks.push({ task_id: taskId(segment.index, quality.name), segment, quality, fps, has_audio: input.has_audio });
    }
  }
  return { duration_s: input.duration_s, segments, qualities, tasks };
}

/**
 * The plan's tasks grouped into ffmpeg jobs (each job one process, transcodeSegment): the lowest quality of every
 * segment alone first, then, per segment, every other quality together. The first jobs are the cheap ones that make
 * the video playable; the rest decode each segment once for all their qualities instead of once per quality.
 */
export function segmentJobs(plan: Pick<TranscodePlan, 'tasks' | 'qualities'>): TranscodeTask[][] {
  const lowest = plan.qualities[0]?.name;
  const first = plan.tasks.filter((t) => t.quality.name === lowest).map((t) => [t]);
  const rest = new Map<number, TranscodeTask[]>();
  for (const t of plan.tasks) {
    if (t.quality.name === lowest) continue;
    const job = rest.get(t.segment.index) ?? [];
    job.push(t);
    rest.set(t.segment.index, job);
  }
  return [...first, ...[...rest.entries()].sort((a, b) => a[0] - b[0]).map(([, job]) => job)];
}

/**
 * One task of the plan, rebuilt from the probe facts alone (a worker that holds only a queued (segment, quality)
 * key gets exactly the task planTranscode made for it, frame-rate cap included); undefined if it is not in the plan.
 */
export function planTask(input: PlanInput, segmentIndex: number, quality: QualityName): TranscodeTask | undefined {
  const q = qualitiesFor(input.width, input.height).find((x) => x.name === quality);
  const segment = sourceSegments(input.duration_s)[segmentIndex];
  if (!q || !segment) return undefined;
  return {
    task_id: taskId(segment.index, q.name),
    segment,
    quality: q,
    fps: outputFps(input),
    has_audio: input.has_audio,
  };
}

/** The 6-s playback segment indexes a task produces (the last source segment may produce fewer than 5). */
export function playbackIndexes(segment: SourceSegment): number[] {
  const n = Math.max(1, Math.ceil((segment.duration_s - 0.001) / PLAYBACK_SEGMENT_S));
  return Array.from({ length: n }, (_, i) => segment.first_playback_index + i);
}

function even(n: number): number {
  return Math.max(2, Math.floor(n / 2) * 2);
}

function round3(n: number): number {
  return Math.round(n * 1000) / 1000;
}
