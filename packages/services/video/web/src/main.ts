/**
 * The player page: hls.js plays the HLS master playlist, Shaka Player the DASH .mpd (`?format=dash`), both in
 * the browser's MediaSource; a quality menu (Auto lets the player choose per segment, a level pins it), the
 * poster, an English captions track (.vtt) and the five thumbnails, each with "choose as poster" for the uploader.
 *
 * URL: /watch/{video_id}?token=<bearer>[&format=hls|dash][&api=<app tier base URL>]
 * It reads GET {api}/api/videos/{id} (title, poster_url, thumbnails, captions_url, dash_manifest_url) and
 * GET {api}/api/videos/{id}/playback (manifest_url), and calls POST {api}/api/videos/{id}/poster {index}.
 * `window.videoPage` exposes the state the browser test reads.
 */
import Hls from 'hls.js';
import shakaModule from 'shaka-player';

// Shaka ships CommonJS whose typings declare a default export: under NodeNext typing the default import is the
// module object (the namespace is its `default`), while the bundle may hand over the namespace itself.
const shaka = ((shakaModule as unknown as { default?: unknown }).default ?? shakaModule) as typeof shakaModule.default;

interface VideoInfo {
  video_id: string;
  title?: string;
  status?: string;
  manifest_url?: string | null;
  dash_manifest_url?: string | null;
  poster_url?: string | null;
  /** The five thumbnails' URLs, in order (10, 30, 50, 70, 90%). */
  thumbnails?: string[];
  captions_url?: string | null;
}

interface Level {
  index: number;
  height: number;
  bandwidth: number;
}

interface Engine {
  levels(): Level[];
  /** -1: the player chooses (adaptive); otherwise pin a level. */
  setLevel(index: number): void;
  /** Height of the level playing now, 0 before one is chosen. */
  playingHeight(): number;
  raw(): unknown;
}

const params = new URLSearchParams(location.search);
const videoId = decodeURIComponent(location.pathname.split('/').filter(Boolean)[1] ?? '');
const api = (params.get('api') ?? location.origin).replace(/\/+$/, '');
const token = params.get('token');
const format: 'hls' | 'dash' = params.get('format') === 'dash' ? 'dash' : 'hls';

const video = document.getElementById('player') as HTMLVideoElement;
const statusEl = document.getElementById('status')!;
const qualityEl = document.getElementById('quality') as HTMLSelectElement;
const thumbsEl = document.getElementById('thumbs')!;
const posterStatusEl = document.getElementById('poster-status')!;
const errors: string[] = [];
let engine: Engine | null = null;
let captionsUrl: string | null = null;

const page = {
  format,
  errors,
  levels: (): Level[] => engine?.levels() ?? [],
  setLevel: (index: number): void => engine?.setLevel(index),
  playingHeight: (): number => engine?.playingHeight() ?? 0,
  /** The player's own view of its variants, for diagnostics. */
  raw: (): unknown => engine?.raw(),
};
(window as unknown as { videoPage: typeof page }).videoPage = page;

function setStatus(state: 'loading' | 'ready' | 'error', text: string): void {
  statusEl.dataset['state'] = state;
  statusEl.textContent = text;
}

function fail(message: string): void {
  errors.push(message);
  setStatus('error', message);
}

async function apiCall(method: string, path: string, body?: unknown): Promise<Response> {
  const headers: Record<string, string> = {};
  if (token !== null) headers['authorization'] = `Bearer ${token}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  return fetch(`${api}${path}`, { method, headers, ...(body !== undefined ? { body: JSON.stringify(body) } : {}) });
}

async function errorText(r: Response): Promise<string> {
  const body = (await r.json().catch(() => null)) as { error?: { message?: string } } | null;
  return body?.error?.message ?? `HTTP ${r.status}`;
}

/** The manifest to play: /playback's (the spec's way), else the video record's; the DASH .mpd sits beside the master. */
async function manifestUrl(info: VideoInfo): Promise<string> {
  let hls = info.manifest_url ?? null;
  const playback = await apiCall('GET', `/api/videos/${encodeURIComponent(videoId)}/playback`).catch(() => null);
  if (playback?.ok) hls = ((await playback.json()) as { manifest_url?: string }).manifest_url ?? hls;
  if (hls === null) throw new Error('the video has no manifest yet (still transcoding?)');
  if (format === 'hls') return hls;
  return info.dash_manifest_url ?? new URL('manifest.mpd', hls).href;
}

function hlsEngine(url: string): Engine {
  if (!Hls.isSupported()) throw new Error('this browser has no MediaSource: hls.js cannot play');
  const hls = new Hls({ capLevelToPlayerSize: false });
  let playing = -1;
  hls.on(Hls.Events.LEVEL_SWITCHED, (_e, d) => {
    playing = d.level;
  });
  hls.on(Hls.Events.ERROR, (_e, d) => {
    if (d.fatal) fail(`hls.js: ${d.type} ${d.details}`);
  });
  hls.on(Hls.Events.MANIFEST_PARSED, () => {
    // Captions from the master's subtitles rendition when it has one, else the page's <track> of captions_url.
    if (hls.subtitleTracks.length > 0) {
      hls.subtitleTrack = 0;
      hls.subtitleDisplay = true;
    } else if (captionsUrl !== null) addCaptions(captionsUrl);
  });
  hls.loadSource(url);
  hls.attachMedia(video);
  return {
    levels: () => hls.levels.map((l, index) => ({ index, height: l.height, bandwidth: l.bitrate })),
    setLevel: (index) => {
      // currentLevel switches at once (flushing the buffer), so the picture changes quality visibly.
      hls.currentLevel = index;
    },
    playingHeight: () => hls.levels[playing]?.height ?? 0,
    raw: () =>
      hls.levels.map((l) => ({ height: l.height, bitrate: l.bitrate, codecs: `${l.videoCodec},${l.audioCodec}` })),
  };
}

async function dashEngine(url: string): Promise<Engine> {
  shaka.polyfill.installAll();
  if (!shaka.Player.isBrowserSupported()) throw new Error('this browser cannot run Shaka Player');
  const player = new shaka.Player();
  // Shaka bans a variant for 30 s when over 15% of its frames drop, and a banned variant vanishes from
  // getVariantTracks, so from the quality menu: on a busy CPU the higher qualities disappeared mid-play. The
  // ABR stays bandwidth-driven (as hls.js, whose frame-drop cap is off by default) and the menu stays whole.
  player.configure({ abr: { droppedFrames: false } });
  await player.attach(video);
  player.addEventListener('error', (event) => {
    const detail = (event as unknown as { detail?: { code?: number } }).detail;
    fail(`shaka: error ${detail?.code ?? 'unknown'}`);
  });
  await player.load(url);
  // Captions from the MPD's text AdaptationSet when it has one, else the page's <track> of captions_url.
  const texts = player.getTextTracks();
  if (texts.length > 0) {
    // Shaka 5: selecting a text track shows it (selectTextTrack(null) hides it).
    player.selectTextTrack(texts[0]!);
  } else if (captionsUrl !== null) addCaptions(captionsUrl);
  // One entry per height: Shaka lists variants (video x audio), the menu offers pictures.
  const levels = (): Level[] => {
    const byHeight = new Map<number, Level>();
    for (const t of player.getVariantTracks()) {
      if (t.height === null || byHeight.has(t.height)) continue;
      byHeight.set(t.height, { index: t.id, height: t.height, bandwidth: t.bandwidth });
    }
    return [...byHeight.values()].sort((a, b) => a.height - b.height);
  };
  return {
    levels,
    setLevel: (index) => {
      if (index < 0) {
        player.configure({ abr: { enabled: true } });
        return;
      }
      const track = player.getVariantTracks().find((t) => t.id === index);
      if (track === undefined) return;
      player.configure({ abr: { enabled: false } });
      player.selectVariantTrack(track, true);
    },
    playingHeight: () => player.getVariantTracks().find((t) => t.active)?.height ?? 0,
    raw: () => ({
      tracks: player
        .getVariantTracks()
        .map((t) => ({ id: t.id, height: t.height, bandwidth: t.bandwidth, codecs: t.codecs, active: t.active })),
      stats: player.getStats(),
    }),
  };
}

function fillQualityMenu(levels: Level[]): void {
  for (const l of levels) {
    const option = document.createElement('option');
    option.value = String(l.index);
    option.textContent = `${l.height}p (${Math.round(l.bandwidth / 1000)} kb/s)`;
    qualityEl.append(option);
  }
  qualityEl.addEventListener('change', () => engine?.setLevel(Number(qualityEl.value)));
}

function addCaptions(url: string): void {
  const track = document.createElement('track');
  track.kind = 'captions';
  track.label = 'English';
  track.srclang = 'en';
  track.src = url;
  track.default = true;
  video.append(track);
  // `default` is not enough once MediaSource attached: show the track explicitly.
  track.track.mode = 'showing';
}

function showThumbnails(urls: string[], poster: string | null): void {
  urls.forEach((url, index) => {
    const figure = document.createElement('figure');
    const img = document.createElement('img');
    img.src = url;
    img.alt = `thumbnail ${index + 1}`;
    img.crossOrigin = 'anonymous';
    if (url === poster) img.classList.add('poster');
    const button = document.createElement('button');
    button.className = 'choose';
    button.dataset['index'] = String(index);
    button.textContent = 'Choose as poster';
    button.addEventListener('click', () => void choosePoster(index, url));
    figure.append(img, button);
    thumbsEl.append(figure);
  });
}

async function choosePoster(index: number, url: string): Promise<void> {
  posterStatusEl.textContent = 'saving…';
  const r = await apiCall('POST', `/api/videos/${encodeURIComponent(videoId)}/poster`, { index }).catch(
    (e: Error) => e,
  );
  if (r instanceof Error || !r.ok) {
    posterStatusEl.textContent = `could not set the poster: ${r instanceof Error ? r.message : await errorText(r)}`;
    posterStatusEl.dataset['state'] = 'error';
    return;
  }
  video.poster = url;
  thumbsEl.querySelectorAll('img').forEach((img, i) => img.classList.toggle('poster', i === index));
  posterStatusEl.textContent = `poster: thumbnail ${index + 1}`;
  posterStatusEl.dataset['state'] = 'saved';
}

async function start(): Promise<void> {
  document.getElementById('format')!.textContent = format.toUpperCase();
  const r = await apiCall('GET', `/api/videos/${encodeURIComponent(videoId)}`);
  if (!r.ok) throw new Error(`video ${videoId}: ${await errorText(r)}`);
  const info = (await r.json()) as VideoInfo;
  document.getElementById('title')!.textContent = info.title ?? videoId;
  document.title = info.title ?? videoId;
  if (info.poster_url) video.poster = info.poster_url;
  showThumbnails(info.thumbnails ?? [], info.poster_url ?? null);
  captionsUrl = info.captions_url ?? null;
  const url = await manifestUrl(info);
  engine = format === 'hls' ? hlsEngine(url) : await dashEngine(url);
  video.addEventListener('error', () => fail(`media error ${video.error?.code ?? ''}: ${video.error?.message ?? ''}`));
  await new Promise<void>((resolve) => {
    if (video.readyState >= 1) resolve();
    else video.addEventListener('loadedmetadata', () => resolve(), { once: true });
  });
  fillQualityMenu(engine.levels());
  setStatus('ready', 'ready');
  await video.play().catch((e: Error) => fail(`play: ${e.message}`));
}

start().catch((e: Error) => fail(e.message));
