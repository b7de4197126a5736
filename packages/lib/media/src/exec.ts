// Runs one external tool (ffmpeg, ffprobe, pocketsphinx, flite, espeak-ng) as a child process with an argument
// vector (never a shell), a deadline, and bounded captured output, so a hostile input can neither inject
// commands nor make us buffer unbounded stderr.
import { spawn } from 'node:child_process';

export interface RunResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: Buffer;
  /** The last MAX_STDERR bytes of stderr (ffmpeg's errors come last). */
  stderr: string;
  timedOut: boolean;
}

export interface RunOptions {
  timeoutMs?: number;
  /** Cap on captured stdout; more is dropped (callers that need it all use a file). */
  maxStdout?: number;
  signal?: AbortSignal;
  /** Called with the child's pid once started (a worker pool may record it to kill the task). */
  onSpawn?: (pid: number) => void;
}

const MAX_STDERR = 16 * 1024;

export function run(command: string, args: readonly string[], options: RunOptions = {}): Promise<RunResult> {
  const maxStdout = options.maxStdout ?? 32 * 1024 * 1024;
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    let outBytes = 0;
    let err = '';
    let timedOut = false;
    child.stdout.on('data', (chunk: Buffer) => {
      if (outBytes >= maxStdout) return;
      out.push(chunk);
      outBytes += chunk.length;
    });
    child.stderr.on('data', (chunk: Buffer) => {
      err += chunk.toString('utf8');
      if (err.length > MAX_STDERR * 2) err = err.slice(-MAX_STDERR);
    });
    const kill = (): void => {
      child.kill('SIGKILL');
    };
    const timer =
      options.timeoutMs === undefined
        ? undefined
        : setTimeout(() => {
            timedOut = true;
            kill();
          }, options.timeoutMs);
    const onAbort = (): void => kill();
    options.signal?.addEventListener('abort', onAbort, { once: true });
    child.on('spawn', () => {
      if (child.pid !== undefined) options.onSpawn?.(child.pid);
    });
    child.on('error', (e) => {
      if (timer) clearTimeout(timer);
      options.signal?.removeEventListener('abort', onAbort);
      reject(e);
    });
    child.on('close', (code, signal) => {
      if (timer) clearTimeout(timer);
      options.signal?.removeEventListener('abort', onAbort);
      resolve({ code, signal, stdout: Buffer.concat(out), stderr: err.slice(-MAX_STDERR), timedOut });
    });
  });
}

/** A tool failure with the tool's own last words, for logs and task records. */
export class ToolError extends Error {
  constructor(
    readonly tool: string,
    readonly result: RunResult,
  ) {
    super(
      `${tool} failed (${result.timedOut ? 'timed out' : (result.signal ?? `exit ${result.code}`)}): ${lastLines(result.stderr)}`,
    );
    this.name = 'ToolError';
  }
}

export async function runOk(command: string, args: readonly string[], options: RunOptions = {}): Promise<RunResult> {
  const result = await run(command, args, options);
  if (result.code !== 0) throw new ToolError(command, result);
  return result;
}

function lastLines(text: string): string {
  return text.trim().split('\n').slice(-3).join(' | ').slice(0, 600);
}

/** Binaries, overridable for tests or non-Debian hosts. */
export const TOOLS = {
  ffmpeg: process.env.MEDIA_FFMPEG ?? '/usr/bin/ffmpeg',
  ffprobe: process.env.MEDIA_FFPROBE ?? '/usr/bin/ffprobe',
  pocketsphinx: process.env.MEDIA_POCKETSPHINX ?? '/usr/bin/pocketsphinx_continuous',
  flite: process.env.MEDIA_FLITE ?? '/usr/bin/flite',
  espeak: process.env.MEDIA_ESPEAK ?? '/usr/bin/espeak-ng',
};

/**
 * Input options for every ffmpeg/ffprobe read of an uploaded file: local files only, and only container demuxers
 * (plus the still-image ones, so probe can name a picture). A "video" that is really an HLS playlist or an ffconcat
 * script would otherwise make ffmpeg open the URLs or local files it lists (the classic SSRF / file-read hole).
 */
export const INPUT_GUARD: readonly string[] = [
  '-protocol_whitelist',
  'file',
  '-format_whitelist',
  'mov,matroska,avi,mpegts,flv,asf,mpeg,mpegvideo,ogg,mxf,h264,hevc,m4v,ivf,wav,mp3,aac,flac,png_pipe,jpeg_pipe,gif,webp_pipe,bmp_pipe,tiff_pipe,image2',
];
