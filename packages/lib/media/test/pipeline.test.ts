/**
 * The whole pipeline on one real 34-s 426x240 video with synthesised speech: probe, plan, segment tasks on a pool
 * of ffmpeg processes, determinism, 6-s segments, manifests read back by a strict parser and by ffmpeg end to end,
 * thumbnails, captions. One source for every case, made once.
 */
import t from 'tap';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { makeCaptions } from '../src/captions.js';
import { run, runOk, TOOLS } from '../src/exec.js';
import { parseHls } from '../src/hls-parse.js';
import { buildManifestSet, LAYOUT } from '../src/layout.js';
import { moderate } from '../src/moderation.js';
import { planTranscode, type TranscodeTask } from '../src/plan.js';
import { runPool } from '../src/pool.js';
import { probe, type ProbeInfo } from '../src/probe.js';
import { makeThumbnails } from '../src/thumbnails.js';
import { segmentArgs, transcodeSegment, transcodeTask, type TaskOutput } from '../src/transcode.js';
import { makeTestVideo } from '../src/testvideo.js';

const dir = await mkdtemp(join(tmpdir(), 'media-pipeline-'));
t.teardown(() => rm(dir, { recursive: true, force: true }));
const source = join(dir, 'source.mp4');
const SPOKEN =
  'The quick brown fox jumped over the lazy dog. Hello world, this is a test of the video service. We are recording a short message about the weather and the garden.';
await makeTestVideo({ path: source, duration_s: 34, width: 426, height: 240, speech_text: SPOKEN });
const probed = await probe(source);
if (!probed.ok) throw new Error(`test source refused: ${probed.message}`);
const info: ProbeInfo = probed.info;
const plan = planTranscode(info);
const out = join(dir, 'out');
const outputs: TaskOutput[] = await runPool(plan.tasks, 2, (task) =>
  transcodeTask(source, task, join(out, task.quality.name)),
);
// Recognition loads a 30 MB model and reads the whole audio: done once, checked in two cases.
const captions = await makeCaptions(source, true);
const FRAMES = 34 * 30;

async function frames(input: string, map: string): Promise<number> {
  const r = await runOk(TOOLS.ffmpeg, ['-nostdin', '-v', 'error', '-i', input, '-map', map, '-f', 'framecrc', '-'], {
    timeoutMs: 120_000,
  });
  return r.stdout
    .toString('utf8')
    .split('\n')
    .filter((l) => /^\d+,/.test(l)).length;
}

t.test('plan: two tiers for a 240p source, two 30-s segments each', async (t) => {
  t.same(
    plan.qualities.map((q) => `${q.name} ${q.width}x${q.height}`),
    ['144p 256x144', '240p 426x240'],
  );
  t.same(
    plan.tasks.map((x) => x.task_id),
    ['s0000-144p', 's0001-144p', 's0000-240p', 's0001-240p'],
  );
  t.equal(outputs.length, 4);
});

t.test('each task gives 6-s playback segments on the video timeline, one shared init per quality', async (t) => {
  for (const q of plan.qualities) {
    const mine = outputs.filter((o) => o.quality === q.name);
    t.equal(new Set(mine.map((o) => o.init.sha256)).size, 1, `${q.name}: every task wrote the same init segment`);
    t.match(mine[0]!.codecs, /^avc1\.4D40[0-9A-F]{2},mp4a\.40\.2$/, `${q.name}: codecs ${mine[0]!.codecs}`);
    const segs = mine.flatMap((o) => o.segments).sort((a, b) => a.index - b.index);
    t.same(
      segs.map((s) => s.index),
      [0, 1, 2, 3, 4, 5],
    );
    segs
      .slice(0, -1)
      .forEach((s) => t.ok(Math.abs(s.duration_s - 6) < 0.05, `${q.name} #${s.index} lasts ${s.duration_s} s`));
    t.ok(Math.abs(segs[5]!.duration_s - 4) < 0.05, `the tail lasts ${segs[5]!.duration_s} s`);
    segs.forEach((s, i) => t.ok(Math.abs(s.start_s - 6 * i) < 0.05, `#${s.index} starts at ${s.start_s} s`));
  }
  // A segment of the second task plays on its own after the init: it starts with a keyframe at 30 s.
  const o = outputs.find((x) => x.task_id === 's0001-240p')!;
  const joined = join(dir, 'one.mp4');
  await writeFile(joined, Buffer.concat([await readFile(o.init.path), await readFile(o.segments[0]!.path)]));
  const r = await runOk(TOOLS.ffprobe, [
    '-v',
    'error',
    '-select_streams',
    'v:0',
    '-show_entries',
    'frame=key_frame,pts_time',
    '-read_intervals',
    '%+#1',
    '-of',
    'csv=p=0',
    joined,
  ]);
  const [key, pts] = r.stdout.toString('utf8').trim().split('\n')[0]!.split(',');
  t.equal(key, '1', 'first frame is a keyframe');
  t.ok(Math.abs(Number(pts) - 30) < 0.2, `first frame at ${pts} s`);
});

t.test('the same task twice gives the same bytes', async (t) => {
  const task: TranscodeTask = plan.tasks.find((x) => x.task_id === 's0001-144p')!;
  const again = await transcodeTask(source, task, join(dir, 'again'));
  const first = outputs.find((x) => x.task_id === task.task_id)!;
  t.equal(again.init.sha256, first.init.sha256, 'init segment');
  t.same(
    again.segments.map((s) => s.sha256),
    first.segments.map((s) => s.sha256),
    'every playback segment',
  );
  t.same(await readFile(again.segments[0]!.path), await readFile(first.segments[0]!.path), 'byte for byte');
});

t.test('every quality of a segment from one ffmpeg process gives the bytes of one task per quality', async (t) => {
  const tasks = plan.tasks.filter((x) => x.segment.index === 1);
  t.equal(tasks.length, 2, 'both qualities of the short last segment');
  t.match(
    segmentArgs(source, tasks, ['a.mp4', 'b.mp4']).join(' '),
    /-filter_complex \[0:v:0\]split=2/,
    'one decode, split',
  );
  const together = await transcodeSegment(
    source,
    tasks,
    tasks.map((x) => join(dir, 'together', x.quality.name)),
  );
  for (const o of together) {
    const alone = outputs.find((x) => x.task_id === o.task_id)!;
    t.equal(o.init.sha256, alone.init.sha256, `${o.task_id}: init segment`);
    t.same(
      o.segments.map((s) => [s.file, s.sha256, s.start_s]),
      alone.segments.map((s) => [s.file, s.sha256, s.start_s]),
      `${o.task_id}: every playback segment`,
    );
  }
  t.throws(() => segmentArgs(source, [plan.tasks[0]!, tasks[0]!], ['a.mp4', 'b.mp4']), /not of the segment/);
});

t.test('manifests: strict HLS parse, ffmpeg plays the master and the MPD end to end', async (t) => {
  const input = {
    duration_s: info.duration_s,
    frame_rate: info.fps,
    captions: true,
    qualities: plan.qualities.map((q) => {
      const mine = outputs.filter((o) => o.quality === q.name);
      return {
        quality: q.name,
        width: q.width,
        height: q.height,
        codecs: mine[0]!.codecs,
        segments: mine.flatMap((o) => o.segments),
      };
    }),
  };
  const set = buildManifestSet(input);
  for (const [path, text] of set) {
    await mkdir(dirname(join(out, path)), { recursive: true });
    await writeFile(join(out, path), text);
  }
  await writeFile(join(out, LAYOUT.captionsVtt), captions.vtt);
  // ffmpeg's DASH reader cannot load a WebVTT sidecar AdaptationSet (it wants media segments), so it reads the
  // same MPD built without captions; the browser test plays the full one.
  // Its reader also mixes up the streams of a second muxed Representation, so each quality gets an MPD of its own.
  for (const q of input.qualities) {
    await writeFile(
      join(out, `${q.quality}-only.mpd`),
      buildManifestSet({ ...input, captions: false, qualities: [q] }).get(LAYOUT.mpd)!,
    );
  }

  const master = parseHls(set.get(LAYOUT.master)!);
  if (master.kind !== 'master') throw new Error('master expected');
  t.same(
    master.variants.map((v) => `${v.resolution?.width}x${v.resolution?.height}`),
    ['256x144', '426x240'],
  );
  t.ok(
    master.variants.every((v) => v.bandwidth > 100_000 && v.codecs?.includes('mp4a')),
    'BANDWIDTH and CODECS on each variant',
  );
  t.ok(master.variants[0]!.bandwidth < master.variants[1]!.bandwidth, 'the lower tier needs less bandwidth');
  for (const q of plan.qualities) {
    const media = parseHls(set.get(LAYOUT.variant(q.name))!);
    t.ok(
      media.kind === 'media' && media.target_duration === 6 && media.segments.length === 6 && media.ended,
      `${q.name} variant playlist`,
    );
  }
  // ffmpeg follows the master into each variant, the init segment and all six segments: 34 s at 30 fps.
  t.equal(await frames(join(out, LAYOUT.master), '0:v:0'), FRAMES, 'HLS: every frame of the first variant decodes');
  t.equal(await frames(join(out, LAYOUT.master), '0:v:1'), FRAMES, 'HLS: every frame of the second variant decodes');
  const audio = await frames(join(out, LAYOUT.master), '0:a:0');
  t.ok(Math.abs(audio - (34 * 48000) / 1024) < 50, `HLS: audio decodes (${audio} AAC frames)`);
  for (const q of input.qualities) {
    t.equal(
      await frames(join(out, `${q.quality}-only.mpd`), '0:v:0'),
      FRAMES,
      `DASH ${q.quality}: the same segments through an MPD`,
    );
  }
  const mpd = set.get(LAYOUT.mpd)!;
  t.match(mpd, /media="240p\/seg-\$Number%05d\$.m4s"/);
  t.match(mpd, /<S t="0" d="6000" r="4" \/>\n\s*<S t="30000" d="4000" \/>/);
  t.match(mpd, /<BaseURL>captions\/en.vtt<\/BaseURL>/);
});

t.test('five thumbnails at 10..90 %', async (t) => {
  const thumbs = await makeThumbnails(source, info.duration_s, join(out, 'thumbs'));
  t.same(
    thumbs.map((x) => x.percent),
    [10, 30, 50, 70, 90],
  );
  t.same(
    thumbs.map((x) => x.time_s),
    [3.4, 10.2, 17, 23.8, 30.6],
  );
  const hashes = new Set<string>();
  for (const th of thumbs) {
    const r = await runOk(TOOLS.ffprobe, [
      '-v',
      'error',
      '-show_entries',
      'stream=codec_name,width,height',
      '-of',
      'csv=p=0',
      th.path,
    ]);
    t.equal(r.stdout.toString('utf8').trim(), 'mjpeg,426,240', `${th.file} is a 426x240 JPEG`);
    hashes.add((await readFile(th.path)).toString('base64'));
  }
  t.equal(hashes.size, 5, 'five different frames');
});

t.test('captions: the recognised words overlap the spoken ones', async (t) => {
  const spoken = new Set(SPOKEN.toLowerCase().match(/[a-z]+/g));
  const heard = new Set(captions.words.map((w) => w.word.toLowerCase()));
  const overlap = [...spoken].filter((w) => heard.has(w));
  t.ok(
    overlap.length / spoken.size >= 0.5,
    `${overlap.length}/${spoken.size} spoken words recognised: "${captions.text}"`,
  );
  t.match(captions.vtt, /^WEBVTT\n/);
  t.match(captions.vtt, /\n00:00:0\d\.\d{3} --> 00:00:\d\d\.\d{3}\n/, 'cues with timestamps');
  t.ok(
    captions.words.every((w) => w.end_s <= 12),
    'no words in the silence after the sentence',
  );
  t.equal(
    moderate({ probe: info, title: 'weather', description: '', tags: [], caption_text: captions.text }).decision,
    'ok',
  );
  const none = await makeCaptions(source, false);
  t.equal(none.vtt.trim(), 'WEBVTT\nKind: captions\nLanguage: en', 'no audio: an empty caption file');
});

t.test("a task on a source that vanished fails with ffmpeg's own words", async (t) => {
  const task = plan.tasks[0]!;
  await t.rejects(transcodeTask(join(dir, 'gone.mp4'), task, join(dir, 'gone')), /ffmpeg failed.*No such file/);
  const r = await run(TOOLS.ffmpeg, ['-v', 'error', '-i', join(dir, 'gone.mp4')]);
  t.not(r.code, 0);
});
