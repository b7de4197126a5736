// Pure text builders: HLS (RFC 8216) master and variant playlists, a WebVTT subtitle playlist, and a DASH MPD,
// all from the same segment records, so both protocols point at the very same fMP4 files.
import { PLAYBACK_SEGMENT_S, type QualityName } from './plan.js';

export interface SegmentRef {
  /** URI as the manifest writes it (relative to the manifest that lists it). */
  uri: string;
  duration_s: number;
  size_bytes: number;
}

export interface VariantInput {
  quality: QualityName;
  width: number;
  height: number;
  /** "avc1.4D401E,mp4a.40.2" (TaskOutput.codecs). */
  codecs: string;
  frame_rate?: number;
  /** Variant playlist URI, relative to the master (HLS). */
  playlist_uri: string;
  /** Init segment URI, relative to the variant playlist (HLS). */
  init_uri: string;
  segments: SegmentRef[];
  /** Nominal peak in bit/s, used only when the segments carry no sizes. */
  nominal_bandwidth?: number;
}

export interface SubtitleInput {
  /** Subtitle playlist URI relative to the master (buildSubtitlePlaylist's output). */
  playlist_uri: string;
  language: string;
  name: string;
}

/** Peak and average bit rate measured over the variant's own segments (RFC 8216 4.3.4.2: peak per segment). */
export function measuredBandwidth(v: Pick<VariantInput, 'segments' | 'nominal_bandwidth'>): {
  peak: number;
  average: number;
} {
  let peak = 0;
  let bytes = 0;
  let seconds = 0;
  for (const s of v.segments) {
    if (s.duration_s > 0.5) peak = Math.max(peak, (s.size_bytes * 8) / s.duration_s);
    bytes += s.size_bytes;
    seconds += s.duration_s;
  }
  const average = seconds > 0 ? (bytes * 8) / seconds : 0;
  if (peak === 0) peak = average;
  if (peak === 0 && v.nominal_bandwidth) return { peak: v.nominal_bandwidth, average: v.nominal_bandwidth };
  return { peak: Math.ceil(peak), average: Math.ceil(average) };
}

export function buildHlsMaster(input: { variants: VariantInput[]; subtitles?: SubtitleInput }): string {
  if (input.variants.length === 0) throw new Error('a master playlist needs at least one variant');
  const lines = ['#EXTM3U', '#EXT-X-VERSION:7', '#EXT-X-INDEPENDENT-SEGMENTS'];
  const subs = input.subtitles;
  if (subs) {
    lines.push(
      `#EXT-X-MEDIA:TYPE=SUBTITLES,GROUP-ID="subs",NAME=${quote(subs.name)},LANGUAGE=${quote(subs.language)},DEFAULT=NO,AUTOSELECT=YES,URI=${quote(subs.playlist_uri)}`,
    );
  }
  // Lowest first: players that start with the first listed variant start fast.
  for (const v of [...input.variants].sort((a, b) => a.height * a.width - b.height * b.width)) {
    const bw = measuredBandwidth(v);
    const attrs = [
      `BANDWIDTH=${bw.peak}`,
      `AVERAGE-BANDWIDTH=${bw.average}`,
      `RESOLUTION=${v.width}x${v.height}`,
      `CODECS=${quote(v.codecs)}`,
    ];
    if (v.frame_rate) attrs.push(`FRAME-RATE=${v.frame_rate.toFixed(3)}`);
    if (subs) attrs.push('SUBTITLES="subs"');
    lines.push(`#EXT-X-STREAM-INF:${attrs.join(',')}`, v.playlist_uri);
  }
  return lines.join('\n') + '\n';
}

/** RFC 8216 4.3.3.1: every EXTINF rounded to the nearest integer must be <= EXT-X-TARGETDURATION. */
export function targetDuration(durations: readonly number[]): number {
  return Math.max(PLAYBACK_SEGMENT_S, ...durations.map((d) => Math.round(d)));
}

export function buildHlsVariant(input: { init_uri: string; segments: SegmentRef[]; media_sequence?: number }): string {
  if (input.segments.length === 0) throw new Error('a variant playlist needs at least one segment');
  const lines = [
    '#EXTM3U',
    '#EXT-X-VERSION:7',
    `#EXT-X-TARGETDURATION:${targetDuration(input.segments.map((s) => s.duration_s))}`,
    `#EXT-X-MEDIA-SEQUENCE:${input.media_sequence ?? 0}`,
    '#EXT-X-PLAYLIST-TYPE:VOD',
    '#EXT-X-INDEPENDENT-SEGMENTS',
    `#EXT-X-MAP:URI=${quote(input.init_uri)}`,
  ];
  for (const s of input.segments) lines.push(`#EXTINF:${s.duration_s.toFixed(6)},`, s.uri);
  lines.push('#EXT-X-ENDLIST');
  return lines.join('\n') + '\n';
}

/** A subtitle "playlist" of one WebVTT file covering the whole video (hls.js and Safari accept this). */
export function buildSubtitlePlaylist(input: { vtt_uri: string; duration_s: number }): string {
  const d = Math.max(input.duration_s, 0.001);
  return (
    [
      '#EXTM3U',
      '#EXT-X-VERSION:7',
      `#EXT-X-TARGETDURATION:${Math.max(1, Math.ceil(d))}`,
      '#EXT-X-MEDIA-SEQUENCE:0',
      '#EXT-X-PLAYLIST-TYPE:VOD',
      `#EXTINF:${d.toFixed(6)},`,
      input.vtt_uri,
      '#EXT-X-ENDLIST',
    ].join('\n') + '\n'
  );
}

export interface DashVariantInput {
  quality: QualityName;
  width: number;
  height: number;
  codecs: string;
  frame_rate?: number;
  /** Init and media URIs relative to the MPD; media URIs must be numbered by playback index. */
  init_uri: string;
  /** A SegmentTemplate media pattern such as "360p/seg-$Number%05d$.m4s"; must match the segments' files. */
  media_template: string;
  segments: SegmentRef[];
  nominal_bandwidth?: number;
}

/**
 * A static (on-demand) MPD, profile isoff-live (SegmentTemplate + SegmentTimeline, $Number$ from 0), one
 * AdaptationSet of muxed audio+video Representations (our segments carry both tracks; Shaka and the browsers'
 * MSE accept muxed fMP4), plus an optional WebVTT text AdaptationSet.
 */
export function buildDashMpd(input: {
  duration_s: number;
  variants: DashVariantInput[];
  subtitles?: { vtt_uri: string; language: string };
}): string {
  if (input.variants.length === 0) throw new Error('an MPD needs at least one representation');
  const dur = isoDuration(input.duration_s);
  const maxSeg = Math.max(...input.variants.flatMap((v) => v.segments.map((s) => s.duration_s)));
  const out = [
    '<?xml version="1.0" encoding="UTF-8"?>',
    `<MPD xmlns="urn:mpeg:dash:schema:mpd:2011" profiles="urn:mpeg:dash:profile:isoff-live:2011" type="static" mediaPresentationDuration="${dur}" minBufferTime="PT${PLAYBACK_SEGMENT_S}S" maxSegmentDuration="${isoDuration(maxSeg)}">`,
    `  <Period id="0" start="PT0S" duration="${dur}">`,
    '    <AdaptationSet id="0" mimeType="video/mp4" segmentAlignment="true" startWithSAP="1">',
  ];
  for (const v of [...input.variants].sort((a, b) => a.height * a.width - b.height * b.width)) {
    const bw = measuredBandwidth(v);
    const fr = v.frame_rate ? ` frameRate="${frameRate(v.frame_rate)}"` : '';
    out.push(
      `      <Representation id="${xml(v.quality)}" bandwidth="${bw.peak}" width="${v.width}" height="${v.height}" codecs="${xml(v.codecs)}"${fr} sar="1:1">`,
      `        <SegmentTemplate timescale="1000" startNumber="0" initialization="${xml(v.init_uri)}" media="${xml(v.media_template)}">`,
      '          <SegmentTimeline>',
    );
    let t = 0;
    for (const run of runs(v.segments.map((s) => Math.round(s.duration_s * 1000)))) {
      out.push(`            <S t="${t}" d="${run.d}"${run.r > 0 ? ` r="${run.r}"` : ''} />`);
      t += run.d * (run.r + 1);
    }
    out.push('          </SegmentTimeline>', '        </SegmentTemplate>', '      </Representation>');
  }
  out.push('    </AdaptationSet>');
  if (input.subtitles) {
    out.push(
      `    <AdaptationSet id="1" contentType="text" mimeType="text/vtt" lang="${xml(input.subtitles.language)}">`,
      '      <Role schemeIdUri="urn:mpeg:dash:role:2011" value="subtitle" />',
      '      <Representation id="captions" bandwidth="256">',
      `        <BaseURL>${xml(input.subtitles.vtt_uri)}</BaseURL>`,
      '      </Representation>',
      '    </AdaptationSet>',
    );
  }
  out.push('  </Period>', '</MPD>');
  return out.join('\n') + '\n';
}

function runs(durations: number[]): Array<{ d: number; r: number }> {
  const out: Array<{ d: number; r: number }> = [];
  for (const d of durations) {
    const last = out[out.length - 1];
    if (last && last.d === d) last.r++;
    else out.push({ d, r: 0 });
  }
  return out;
}

export function isoDuration(seconds: number): string {
  return `PT${(Math.round(seconds * 1000) / 1000).toFixed(3)}S`;
}

function frameRate(fps: number): string {
  if (Number.isInteger(fps)) return String(fps);
  const ntsc = Math.round(fps * 1.001);
  if (Math.abs(fps - (ntsc * 1000) / 1001) < 0.001) return `${ntsc * 1000}/1001`;
  return `${Math.round(fps * 1000)}/1000`;
}

function quote(s: string): string {
  if (/["\r\n]/.test(s)) throw new Error(`cannot quote ${JSON.stringify(s)} in a playlist attribute`);
  return `"${s}"`;
}

function xml(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}
