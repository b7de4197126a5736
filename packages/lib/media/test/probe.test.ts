/** probe() on real files made with ffmpeg: good videos and bad files of every kind. */
import t, { type Test } from 'tap';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runOk, TOOLS } from '../src/exec.js';
import { probe, type ProbeResult } from '../src/probe.js';
import { makeTestVideo } from '../src/testvideo.js';

const dir = await mkdtemp(join(tmpdir(), 'media-probe-'));
t.teardown(() => rm(dir, { recursive: true, force: true }));

const good = join(dir, 'good.mp4');
const goodFast = join(dir, 'good-faststart.mp4');
await makeTestVideo({ path: good, duration_s: 10, width: 160, height: 90, audio: 'sine' });
await makeTestVideo({ path: goodFast, duration_s: 10, width: 160, height: 90, audio: 'sine', faststart: true });

function rejected(t: Test, r: ProbeResult, reason: string): void {
  t.equal(r.ok, false, `${reason}: refused`);
  if (!r.ok) {
    t.equal(r.reason, reason);
    t.ok(r.message.length > 0, `message: ${r.message}`);
  }
}

t.test('a good video: duration, codec, size, rate, audio', async (t) => {
  const r = await probe(good);
  if (!r.ok) throw new Error(`refused: ${r.message}`);
  t.ok(Math.abs(r.info.duration_s - 10) < 0.1, `duration ${r.info.duration_s}`);
  t.equal(r.info.source_codec, 'h264');
  t.same([r.info.width, r.info.height], [160, 90]);
  t.equal(r.info.fps, 30);
  t.equal(r.info.fps_rational, '30/1');
  t.equal(r.info.has_audio, true);
  t.equal(r.info.audio_codec, 'aac');
  t.ok(r.info.size_bytes > 0);
  const silent = join(dir, 'silent.mkv');
  await makeTestVideo({ path: silent, duration_s: 3, width: 160, height: 90, audio: 'none' });
  const s = await probe(silent);
  t.ok(s.ok && !s.info.has_audio && s.info.container.includes('matroska'), 'a video without audio in Matroska is fine');
});

t.test('bad files of every kind get a typed rejection', async (t) => {
  const empty = join(dir, 'empty.mp4');
  await writeFile(empty, '');
  rejected(t, await probe(empty), 'empty');
  rejected(t, await probe(join(dir, 'missing.mp4')), 'unreadable');
  rejected(t, await probe(dir), 'unreadable');

  const random = join(dir, 'random.mp4');
  await writeFile(random, randomBytes(200_000));
  rejected(t, await probe(random), 'malformed');
  const said = await probe(random);
  t.notOk(!said.ok && said.message.includes(dir), 'the message does not show the server path of the file');

  const text = join(dir, 'notes.mp4');
  await writeFile(text, 'this is not a video\n'.repeat(100));
  rejected(t, await probe(text), 'malformed');

  // moov at the end (ffmpeg's default): cutting the file loses the index, ffprobe cannot open it.
  const bytes = await readFile(good);
  const cut = join(dir, 'cut.mp4');
  await writeFile(cut, bytes.subarray(0, Math.floor(bytes.length / 2)));
  rejected(t, await probe(cut), 'malformed');

  // moov first: the header is whole and promises 10 s, the data stops halfway.
  const fast = await readFile(goodFast);
  const cutFast = join(dir, 'cut-faststart.mp4');
  await writeFile(cutFast, fast.subarray(0, Math.floor(fast.length / 2)));
  rejected(t, await probe(cutFast), 'truncated');

  const audio = join(dir, 'audio.m4a');
  await runOk(TOOLS.ffmpeg, [
    '-v',
    'error',
    '-f',
    'lavfi',
    '-i',
    'sine=frequency=440:duration=3',
    '-c:a',
    'aac',
    '-y',
    audio,
  ]);
  rejected(t, await probe(audio), 'not_video');

  const png = join(dir, 'still.png');
  await runOk(TOOLS.ffmpeg, ['-v', 'error', '-f', 'lavfi', '-i', 'testsrc2=size=160x90', '-frames:v', '1', '-y', png]);
  rejected(t, await probe(png), 'not_video');
  const jpg = join(dir, 'still.jpg');
  await runOk(TOOLS.ffmpeg, ['-v', 'error', '-f', 'lavfi', '-i', 'testsrc2=size=160x90', '-frames:v', '1', '-y', jpg]);
  rejected(t, await probe(jpg), 'not_video');
  // A JPEG renamed .mp4 is still a picture.
  const disguised = join(dir, 'disguised.mp4');
  await writeFile(disguised, await readFile(jpg));
  rejected(t, await probe(disguised), 'not_video');

  // An HLS playlist (or ffconcat script) named .mp4 must not make ffprobe open what it lists.
  const playlist = join(dir, 'playlist.mp4');
  await writeFile(playlist, `#EXTM3U\n#EXT-X-TARGETDURATION:10\n#EXTINF:10,\nfile://${good}\n#EXT-X-ENDLIST\n`);
  rejected(t, await probe(playlist), 'malformed');
  const concat = join(dir, 'concat.mp4');
  await writeFile(concat, `ffconcat version 1.0\nfile '${good}'\n`);
  rejected(t, await probe(concat), 'malformed');

  rejected(t, await probe(good, { maxDurationS: 5 }), 'too_long');

  const thin = join(dir, 'thin.mp4');
  await runOk(TOOLS.ffmpeg, [
    '-v',
    'error',
    '-f',
    'lavfi',
    '-i',
    'testsrc2=size=8x90:rate=30:duration=1',
    '-c:v',
    'libx264',
    '-pix_fmt',
    'yuv420p',
    '-y',
    thin,
  ]);
  rejected(t, await probe(thin), 'bad_dimensions');
});

t.test(
  'hostile sources: too large a frame, too fast, too many pixel-seconds (tiny files, large decode work)',
  async (t) => {
    // 4112 px wide, 0.2 s: a few KB whose every frame is wider than the 4096 px limit.
    const wide = join(dir, 'wide.mp4');
    await runOk(TOOLS.ffmpeg, [
      '-v',
      'error',
      '-f',
      'lavfi',
      '-i',
      'color=size=4112x32:rate=30:duration=0.2',
      '-c:v',
      'libx264',
      '-preset',
      'ultrafast',
      '-pix_fmt',
      'yuv420p',
      '-y',
      wide,
    ]);
    rejected(t, await probe(wide), 'bad_dimensions');
    const fast = join(dir, 'fast.mp4');
    await runOk(TOOLS.ffmpeg, [
      '-v',
      'error',
      '-f',
      'lavfi',
      '-i',
      'testsrc2=size=160x90:rate=120:duration=1',
      '-c:v',
      'libx264',
      '-preset',
      'ultrafast',
      '-pix_fmt',
      'yuv420p',
      '-y',
      fast,
    ]);
    rejected(t, await probe(fast), 'bad_frame_rate');
    // 10 s of 160x90 is 144,000 pixel-seconds: refused under a lower cap, accepted under the default.
    rejected(t, await probe(good, { maxPixelSeconds: 100_000 }), 'too_large');
    t.equal((await probe(good)).ok, true);
    // The frame limits are by long and short side (portrait and landscape alike), inclusive.
    t.equal((await probe(good, { maxLongSide: 160, maxShortSide: 90 })).ok, true, 'exactly at the limits');
    rejected(t, await probe(good, { maxLongSide: 159 }), 'bad_dimensions');
  },
);
