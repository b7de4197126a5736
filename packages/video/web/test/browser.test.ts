// The player page in Debian's chromium (playwright-core): a test video made here with ffmpeg (testsrc2 and a tone,
// two H.264 qualities and AAC in fMP4, one set of segments described by an HLS master and a DASH .mpd, five
// thumbnails, a .vtt) sits in an origin; a regional cache and an edge (real processes) serve it, the edge serves
// the page. HLS (hls.js) and DASH (Shaka) each play for several seconds, switch quality and show captions; the
// screenshots of the video are checked by their pixels. The app tier's two reads (the video record, /playback)
// and the poster call come from a small HTTP server here until the real app tier serves them.
import { execFile } from 'node:child_process';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import t, { type Test } from 'tap';
import type { Browser, Page } from 'playwright-core';
import { freePort, reservePorts, until, type PortRange } from '@raftkit/testkit';
import { launchChromium } from '@raftkit/testkit/browser';
import { spawnTier, type TierChild } from '@raftkit/video/delivery';

const run = promisify(execFile);
const TOKEN = 'video-browser-test-token';
const VIDEO = 'vbrowser1';
const PREFIX = `videos/${VIDEO}/r1`;
const WAIT = 90_000;
const SHOTS = join(process.cwd(), 'jepsen-out', 'browser');

let ports: PortRange;
let dir: string;
let browser: Browser;
const servers: Server[] = [];
const tiers: TierChild[] = [];
let edge: TierChild;
let appUrl = '';
const posterCalls: Array<{ auth: string | undefined; body: string }> = [];

async function listen(handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<string> {
  const port = await freePort();
  const server = createServer(handler);
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  servers.push(server);
  return `http://127.0.0.1:${port}`;
}

/** A small test video: 18 s, 144p and 360p H.264 + AAC, 6-s fMP4 segments under one HLS master and one .mpd. */
async function makeVideo(out: string): Promise<void> {
  mkdirSync(out, { recursive: true });
  const src = ['-f', 'lavfi', '-i', 'testsrc2=size=640x360:rate=24:duration=18', '-f', 'lavfi', '-i', 'sine=frequency=440:duration=18'];
  await run('ffmpeg', [
    '-hide_banner', '-loglevel', 'error', '-y', ...src,
    '-map', '0:v', '-map', '0:v', '-map', '1:a',
    '-c:v', 'libx264', '-preset', 'ultrafast', '-g', '48', '-keyint_min', '48', '-sc_threshold', '0', '-pix_fmt', 'yuv420p',
    '-filter:v:0', 'scale=-2:144', '-b:v:0', '150k', '-filter:v:1', 'scale=-2:360', '-b:v:1', '600k',
    '-c:a', 'aac', '-b:a', '64k',
    '-f', 'dash', '-seg_duration', '6', '-use_template', '1', '-use_timeline', '0', '-hls_playlist', '1',
    '-adaptation_sets', 'id=0,streams=v id=1,streams=a',
    '-init_seg_name', 'init-$RepresentationID$.m4s', '-media_seg_name', 'chunk-$RepresentationID$-$Number%05d$.m4s',
    join(out, 'manifest.mpd'),
  ]);
  for (const [i, pct] of [10, 30, 50, 70, 90].entries()) {
    await run('ffmpeg', ['-hide_banner', '-loglevel', 'error', '-y', '-ss', String((18 * pct) / 100), ...src.slice(0, 4), '-frames:v', '1', '-vf', 'scale=320:-2', join(out, `thumb_${i + 1}.jpg`)]);
  }
  writeFileSync(join(out, 'captions.vtt'), 'WEBVTT\n\n00:00:00.000 --> 00:00:09.000\nHello from the captions track\n\n00:00:09.000 --> 00:00:18.000\nSecond caption line\n');
}

t.before(async () => {
  ports = await reservePorts();
  dir = mkdtempSync(join(tmpdir(), 'video-browser-test-'));
  const files = join(dir, 'origin');
  await makeVideo(files);
  // The origin: GET /objects/<key> of the files above, cluster token only (as the object store).
  const originUrl = await listen((req, res) => {
    const key = decodeURIComponent((req.url ?? '').replace(/^\/objects\//, ''));
    const name = key.startsWith(`${PREFIX}/`) ? key.slice(PREFIX.length + 1) : '';
    if (req.headers.authorization !== `Bearer ${TOKEN}`) return void res.writeHead(401).end();
    if (!/^[A-Za-z0-9_.-]+$/.test(name) || !existsSync(join(files, name))) return void res.writeHead(404).end();
    res.writeHead(200).end(readFileSync(join(files, name)));
  });
  const edgePort = ports.base + 42;
  const regional = await spawnTier({ id: 'regional1', kind: 'regional', httpAddress: `127.0.0.1:${ports.base + 41}`, dataDir: join(dir, 'regional1'), token: TOKEN, upstreamUrl: `${originUrl}/objects`, downstream: [{ id: 'edge1', url: `http://127.0.0.1:${edgePort}` }] });
  tiers.push(regional);
  edge = await spawnTier({ id: 'edge1', kind: 'edge', httpAddress: `127.0.0.1:${edgePort}`, dataDir: join(dir, 'edge1'), token: TOKEN, upstreamUrl: `${regional.url}/media` });
  tiers.push(edge);
  const media = `${edge.url}/media/${PREFIX}`;
  const thumbs = [1, 2, 3, 4, 5].map((i) => `${media}/thumb_${i}.jpg`);
  const record = { video_id: VIDEO, title: 'Browser test video', status: 'playable', duration: 18, manifest_url: `${media}/master.m3u8`, dash_manifest_url: `${media}/manifest.mpd`, poster_url: thumbs[0], thumbnails: thumbs, captions_url: `${media}/captions.vtt`, qualities: ['144p', '360p'] };
  // The app tier's reads and the poster call, with CORS (the page comes from the edge, another origin).
  appUrl = await listen((req, res) => {
    res.setHeader('access-control-allow-origin', '*');
    res.setHeader('access-control-allow-headers', 'authorization, content-type');
    res.setHeader('access-control-allow-methods', 'GET, POST');
    if (req.method === 'OPTIONS') return void res.writeHead(204).end();
    const json = (status: number, body: unknown): void => void res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    if (req.url === `/api/videos/${VIDEO}` && req.method === 'GET') return json(200, record);
    if (req.url === `/api/videos/${VIDEO}/playback` && req.method === 'GET') return json(200, { manifest_url: record.manifest_url, ttl_seconds: 3600 });
    if (req.url === `/api/videos/${VIDEO}/poster` && req.method === 'POST') {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        posterCalls.push({ auth: req.headers.authorization, body });
        json(200, { video_id: VIDEO, poster_url: thumbs[(JSON.parse(body) as { index: number }).index] });
      });
      return;
    }
    json(404, { error: { code: 'not_found', message: 'no such route' } });
  });
  browser = await launchChromium();
});

t.teardown(async () => {
  await browser?.close();
  await Promise.all(tiers.map((x) => x.stop()));
  for (const s of servers) {
    s.closeAllConnections();
    s.close();
  }
  if (dir) rmSync(dir, { recursive: true, force: true });
  ports?.release();
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
    const w = window as unknown as { videoPage: { errors: string[]; levels(): Array<{ index: number; height: number }>; playingHeight(): number } };
    const v = document.getElementById('player') as HTMLVideoElement;
    const tt = v.textTracks[0];
    return {
      time: v.currentTime,
      paused: v.paused,
      errors: [...w.videoPage.errors],
      levels: w.videoPage.levels(),
      playing: w.videoPage.playingHeight(),
      track: tt ? { mode: tt.mode, cues: tt.cues?.length ?? 0, active: [...(tt.activeCues ?? [])].map((c) => (c as VTTCue).text) } : null,
    };
  });

/** Pixel figures of a PNG, decoded by the browser: how many pixels are not near-black and how many colours. */
async function pixels(p: Page, png: Buffer): Promise<{ width: number; height: number; lit: number; colours: number }> {
  return p.evaluate(async (b64) => {
    const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
    const bitmap = await createImageBitmap(new Blob([bytes], { type: 'image/png' }));
    const canvas = new OffscreenCanvas(bitmap.width, bitmap.height);
    const ctx = canvas.getContext('2d')!;
    ctx.drawImage(bitmap, 0, 0);
    const data = ctx.getImageData(0, 0, bitmap.width, bitmap.height).data;
    let lit = 0;
    const colours = new Set<number>();
    for (let i = 0; i < data.length; i += 4) {
      const [r, g, b] = [data[i]!, data[i + 1]!, data[i + 2]!];
      if (r + g + b > 90) lit++;
      if (colours.size < 5000) colours.add(((r >> 3) << 10) | ((g >> 3) << 5) | (b >> 3));
    }
    return { width: bitmap.width, height: bitmap.height, lit, colours: colours.size };
  }, png.toString('base64'));
}

async function playsAndSwitches(t: Test, format: 'hls' | 'dash'): Promise<Page> {
  const page = await browser.newPage({ viewport: { width: 1000, height: 900 } });
  const pageErrors: string[] = [];
  page.on('pageerror', (e) => pageErrors.push(e.message));
  await page.goto(`${edge.url}/watch/${VIDEO}?format=${format}&api=${encodeURIComponent(appUrl)}&token=${TOKEN}`);
  await page.waitForSelector('#status[data-state="ready"], #status[data-state="error"]', { timeout: WAIT });
  t.equal(await page.getAttribute('#status', 'data-state'), 'ready', `${format}: the page is ready (${await page.textContent('#status')})`);
  t.equal(await page.textContent('#title'), 'Browser test video');

  let last: PageState | null = null;
  await until(`${format} plays past 4 s`, async () => {
    last = await state(page);
    if (last.errors.length > 0) throw new Error(last.errors.join('; '));
    return last.time > 4 ? last : null;
  }, WAIT).catch((e: Error) => {
    throw new Error(`${e.message}; state ${JSON.stringify(last)}`);
  });
  const playing = await state(page);
  t.same(playing.errors, [], `${format}: no player error`);
  t.same(pageErrors, [], `${format}: no page error`);
  t.same(playing.levels.map((l) => l.height).sort((a, b) => a - b), [144, 360], `${format}: both qualities in the menu`);
  t.equal(await page.locator('#quality option').count(), 3, 'Auto and two levels in the menu');

  // The picture: the video element's pixels are lit and varied (testsrc2 is colourful; a blank video is black).
  const shot = await page.locator('#player').screenshot();
  mkdirSync(SHOTS, { recursive: true });
  writeFileSync(join(SHOTS, `video-${format}.png`), shot);
  const px = await pixels(page, shot);
  t.ok(px.lit > px.width * px.height * 0.3, `${format}: the video area is not blank (${px.lit} of ${px.width * px.height} pixels lit)`);
  t.ok(px.colours > 100, `${format}: the picture has many colours (${px.colours})`);

  // Captions: the .vtt track is showing with a cue active now.
  t.equal(playing.track?.mode, 'showing', `${format}: the captions track is showing`);
  t.ok((playing.track?.cues ?? 0) >= 2, `${format}: the captions loaded (${playing.track?.cues} cues)`);
  await until(`${format} shows a caption`, async () => ((await state(page)).track?.active.length ? true : null), WAIT);

  // Quality: pin 144p, then 360p; the player switches and keeps playing.
  for (const height of [144, 360]) {
    const level = playing.levels.find((l) => l.height === height)!;
    await page.selectOption('#quality', String(level.index));
    const before = (await state(page)).time;
    await until(`${format} switches to ${height}p and plays on`, async () => {
      const s = await state(page);
      if (s.errors.length > 0) throw new Error(s.errors.join('; '));
      return s.playing === height && s.time > before + 0.5 ? true : null;
    }, WAIT);
    t.pass(`${format}: switched to ${height}p`);
  }
  return page;
}

t.test('HLS through hls.js: plays, qualities, captions, thumbnails and choosing a poster', async (t) => {
  const page = await playsAndSwitches(t, 'hls');
  t.equal(await page.locator('#thumbs img').count(), 5, 'five thumbnails');
  await until('thumbnails loaded', async () => ((await page.evaluate(() => [...document.querySelectorAll<HTMLImageElement>('#thumbs img')].every((i) => i.complete && i.naturalWidth > 0))) ? true : null), WAIT);
  t.equal(await page.getAttribute('#thumbs img.poster', 'alt'), 'thumbnail 1', 'the first is the default poster');
  await page.click('#thumbs button.choose[data-index="2"]');
  await page.waitForSelector('#poster-status[data-state="saved"]', { timeout: WAIT });
  t.same(posterCalls.map((c) => [c.auth, JSON.parse(c.body)]), [[`Bearer ${TOKEN}`, { index: 2 }]], 'the page called POST /api/videos/{id}/poster {index: 2} with its token');
  t.equal(await page.getAttribute('#thumbs img.poster', 'alt'), 'thumbnail 3', 'the chosen thumbnail is marked');
  t.match(await page.evaluate(() => (document.getElementById('player') as HTMLVideoElement).poster), /thumb_3\.jpg$/);
  await page.close();
});

t.test('DASH through Shaka Player: plays, qualities, captions', async (t) => {
  const page = await playsAndSwitches(t, 'dash');
  await page.close();
});

t.test('the page of a video that does not exist says so', async (t) => {
  const page = await browser.newPage();
  await page.goto(`${edge.url}/watch/nosuchvideo?api=${encodeURIComponent(appUrl)}&token=${TOKEN}`);
  await page.waitForSelector('#status[data-state="error"]', { timeout: WAIT });
  t.match(await page.textContent('#status'), /no such route|nosuchvideo/);
  await page.close();
});
