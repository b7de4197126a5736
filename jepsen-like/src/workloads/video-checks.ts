/**
 * The video workload's checks, pure functions of a history (workloads/video.ts gives its shape), so tests can feed
 * them hand-made histories with a video lost, one that never plays, a segment missing, a wrong checksum.
 *
 * - video-playable: every acknowledged upload (finalize answered) ends playable after the heal: its record is
 *   `playable` (`not-playable` with the status it ended in; `lost` when the record is gone), the HLS master from
 *   the edge parses and names at least one variant, every variant playlist parses, and its init segment and every
 *   media segment fetch (`unplayable`, with what failed).
 * - video-chunks: the raw source the store assembled from the acknowledged chunks hashes to the clip uploaded
 *   (`raw-mismatch`, `raw-lost`), the finalize answer names its checksum (`ack-mismatch`), and one idempotency key
 *   never gives two videos (`two-videos`).
 * - video-checksums: every object the edge served (master, playlists, init and media segments) hashes to the
 *   store's SHA-256 of that object (`wrong-checksum`); one the store no longer has is `store-lost`.
 */
import type { HistoryEvent } from '../history.js';
import { pairOps, quantiles } from './ops.js';
import type { Anomaly, CheckResult } from './workload.js';

/** A playlist, parsed as far as playing it needs: a master's variant URIs, a media playlist's map and segments. */
type Playlist =
  | { kind: 'master'; uris: string[] }
  | { kind: 'media'; map: string | null; uris: string[] }
  | { kind: 'invalid'; reason: string };

export function parsePlaylist(text: string): Playlist {
  const lines = text
    .split(/\r?\n/)
    .map((l) => l.trim())
    .filter((l) => l.length > 0);
  if (lines[0] !== '#EXTM3U') return { kind: 'invalid', reason: 'no #EXTM3U header' };
  const uris = lines.filter((l) => !l.startsWith('#'));
  if (lines.some((l) => l.startsWith('#EXT-X-STREAM-INF:'))) {
    // Every variant's tag is followed by its URI.
    for (const [i, l] of lines.entries())
      if (l.startsWith('#EXT-X-STREAM-INF:') && (lines[i + 1] === undefined || lines[i + 1]!.startsWith('#')))
        return { kind: 'invalid', reason: `variant at line ${i + 1} without a URI` };
    return uris.length > 0 ? { kind: 'master', uris } : { kind: 'invalid', reason: 'a master without variants' };
  }
  if (!lines.includes('#EXT-X-ENDLIST')) return { kind: 'invalid', reason: 'a media playlist without #EXT-X-ENDLIST' };
  if (uris.length === 0) return { kind: 'invalid', reason: 'a media playlist without segments' };
  const inf = lines.filter((l) => l.startsWith('#EXTINF:')).length;
  if (inf !== uris.length) return { kind: 'invalid', reason: `${uris.length} segments for ${inf} #EXTINF tags` };
  const map = lines.find((l) => l.startsWith('#EXT-X-MAP:'))?.match(/URI="([^"]+)"/)?.[1] ?? null;
  return { kind: 'media', map, uris };
}

interface FinalPlay {
  video_id: string;
  status: string;
  stage?: string | null;
  /** The record's failure ({stage, reason}) when it ended failed. */
  failure?: unknown;
  raw_sha256?: string | null;
  master?: number | string;
  variants?: number[];
  objects: Array<[key: string, served: string | null, stored: string | null]>;
  errors: string[];
}

export function checkVideo(events: readonly HistoryEvent[]): CheckResult[] {
  const ops = pairOps(events);
  const playable: Anomaly[] = [];
  const chunks: Anomaly[] = [];
  const sums: Anomaly[] = [];
  // key -> acknowledged uploads.
  const acked = new Map<string, { video: Set<string>; sha256: string; at: number }>();
  for (const o of ops) {
    if (o.f !== 'upload' || o.type !== 'ok' || o.key === undefined) continue;
    const input = o.input as { sha256: string };
    const v = o.value as { video_id: string; checksum?: string };
    const a = acked.get(o.key) ?? { video: new Set<string>(), sha256: input.sha256, at: o.complete };
    acked.set(o.key, a);
    a.video.add(v.video_id);
    if (v.checksum !== undefined && v.checksum.replace(/^sha256:/, '') !== input.sha256)
      chunks.push({
        check: 'video-chunks',
        type: 'ack-mismatch',
        description: `upload ${o.key} acknowledged with checksum ${v.checksum}, the clip's is ${input.sha256}`,
        times: [o.complete],
      });
  }
  for (const [key, a] of acked)
    if (a.video.size > 1)
      chunks.push({
        check: 'video-chunks',
        type: 'two-videos',
        description: `upload ${key} acknowledged as ${a.video.size} videos: ${[...a.video].join(', ')}`,
        times: [a.at],
      });
  // The first time each video was seen playable (any read), for the figures.
  const playableAt = new Map<string, number>();
  for (const o of ops)
    if (o.f === 'status' && o.type === 'ok') {
      const v = o.value as { video_id: string; status: string };
      if (v.status === 'playable' && !playableAt.has(v.video_id)) playableAt.set(v.video_id, o.invoke);
    }
  const finals = new Map<string, FinalPlay>();
  for (const o of ops)
    if (o.f === 'final-play' && o.type === 'ok' && o.key !== undefined) finals.set(o.key, o.value as FinalPlay);
  let unread = 0;
  let segments = 0;
  let playableCount = 0;
  for (const [key, a] of acked) {
    const f = finals.get(key);
    if (f === undefined) {
      unread++;
      continue;
    }
    if (f.status === 'missing')
      playable.push({
        check: 'video-playable',
        type: 'lost',
        description: `upload ${key} (video ${f.video_id}) acknowledged, its record gone after the heal`,
      });
    else if (f.status !== 'playable')
      playable.push({
        check: 'video-playable',
        type: 'not-playable',
        description: `upload ${key} (video ${f.video_id}) ended ${f.status}${f.stage ? ` at stage ${f.stage}` : ''}${f.failure !== undefined ? `: ${JSON.stringify(f.failure)}` : ''}`,
      });
    else if (f.errors.length > 0 || typeof f.master !== 'number' || (f.variants ?? []).length === 0)
      playable.push({
        check: 'video-playable',
        type: 'unplayable',
        description: `video ${f.video_id} (upload ${key}) is playable but does not play: ${f.errors.slice(0, 3).join('; ') || 'no variant'}${f.errors.length > 3 ? ` (+${f.errors.length - 3})` : ''}`,
      });
    else playableCount++;
    if (f.status === 'playable') {
      if (f.raw_sha256 === null)
        chunks.push({
          check: 'video-chunks',
          type: 'raw-lost',
          description: `video ${f.video_id}: the raw source the chunks made is gone from the store`,
        });
      else if (f.raw_sha256 !== undefined && f.raw_sha256 !== a.sha256)
        chunks.push({
          check: 'video-chunks',
          type: 'raw-mismatch',
          description: `video ${f.video_id}: the raw source hashes to ${f.raw_sha256}, the clip uploaded to ${a.sha256}`,
        });
    }
    for (const [objectKey, served, stored] of f.objects) {
      segments++;
      if (stored === null)
        sums.push({
          check: 'video-checksums',
          type: 'store-lost',
          description: `${objectKey}: served by the edge, gone from the store`,
        });
      else if (served !== stored)
        sums.push({
          check: 'video-checksums',
          type: 'wrong-checksum',
          description: `${objectKey}: the edge served bytes hashing to ${served}, the store's object is ${stored}`,
        });
    }
  }
  const count = (f: string, type: string): number => ops.filter((o) => o.f === f && o.type === type).length;
  const toPlayable = quantiles(
    [...acked.values()].flatMap((a) =>
      [...a.video].filter((v) => playableAt.has(v)).map((v) => Math.max(0, playableAt.get(v)! - a.at) / 1e6),
    ),
  );
  return [
    {
      name: 'video-playable',
      valid: playable.length > 0 ? false : unread > 0 ? 'unknown' : true,
      anomalies: playable,
      stats: {
        uploads_ok: count('upload', 'ok'),
        uploads_unknown: count('upload', 'info'),
        uploads_failed: count('upload', 'fail'),
        videos: acked.size,
        played: playableCount,
        unread,
        seen_playable: playableAt.size,
        seen_playable_p50_ms: toPlayable.p50,
        seen_playable_max_ms: toPlayable.max,
      },
    },
    { name: 'video-chunks', valid: chunks.length === 0, anomalies: chunks },
    { name: 'video-checksums', valid: sums.length === 0, anomalies: sums, stats: { objects_checked: segments } },
  ];
}
