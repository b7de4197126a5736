/**
 * The cold storage class's container: one archive file per video holding every object of the video (every
 * revision's segments, playlists, manifests, thumbnails, captions). Layout of a file (README "Storage tiers"):
 *
 *   bytes 0..7     magic "RKVCOLD1"
 *   bytes 8..11    header length H, unsigned 32-bit big-endian
 *   bytes 12..12+H the header: UTF-8 JSON {format: 1, video_id, encoding: "identity", entries: [{key, size, sha256}]}
 *   then           the entries' bytes, concatenated in the header's order (no padding)
 *
 * No gzip: the bulk is H.264/AAC segments and JPEGs, already compressed (gzip would cost CPU on both moves for a
 * few percent); `encoding` leaves room for it. A file is valid only if its length is exactly 12 + H + the sum of
 * the sizes and every entry's bytes hash to its sha256: a torn write, a truncation or a flipped byte is refused.
 * Writes go to a temp file, fsynced, renamed into place, and the folder fsynced (as every write of the store).
 */
import { createHash, randomBytes } from 'node:crypto';
import { open, rename, rm, type FileHandle } from 'node:fs/promises';
import { dirname, join } from 'node:path';

const ARCHIVE_MAGIC = Buffer.from('RKVCOLD1', 'latin1');
const PREFIX = ARCHIVE_MAGIC.length + 4;
/** A header bigger than this is a corrupt length field, not a real video (100 000 keys fit easily). */
const MAX_HEADER = 64 * 1024 * 1024;
const COPY = 1024 * 1024;

interface ArchiveEntry {
  key: string;
  size: number;
  sha256: string;
}

export interface ArchiveHeader {
  format: 1;
  video_id: string;
  encoding: 'identity';
  entries: ArchiveEntry[];
}

/** The archive is not a valid container (truncated, torn, a byte changed): nothing is restored from it. */
export class ArchiveCorruptError extends Error {
  override name = 'ArchiveCorruptError';
}

/** An entry to pack: its key, and the file holding its bytes with the size and sha256 its sidecar promises. */
interface PackSource extends ArchiveEntry {
  file: string;
}

/**
 * Writes the archive of `sources` to `path` durably (temp file in `tmpDir`, fsync, rename, folder fsync). Each
 * source's bytes are hashed while copied and must match its promised sha256 (a rotten warm copy is not archived).
 */
export async function writeArchive(
  path: string,
  tmpDir: string,
  videoId: string,
  sources: PackSource[],
): Promise<ArchiveHeader> {
  const header: ArchiveHeader = {
    format: 1,
    video_id: videoId,
    encoding: 'identity',
    entries: sources.map((s) => ({ key: s.key, size: s.size, sha256: s.sha256 })),
  };
  const json = Buffer.from(JSON.stringify(header), 'utf8');
  const lead = Buffer.alloc(PREFIX);
  ARCHIVE_MAGIC.copy(lead, 0);
  lead.writeUInt32BE(json.length, ARCHIVE_MAGIC.length);
  const tmp = join(tmpDir, `cold-${randomBytes(12).toString('hex')}`);
  const out = await open(tmp, 'w');
  try {
    await out.write(lead);
    await out.write(json);
    for (const s of sources) {
      const hash = createHash('sha256');
      let copied = 0;
      const input = await open(s.file, 'r');
      try {
        const buf = Buffer.alloc(Math.min(COPY, Math.max(1, s.size)));
        for (;;) {
          const { bytesRead } = await input.read(buf, 0, buf.length, copied);
          if (bytesRead === 0) break;
          hash.update(buf.subarray(0, bytesRead));
          await out.write(buf, 0, bytesRead);
          copied += bytesRead;
        }
      } finally {
        await input.close();
      }
      if (copied !== s.size || hash.digest('hex') !== s.sha256)
        throw new ArchiveCorruptError(`the warm copy of ${s.key} does not match its checksum: not archived`);
    }
    await out.sync();
  } catch (error) {
    await out.close();
    await rm(tmp, { force: true });
    throw error;
  }
  await out.close();
  await rename(tmp, path);
  await fsyncDir(dirname(path));
  return header;
}

async function readHeader(fh: FileHandle, fileSize: number): Promise<ArchiveHeader> {
  if (fileSize < PREFIX) throw new ArchiveCorruptError('shorter than the archive prefix');
  const lead = Buffer.alloc(PREFIX);
  await fh.read(lead, 0, PREFIX, 0);
  if (!lead.subarray(0, ARCHIVE_MAGIC.length).equals(ARCHIVE_MAGIC))
    throw new ArchiveCorruptError('not a cold archive (bad magic)');
  const length = lead.readUInt32BE(ARCHIVE_MAGIC.length);
  if (length > MAX_HEADER || PREFIX + length > fileSize) throw new ArchiveCorruptError('header length out of range');
  const json = Buffer.alloc(length);
  await fh.read(json, 0, length, PREFIX);
  let header: ArchiveHeader;
  try {
    header = JSON.parse(json.toString('utf8')) as ArchiveHeader;
  } catch {
    throw new ArchiveCorruptError('the header is not JSON');
  }
  if (header.format !== 1 || header.encoding !== 'identity' || !Array.isArray(header.entries))
    throw new ArchiveCorruptError('unknown archive format');
  let total = PREFIX + length;
  for (const e of header.entries) {
    if (
      typeof e.key !== 'string' ||
      !Number.isSafeInteger(e.size) ||
      e.size < 0 ||
      typeof e.sha256 !== 'string' ||
      !/^[0-9a-f]{64}$/.test(e.sha256)
    )
      throw new ArchiveCorruptError('a malformed entry in the header');
    total += e.size;
  }
  if (total !== fileSize)
    throw new ArchiveCorruptError(`the file is ${fileSize} bytes, the header accounts for ${total}`);
  return header;
}

/**
 * Reads and checks the whole archive at `path`; calls `onEntry` with each entry's verified bytes, in order, only
 * after EVERY entry was verified (so a corrupt archive restores nothing). Null when there is no archive.
 */
export async function readArchive(
  path: string,
  onEntry?: (entry: ArchiveEntry, bytes: Buffer) => Promise<void>,
): Promise<ArchiveHeader | null> {
  let fh: FileHandle;
  try {
    fh = await open(path, 'r');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw error;
  }
  try {
    const size = (await fh.stat()).size;
    const header = await readHeader(fh, size);
    // The header's length as written (not a re-serialization) positions the data.
    const lead = Buffer.alloc(PREFIX);
    await fh.read(lead, 0, PREFIX, 0);
    let offset = PREFIX + lead.readUInt32BE(ARCHIVE_MAGIC.length);
    const offsets: number[] = [];
    for (const e of header.entries) {
      offsets.push(offset);
      const bytes = await readAt(fh, offset, e.size);
      if (createHash('sha256').update(bytes).digest('hex') !== e.sha256)
        throw new ArchiveCorruptError(`entry ${e.key}: its bytes do not match its sha256`);
      offset += e.size;
    }
    if (onEntry !== undefined) {
      for (let i = 0; i < header.entries.length; i++) {
        const e = header.entries[i]!;
        const bytes = await readAt(fh, offsets[i]!, e.size);
        // Re-checked: the file could have changed between the passes (it never should; a restore must not trust it).
        if (createHash('sha256').update(bytes).digest('hex') !== e.sha256)
          throw new ArchiveCorruptError(`entry ${e.key} changed while being restored`);
        await onEntry(e, bytes);
      }
    }
    return header;
  } finally {
    await fh.close();
  }
}

async function readAt(fh: FileHandle, position: number, length: number): Promise<Buffer> {
  const buf = Buffer.alloc(length);
  let done = 0;
  while (done < length) {
    const { bytesRead } = await fh.read(buf, done, length - done, position + done);
    if (bytesRead === 0) throw new ArchiveCorruptError('truncated');
    done += bytesRead;
  }
  return buf;
}

export async function fsyncDir(dir: string): Promise<void> {
  const fh = await open(dir, 'r');
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}
