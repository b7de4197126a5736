/**
 * What the pipeline lets a source cost, from `cluster up --set` settings (README "Source limits and the transcode
 * budget"): the probe's limits on the frame, the frame rate, the duration and duration x frame size, and the
 * per-user budget of source seconds per window that the `probed` command is checked against. And the one place
 * that turns a tool's message into text for users: no path of this machine in it.
 */
import { DEFAULT_SOURCE_LIMITS, type SourceLimits } from '@raftkit/media';
import type { TranscodeBudget } from '../../machine.js';

/** 12 h of source per user per rolling 24 h: the longest accepted video, once a day (README says why not per hour). */
const DEFAULT_BUDGET: TranscodeBudget = { seconds: 12 * 3600, windowMs: 24 * 3_600_000 };

interface PipelineLimits {
  source: SourceLimits;
  /** null: `transcode_budget_s=0`, no budget. */
  budget: TranscodeBudget | null;
}

function positive(settings: Record<string, string>, name: string, fallback: number, allowZero = false): number {
  const raw = settings[name];
  if (raw === undefined) return fallback;
  const n = Number(raw);
  if (!Number.isFinite(n) || n < 0 || (n === 0 && !allowZero))
    throw new Error(`--set ${name}=${raw}: expected a positive number`);
  return n;
}

export function pipelineLimits(settings: Record<string, string>): PipelineLimits {
  const d = DEFAULT_SOURCE_LIMITS;
  const source: SourceLimits = {
    maxDurationS: positive(settings, 'source_max_duration_s', d.maxDurationS),
    maxLongSide: positive(settings, 'source_max_long_side', d.maxLongSide),
    maxShortSide: positive(settings, 'source_max_short_side', d.maxShortSide),
    maxFps: positive(settings, 'source_max_fps', d.maxFps),
    maxPixelSeconds: positive(settings, 'source_max_pixel_seconds', d.maxPixelSeconds),
  };
  const seconds = positive(settings, 'transcode_budget_s', DEFAULT_BUDGET.seconds, true);
  const windowMs = Math.round(positive(settings, 'transcode_budget_window_ms', DEFAULT_BUDGET.windowMs));
  return { source, budget: seconds === 0 ? null : { seconds, windowMs } };
}

/**
 * A tool's message (ffprobe, ffmpeg) as users may read it in a video's failure: every absolute path (two or more
 * segments, not part of a word or a ratio such as 30000/1001) becomes "the file". The server's layout (data
 * folders, video ids of others' scratch files) is nobody's business outside.
 */
export function forUsers(text: string): string {
  return text.replace(/(?<![\w.:/])(?:\/[\w.+@-]+){2,}\/?/g, 'the file');
}
