// probe(path): what the pipeline needs to know about an uploaded file, or a typed reason to refuse it. ffprobe
// reads the container; a one-frame decode near the end catches files whose header is whole but whose data was cut.
import { stat } from 'node:fs/promises';
import { INPUT_GUARD, run, TOOLS } from './exec.js';

export interface ProbeInfo {
  duration_s: number;
  /** ffprobe's codec name of the first real video stream (h264, hevc, vp9, mpeg4...). */
  source_codec: string;
  width: number;
  height: number;
  /** Frames per second as a number (29.97...). */
  fps: number;
  /** The same rate as ffprobe's rational ("30000/1001"), which ffmpeg's -r takes without rounding. */
  fps_rational: string;
  has_audio: boolean;
  audio_codec: string | null;
  container: string;
  size_bytes: number;
}

/**
 * Why a file is refused. `empty`: zero bytes. `unreadable`: missing or not a regular file. `malformed`: ffprobe
 * cannot parse it (random bytes, a cut-off header). `truncated`: the header parses but the data ends early.
 * `not_video`: no video stream (audio only) or a still image. `too_long`: longer than the limit. `bad_dimensions`:
 * smaller than 16 px or larger than 7680x4320. `bad_frame_rate`: missing or above 120 fps.
 */
export type ProbeRejection =
  | 'empty'
  | 'unreadable'
  | 'malformed'
  | 'truncated'
  | 'not_video'
  | 'too_long'
  | 'bad_dimensions'
  | 'bad_frame_rate';

export type ProbeResult =
  | { ok: true; info: ProbeInfo }
  | { ok: false; reason: ProbeRejection; message: string };

export interface ProbeOptions {
  /** Longest accepted video (default 12 h). */
  maxDurationS?: number;
  timeoutMs?: number;
}

export const DEFAULT_MAX_DURATION_S = 12 * 3600;
const MIN_SIDE = 16;
const MAX_WIDTH = 7680;
const MAX_HEIGHT = 4320;
const MAX_FPS = 120;
// Codecs of still images: a PNG or JPEG "video" stream of one frame is a picture, not a video.
const IMAGE_CODECS = new Set(['png', 'mjpeg', 'jpegls', 'bmp', 'gif', 'webp', 'tiff', 'jpeg2000', 'ppm', 'pgm', 'pam', 'qoi']);

interface FfprobeStream {
  codec_type?: string;
  codec_name?: string;
  width?: number;
  height?: number;
  avg_frame_rate?: string;
  r_frame_rate?: string;
  nb_frames?: string;
  duration?: string;
  disposition?: { attached_pic?: number };
}
interface FfprobeOutput {
  streams?: FfprobeStream[];
  format?: { format_name?: string; duration?: string };
}

export async function probe(path: string, options: ProbeOptions = {}): Promise<ProbeResult> {
  const timeoutMs = options.timeoutMs ?? 60_000;
  const maxDuration = options.maxDurationS ?? DEFAULT_MAX_DURATION_S;
  let size: number;
  try {
    const st = await stat(path);
    if (!st.isFile()) return reject('unreadable', 'not a regular file');
    size = st.size;
  } catch {
    return reject('unreadable', 'file not found');
  }
  if (size === 0) return reject('empty', 'the file is empty (0 bytes)');

  const res = await run(
    TOOLS.ffprobe,
    ['-v', 'error', ...INPUT_GUARD, '-print_format', 'json', '-show_format', '-show_streams', '--', path],
    { timeoutMs, maxStdout: 4 * 1024 * 1024 },
  );
  if (res.code !== 0) return reject('malformed', `ffprobe cannot read the file: ${firstLine(res.stderr)}`);
  let parsed: FfprobeOutput;
  try {
    parsed = JSON.parse(res.stdout.toString('utf8')) as FfprobeOutput;
  } catch {
    return reject('malformed', 'ffprobe gave no description of the file');
  }
  const streams = parsed.streams ?? [];
  const container = parsed.format?.format_name ?? 'unknown';
  const video = streams.find((s) => s.codec_type === 'video' && s.disposition?.attached_pic !== 1);
  const audio = streams.find((s) => s.codec_type === 'audio');
  if (!video) return reject('not_video', audio ? 'audio only: the file has no video stream' : 'the file has no video stream');
  const codec = video.codec_name ?? 'unknown';
  const duration = num(parsed.format?.duration) ?? num(video.duration);
  const isImageContainer = container.includes('image2') || container.endsWith('_pipe');
  if (isImageContainer || (IMAGE_CODECS.has(codec) && (duration === undefined || duration < 0.5 || (num(video.nb_frames) ?? 0) <= 1))) {
    return reject('not_video', `a still image (${codec}), not a video`);
  }
  if (duration === undefined || !(duration > 0)) return reject('malformed', 'the file has no duration');
  if (duration > maxDuration) return reject('too_long', `duration ${duration.toFixed(1)} s is over the limit of ${maxDuration} s`);
  const width = video.width ?? 0;
  const height = video.height ?? 0;
  if (width < MIN_SIDE || height < MIN_SIDE || width > MAX_WIDTH || height > MAX_HEIGHT) {
    return reject('bad_dimensions', `frame size ${width}x${height} is outside ${MIN_SIDE}x${MIN_SIDE}..${MAX_WIDTH}x${MAX_HEIGHT}`);
  }
  const rate = pickRate(video);
  if (!rate || rate.value > MAX_FPS) return reject('bad_frame_rate', `frame rate ${rate ? rate.value.toFixed(2) : 'unknown'} is not in (0, ${MAX_FPS}]`);

  // A whole header over cut data: decoding a frame from the last second finds nothing (or only errors).
  const tail = await run(
    TOOLS.ffmpeg,
    ['-nostdin', '-v', 'error', ...INPUT_GUARD, '-ss', Math.max(0, duration - 1).toFixed(3), '-i', path, '-map', '0:v:0', '-frames:v', '1', '-f', 'framecrc', '-'],
    { timeoutMs, maxStdout: 64 * 1024 },
  );
  // framecrc prints one line per decoded frame ("0, pts, ..."), after its '#' header lines.
  const decoded = tail.stdout.toString('utf8').split('\n').some((l) => /^\d+,/.test(l));
  if (tail.code !== 0 || !decoded) {
    return reject('truncated', `the data ends before the declared duration: ${firstLine(tail.stderr) || 'no frame decodes near the end'}`);
  }
  return {
    ok: true,
    info: {
      duration_s: duration,
      source_codec: codec,
      width,
      height,
      fps: rate.value,
      fps_rational: rate.text,
      has_audio: audio !== undefined,
      audio_codec: audio?.codec_name ?? null,
      container,
      size_bytes: size,
    },
  };
}

function reject(reason: ProbeRejection, message: string): ProbeResult {
  return { ok: false, reason, message };
}

function num(text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const n = Number(text);
  return Number.isFinite(n) ? n : undefined;
}

function parseRate(text: string | undefined): { value: number; text: string } | undefined {
  if (!text) return undefined;
  const m = /^(\d+)\/(\d+)$/.exec(text);
  if (!m) return undefined;
  const n = Number(m[1]);
  const d = Number(m[2]);
  if (!(n > 0) || !(d > 0)) return undefined;
  return { value: n / d, text };
}

// avg_frame_rate is what a player sees; r_frame_rate is the timebase guess and can be 90000/1 for VFR files.
function pickRate(s: FfprobeStream): { value: number; text: string } | undefined {
  const avg = parseRate(s.avg_frame_rate);
  if (avg && avg.value <= MAX_FPS) return avg;
  return parseRate(s.r_frame_rate) ?? avg;
}

function firstLine(text: string): string {
  return text.trim().split('\n')[0]?.slice(0, 300) ?? '';
}
