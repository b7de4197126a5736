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
 * a side under 16 px, or a frame larger than 4096x2160 (either orientation). `bad_frame_rate`: missing or above
 * 60 fps. `too_large`: duration x frame size over the limit (12 h of 1080p by default).
 */
export type ProbeRejection =
  | 'empty'
  | 'unreadable'
  | 'malformed'
  | 'truncated'
  | 'not_video'
  | 'too_long'
  | 'bad_dimensions'
  | 'bad_frame_rate'
  | 'too_large';

export type ProbeResult = { ok: true; info: ProbeInfo } | { ok: false; reason: ProbeRejection; message: string };

/**
 * What a source may cost to transcode. Decoding is what a hostile source amplifies (the ladder never encodes above
 * 1080p nor above 60 fps): a 100 KB file of 1.5 s at 7680x4320 and 120 fps held two transcoders for 5 minutes.
 */
export interface SourceLimits {
  /** Longest accepted video, s (default 12 h). */
  maxDurationS: number;
  /** Longer side of a frame, px (default 4096: UHD and DCI 4K, landscape or portrait). */
  maxLongSide: number;
  /** Shorter side of a frame, px (default 2160). */
  maxShortSide: number;
  /** Highest accepted frame rate (default 60: the ladder's output cap; decoding more frames buys nothing). */
  maxFps: number;
  /** duration x width x height, pixel-seconds (default 12 h of 1920x1080: 3 h of 4K, the whole 12 h at 1080p). */
  maxPixelSeconds: number;
}

export const DEFAULT_MAX_DURATION_S = 12 * 3600;
export const DEFAULT_SOURCE_LIMITS: SourceLimits = {
  maxDurationS: DEFAULT_MAX_DURATION_S,
  maxLongSide: 4096,
  maxShortSide: 2160,
  maxFps: 60,
  maxPixelSeconds: DEFAULT_MAX_DURATION_S * 1920 * 1080,
};

export interface ProbeOptions extends Partial<SourceLimits> {
  timeoutMs?: number;
}

const MIN_SIDE = 16;
/** 59.94 and 60 pass; a rate a hair over the cap from timebase rounding does too. */
const FPS_SLACK = 0.5;
// Codecs of still images: a PNG or JPEG "video" stream of one frame is a picture, not a video.
const IMAGE_CODECS = new Set([
  'png',
  'mjpeg',
  'jpegls',
  'bmp',
  'gif',
  'webp',
  'tiff',
  'jpeg2000',
  'ppm',
  'pgm',
  'pam',
  'qoi',
]);

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
  const limits: SourceLimits = { ...DEFAULT_SOURCE_LIMITS, ...definedOnly(options) };
  const maxDuration = limits.maxDurationS;
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
  // ffmpeg's messages name the file: the server's path is no business of the uploader's.
  const said = (stderr: string): string => firstLine(stderr).split(path).join('the file');
  if (res.code !== 0) return reject('malformed', `ffprobe cannot read the file: ${said(res.stderr)}`);
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
  if (!video)
    return reject('not_video', audio ? 'audio only: the file has no video stream' : 'the file has no video stream');
  const codec = video.codec_name ?? 'unknown';
  const duration = num(parsed.format?.duration) ?? num(video.duration);
  const isImageContainer = container.includes('image2') || container.endsWith('_pipe');
  if (
    isImageContainer ||
    (IMAGE_CODECS.has(codec) && (duration === undefined || duration < 0.5 || (num(video.nb_frames) ?? 0) <= 1))
  ) {
    return reject('not_video', `a still image (${codec}), not a video`);
  }
  if (duration === undefined || !(duration > 0)) return reject('malformed', 'the file has no duration');
  if (duration > maxDuration)
    return reject('too_long', `duration ${duration.toFixed(1)} s is over the limit of ${maxDuration} s`);
  const width = video.width ?? 0;
  const height = video.height ?? 0;
  const long = Math.max(width, height);
  const short = Math.min(width, height);
  if (short < MIN_SIDE || long > limits.maxLongSide || short > limits.maxShortSide) {
    return reject(
      'bad_dimensions',
      `frame size ${width}x${height} is outside ${MIN_SIDE}x${MIN_SIDE}..${limits.maxLongSide}x${limits.maxShortSide} (either orientation)`,
    );
  }
  const rate = pickRate(video, limits.maxFps);
  if (!rate || rate.value > limits.maxFps + FPS_SLACK)
    return reject(
      'bad_frame_rate',
      `frame rate ${rate ? rate.value.toFixed(2) : 'unknown'} is not in (0, ${limits.maxFps}]`,
    );
  const pixelSeconds = duration * width * height;
  if (pixelSeconds > limits.maxPixelSeconds) {
    const hoursAt1080 = limits.maxPixelSeconds / (1920 * 1080 * 3600);
    return reject(
      'too_large',
      `${duration.toFixed(1)} s at ${width}x${height} is over the limit of ${limits.maxPixelSeconds.toExponential(2)} pixel-seconds (${hoursAt1080.toFixed(1)} h of 1920x1080)`,
    );
  }

  // A whole header over cut data: decoding a frame from the last second finds nothing (or only errors).
  const tail = await run(
    TOOLS.ffmpeg,
    [
      '-nostdin',
      '-v',
      'error',
      ...INPUT_GUARD,
      '-ss',
      Math.max(0, duration - 1).toFixed(3),
      '-i',
      path,
      '-map',
      '0:v:0',
      '-frames:v',
      '1',
      '-f',
      'framecrc',
      '-',
    ],
    { timeoutMs, maxStdout: 64 * 1024 },
  );
  // framecrc prints one line per decoded frame ("0, pts, ..."), after its '#' header lines.
  const decoded = tail.stdout
    .toString('utf8')
    .split('\n')
    .some((l) => /^\d+,/.test(l));
  if (tail.code !== 0 || !decoded) {
    return reject(
      'truncated',
      `the data ends before the declared duration: ${said(tail.stderr) || 'no frame decodes near the end'}`,
    );
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
function pickRate(s: FfprobeStream, maxFps: number): { value: number; text: string } | undefined {
  const avg = parseRate(s.avg_frame_rate);
  if (avg && avg.value <= maxFps + FPS_SLACK) return avg;
  return parseRate(s.r_frame_rate) ?? avg;
}

function firstLine(text: string): string {
  return text.trim().split('\n')[0]?.slice(0, 300) ?? '';
}

/** The options that were given (an explicit undefined must not replace a default). */
function definedOnly(options: ProbeOptions): Partial<SourceLimits> {
  const out: Partial<SourceLimits> = {};
  for (const k of ['maxDurationS', 'maxLongSide', 'maxShortSide', 'maxFps', 'maxPixelSeconds'] as const) {
    const v = options[k];
    if (v !== undefined) out[k] = v;
  }
  return out;
}
