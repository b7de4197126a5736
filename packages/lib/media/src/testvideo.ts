// Test videos of any length and size: ffmpeg's testsrc2 pattern (moving, so the encoder has real work) with
// synthesised English speech, a sine tone, or no audio. Used by this package's tests, the bench and the video
// service's tests. Speech comes from Debian's flite (voice "slt") by default: pocketsphinx recognises it almost
// word for word, while espeak-ng's formant voice comes out mostly wrong, so flite makes the caption test
// meaningful. espeak-ng stays selectable.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runOk, TOOLS } from './exec.js';

export const DEFAULT_SPEECH =
  'The quick brown fox jumped over the lazy dog. Hello world, this is a test of the video service. ' +
  'We are recording a short message about the weather and the garden.';

export interface TestVideoOptions {
  path: string;
  duration_s: number;
  width?: number;
  height?: number;
  fps?: number;
  /** 'speech' (default), 'sine', or 'none'. */
  audio?: 'speech' | 'sine' | 'none';
  speech_text?: string;
  /** Repeat the sentence (with a pause) for the whole duration instead of speaking it once then silence. */
  loop_speech?: boolean;
  voice?: 'flite' | 'espeak-ng';
  /** mp4 only: put the moov box first (a truncated file then keeps a whole header). */
  faststart?: boolean;
  timeoutMs?: number;
}

export async function makeTestVideo(o: TestVideoOptions): Promise<{ path: string; speech_text: string | null }> {
  const width = o.width ?? 320;
  const height = o.height ?? 180;
  const fps = o.fps ?? 30;
  const audio = o.audio ?? 'speech';
  const text = o.speech_text ?? DEFAULT_SPEECH;
  const dir = await mkdtemp(join(tmpdir(), 'media-testvideo-'));
  try {
    const args = [
      '-nostdin',
      '-v',
      'error',
      '-f',
      'lavfi',
      '-i',
      `testsrc2=size=${width}x${height}:rate=${fps}:duration=${o.duration_s}`,
    ];
    if (audio === 'speech') {
      const wav = join(dir, 'speech.wav');
      if ((o.voice ?? 'flite') === 'flite') await runOk(TOOLS.flite, ['-voice', 'slt', '-t', text, '-o', wav]);
      else await runOk(TOOLS.espeak, ['-v', 'en-us', '-s', '150', '-w', wav, text]);
      if (o.loop_speech) args.push('-stream_loop', '-1');
      args.push('-i', wav);
    } else if (audio === 'sine') {
      args.push('-f', 'lavfi', '-i', `sine=frequency=440:sample_rate=48000:duration=${o.duration_s}`);
    }
    args.push('-map', '0:v');
    if (audio !== 'none') {
      args.push('-map', '1:a');
      // Spoken once: padded with silence to the full length. Looped: the sentence repeats back to back.
      args.push('-af', o.loop_speech ? 'anull' : 'apad', '-c:a', 'aac', '-b:a', '96k', '-ar', '48000');
    }
    args.push(
      '-t',
      String(o.duration_s),
      '-c:v',
      'libx264',
      '-preset',
      'ultrafast',
      '-crf',
      '23',
      '-pix_fmt',
      'yuv420p',
      '-g',
      String(fps * 2),
    );
    if (o.faststart) args.push('-movflags', '+faststart');
    args.push('-y', o.path);
    await runOk(TOOLS.ffmpeg, args, { timeoutMs: o.timeoutMs ?? 30 * 60_000 });
    return { path: o.path, speech_text: audio === 'speech' ? text : null };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
