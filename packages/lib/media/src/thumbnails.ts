// Five JPEG posters at 10/30/50/70/90 % of the duration. The 50 % frame is the default poster (the middle of a
// video is rarely a title card or a fade); the uploader may pick any of the five.
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { INPUT_GUARD, runOk, TOOLS } from './exec.js';

export const THUMBNAIL_PERCENTS = [10, 30, 50, 70, 90] as const;
export const DEFAULT_POSTER_PERCENT = 50;

export interface Thumbnail {
  percent: number;
  time_s: number;
  file: string;
  path: string;
}

/** Pure: the sample times for a duration. */
export function thumbnailTimes(duration_s: number): Array<{ percent: number; time_s: number }> {
  return THUMBNAIL_PERCENTS.map((percent) => ({ percent, time_s: Math.round(duration_s * percent * 10) / 1000 }));
}

export async function makeThumbnails(
  source: string,
  duration_s: number,
  outDir: string,
  options: { maxHeight?: number; timeoutMs?: number } = {},
): Promise<Thumbnail[]> {
  await mkdir(outDir, { recursive: true });
  const maxHeight = options.maxHeight ?? 360;
  const out: Thumbnail[] = [];
  for (const { percent, time_s } of thumbnailTimes(duration_s)) {
    const file = `thumb-${String(percent).padStart(2, '0')}.jpg`;
    const path = join(outDir, file);
    await runOk(
      TOOLS.ffmpeg,
      [
        '-nostdin',
        '-v',
        'error',
        '-threads',
        '1',
        ...INPUT_GUARD,
        '-ss',
        time_s.toFixed(3),
        '-i',
        source,
        '-map',
        '0:v:0',
        '-frames:v',
        '1',
        '-vf',
        `scale=-2:'min(${maxHeight},ih)':flags=bicubic,setsar=1`,
        '-q:v',
        '3',
        '-fflags',
        '+bitexact',
        '-flags:v',
        '+bitexact',
        '-map_metadata',
        '-1',
        '-f',
        'image2',
        '-update',
        '1',
        '-y',
        path,
      ],
      { timeoutMs: options.timeoutMs ?? 120_000 },
    );
    out.push({ percent, time_s, file, path });
  }
  return out;
}
