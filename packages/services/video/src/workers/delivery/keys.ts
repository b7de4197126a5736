/**
 * Object keys as the delivery tier sees them: the object store's keys of transcoded outputs, e.g.
 * `videos/<video_id>/r<revision>/hls/720p/seg_00003.m4s`. A key is checked before it is looked up, fetched or
 * turned into a file name, so no request can walk out of a cache folder or ask the origin for something odd.
 */
import { createHash } from 'node:crypto';
import { badRequest } from '@raftkit/http';

export const MAX_KEY_LENGTH = 512;
// Ids are base64url, so a segment may start with '-' (one id in 64 does); only a leading dot is refused.
const SEGMENT = /^(?!\.)[A-Za-z0-9._-]{1,128}$/;

/** The key of a request path below its prefix (`/media/`), or a 400 naming the problem. */
export function parseKey(rawPath: string): string {
  let key: string;
  try {
    key = decodeURIComponent(rawPath);
  } catch {
    throw badRequest('invalid_key', 'the object key is not valid percent-encoding');
  }
  checkKey(key);
  return key;
}

/** Throws a 400 unless `key` is 1 to 512 characters of `/`-separated segments of [A-Za-z0-9._-], none `.`/`..`. */
export function checkKey(key: string): void {
  if (key.length === 0 || key.length > MAX_KEY_LENGTH)
    throw badRequest('invalid_key', `an object key is 1 to ${MAX_KEY_LENGTH} characters`, { field: 'key' });
  for (const s of key.split('/')) {
    // A leading dot is refused too: no ".." and no hidden files, whatever the origin would do with them.
    if (!SEGMENT.test(s))
      throw badRequest(
        'invalid_key',
        `object key segment ${JSON.stringify(s)} is not 1 to 128 characters of A-Z a-z 0-9 . _ - (not starting with a dot)`,
        { field: 'key' },
      );
  }
}

/** Throws a 400 unless `prefix` is a usable purge prefix: a key's leading segments (at least one whole one). */
export function checkPrefix(prefix: string): void {
  // A purge by "" or "v" would empty caches by accident; a prefix names at least one whole segment.
  checkKey(prefix.endsWith('/') ? prefix.slice(0, -1) : prefix);
}

const TYPES: Record<string, string> = {
  m3u8: 'application/vnd.apple.mpegurl',
  mpd: 'application/dash+xml',
  m4s: 'video/iso.segment',
  mp4: 'video/mp4',
  m4a: 'audio/mp4',
  m4v: 'video/mp4',
  ts: 'video/mp2t',
  webm: 'video/webm',
  vtt: 'text/vtt; charset=utf-8',
  jpg: 'image/jpeg',
  jpeg: 'image/jpeg',
  png: 'image/png',
  webp: 'image/webp',
};

/** The Content-Type of a key by its extension (the origin's own type wins when it sends one). */
export function contentTypeOf(key: string): string {
  const dot = key.lastIndexOf('.');
  return (dot >= 0 ? TYPES[key.slice(dot + 1).toLowerCase()] : undefined) ?? 'application/octet-stream';
}

/** The ETag of an immutable object: a hash of its bytes, the same at every tier for the same bytes. */
export function etagOf(body: Buffer): string {
  return `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"`;
}

/** The file name a key is kept under on disk: a hash, so any key maps to one flat, safe name. */
export function fileNameOf(key: string): string {
  return createHash('sha256').update(key).digest('hex');
}

/**
 * Which edge serves a video: rendezvous (highest random weight) hashing of the video id over the edges' ids. Every
 * viewer of a video goes to the same edge (its cache holds the video once, not once per edge), and adding or
 * removing an edge moves only the videos that edge wins or held, unlike `hash mod n`, which moves almost all.
 */
export function pickEdge<E extends { id: string }>(videoId: string, edges: readonly E[]): E {
  if (edges.length === 0) throw new Error('pickEdge: no edges');
  let best = edges[0]!;
  let bestScore = -1n;
  for (const edge of edges) {
    const score = createHash('sha256').update(`${edge.id}\n${videoId}`).digest().readBigUInt64BE(0);
    if (score > bestScore) {
      best = edge;
      bestScore = score;
    }
  }
  return best;
}
