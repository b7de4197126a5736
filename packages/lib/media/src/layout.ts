// The standard object layout of one video and every manifest for it in one call, from per-quality segment
// records (what the video service keeps in its replicated store). Pure.
//
//   master.m3u8  manifest.mpd
//   <quality>/index.m3u8  <quality>/init.mp4  <quality>/seg-00000.m4s ...
//   captions/en.vtt  captions/en.m3u8
//   thumbs/thumb-10.jpg ... thumb-90.jpg
import { buildDashMpd, buildHlsMaster, buildHlsVariant, buildSubtitlePlaylist, type VariantInput } from './manifest.js';
import type { QualityName } from './plan.js';
import { INIT_FILE, segmentFileName } from './transcode.js';

export interface QualityRecord {
  quality: QualityName;
  width: number;
  height: number;
  codecs: string;
  /** Every playback segment of the quality, any order; indexes must run 0..n-1 without gaps. */
  segments: Array<{ index: number; duration_s: number; size_bytes: number }>;
}

export interface ManifestSetInput {
  duration_s: number;
  frame_rate?: number;
  /** Only qualities whose every segment is done: a video is playable once one is listed. */
  qualities: QualityRecord[];
  /** Lists captions/en.vtt in both manifests. */
  captions?: boolean;
}

export const LAYOUT = {
  master: 'master.m3u8',
  mpd: 'manifest.mpd',
  variant: (q: QualityName): string => `${q}/index.m3u8`,
  init: (q: QualityName): string => `${q}/${INIT_FILE}`,
  segment: (q: QualityName, index: number): string => `${q}/${segmentFileName(index)}`,
  captionsVtt: 'captions/en.vtt',
  captionsPlaylist: 'captions/en.m3u8',
  thumbnail: (percent: number): string => `thumbs/thumb-${String(percent).padStart(2, '0')}.jpg`,
};

/** Path (relative to the video's root) -> file text, for every manifest. */
export function buildManifestSet(input: ManifestSetInput): Map<string, string> {
  if (input.qualities.length === 0) throw new Error('no finished quality: nothing to play yet');
  const files = new Map<string, string>();
  const variants: VariantInput[] = [];
  for (const q of input.qualities) {
    const segments = [...q.segments].sort((a, b) => a.index - b.index);
    segments.forEach((s, i) => {
      if (s.index !== i) throw new Error(`${q.quality}: segment ${i} is missing`);
    });
    const refs = segments.map((s) => ({
      uri: segmentFileName(s.index),
      duration_s: s.duration_s,
      size_bytes: s.size_bytes,
    }));
    files.set(LAYOUT.variant(q.quality), buildHlsVariant({ init_uri: INIT_FILE, segments: refs }));
    variants.push({
      quality: q.quality,
      width: q.width,
      height: q.height,
      codecs: q.codecs,
      ...(input.frame_rate ? { frame_rate: input.frame_rate } : {}),
      playlist_uri: LAYOUT.variant(q.quality),
      init_uri: INIT_FILE,
      segments: refs,
    });
  }
  if (input.captions) {
    files.set(LAYOUT.captionsPlaylist, buildSubtitlePlaylist({ vtt_uri: 'en.vtt', duration_s: input.duration_s }));
  }
  files.set(
    LAYOUT.master,
    buildHlsMaster({
      variants,
      ...(input.captions
        ? { subtitles: { playlist_uri: LAYOUT.captionsPlaylist, language: 'en', name: 'English (automatic)' } }
        : {}),
    }),
  );
  files.set(
    LAYOUT.mpd,
    buildDashMpd({
      duration_s: input.duration_s,
      variants: variants.map((v) => ({
        ...v,
        init_uri: LAYOUT.init(v.quality),
        media_template: `${v.quality}/seg-$Number%05d$.m4s`,
      })),
      ...(input.captions ? { subtitles: { vtt_uri: LAYOUT.captionsVtt, language: 'en' } } : {}),
    }),
  );
  return files;
}
