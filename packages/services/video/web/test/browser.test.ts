// The player page in Debian's chromium (playwright-core) on the real service: `cluster up --service video` (one
// member, object store, regional cache and an edge, app tier, pipeline, 2 transcoders); a 12-s test video with
// speech made by @raftkit/media is uploaded in chunks by its signed URL and finalized, and the pipeline transcodes
// it (144p and 240p, 6-s fMP4 segments, HLS master and DASH .mpd with captions, thumbnails, speech-to-text). The
// page comes from the app tier; its media from the edge. HLS (hls.js) and DASH (Shaka) each play for several
// seconds, switch quality and show captions; the screenshots of the video are checked by their pixels; choosing a
// poster goes through the real API. The same page served by the edge (the one URL a viewer is given) plays too,
// its API calls answered by that edge (src/workers/delivery/api-proxy.ts).
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import type { Browser, Page } from 'playwright-core';
import { deriveClientToken } from '@raftkit/http';
import { makeTestVideo } from '@raftkit/media';
import { call, startCluster, until, type TestCluster } from '@raftkit/testkit';
import { decodePng, launchChromium } from '@raftkit/testkit/browser';
import { VideoClient } from '@raftkit/video';

const WAIT = 90_000;
const SHOTS = join(process.cwd(), 'jepsen-out', 'browser');

let dir: string;
let cluster: TestCluster;
let browser: Browser;
let app: string;
let uploader: string;
let videoId: string;

interface VideoBody {
  video_id: string;
  status: string;
  failure: unknown;
  poster_url: string | null;
  thumbnails: string[];
  captions_url: string | null;
  qualities: Array<{ name: string; ready: boolean }>;
}

const video = async (): Promise<VideoBody> =>
  (await call(app, 'GET', `/api/videos/${videoId}`, { token: uploader })).body as unknown as VideoBody;

/** Uploads `bytes` through VideoClient: chunks to the store by the signed URL, then finalize (the app tier never carries the bytes). */
async function upload(bytes: Buffer): Promise<string> {
  const client = new VideoClient({ endpoints: [app], token: uploader });
  try {
    return (await client.upload(bytes, { user_id: 'ann', title: 'Browser test video', idempotency_key: 'browser-1' }))
      .video_id;
  } finally {
    await client.close();
  }
}

t.before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'video-browser-test-'));
  const source = join(dir, 'source.mp4');
  const t0 = Date.now();
  const since = (): string => `${((Date.now() - t0) / 1000).toFixed(1)} s`;
  // One member: this file is about the page and the delivery path, not replication (the service's own tests run 3).
  // Both settled before going on: a cluster that started while the source failed (flite missing) is still stopped.
  const [started, made] = await Promise.allSettled([
    startCluster('video', { nodes: 1, workers: 'edge=1,transcoder=2' }),
    makeTestVideo({ path: source, duration_s: 12, width: 426, height: 240, audio: 'speech', loop_speech: true }),
  ]);
  if (started.status === 'fulfilled') cluster = started.value;
  if (started.status === 'rejected') throw started.reason;
  if (made.status === 'rejected') throw made.reason;
  app = cluster.role('app')[0]!.url;
  uploader = deriveClientToken(cluster.token, 'ann');
  await until(
    'the video service answers',
    async () => (await call(app, 'GET', '/api/users/ann/library', { token: uploader })).status === 200,
    WAIT,
    250,
  );
  t.comment(`cluster up and the source made after ${since()}`);
  videoId = await upload(readFileSync(source));
  await until(
    'playable in every quality, with thumbnails and captions',
    async () => {
      const v = await video();
      if (v.status === 'failed') throw new Error(`failed: ${JSON.stringify(v.failure)}`);
      return v.status === 'playable' &&
        v.qualities.length > 0 &&
        v.qualities.every((q) => q.ready) &&
        v.thumbnails.length === 5 &&
        v.captions_url !== null
        ? v
        : null;
    },
    240_000,
    500,
  );
  t.comment(`playable with thumbnails and captions after ${since()}`);
  browser = await launchChromium();
});

t.teardown(async () => {
  await browser?.close();
  await cluster?.down();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

interface PageState {
  time: number;
  paused: boolean;
  errors: string[];
  levels: Array<{ index: number; height: number }>;
  playing: number;
  track: { mode: string; cues: number; active: string[] } | null;
}

const state = (p: Page): Promise<PageState> =>
  p.evaluate(() => {
    const w = window as unknown as {
      videoPage: { errors: string[]; levels(): Array<{ index: number; height: number }>; playingHeight(): number };
    };
    const v = document.getElementById('player') as HTMLVideoElement;
    // The captions: whichever text track shows (the player's own from the manifest, or the page's <track>).
    const tt = [...v.textTracks].find((x) => x.mode === 'showing') ?? v.textTracks[0];
    return {
      time: v.currentTime,
      paused: v.paused,
      errors: [...w.videoPage.errors],
      levels: w.videoPage.levels(),
      playing: w.videoPage.playingHeight(),
      track: tt
        ? {
            mode: tt.mode,
            cues: tt.cues?.length ?? 0,
            active: [...(tt.activeCues ?? [])].map((c) => (c as VTTCue).text),
          }
        : null,
    };
  });

/** Pixel figures of a PNG, decoded by the browser: how many pixels are not near-black and how many colours. */
async function pixels(p: Page, png: Buffer): Promise<{ width: number; height: number; lit: number; colours: number }> {
  const { width, height, rgba } = await decodePng(p, png);
  let lit = 0;
  const colours = new Set<number>();
  for (let i = 0; i < rgba.length; i += 4) {
    const [r, g, b] = [rgba[i]!, rgba[i + 1]!, rgba[i + 2]!];
    if (r + g + b > 90) lit++;
    if (colours.size < 5000) colours.add(((r >> 3) << 10) | ((g >> 3) << 5) | (b >> 3));
  }
  return { width, height, lit, colours: colours.size };
}

async function playsAndSwitches(t: Test, format: 'hls' | 'dash'): Promise<Page> {
  const page = await browser.newPage({ viewport: { width: 1000, height: 900 } });
  const pageErrors: string[] = [];
  page.on('pageerror', (e) => pageErrors.push(e.message));
  await page.goto(`${app}/watch/${videoId}?format=${format}&token=${encodeURIComponent(uploader)}`);
  await page.waitForSelector('#status[data-state="ready"], #status[data-state="error"]', { timeout: WAIT });
  t.equal(
    await page.getAttribute('#status', 'data-state'),
    'ready',
    `${format}: the page is ready (${await page.textContent('#status')})`,
  );
  t.equal(await page.textContent('#title'), 'Browser test video', 'the title from the video record');

  let last: PageState | null = null;
  await until(
    `${format} plays past 4 s`,
    async () => {
      last = await state(page);
      if (last.errors.length > 0) throw new Error(last.errors.join('; '));
      return last.time > 4 ? last : null;
    },
    WAIT,
  ).catch((e: Error) => {
    throw new Error(`${e.message}; state ${JSON.stringify(last)}`);
  });
  const playing = await state(page);
  t.same(playing.errors, [], `${format}: no player error`);
  t.same(pageErrors, [], `${format}: no page error`);
  const heights = playing.levels.map((l) => l.height).sort((a, b) => a - b);
  // On a mismatch, the player's own view of its variants says why (Shaka drops variants it bans, for one).
  const raw =
    heights.join() === '144,240'
      ? ''
      : ` (the player's variants: ${await page.evaluate(() => JSON.stringify((window as unknown as { videoPage: { raw(): unknown } }).videoPage.raw()).slice(0, 1500))})`;
  t.same(heights, [144, 240], `${format}: both qualities (144p, 240p) in the menu${raw}`);
  t.equal(await page.locator('#quality option').count(), 3, 'Auto and two levels in the menu');

  // The picture: the video element's pixels are lit and varied (testsrc2 is colourful; a blank video is black).
  const shot = await page.locator('#player').screenshot();
  mkdirSync(SHOTS, { recursive: true });
  writeFileSync(join(SHOTS, `video-${format}.png`), shot);
  const px = await pixels(page, shot);
  t.ok(
    px.lit > px.width * px.height * 0.3,
    `${format}: the video area is not blank (${px.lit} of ${px.width * px.height} pixels lit)`,
  );
  t.ok(px.colours > 100, `${format}: the picture has many colours (${px.colours})`);

  // Captions: the .vtt track is showing with a cue active now.
  t.equal(playing.track?.mode, 'showing', `${format}: the captions track is showing`);
  t.ok((playing.track?.cues ?? 0) >= 2, `${format}: the captions loaded (${playing.track?.cues} cues)`);
  await until(`${format} shows a caption`, async () => ((await state(page)).track?.active.length ? true : null), WAIT);

  // Quality: pin 144p, then 240p; the player switches and keeps playing.
  for (const height of [144, 240]) {
    const level = playing.levels.find((l) => l.height === height)!;
    await page.selectOption('#quality', String(level.index));
    const before = (await state(page)).time;
    await until(
      `${format} switches to ${height}p and plays on`,
      async () => {
        const s = await state(page);
        if (s.errors.length > 0) throw new Error(s.errors.join('; '));
        return s.playing === height && s.time > before + 0.5 ? true : null;
      },
      WAIT,
    );
    t.pass(`${format}: switched to ${height}p`);
  }
  return page;
}

t.test('HLS through hls.js: plays, qualities, captions, thumbnails and choosing a poster', async (t) => {
  const page = await playsAndSwitches(t, 'hls');
  t.equal(await page.locator('#thumbs img').count(), 5, 'five thumbnails');
  await until(
    'thumbnails loaded',
    async () =>
      (await page.evaluate(() =>
        [...document.querySelectorAll<HTMLImageElement>('#thumbs img')].every((i) => i.complete && i.naturalWidth > 0),
      ))
        ? true
        : null,
    WAIT,
  );
  t.equal(await page.getAttribute('#thumbs img.poster', 'alt'), 'thumbnail 3', 'the 50% frame is the default poster');
  await page.click('#thumbs button.choose[data-index="4"]');
  await page.waitForSelector('#poster-status[data-state="saved"], #poster-status[data-state="error"]', {
    timeout: WAIT,
  });
  t.equal(
    await page.getAttribute('#poster-status', 'data-state'),
    'saved',
    `the poster call succeeded (${await page.textContent('#poster-status')})`,
  );
  const v = await video();
  t.equal(v.poster_url, v.thumbnails[4], 'the app tier now names the fifth thumbnail as the poster');
  t.equal(await page.getAttribute('#thumbs img.poster', 'alt'), 'thumbnail 5', 'the chosen thumbnail is marked');
  t.equal(
    await page.evaluate(() => (document.getElementById('player') as HTMLVideoElement).poster),
    v.thumbnails[4],
    'and the player shows it',
  );
  await page.close();
});

t.test('DASH through Shaka Player: plays, qualities, captions', async (t) => {
  const page = await playsAndSwitches(t, 'dash');
  await page.close();
});

t.test('the operator pre-populates the video at every edge through the app tier', async (t) => {
  const answer = await call(app, 'POST', `/api/videos/${videoId}/prefill`, {
    token: cluster.token,
    timeoutMs: 120_000,
  });
  t.equal(answer.status, 200, JSON.stringify(answer.body).slice(0, 300));
  // master, 2 variants, 2 init sections, 2x2 segments, subtitle playlist, .mpd, 5 thumbnails, .vtt
  t.ok(Number(answer.body['keys']) >= 17, `the regional tier warmed ${answer.body['keys']} objects`);
  t.same(answer.body['failed'], [], 'none failed');
  const edges = answer.body['downstream'] as Array<{ id: string; keys: number; failed: unknown[] }>;
  t.equal(edges.length, 1);
  t.equal(edges[0]!.keys, answer.body['keys'], 'the edge got the same list');
  t.same(edges[0]!.failed, []);
  t.equal(
    (await call(app, 'POST', `/api/videos/${videoId}/prefill`, { token: uploader })).status,
    403,
    'an uploader cannot',
  );
  t.equal((await call(app, 'POST', '/api/videos/nosuchvideo/prefill', { token: cluster.token })).status, 404);
});

t.test('one URL on an edge: the page an edge serves plays, its API calls answered by that edge', async (t) => {
  const edge = cluster.role('edge')[0]!.url;
  const page = await browser.newPage({ viewport: { width: 1000, height: 900 } });
  const pageErrors: string[] = [];
  const failed: string[] = [];
  page.on('pageerror', (e) => pageErrors.push(e.message));
  // The page's own calls (a player may abort a media fetch it no longer needs: not counted).
  page.on('requestfailed', (r) => {
    if (!new URL(r.url()).pathname.startsWith('/media/')) failed.push(`${r.url()}: ${r.failure()?.errorText}`);
  });
  const apiOrigins = new Set<string>();
  page.on('request', (r) => {
    if (new URL(r.url()).pathname.startsWith('/api/')) apiOrigins.add(new URL(r.url()).origin);
  });
  await page.goto(`${edge}/watch/${videoId}?token=${encodeURIComponent(uploader)}`);
  await page.waitForSelector('#status[data-state="ready"], #status[data-state="error"]', { timeout: WAIT });
  t.equal(await page.getAttribute('#status', 'data-state'), 'ready', `ready (${await page.textContent('#status')})`);
  t.equal(await page.textContent('#title'), 'Browser test video', 'the title, through the edge');
  t.same([...apiOrigins], [new URL(edge).origin], 'every API call went to the edge the page came from');
  await until(
    'it plays past 3 s',
    async () => {
      const s = await state(page);
      if (s.errors.length > 0) throw new Error(s.errors.join('; '));
      return s.time > 3 ? true : null;
    },
    WAIT,
  );
  await until(
    'five thumbnails loaded',
    async () =>
      (await page.evaluate(() => {
        const imgs = [...document.querySelectorAll<HTMLImageElement>('#thumbs img')];
        return imgs.length === 5 && imgs.every((i) => i.complete && i.naturalWidth > 0);
      }))
        ? true
        : null,
    WAIT,
  );
  t.same(pageErrors, [], 'no page error');
  t.same(failed, [], 'no failed API or page request');
  // The relay is the page's three calls only, and the token is still the app tier's to check.
  t.equal(
    (await call(edge, 'GET', `/api/videos/${videoId}`, {})).status,
    401,
    'no token: the app tier refuses it through the edge',
  );
  t.equal(
    (await call(edge, 'GET', '/api/users/ann/library', { token: uploader })).status,
    404,
    'the rest of the API is not on the edge',
  );
  await page.close();
});

t.test('the page of a video that does not exist says so', async (t) => {
  const page = await browser.newPage();
  await page.goto(`${app}/watch/nosuchvideo?token=${encodeURIComponent(uploader)}`);
  await page.waitForSelector('#status[data-state="error"]', { timeout: WAIT });
  t.match(await page.textContent('#status'), /no video nosuchvideo/);
  await page.close();
});
