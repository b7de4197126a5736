// Captions: offline speech-to-text with Debian's pocketsphinx (pocketsphinx_continuous and the en-us model from
// pocketsphinx-en-us), grouped into WebVTT cues. Why pocketsphinx: it is in Debian main with its English model
// (no network, no model download), runs on one core at several times real time, and ffmpeg 5.1 (Debian 12) has
// no speech filter (its whisper filter is ffmpeg 8). Its accuracy is modest on real speech; captions are marked
// as machine-generated in the README.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { INPUT_GUARD, runOk, TOOLS } from './exec.js';

export interface RecognisedWord {
  word: string;
  start_s: number;
  end_s: number;
  confidence: number;
}

export interface Cue {
  start_s: number;
  end_s: number;
  text: string;
}

export const POCKETSPHINX_MODEL_DIR = '/usr/share/pocketsphinx/model/en-us';

/** Audio of the source as 16 kHz mono WAV (what the en-us acoustic model was trained on), then recognition. */
export async function recogniseSpeech(source: string, options: { timeoutMs?: number } = {}): Promise<RecognisedWord[]> {
  const dir = await mkdtemp(join(tmpdir(), 'media-stt-'));
  try {
    const wav = join(dir, 'audio.wav');
    await runOk(
      TOOLS.ffmpeg,
      [
        '-nostdin',
        '-v',
        'error',
        ...INPUT_GUARD,
        '-i',
        source,
        '-map',
        '0:a:0',
        '-ac',
        '1',
        '-ar',
        '16000',
        '-c:a',
        'pcm_s16le',
        '-y',
        wav,
      ],
      {
        timeoutMs: options.timeoutMs ?? 600_000,
      },
    );
    const res = await runOk(
      TOOLS.pocketsphinx,
      [
        '-infile',
        wav,
        '-time',
        'yes',
        '-hmm',
        `${POCKETSPHINX_MODEL_DIR}/en-us`,
        '-lm',
        `${POCKETSPHINX_MODEL_DIR}/en-us.lm.bin`,
        '-dict',
        `${POCKETSPHINX_MODEL_DIR}/cmudict-en-us.dict`,
      ],
      { timeoutMs: options.timeoutMs ?? 600_000 },
    );
    return parsePocketsphinx(res.stdout.toString('utf8'));
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** Pure: pocketsphinx_continuous -time yes prints "word start end confidence" lines; fillers and silences go. */
export function parsePocketsphinx(text: string): RecognisedWord[] {
  const words: RecognisedWord[] = [];
  for (const line of text.split('\n')) {
    const m = /^(\S+) (\d+(?:\.\d+)?) (\d+(?:\.\d+)?) (\d+(?:\.\d+)?)$/.exec(line.trim());
    if (!m) continue;
    const raw = m[1]!;
    if (raw.startsWith('<') || raw.startsWith('[') || raw.startsWith('++')) continue;
    words.push({
      word: raw.replace(/\(\d+\)$/, ''),
      start_s: Number(m[2]),
      end_s: Number(m[3]),
      confidence: Number(m[4]),
    });
  }
  return words;
}

/** Pure: words into cues of at most 7 words or 4 s, broken at pauses over 0.7 s. */
export function wordsToCues(
  words: readonly RecognisedWord[],
  limits = { maxWords: 7, maxSeconds: 4, pauseSeconds: 0.7 },
): Cue[] {
  const cues: Cue[] = [];
  let current: RecognisedWord[] = [];
  const flush = (): void => {
    if (current.length === 0) return;
    cues.push({
      start_s: current[0]!.start_s,
      end_s: current[current.length - 1]!.end_s,
      text: current.map((w) => w.word).join(' '),
    });
    current = [];
  };
  for (const w of words) {
    const first = current[0];
    const last = current[current.length - 1];
    if (
      first &&
      last &&
      (current.length >= limits.maxWords ||
        w.end_s - first.start_s > limits.maxSeconds ||
        w.start_s - last.end_s > limits.pauseSeconds)
    )
      flush();
    current.push(w);
  }
  flush();
  return cues;
}

/** Pure: a WebVTT file. Cue text is escaped (&, <, >) so recognised words can never inject markup. */
export function buildWebVtt(cues: readonly Cue[]): string {
  const out = ['WEBVTT', 'Kind: captions', 'Language: en', ''];
  cues.forEach((c, i) => {
    const end = Math.max(c.end_s, c.start_s + 0.2);
    out.push(
      String(i + 1),
      `${vttTime(c.start_s)} --> ${vttTime(end)}`,
      c.text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;'),
      '',
    );
  });
  return out.join('\n');
}

export function vttTime(seconds: number): string {
  const ms = Math.max(0, Math.round(seconds * 1000));
  const h = Math.floor(ms / 3_600_000);
  const m = Math.floor((ms % 3_600_000) / 60_000);
  const s = Math.floor((ms % 60_000) / 1000);
  const pad = (n: number, w = 2): string => String(n).padStart(w, '0');
  return `${pad(h)}:${pad(m)}:${pad(s)}.${pad(ms % 1000, 3)}`;
}

/** Recognise and format in one call: { vtt, words, text }. A video without audio gets an empty WebVTT file. */
export async function makeCaptions(
  source: string,
  hasAudio: boolean,
  options: { timeoutMs?: number } = {},
): Promise<{ vtt: string; words: RecognisedWord[]; text: string }> {
  const words = hasAudio ? await recogniseSpeech(source, options) : [];
  return { vtt: buildWebVtt(wordsToCues(words)), words, text: words.map((w) => w.word).join(' ') };
}
