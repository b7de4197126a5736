/**
 * The objects an HLS playlist refers to (variant playlists, segments, init sections, rendition playlists,
 * subtitles), as keys relative to the playlist's own key, for pre-population: a master playlist's key is
 * enough to warm a whole video. Pure: text in, keys out.
 */
export function playlistReferences(playlistKey: string, text: string): string[] {
  const dir = playlistKey.includes('/') ? playlistKey.slice(0, playlistKey.lastIndexOf('/') + 1) : '';
  const out: string[] = [];
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.trim();
    if (line.length === 0) continue;
    if (line.startsWith('#')) {
      // EXT-X-MAP, EXT-X-MEDIA and EXT-X-I-FRAME-STREAM-INF carry theirs in a URI attribute.
      for (const m of line.matchAll(/URI="([^"]+)"/g)) out.push(m[1]!);
      continue;
    }
    out.push(line);
  }
  const keys: string[] = [];
  for (const uri of out) {
    const key = resolve(dir, uri);
    if (key !== null && !keys.includes(key)) keys.push(key);
  }
  return keys;
}

/** A relative URI against a key's folder; null for absolute URLs (another host's objects are not ours to warm). */
function resolve(dir: string, uri: string): string | null {
  if (/^[a-z][a-z0-9+.-]*:/i.test(uri) || uri.startsWith('//')) return null;
  const path = uri.split(/[?#]/)[0]!;
  // An absolute path is a path on a tier: `/media/<key>`.
  const parts = (path.startsWith('/') ? path.replace(/^\/(media\/)?/, '') : dir + path).split('/');
  const stack: string[] = [];
  for (const p of parts) {
    if (p === '' || p === '.') continue;
    if (p === '..') {
      if (stack.pop() === undefined) return null;
    } else stack.push(p);
  }
  return stack.length > 0 ? stack.join('/') : null;
}
