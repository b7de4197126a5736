/**
 * The object store's bytes on local disk. Layout under the store's data folder:
 *
 *   objects/<hh>/<sha256(key) hex>        the object's bytes (hh: the first two hex digits, 256 folders)
 *   objects/<hh>/<sha256(key) hex>.json   sidecar {key, size, sha256}: the key (file names are hashes, so any key
 *                                         of the API maps to one safe flat name) and the checksum of the bytes
 *   uploads/<upload id>/<index>.chunk     a chunk of a chunked upload, and <index>.json its sidecar {size, sha256}
 *   uploads/<upload id>/tus.bin           a tus upload's bytes so far, and tus.json {length, metadata}
 *   cold/<video id>.vca                   the cold storage class: every object of a cold video in one archive
 *                                         (archive.ts has the container)
 *   tombstones.jsonl                      {key, at} of each deleted object (replication: a replica that missed the
 *                                         delete drops its copy instead of handing it back; kept 30 days)
 *   tmp/                                  files being written
 *
 * Every finished object is also in an in-memory index (key -> size, sha256, written-at), built from the sidecars at
 * start and kept by every write and delete, with a generation bumped on each change: a peer's anti-entropy pass asks
 * for it and learns "unchanged" without this store touching the disk.
 *
 * Every write goes to tmp/, is fsynced, renamed into place and its folder fsynced: a crash leaves the old file or
 * the new one, never a torn one, and an acknowledged write survives a power cut. The sidecar is written after the
 * bytes, so an object without a sidecar is an unfinished write (ignored, overwritten by the next).
 */
import { createHash, randomBytes } from 'node:crypto';
import { createReadStream, createWriteStream, type ReadStream } from 'node:fs';
import { appendFile, mkdir, open, readdir, readFile, rename, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { readArchive, writeArchive, type ArchiveHeader } from './archive.js';

interface ObjectInfo {
  key: string;
  size: number;
  sha256: string;
}

/** An object as the index knows it: `at` is when it was written (ms; kept when a replica copies it). */
export interface IndexedObject extends ObjectInfo {
  at: number;
}

/** How long a tombstone is kept: a replica away longer than this may hand a deleted object back. */
const TOMBSTONE_KEEP_MS = 30 * 86_400_000;

/** A stored object whose bytes no longer hash to its sidecar's sha256: refused, and repaired from a replica. */
export class CorruptObjectError extends Error {
  override name = 'CorruptObjectError';
}

export interface ChunkInfo {
  index: number;
  size: number;
  sha256: string;
}

interface TusState {
  length: number;
  offset: number;
  metadata: string | null;
}

/** A write's size went over its limit: the caller answers 413. */
export class TooLargeError extends Error {
  override name = 'TooLargeError';
}

export class DiskStore {
  private readonly index = new Map<string, IndexedObject>();
  private readonly tombstones = new Map<string, number>();
  /** Bumped by every change of the index or the tombstones. */
  generation = 0;

  constructor(readonly root: string) {}

  async init(): Promise<void> {
    await mkdir(join(this.root, 'objects'), { recursive: true });
    await mkdir(join(this.root, 'uploads'), { recursive: true });
    await mkdir(join(this.root, 'cold'), { recursive: true });
    await rm(join(this.root, 'tmp'), { recursive: true, force: true });
    await mkdir(join(this.root, 'tmp'), { recursive: true });
    this.index.clear();
    for (const info of await this.scanSidecars()) this.index.set(info.key, info);
    await this.loadTombstones();
  }

  private async scanSidecars(): Promise<IndexedObject[]> {
    const out: IndexedObject[] = [];
    const top = join(this.root, 'objects');
    for (const hh of await readdir(top)) {
      for (const name of await readdir(join(top, hh))) {
        if (!name.endsWith('.json')) continue;
        try {
          const info = JSON.parse(await readFile(join(top, hh, name), 'utf8')) as IndexedObject;
          out.push({ key: info.key, size: info.size, sha256: info.sha256, at: info.at ?? 0 });
        } catch {
          // a sidecar torn by a crash before its rename cannot be here (renamed whole); skip anything unreadable
        }
      }
    }
    return out;
  }

  private tombstoneFile(): string {
    return join(this.root, 'tombstones.jsonl');
  }

  /** Loads the tombstones, dropping those past their keep time (the file is rewritten without them). */
  private async loadTombstones(): Promise<void> {
    this.tombstones.clear();
    let text = '';
    try {
      text = await readFile(this.tombstoneFile(), 'utf8');
    } catch {
      return;
    }
    const cutoff = Date.now() - TOMBSTONE_KEEP_MS;
    for (const line of text.split('\n')) {
      try {
        const t = JSON.parse(line) as { key: string; at: number };
        if (t.at >= cutoff && t.at > (this.tombstones.get(t.key) ?? -1)) this.tombstones.set(t.key, t.at);
      } catch {
        // an empty or torn last line
      }
    }
    for (const [key, at] of this.tombstones) if ((this.index.get(key)?.at ?? -1) >= at) this.tombstones.delete(key);
    const lines = [...this.tombstones].map(([key, at]) => JSON.stringify({ key, at }) + '\n').join('');
    await writeDurably(join(this.root, 'tmp'), this.tombstoneFile(), lines);
  }

  /** Every indexed object and tombstone, for a peer's anti-entropy pass. */
  listing(): { objects: IndexedObject[]; tombstones: Array<{ key: string; at: number }> } {
    return {
      objects: [...this.index.values()],
      tombstones: [...this.tombstones].map(([key, at]) => ({ key, at })),
    };
  }

  indexed(key: string): IndexedObject | null {
    return this.index.get(key) ?? null;
  }

  tombstoneOf(key: string): number | null {
    return this.tombstones.get(key) ?? null;
  }

  private objectPath(key: string): string {
    const h = createHash('sha256').update(key).digest('hex');
    return join(this.root, 'objects', h.slice(0, 2), h);
  }

  uploadDir(uploadId: string): string {
    return join(this.root, 'uploads', uploadId);
  }

  /**
   * Streams `source` to a temp file (at most `maxBytes`), fsynced; returns its path, size and sha256. The caller
   * renames it into place with `commit`.
   */
  async receive(source: Readable, maxBytes: number): Promise<{ tmp: string; size: number; sha256: string }> {
    const tmp = join(this.root, 'tmp', randomBytes(12).toString('hex'));
    const hash = createHash('sha256');
    let size = 0;
    const out = createWriteStream(tmp);
    try {
      await pipeline(
        source,
        async function* (chunks: AsyncIterable<Buffer>) {
          for await (const chunk of chunks) {
            size += chunk.length;
            if (size > maxBytes) throw new TooLargeError(`over ${maxBytes} bytes`);
            hash.update(chunk);
            yield chunk;
          }
        },
        out,
      );
      await fsyncFile(tmp);
    } catch (error) {
      await rm(tmp, { force: true });
      throw error;
    }
    return { tmp, size, sha256: hash.digest('hex') };
  }

  /** Moves a received temp file to `path` with its sidecar, durably. */
  private async commit(tmp: string, path: string, sidecar: object): Promise<void> {
    const dir = join(path, '..');
    await mkdir(dir, { recursive: true });
    await rename(tmp, path);
    await writeDurably(join(this.root, 'tmp'), `${path}.json`, JSON.stringify(sidecar));
    await fsyncDir(dir);
  }

  /** Stores an object from a stream; `at` is its write time (a replica's copy keeps the original's). */
  async putObject(key: string, source: Readable, maxBytes: number, at = Date.now()): Promise<ObjectInfo> {
    const r = await this.receive(source, maxBytes);
    return this.commitObject(key, r, at);
  }

  /** Moves a received temp file into place as `key` (temp, fsync, rename, sidecar) and indexes it. */
  async commitObject(
    key: string,
    r: { tmp: string; size: number; sha256: string },
    at = Date.now(),
  ): Promise<ObjectInfo> {
    const info = { key, size: r.size, sha256: r.sha256 };
    await this.commit(r.tmp, this.objectPath(key), { ...info, at });
    this.index.set(key, { ...info, at });
    if ((this.tombstones.get(key) ?? -1) <= at) this.tombstones.delete(key);
    this.generation++;
    return info;
  }

  /**
   * The object's bytes after checking them against its sha256 (for objects small enough to hold: the store's reads
   * of outputs and manifests); throws CorruptObjectError for a copy that no longer matches.
   */
  async readVerified(key: string, info: ObjectInfo): Promise<Buffer> {
    const bytes = await readFile(this.objectPath(key));
    const sha = createHash('sha256').update(bytes).digest('hex');
    if (bytes.length !== info.size || sha !== info.sha256)
      throw new CorruptObjectError(`${key}: the stored bytes hash to ${sha}, the sidecar says ${info.sha256}`);
    return bytes;
  }

  /** Whether the stored bytes of `key` still hash to its sidecar's sha256 (a streamed check, any size). */
  async verify(key: string): Promise<boolean> {
    const info = this.index.get(key);
    if (info === undefined) return false;
    const hash = createHash('sha256');
    try {
      for await (const chunk of createReadStream(this.objectPath(key)) as AsyncIterable<Buffer>) hash.update(chunk);
    } catch {
      return false;
    }
    return hash.digest('hex') === info.sha256;
  }

  async objectInfo(key: string): Promise<ObjectInfo | null> {
    try {
      const info = JSON.parse(await readFile(`${this.objectPath(key)}.json`, 'utf8')) as ObjectInfo;
      return info.key === key ? info : null;
    } catch {
      return null;
    }
  }

  readObject(key: string, range?: { start: number; end: number }): ReadStream {
    return createReadStream(this.objectPath(key), range === undefined ? {} : range);
  }

  objectFile(key: string): string {
    return this.objectPath(key);
  }

  /**
   * Deletes an object. `tombstone` (a delete the cluster decided: a re-encode's old outputs, a raw source past its
   * keep time) records it, so a replica that missed the delete drops its copy rather than handing it back; a local
   * move (the cold class's pack) leaves none, and a corrupt copy dropped for its repair neither.
   */
  async deleteObject(key: string, tombstone = false, at = Date.now()): Promise<boolean> {
    const path = this.objectPath(key);
    const existed = (await this.objectInfo(key)) !== null;
    if (tombstone && at > (this.tombstones.get(key) ?? -1)) {
      this.tombstones.set(key, at);
      await appendFile(this.tombstoneFile(), JSON.stringify({ key, at }) + '\n');
      this.generation++;
    }
    // Sidecar first: without it the bytes are an unfinished write, never served.
    await rm(`${path}.json`, { force: true });
    await rm(path, { force: true });
    if (this.index.delete(key)) this.generation++;
    return existed;
  }

  /** Deletes every object whose key starts with `prefix` (a re-encode's old outputs, a video's raw source). */
  async deletePrefix(prefix: string, tombstone = false): Promise<number> {
    let n = 0;
    for (const info of await this.listPrefix(prefix)) if (await this.deleteObject(info.key, tombstone)) n++;
    return n;
  }

  /** Every finished object whose key starts with `prefix`, sorted by key (from the index). */
  async listPrefix(prefix: string): Promise<ObjectInfo[]> {
    const out: ObjectInfo[] = [];
    for (const info of this.index.values())
      if (info.key.startsWith(prefix)) out.push({ key: info.key, size: info.size, sha256: info.sha256 });
    return out.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  }

  // ---------------------------------------------------------------- the cold storage class

  coldFile(videoId: string): string {
    return join(this.root, 'cold', `${videoId}.vca`);
  }

  async coldArchiveExists(videoId: string): Promise<boolean> {
    try {
      await stat(this.coldFile(videoId));
      return true;
    } catch {
      return false;
    }
  }

  /** The archive's header after checking every byte of it, or null without one (throws ArchiveCorruptError). */
  async coldArchive(videoId: string): Promise<ArchiveHeader | null> {
    return readArchive(this.coldFile(videoId));
  }

  /**
   * Moves every object under `videos/<id>/` into the video's archive: packs them (unless a verified archive is
   * already there: a move that crashed after the rename only has deletions left), re-reads and verifies the
   * archive, then deletes the warm copies it holds. Idempotent: re-running after a crash at any point finishes the
   * move and loses nothing (the warm copies go only once the archive on disk is verified).
   */
  async packCold(videoId: string): Promise<{ objects: number; bytes: number; packed: boolean }> {
    const path = this.coldFile(videoId);
    let header = await readArchive(path);
    const packed = header === null;
    if (header === null) {
      const warm = await this.listPrefix(`videos/${videoId}/`);
      await writeArchive(
        path,
        join(this.root, 'tmp'),
        videoId,
        warm.map((w) => ({ ...w, file: this.objectPath(w.key) })),
      );
      header = await readArchive(path);
      if (header === null) throw new Error(`the archive ${path} vanished after its write`);
    }
    // A warm copy that survives a power cut here is only wasted space: the record says archived, reads go cold.
    for (const e of header.entries) await this.deleteObject(e.key);
    return { objects: header.entries.length, bytes: header.entries.reduce((n, e) => n + e.size, 0), packed };
  }

  /**
   * Restores the video's archive into the warm layout: every entry's sha256 is verified before any is written
   * (a corrupt archive restores nothing and stays for an operator), each written as any object (temp, fsync,
   * rename, sidecar); then the archive is deleted. Idempotent: without an archive there is nothing left to do.
   */
  async unpackCold(videoId: string): Promise<{ objects: number; bytes: number; unpacked: boolean }> {
    const path = this.coldFile(videoId);
    let bytes = 0;
    const header = await readArchive(path, async (entry, data) => {
      const info = await this.putObject(entry.key, Readable.from([data]), entry.size);
      if (info.sha256 !== entry.sha256)
        throw new Error(`${entry.key} was written with sha256 ${info.sha256}, the archive says ${entry.sha256}`);
      bytes += entry.size;
    });
    if (header === null) return { objects: 0, bytes: 0, unpacked: false };
    await rm(path, { force: true });
    await fsyncDir(join(this.root, 'cold'));
    return { objects: header.entries.length, bytes, unpacked: true };
  }

  // ---------------------------------------------------------------- chunked uploads

  /** Stores chunk `index` (replacing a resent one atomically: the last complete copy wins). */
  async putChunk(
    uploadId: string,
    index: number,
    r: { tmp: string; size: number; sha256: string },
  ): Promise<ChunkInfo> {
    const info = { index, size: r.size, sha256: r.sha256 };
    await this.commit(r.tmp, join(this.uploadDir(uploadId), `${index}.chunk`), info);
    return info;
  }

  async chunks(uploadId: string): Promise<ChunkInfo[]> {
    let names: string[];
    try {
      names = await readdir(this.uploadDir(uploadId));
    } catch {
      return [];
    }
    const out: ChunkInfo[] = [];
    for (const name of names) {
      if (!/^\d+\.chunk\.json$/.test(name)) continue;
      try {
        out.push(JSON.parse(await readFile(join(this.uploadDir(uploadId), name), 'utf8')) as ChunkInfo);
      } catch {
        // being replaced right now
      }
    }
    return out.sort((a, b) => a.index - b.index);
  }

  chunkFile(uploadId: string, index: number): string {
    return join(this.uploadDir(uploadId), `${index}.chunk`);
  }

  // ---------------------------------------------------------------- tus

  async tusState(uploadId: string): Promise<TusState | null> {
    try {
      const meta = JSON.parse(await readFile(join(this.uploadDir(uploadId), 'tus.json'), 'utf8')) as {
        length: number;
        metadata: string | null;
      };
      let offset = 0;
      try {
        offset = (await stat(this.tusFile(uploadId))).size;
      } catch {
        offset = 0;
      }
      return { length: meta.length, offset, metadata: meta.metadata };
    } catch {
      return null;
    }
  }

  tusFile(uploadId: string): string {
    return join(this.uploadDir(uploadId), 'tus.bin');
  }

  async tusCreate(uploadId: string, length: number, metadata: string | null): Promise<void> {
    const dir = this.uploadDir(uploadId);
    await mkdir(dir, { recursive: true });
    await rm(this.tusFile(uploadId), { force: true });
    const fh = await open(this.tusFile(uploadId), 'w');
    await fh.sync();
    await fh.close();
    await writeDurably(join(this.root, 'tmp'), join(dir, 'tus.json'), JSON.stringify({ length, metadata }));
    await fsyncDir(dir);
  }

  /**
   * Appends a PATCH body at `offset` (which must be the current size), at most up to the declared length. The
   * bytes are fsynced before the new offset is answered; a PATCH cut short keeps what arrived (tus resumes there).
   */
  async tusAppend(
    uploadId: string,
    offset: number,
    length: number,
    source: Readable,
    expect?: { algorithm: 'sha1' | 'sha256' | 'md5'; digest: string },
  ): Promise<number> {
    const file = this.tusFile(uploadId);
    const fh = await open(file, 'r+');
    let written = 0;
    const hash = expect === undefined ? null : createHash(expect.algorithm);
    const parts: Buffer[] = [];
    try {
      for await (const chunk of source as AsyncIterable<Buffer>) {
        if (offset + written + chunk.length > length)
          throw new TooLargeError(`the body goes past Upload-Length ${length}`);
        if (hash !== null) {
          // With a checksum the PATCH is all or nothing: held until it is verified.
          hash.update(chunk);
          parts.push(chunk);
          written += chunk.length;
          continue;
        }
        await fh.write(chunk, 0, chunk.length, offset + written);
        written += chunk.length;
      }
      if (hash !== null) {
        if (hash.digest('base64') !== expect!.digest)
          throw new ChecksumError('the PATCH body does not match Upload-Checksum');
        const all = Buffer.concat(parts);
        await fh.write(all, 0, all.length, offset);
      }
      await fh.sync();
    } catch (error) {
      if (hash === null) await fh.sync().catch(() => undefined);
      throw error;
    } finally {
      await fh.close();
    }
    return offset + written;
  }

  /**
   * Removes uploads nothing was written to for `maxAgeMs` (abandoned: never finalized, or finalized and their chunk
   * copies left behind). Their URL expired long before (24 h); a client coming back re-signs and resends.
   */
  async sweepUploads(now: number, maxAgeMs: number): Promise<string[]> {
    const dropped: string[] = [];
    for (const id of await readdir(join(this.root, 'uploads'))) {
      const dir = this.uploadDir(id);
      let newest = 0;
      try {
        newest = (await stat(dir)).mtimeMs;
        for (const name of await readdir(dir)) newest = Math.max(newest, (await stat(join(dir, name))).mtimeMs);
      } catch {
        continue;
      }
      if (now - newest >= maxAgeMs) {
        await rm(dir, { recursive: true, force: true });
        dropped.push(id);
      }
    }
    return dropped;
  }

  async dropUpload(uploadId: string): Promise<void> {
    await rm(this.uploadDir(uploadId), { recursive: true, force: true });
  }
}

export class ChecksumError extends Error {
  override name = 'ChecksumError';
}

async function fsyncFile(path: string): Promise<void> {
  const fh = await open(path, 'r');
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}

async function fsyncDir(dir: string): Promise<void> {
  const fh = await open(dir, 'r');
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}

async function writeDurably(tmpDir: string, path: string, text: string): Promise<void> {
  const tmp = join(tmpDir, randomBytes(12).toString('hex'));
  const fh = await open(tmp, 'w');
  try {
    await fh.writeFile(text);
    await fh.sync();
  } finally {
    await fh.close();
  }
  await rename(tmp, path);
}
