/** The pure parts, without processes: plan, manifests and the strict HLS parser, WebVTT, moderation. */
import t from 'tap';
import { buildWebVtt, parsePocketsphinx, vttTime, wordsToCues } from '../src/captions.js';
import { HlsParseError, parseHls } from '../src/hls-parse.js';
import {
  buildDashMpd,
  buildHlsMaster,
  buildHlsVariant,
  buildSubtitlePlaylist,
  measuredBandwidth,
  type VariantInput,
} from '../src/manifest.js';
import { DEFAULT_RULES, moderate, termRule, type ModerationInput } from '../src/moderation.js';
import {
  LADDER,
  planTask,
  planTranscode,
  playbackIndexes,
  qualitiesFor,
  segmentJobs,
  sourceSegments,
} from '../src/plan.js';
import { thumbnailTimes } from '../src/thumbnails.js';

const info = (width: number, height: number, duration_s = 95) => ({
  duration_s,
  width,
  height,
  fps: 30,
  fps_rational: '30/1',
  has_audio: true,
});

t.test('the ladder never upscales, and the lowest tier always exists', async (t) => {
  t.same(
    qualitiesFor(1920, 1080).map((q) => `${q.name} ${q.width}x${q.height}`),
    ['144p 256x144', '240p 426x240', '360p 640x360', '720p 1280x720', '1080p 1920x1080'],
  );
  t.same(
    qualitiesFor(3840, 2160).map((q) => q.name),
    ['144p', '240p', '360p', '720p', '1080p'],
    '4K gets the five tiers, nothing above 1080p',
  );
  t.same(
    qualitiesFor(1280, 720).map((q) => q.name),
    ['144p', '240p', '360p', '720p'],
  );
  t.same(
    qualitiesFor(640, 480).map((q) => `${q.name} ${q.width}x${q.height}`),
    ['144p 192x144', '240p 320x240', '360p 480x360'],
    '4:3 keeps its aspect',
  );
  t.same(
    qualitiesFor(1080, 1920).map((q) => `${q.name} ${q.width}x${q.height}`),
    ['144p 144x256', '240p 240x426', '360p 360x640', '720p 720x1280', '1080p 1080x1920'],
    'portrait: tiers by the short side',
  );
  const tiny = qualitiesFor(160, 90);
  t.equal(tiny.length, 1, 'a source under 144p still gets the lowest tier');
  t.same([tiny[0]!.name, tiny[0]!.width, tiny[0]!.height], ['144p', 160, 90], '...at its own size, not enlarged');
  const odd = qualitiesFor(333, 201);
  t.ok(
    odd.every((q) => q.width % 2 === 0 && q.height % 2 === 0),
    'even sides for yuv420p',
  );
  for (const q of qualitiesFor(7680, 4320)) t.ok(q.max_video_kbps > q.video_kbps && q.audio_kbps > 0);
  t.equal(LADDER.length, 5);
});

t.test('30-s source segments, tasks per (segment, quality), lowest quality first', async (t) => {
  t.same(
    sourceSegments(95).map((s) => [s.start_s, s.duration_s, s.first_playback_index]),
    [
      [0, 30, 0],
      [30, 30, 5],
      [60, 30, 10],
      [90, 5, 15],
    ],
  );
  t.same(
    sourceSegments(60.3).map((s) => s.duration_s),
    [30, 30.3],
    'a sliver under 0.5 s joins the last segment',
  );
  t.same(
    sourceSegments(4).map((s) => s.duration_s),
    [4],
  );
  const plan = planTranscode(info(1280, 720));
  t.equal(plan.tasks.length, 4 * 4, '4 segments x 4 qualities');
  t.same(
    plan.tasks.slice(0, 5).map((x) => x.task_id),
    ['s0000-144p', 's0001-144p', 's0002-144p', 's0003-144p', 's0000-240p'],
  );
  t.equal(new Set(plan.tasks.map((x) => x.task_id)).size, plan.tasks.length, 'task ids are unique');
  t.same(planTranscode(info(1280, 720)), plan, 'the same input gives the same plan');
  t.same(playbackIndexes(plan.segments[0]!), [0, 1, 2, 3, 4]);
  t.same(playbackIndexes(plan.segments[3]!), [15], 'the 5-s tail is one playback segment');
  t.equal(
    planTranscode({ ...info(640, 360), fps: 119.88, fps_rational: '120000/1001' }).tasks[0]!.fps,
    '60',
    'frame rate capped at 60',
  );
  for (const task of plan.tasks)
    t.same(planTask(info(1280, 720), task.segment.index, task.quality.name), task, `planTask rebuilds ${task.task_id}`);
  t.equal(planTask(info(1280, 720), 4, '144p'), undefined, 'no fifth segment');
  t.equal(planTask(info(1280, 720), 0, '1080p'), undefined, 'no upscaled tier');
  t.equal(planTask({ ...info(640, 360), fps: 119.88, fps_rational: '120000/1001' }, 0, '144p')!.fps, '60');
  t.same(
    thumbnailTimes(200).map((x) => x.time_s),
    [20, 60, 100, 140, 180],
  );
  t.same(
    segmentJobs(plan).map((job) => job.map((x) => x.task_id).join('+')),
    [
      ...[0, 1, 2, 3].map((k) => `s000${k}-144p`),
      ...[0, 1, 2, 3].map((k) => `s000${k}-240p+s000${k}-360p+s000${k}-720p`),
    ],
    'jobs: the lowest quality of each segment alone first, then the other qualities of a segment together',
  );
  const small = planTranscode(info(200, 120));
  t.same(
    segmentJobs(small).map((job) => job.length),
    small.segments.map(() => 1),
    'one quality: one job a segment',
  );
});

const segs = (n: number, last = 6) =>
  Array.from({ length: n }, (_, i) => ({
    uri: `seg-${String(i).padStart(5, '0')}.m4s`,
    duration_s: i === n - 1 ? last : 6,
    size_bytes: 150_000 + i * 1000,
  }));
const variant = (quality: '144p' | '360p', w: number, h: number): VariantInput => ({
  quality,
  width: w,
  height: h,
  codecs: 'avc1.4D401E,mp4a.40.2',
  frame_rate: 30,
  playlist_uri: `${quality}/index.m3u8`,
  init_uri: 'init.mp4',
  segments: segs(4, 3.5),
});

t.test('HLS master and variant playlists parse strictly; bandwidth is measured from the segments', async (t) => {
  const master = buildHlsMaster({
    variants: [variant('360p', 640, 360), variant('144p', 256, 144)],
    subtitles: { playlist_uri: 'captions/en.m3u8', language: 'en', name: 'English (auto)' },
  });
  const m = parseHls(master);
  if (m.kind !== 'master') throw new Error('not a master');
  t.same(
    m.variants.map((v) => v.uri),
    ['144p/index.m3u8', '360p/index.m3u8'],
    'lowest first',
  );
  t.same(m.variants[0]!.resolution, { width: 256, height: 144 });
  t.equal(m.variants[0]!.codecs, 'avc1.4D401E,mp4a.40.2');
  t.equal(
    m.variants[0]!.bandwidth,
    Math.ceil((153_000 * 8) / 3.5),
    'BANDWIDTH: the peak segment rate (the short last segment here)',
  );
  t.equal(m.media[0]!.TYPE, 'SUBTITLES');
  const bw = measuredBandwidth(variant('144p', 256, 144));
  t.ok(bw.average < bw.peak);

  const media = parseHls(buildHlsVariant({ init_uri: 'init.mp4', segments: segs(4, 3.5) }));
  if (media.kind !== 'media') throw new Error('not media');
  t.equal(media.target_duration, 6);
  t.equal(media.map, 'init.mp4');
  t.same(
    media.segments.map((s) => s.duration_s),
    [6, 6, 6, 3.5],
  );
  t.ok(media.ended, '#EXT-X-ENDLIST');
  t.equal(media.playlist_type, 'VOD');
  const long = parseHls(
    buildHlsVariant({ init_uri: 'init.mp4', segments: [{ uri: 'a.m4s', duration_s: 6.6, size_bytes: 1 }] }),
  );
  t.equal(
    long.kind === 'media' && long.target_duration,
    7,
    'a segment rounding to 7 raises the target duration (RFC 8216 4.3.3.1)',
  );
  const subs = parseHls(buildSubtitlePlaylist({ vtt_uri: 'en.vtt', duration_s: 41.5 }));
  t.equal(subs.kind === 'media' && subs.segments[0]!.uri, 'en.vtt');
});

t.test('the strict parser refuses broken playlists', async (t) => {
  const good = buildHlsVariant({ init_uri: 'init.mp4', segments: segs(2) });
  const bad: Array<[string, string]> = [
    ['no header', good.replace('#EXTM3U\n', '')],
    ['segment over target', good.replace('#EXTINF:6.000000,', '#EXTINF:9.000000,')],
    ['EXTINF without URI', good.replace('seg-00001.m4s\n', '')],
    ['no target duration', good.replace(/#EXT-X-TARGETDURATION:6\n/, '')],
    ['content after ENDLIST', good + 'seg-9.m4s\n'],
    ['master tag in media', good.replace('#EXT-X-INDEPENDENT-SEGMENTS', '#EXT-X-STREAM-INF:BANDWIDTH=1')],
    [
      'bad attribute list',
      buildHlsMaster({ variants: [variant('144p', 256, 144)] }).replace('RESOLUTION=256x144', 'RESOLUTION=256 x 144'),
    ],
    [
      'missing BANDWIDTH',
      buildHlsMaster({ variants: [variant('144p', 256, 144)] }).replace(/BANDWIDTH=\d+,AVERAGE-/, 'AVERAGE-'),
    ],
    [
      'undeclared subtitles group',
      buildHlsMaster({ variants: [variant('144p', 256, 144)] }).replace(
        'FRAME-RATE=30.000',
        'FRAME-RATE=30.000,SUBTITLES="x"',
      ),
    ],
    ['CRLF', good.replace(/\n/g, '\r\n')],
  ];
  for (const [name, text] of bad) t.throws(() => parseHls(text), HlsParseError, name);
});

t.test('the DASH MPD lists the same segment files on a timeline', async (t) => {
  const mpd = buildDashMpd({
    duration_s: 21.5,
    variants: [
      { ...variant('144p', 256, 144), init_uri: '144p/init.mp4', media_template: '144p/seg-$Number%05d$.m4s' },
    ],
    subtitles: { vtt_uri: 'captions/en.vtt', language: 'en' },
  });
  t.match(mpd, /type="static"/);
  t.match(mpd, /mediaPresentationDuration="PT21\.500S"/);
  t.match(mpd, /<S t="0" d="6000" r="2" \/>\n\s*<S t="18000" d="3500" \/>/, 'three 6-s segments then the 3.5-s tail');
  t.match(mpd, /initialization="144p\/init.mp4" media="144p\/seg-\$Number%05d\$.m4s"/);
  t.match(mpd, /codecs="avc1.4D401E,mp4a.40.2"/);
  t.match(mpd, /mimeType="text\/vtt"/);
  t.equal((mpd.match(/<Representation /g) ?? []).length, 2);
});

t.test('pocketsphinx output into WebVTT cues', async (t) => {
  const out = [
    'hello world',
    '<s> 0.000 0.100 1.0',
    'hello 0.110 0.500 0.9',
    '<sil> 0.5 0.6 1.0',
    'world(2) 0.600 1.000 0.8',
    '[NOISE] 1.0 1.2 1.0',
    'again 2.500 2.900 0.7',
    '</s> 3.0 3.1 1.0',
  ].join('\n');
  const words = parsePocketsphinx(out);
  t.same(
    words.map((w) => w.word),
    ['hello', 'world', 'again'],
    'fillers dropped, alternates normalised',
  );
  const cues = wordsToCues(words);
  t.same(
    cues.map((c) => c.text),
    ['hello world', 'again'],
    'a pause over 0.7 s starts a cue',
  );
  const vtt = buildWebVtt([...cues, { start_s: 3601.5, end_s: 3602, text: '<b>&' }]);
  t.match(vtt, /^WEBVTT\n/);
  t.match(vtt, /00:00:00\.110 --> 00:00:01\.000\nhello world/);
  t.match(vtt, /&lt;b&gt;&amp;/, 'cue text escaped');
  t.equal(vttTime(3661.007), '01:01:01.007');
});

t.test('moderation: default rules and custom rules', async (t) => {
  const base: ModerationInput = {
    probe: { duration_s: 60, width: 640, height: 360, has_audio: true },
    title: 'My garden',
    description: 'tomatoes',
    tags: ['garden'],
    caption_text: 'hello world',
  };
  t.same(moderate(base), { decision: 'ok', reasons: [] });
  t.equal(
    moderate({ ...base, caption_text: 'today we sell stolen credit cards cheap' }).decision,
    'take_down',
    'take-down term in the captions',
  );
  const spam = moderate({ ...base, description: 'FREE money inside' });
  t.equal(spam.decision, 'flag');
  t.equal(spam.reasons[0]!.rule, 'spam-terms');
  t.equal(moderate({ ...base, title: 'WATCH THIS NOW EVERYONE' }).decision, 'flag', 'shouting title');
  t.equal(moderate({ ...base, probe: { ...base.probe, duration_s: 0.4 } }).decision, 'flag', 'under a second');
  t.equal(moderate({ ...base, title: 'freemoney' }).decision, 'ok', 'terms match whole words only');
  const both = moderate({ ...base, title: 'FREE MONEY FOR EVERYONE', caption_text: 'terrorist recruitment' });
  t.same(
    both.reasons.map((r) => r.decision),
    ['take_down', 'flag', 'flag'],
    'most severe first',
  );
  const custom = moderate(base, [...DEFAULT_RULES, termRule('local', ['tomatoes'], 'flag', ['metadata'])]);
  t.equal(custom.decision, 'flag', 'a deployment adds its own rule');
});
