// transcodeTask: one (30-s source segment, quality) task. Cuts [start, start+30) out of the source, encodes it
// with settings fixed per quality (single-threaded x264, bit-exact muxing, no metadata) so the same input gives
// the same bytes on every run and every worker, and writes the task's 6-s fMP4 playback segments plus the
// quality's init segment. The init segment is identical for every task of a quality (same encoder settings, no
// edit list, no durations in it), so one #EXT-X-MAP / DASH Initialization serves the whole variant.
import { createHash, randomBytes } from 'node:crypto';
import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { INPUT_GUARD, runOk, TOOLS } from './exec.js';
import { parseFmp4, shiftFragments } from './fmp4.js';
import { PLAYBACK_SEGMENT_S, playbackIndexes, type QualityName, type TranscodeTask } from './plan.js';

export interface PlaybackSegment {
  /** Index within its quality: source segment k gives 5k..5k+4. */
  index: number;
  /** File name inside outDir ("seg-00005.m4s"). */
  file: string;
  path: string;
  start_s: number;
  duration_s: number;
  size_bytes: number;
  sha256: string;
}

export interface TaskOutput {
  task_id: string;
  quality: QualityName;
  width: number;
  height: number;
  /** RFC 6381 codecs of the variant, read from the init segment ("avc1.4D401E,mp4a.40.2"). */
  codecs: string;
  init: { file: string; path: string; size_bytes: number; sha256: string };
  segments: PlaybackSegment[];
}

export interface TranscodeOptions {
  /** Kill ffmpeg after this long (default: 20 min, a generous bound for 30 s at 1080p on a busy core). */
  timeoutMs?: number;
  signal?: AbortSignal;
  onSpawn?: (pid: number) => void;
}

export const INIT_FILE = 'init.mp4';

export function segmentFileName(index: number): string {
  return `seg-${String(index).padStart(5, '0')}.m4s`;
}

/** The ffmpeg arguments of a task, exposed so tests and the bench can show exactly what runs. */
export function transcodeArgs(source: string, task: TranscodeTask, outFile: string): string[] {
  return segmentArgs(source, [task], [outFile]);
}

/**
 * The ffmpeg arguments of several qualities of ONE source segment in one process: the segment is read and decoded
 * once, the filter graph splits the frames into one scaler per quality, and each quality is its own output with
 * exactly the encoder and muxer settings of a one-quality task (so the bytes are the same either way). With one
 * task this is the one-quality command, with `-vf` as before.
 */
export function segmentArgs(source: string, tasks: readonly TranscodeTask[], outFiles: readonly string[]): string[] {
  const first = tasks[0];
  if (first === undefined || tasks.length !== outFiles.length) throw new Error('segmentArgs: one output per task');
  for (const t of tasks) {
    if (t.segment.index !== first.segment.index || t.fps !== first.fps || t.has_audio !== first.has_audio)
      throw new Error(`segmentArgs: ${t.task_id} is not of the segment of ${first.task_id}`);
  }
  const args = [
    '-nostdin',
    '-v',
    'error',
    '-threads',
    '1',
    '-filter_threads',
    '1',
    ...INPUT_GUARD,
    '-ss',
    first.segment.start_s.toFixed(3),
    '-t',
    first.segment.duration_s.toFixed(3),
    '-i',
    source,
  ];
  const scale = (t: TranscodeTask): string =>
    `scale=${t.quality.width}:${t.quality.height}:flags=bicubic,setsar=1,format=yuv420p`;
  if (tasks.length > 1) {
    // Filter graph threads stay at one (-filter_complex_threads): one core per process, the pool gives parallelism.
    const split = `[0:v:0]split=${tasks.length}${tasks.map((_, i) => `[s${i}]`).join('')}`;
    args.push(
      '-filter_complex_threads',
      '1',
      '-filter_complex',
      [split, ...tasks.map((t, i) => `[s${i}]${scale(t)}[v${i}]`)].join(';'),
    );
  }
  tasks.forEach((t, i) => {
    if (tasks.length > 1) args.push('-map', `[v${i}]`);
    else args.push('-map', '0:v:0');
    if (t.has_audio) args.push('-map', '0:a:0');
    if (tasks.length === 1) args.push('-vf', scale(t));
    args.push(...outputArgs(t, outFiles[i]!));
  });
  return args;
}

/** One quality's encoder and muxer arguments (after its -map and filter). */
function outputArgs(task: TranscodeTask, outFile: string): string[] {
  const q = task.quality;
  const fpsNum = evalRate(task.fps);
  // Keyframes come only from -force_key_frames (every 6 s of output time); the GOP cap is set above that so x264
  // never adds one of its own, and scene-cut keyframes are off, so every task cuts at the same 6-s boundaries.
  const gop = Math.ceil(fpsNum * PLAYBACK_SEGMENT_S * 2);
  const args = [
    '-fps_mode',
    'cfr',
    '-r',
    task.fps,
    '-c:v',
    'libx264',
    '-threads',
    '1',
    '-preset',
    'veryfast',
    '-profile:v',
    'main',
    '-level:v',
    q.level,
    '-b:v',
    `${q.video_kbps}k`,
    '-maxrate',
    `${q.max_video_kbps}k`,
    '-bufsize',
    `${q.max_video_kbps * 2}k`,
    '-g',
    String(gop),
    '-sc_threshold',
    '0',
    '-force_key_frames',
    `expr:gte(t,n_forced*${PLAYBACK_SEGMENT_S})`,
    '-x264-params',
    'threads=1:lookahead-threads=1:sliced-threads=0',
  ];
  if (task.has_audio) args.push('-c:a', 'aac', '-b:a', `${q.audio_kbps}k`, '-ar', '48000', '-ac', '2');
  args.push(
    '-map_metadata',
    '-1',
    '-map_chapters',
    '-1',
    '-fflags',
    '+bitexact',
    '-flags:v',
    '+bitexact',
    '-flags:a',
    '+bitexact',
    // One fragment per keyframe = one fragment per 6-s playback segment; no edit list, so the init segment has
    // nothing task-specific in it (the task's place on the timeline goes into each fragment's tfdt instead).
    '-movflags',
    '+frag_keyframe+empty_moov+default_base_moof+skip_trailer',
    '-use_editlist',
    '0',
    '-f',
    'mp4',
    '-y',
    outFile,
  );
  return args;
}

export async function transcodeTask(
  source: string,
  task: TranscodeTask,
  outDir: string,
  options: TranscodeOptions = {},
): Promise<TaskOutput> {
  return (await transcodeSegment(source, [task], [outDir], options))[0]!;
}

/**
 * Several qualities of one source segment (tasks of the same segment, each with its output folder) from ONE ffmpeg
 * process that decodes the segment once (segmentArgs). Each task's outputs are exactly transcodeTask's: the same
 * files, bytes and TaskOutput. A failure fails them all.
 */
export async function transcodeSegment(
  source: string,
  tasks: readonly TranscodeTask[],
  outDirs: readonly string[],
  options: TranscodeOptions = {},
): Promise<TaskOutput[]> {
  if (tasks.length === 0 || tasks.length !== outDirs.length) throw new Error('transcodeSegment: one folder per task');
  // Private scratch space: tasks of one quality share outDir, and a killed worker's leftovers never collide.
  const scratches = await Promise.all(
    tasks.map(async (task, i) => {
      await mkdir(outDirs[i]!, { recursive: true });
      const scratch = join(outDirs[i]!, `.tmp-${task.task_id}-${randomBytes(4).toString('hex')}`);
      await mkdir(scratch, { recursive: true });
      return scratch;
    }),
  );
  try {
    const encoded = scratches.map((scratch) => join(scratch, 'out.mp4'));
    await runOk(TOOLS.ffmpeg, segmentArgs(source, tasks, encoded), {
      timeoutMs: options.timeoutMs ?? 20 * 60_000 * tasks.length,
      ...(options.signal ? { signal: options.signal } : {}),
      ...(options.onSpawn ? { onSpawn: options.onSpawn } : {}),
    });
    const outputs: TaskOutput[] = [];
    for (let i = 0; i < tasks.length; i++) {
      outputs.push(await collect(tasks[i]!, encoded[i]!, scratches[i]!, outDirs[i]!));
    }
    return outputs;
  } finally {
    await Promise.all(scratches.map((scratch) => rm(scratch, { recursive: true, force: true })));
  }
}

/** One task's ffmpeg output cut into its init segment and 6-s segments, moved onto the video's timeline, published. */
async function collect(task: TranscodeTask, encoded: string, scratch: string, outDir: string): Promise<TaskOutput> {
  const buf = await readFile(encoded);
  const layout = parseFmp4(buf);
  shiftFragments(buf, layout, task.segment.start_s);
  const video = layout.tracks.find((t) => t.handler === 'vide');
  if (!video) throw new Error(`transcode ${task.task_id}: no video track in the output`);
  const expected = playbackIndexes(task.segment);
  if (layout.fragments.length !== expected.length) {
    throw new Error(
      `transcode ${task.task_id}: ${layout.fragments.length} fragments, expected ${expected.length} (keyframes every ${PLAYBACK_SEGMENT_S} s)`,
    );
  }
  const initBytes = buf.subarray(0, layout.initEnd);
  const init = await publish(scratch, outDir, INIT_FILE, initBytes);
  const segments: PlaybackSegment[] = [];
  for (let i = 0; i < layout.fragments.length; i++) {
    const frag = layout.fragments[i]!;
    const v = frag.tracks.get(video.id);
    if (!v) throw new Error(`transcode ${task.task_id}: fragment ${i} has no video samples`);
    const index = expected[i]!;
    const file = segmentFileName(index);
    const written = await publish(scratch, outDir, file, buf.subarray(frag.start, frag.end));
    segments.push({
      index,
      file,
      path: written.path,
      start_s: round6(Number(v.baseTime) / video.timescale),
      duration_s: round6(v.duration / video.timescale),
      size_bytes: written.size_bytes,
      sha256: written.sha256,
    });
  }
  return {
    task_id: task.task_id,
    quality: task.quality.name,
    width: task.quality.width,
    height: task.quality.height,
    codecs: layout.tracks
      .map((t) => t.codec)
      .filter((c) => c !== 'unknown')
      .join(','),
    init: { file: INIT_FILE, ...init },
    segments,
  };
}

// Write to scratch, then rename into place: readers never see half a segment, and two workers finishing the same
// task (one was presumed dead) both leave the same complete bytes.
async function publish(
  scratch: string,
  outDir: string,
  name: string,
  bytes: Buffer,
): Promise<{ path: string; size_bytes: number; sha256: string }> {
  const tmp = join(scratch, name);
  await writeFile(tmp, bytes);
  const path = join(outDir, name);
  await rename(tmp, path);
  return { path, size_bytes: bytes.length, sha256: createHash('sha256').update(bytes).digest('hex') };
}

function evalRate(rate: string): number {
  const m = /^(\d+)(?:\/(\d+))?$/.exec(rate);
  if (!m) throw new Error(`bad frame rate ${rate}`);
  return Number(m[1]) / Number(m[2] ?? 1);
}

function round6(n: number): number {
  return Math.round(n * 1e6) / 1e6;
}
