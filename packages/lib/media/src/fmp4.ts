// Just enough ISO-BMFF (fragmented MP4) to cut ffmpeg's output into an init segment and one media segment per
// fragment, to move each fragment onto the video's timeline, and to read the durations and codec strings that the
// manifests advertise. Pure functions over Buffers.

interface Box {
  type: string;
  start: number;
  size: number;
  /** Offset of the payload (after the 8- or 16-byte header). */
  body: number;
}

function boxes(buf: Buffer, from = 0, to = buf.length): Box[] {
  const out: Box[] = [];
  let at = from;
  while (at + 8 <= to) {
    let size = buf.readUInt32BE(at);
    const type = buf.toString('latin1', at + 4, at + 8);
    let body = at + 8;
    if (size === 1) {
      if (at + 16 > to) throw new Error('fmp4: truncated large box header');
      size = Number(buf.readBigUInt64BE(at + 8));
      body = at + 16;
    } else if (size === 0) {
      size = to - at;
    }
    if (size < body - at || at + size > to) throw new Error(`fmp4: box ${type} at ${at} overruns its parent`);
    out.push({ type, start: at, size, body });
    at += size;
  }
  return out;
}

function child(buf: Buffer, parent: Box, type: string): Box | undefined {
  return boxes(buf, parent.body, parent.start + parent.size).find((b) => b.type === type);
}

function children(buf: Buffer, parent: Box, type: string): Box[] {
  return boxes(buf, parent.body, parent.start + parent.size).filter((b) => b.type === type);
}

export interface TrackInfo {
  id: number;
  handler: 'vide' | 'soun' | string;
  timescale: number;
  /** RFC 6381 codec string: avc1.PPCCLL from avcC, mp4a.40.<aot> from esds. */
  codec: string;
}

export interface FragmentInfo {
  /** Byte range of moof (+ any styp/prft before it) through its mdat. */
  start: number;
  end: number;
  /** Per track: decode time of the first sample and total sample duration, in the track's timescale. */
  tracks: Map<number, { baseTime: bigint; duration: number; tfdtAt: number }>;
}

export interface Fmp4Layout {
  /** ftyp + moov. */
  initEnd: number;
  tracks: TrackInfo[];
  fragments: FragmentInfo[];
}

export function parseFmp4(buf: Buffer): Fmp4Layout {
  const top = boxes(buf);
  const moov = top.find((b) => b.type === 'moov');
  if (!moov) throw new Error('fmp4: no moov box');
  const initEnd = moov.start + moov.size;
  const tracks = children(buf, moov, 'trak').map((trak) => trackInfo(buf, trak));
  const trex = new Map<number, number>();
  const mvex = child(buf, moov, 'mvex');
  if (mvex) {
    for (const t of children(buf, mvex, 'trex')) trex.set(buf.readUInt32BE(t.body + 4), buf.readUInt32BE(t.body + 12));
  }
  const fragments: FragmentInfo[] = [];
  let pendingStart: number | undefined;
  let current: FragmentInfo | undefined;
  for (const b of top) {
    if (b.start < initEnd) continue;
    if (b.type === 'styp' || b.type === 'prft' || b.type === 'sidx') {
      pendingStart ??= b.start;
    } else if (b.type === 'moof') {
      current = { start: pendingStart ?? b.start, end: b.start + b.size, tracks: new Map() };
      pendingStart = undefined;
      for (const traf of children(buf, b, 'traf')) readTraf(buf, traf, trex, current);
      fragments.push(current);
    } else if (b.type === 'mdat' && current) {
      current.end = b.start + b.size;
    }
  }
  return { initEnd, tracks, fragments };
}

function trackInfo(buf: Buffer, trak: Box): TrackInfo {
  const tkhd = child(buf, trak, 'tkhd');
  const mdia = child(buf, trak, 'mdia');
  if (!tkhd || !mdia) throw new Error('fmp4: trak without tkhd or mdia');
  const id = buf.readUInt32BE(tkhd.body + (buf[tkhd.body] === 1 ? 20 : 12));
  const mdhd = child(buf, mdia, 'mdhd');
  const hdlr = child(buf, mdia, 'hdlr');
  if (!mdhd || !hdlr) throw new Error('fmp4: mdia without mdhd or hdlr');
  const timescale = buf.readUInt32BE(mdhd.body + (buf[mdhd.body] === 1 ? 20 : 12));
  const handler = buf.toString('latin1', hdlr.body + 8, hdlr.body + 12);
  return { id, handler, timescale, codec: codecOf(buf, trak) };
}

// The sample entry sits deep (mdia/minf/stbl/stsd); searching the trak's bytes for the config box is simpler and
// safe because the four-character names cannot occur inside ffmpeg's fixed-size header fields here.
function codecOf(buf: Buffer, trak: Box): string {
  const region = buf.subarray(trak.start, trak.start + trak.size);
  const avcC = region.indexOf('avcC', 0, 'latin1');
  if (avcC >= 0) {
    const p = avcC + 4;
    // configurationVersion, AVCProfileIndication, profile_compatibility, AVCLevelIndication
    const hex = (n: number): string => n.toString(16).padStart(2, '0').toUpperCase();
    return `avc1.${hex(region[p + 1]!)}${hex(region[p + 2]!)}${hex(region[p + 3]!)}`;
  }
  if (region.indexOf('mp4a', 0, 'latin1') >= 0) {
    const esds = region.indexOf('esds', 0, 'latin1');
    // DecoderSpecificInfo tag 0x05: its first 5 bits are the audio object type (2 = AAC-LC).
    if (esds >= 0) {
      for (let i = esds + 8; i < region.length - 2; i++) {
        if (region[i] === 0x05) {
          let j = i + 1;
          while (region[j]! & 0x80) j++;
          const aot = region[j + 1]! >> 3;
          if (aot > 0) return `mp4a.40.${aot}`;
          break;
        }
      }
    }
    return 'mp4a.40.2';
  }
  return 'unknown';
}

function readTraf(buf: Buffer, traf: Box, trex: Map<number, number>, frag: FragmentInfo): void {
  const tfhd = child(buf, traf, 'tfhd');
  const tfdt = child(buf, traf, 'tfdt');
  if (!tfhd || !tfdt) throw new Error('fmp4: traf without tfhd or tfdt');
  const flags = buf.readUInt32BE(tfhd.body) & 0xffffff;
  const id = buf.readUInt32BE(tfhd.body + 4);
  let p = tfhd.body + 8;
  if (flags & 0x01) p += 8; // base_data_offset
  if (flags & 0x02) p += 4; // sample_description_index
  const defaultDuration = flags & 0x08 ? buf.readUInt32BE(p) : (trex.get(id) ?? 0);
  const version = buf[tfdt.body]!;
  const baseTime = version === 1 ? buf.readBigUInt64BE(tfdt.body + 4) : BigInt(buf.readUInt32BE(tfdt.body + 4));
  let duration = 0;
  for (const trun of children(buf, traf, 'trun')) {
    const tflags = buf.readUInt32BE(trun.body) & 0xffffff;
    const count = buf.readUInt32BE(trun.body + 4);
    let q = trun.body + 8;
    if (tflags & 0x01) q += 4; // data_offset
    if (tflags & 0x04) q += 4; // first_sample_flags
    const per = [0x100, 0x200, 0x400, 0x800].filter((f) => tflags & f).length * 4;
    if (tflags & 0x100) {
      for (let i = 0; i < count; i++) duration += buf.readUInt32BE(q + i * per);
    } else {
      duration += count * defaultDuration;
    }
  }
  frag.tracks.set(id, { baseTime, duration, tfdtAt: version === 1 ? tfdt.body + 4 : -1 });
}

/**
 * Moves every fragment by `offsetSeconds` on each track's own timescale (ffmpeg starts every task's output at 0;
 * the manifests need segment k of the video at its real time). Writes in place; needs 64-bit tfdt (ffmpeg's).
 */
export function shiftFragments(buf: Buffer, layout: Fmp4Layout, offsetSeconds: number): void {
  for (const frag of layout.fragments) {
    for (const [id, t] of frag.tracks) {
      const track = layout.tracks.find((x) => x.id === id);
      if (!track) throw new Error(`fmp4: fragment for unknown track ${id}`);
      if (t.tfdtAt < 0) throw new Error('fmp4: 32-bit tfdt cannot be shifted in place');
      const shifted = t.baseTime + BigInt(Math.round(offsetSeconds * track.timescale));
      buf.writeBigUInt64BE(shifted, t.tfdtAt);
      t.baseTime = shifted;
    }
  }
}
