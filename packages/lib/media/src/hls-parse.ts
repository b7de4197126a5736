// A small strict HLS parser: enough of RFC 8216 to check what our builders write (and what a cache serves) is a
// well-formed master or media playlist. Throws HlsParseError naming the line on anything it does not accept.

export class HlsParseError extends Error {
  constructor(
    readonly line: number,
    message: string,
  ) {
    super(`line ${line}: ${message}`);
    this.name = 'HlsParseError';
  }
}

export type Attributes = Record<string, string>;

export interface HlsVariant {
  attributes: Attributes;
  bandwidth: number;
  resolution?: { width: number; height: number };
  codecs?: string;
  uri: string;
}

export interface HlsMaster {
  kind: 'master';
  version: number;
  variants: HlsVariant[];
  media: Attributes[];
}

export interface HlsMediaSegment {
  duration_s: number;
  uri: string;
}

export interface HlsMedia {
  kind: 'media';
  version: number;
  target_duration: number;
  media_sequence: number;
  playlist_type?: string;
  map?: string;
  segments: HlsMediaSegment[];
  ended: boolean;
}

/** RFC 8216 4.2 attribute-list: NAME=value, value quoted-string | enumerated | decimal | resolution. */
export function parseAttributes(text: string, line: number): Attributes {
  const out: Attributes = {};
  let i = 0;
  while (i < text.length) {
    const eq = text.indexOf('=', i);
    if (eq < 0) throw new HlsParseError(line, `attribute without value in "${text}"`);
    const name = text.slice(i, eq);
    if (!/^[A-Z0-9-]+$/.test(name)) throw new HlsParseError(line, `bad attribute name "${name}"`);
    if (name in out) throw new HlsParseError(line, `attribute ${name} repeated`);
    let value: string;
    if (text[eq + 1] === '"') {
      const close = text.indexOf('"', eq + 2);
      if (close < 0) throw new HlsParseError(line, `unterminated quoted value of ${name}`);
      value = text.slice(eq + 2, close);
      i = close + 1;
    } else {
      const comma = text.indexOf(',', eq + 1);
      const end = comma < 0 ? text.length : comma;
      value = text.slice(eq + 1, end);
      if (!/^[^\s",]+$/.test(value)) throw new HlsParseError(line, `bad unquoted value of ${name}`);
      i = end;
    }
    out[name] = value;
    if (i < text.length) {
      if (text[i] !== ',') throw new HlsParseError(line, `expected ',' after ${name}`);
      i++;
      if (i === text.length) throw new HlsParseError(line, 'trailing comma');
    }
  }
  return out;
}

const MASTER_TAGS = new Set([
  '#EXT-X-VERSION',
  '#EXT-X-INDEPENDENT-SEGMENTS',
  '#EXT-X-STREAM-INF',
  '#EXT-X-MEDIA',
  '#EXT-X-I-FRAME-STREAM-INF',
  '#EXT-X-START',
  '#EXT-X-SESSION-DATA',
]);
const MEDIA_TAGS = new Set([
  '#EXT-X-VERSION',
  '#EXT-X-INDEPENDENT-SEGMENTS',
  '#EXT-X-TARGETDURATION',
  '#EXT-X-MEDIA-SEQUENCE',
  '#EXT-X-PLAYLIST-TYPE',
  '#EXT-X-MAP',
  '#EXTINF',
  '#EXT-X-ENDLIST',
  '#EXT-X-DISCONTINUITY',
  '#EXT-X-BYTERANGE',
  '#EXT-X-START',
]);

export function parseHls(text: string): HlsMaster | HlsMedia {
  const lines = text.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  if (lines[0] !== '#EXTM3U') throw new HlsParseError(1, 'first line must be #EXTM3U');
  const isMaster = lines.some((l) => l.startsWith('#EXT-X-STREAM-INF:'));
  const allowed = isMaster ? MASTER_TAGS : MEDIA_TAGS;
  let version = 1;
  const variants: HlsVariant[] = [];
  const media: Attributes[] = [];
  const segments: HlsMediaSegment[] = [];
  let pendingInf: { attrs: Attributes; line: number } | undefined;
  let pendingDuration: number | undefined;
  let target: number | undefined;
  let sequence = 0;
  let playlistType: string | undefined;
  let map: string | undefined;
  let ended = false;
  for (let n = 1; n < lines.length; n++) {
    const line = lines[n]!;
    const ln = n + 1;
    if (line.includes('\r')) throw new HlsParseError(ln, 'carriage return');
    if (line === '') continue;
    if (ended) throw new HlsParseError(ln, 'content after #EXT-X-ENDLIST');
    if (line.startsWith('#')) {
      if (!line.startsWith('#EXT')) continue; // a comment
      const colon = line.indexOf(':');
      const tag = colon < 0 ? line : line.slice(0, colon);
      const value = colon < 0 ? '' : line.slice(colon + 1);
      if (!allowed.has(tag))
        throw new HlsParseError(ln, `tag ${tag} is not allowed in a ${isMaster ? 'master' : 'media'} playlist`);
      if (pendingInf || pendingDuration !== undefined) {
        if (tag === '#EXT-X-STREAM-INF' || tag === '#EXTINF')
          throw new HlsParseError(ln, `${tag} before the previous one's URI`);
      }
      switch (tag) {
        case '#EXT-X-VERSION':
          version = int(value, ln, tag);
          break;
        case '#EXT-X-STREAM-INF':
          pendingInf = { attrs: parseAttributes(value, ln), line: ln };
          break;
        case '#EXT-X-MEDIA': {
          const a = parseAttributes(value, ln);
          if (!a.TYPE || !a['GROUP-ID'] || !a.NAME)
            throw new HlsParseError(ln, 'EXT-X-MEDIA needs TYPE, GROUP-ID and NAME');
          if (a.TYPE === 'SUBTITLES' && !a.URI) throw new HlsParseError(ln, 'SUBTITLES media needs a URI');
          media.push(a);
          break;
        }
        case '#EXT-X-TARGETDURATION':
          target = int(value, ln, tag);
          break;
        case '#EXT-X-MEDIA-SEQUENCE':
          sequence = int(value, ln, tag);
          break;
        case '#EXT-X-PLAYLIST-TYPE':
          if (value !== 'VOD' && value !== 'EVENT') throw new HlsParseError(ln, `bad playlist type ${value}`);
          playlistType = value;
          break;
        case '#EXT-X-MAP': {
          const a = parseAttributes(value, ln);
          if (!a.URI) throw new HlsParseError(ln, 'EXT-X-MAP needs URI');
          map = a.URI;
          break;
        }
        case '#EXTINF': {
          const m = /^(\d+(?:\.\d+)?),.*$/.exec(value);
          if (!m) throw new HlsParseError(ln, `bad EXTINF "${value}"`);
          pendingDuration = Number(m[1]);
          break;
        }
        case '#EXT-X-ENDLIST':
          ended = true;
          break;
        default:
          break;
      }
      continue;
    }
    // A URI line.
    if (isMaster) {
      if (!pendingInf) throw new HlsParseError(ln, 'URI without #EXT-X-STREAM-INF');
      const a = pendingInf.attrs;
      if (!a.BANDWIDTH || !/^\d+$/.test(a.BANDWIDTH))
        throw new HlsParseError(pendingInf.line, 'EXT-X-STREAM-INF needs a decimal BANDWIDTH');
      const v: HlsVariant = { attributes: a, bandwidth: Number(a.BANDWIDTH), uri: line };
      if (a.RESOLUTION !== undefined) {
        const r = /^(\d+)x(\d+)$/.exec(a.RESOLUTION);
        if (!r) throw new HlsParseError(pendingInf.line, `bad RESOLUTION ${a.RESOLUTION}`);
        v.resolution = { width: Number(r[1]), height: Number(r[2]) };
      }
      if (a.CODECS !== undefined) v.codecs = a.CODECS;
      if (a.SUBTITLES !== undefined && !media.some((m) => m.TYPE === 'SUBTITLES' && m['GROUP-ID'] === a.SUBTITLES)) {
        throw new HlsParseError(pendingInf.line, `SUBTITLES group ${a.SUBTITLES} is not declared`);
      }
      variants.push(v);
      pendingInf = undefined;
    } else {
      if (pendingDuration === undefined) throw new HlsParseError(ln, 'URI without #EXTINF');
      segments.push({ duration_s: pendingDuration, uri: line });
      pendingDuration = undefined;
    }
  }
  if (pendingInf || pendingDuration !== undefined) throw new HlsParseError(lines.length, 'playlist ends before a URI');
  if (isMaster) {
    if (variants.length === 0) throw new HlsParseError(1, 'master playlist without variants');
    return { kind: 'master', version, variants, media };
  }
  if (target === undefined) throw new HlsParseError(1, 'media playlist without #EXT-X-TARGETDURATION');
  for (const s of segments) {
    if (Math.round(s.duration_s) > target)
      throw new HlsParseError(1, `segment ${s.uri} lasts ${s.duration_s} s, over the target duration ${target}`);
  }
  if (map !== undefined && version < 6)
    throw new HlsParseError(1, 'EXT-X-MAP in a media playlist needs version 6 or more');
  const out: HlsMedia = { kind: 'media', version, target_duration: target, media_sequence: sequence, segments, ended };
  if (playlistType !== undefined) out.playlist_type = playlistType;
  if (map !== undefined) out.map = map;
  return out;
}

function int(value: string, line: number, tag: string): number {
  if (!/^\d+$/.test(value)) throw new HlsParseError(line, `${tag} needs a decimal integer`);
  return Number(value);
}
