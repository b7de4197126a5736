/**
 * The durable stream on disk: append-only segment files named by the offset of their first record, rolled by
 * size. Appends are group-committed: records that arrive within `commitIntervalMs` share one write and one
 * fdatasync, and an append resolves only once its records are on disk. Readers only ever see durable records, so
 * a consumer never acts on a record a crash could take back. `open` checks the last segment record by record and
 * truncates a torn tail.
 */
import { mkdir, open, readdir, rm, stat, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { encodeRecord, HEADER_BYTES, scanRecords } from './record.js';

export interface StreamLogOptions {
  dir: string;
  /** A segment is rolled once the next record would take it past this size (default 64 MiB). */
  segmentBytes?: number;
  /** Group-commit window: how long appends wait to share a write and an fdatasync (default 5 ms). */
  commitIntervalMs?: number;
  /** Largest payload accepted (default 1 MiB). */
  maxRecordBytes?: number;
  /** Retention: oldest whole segments are deleted while the stream is larger than this (0 = keep all, the default). */
  retainBytes?: number;
  /** Retention: oldest whole segments are deleted while there are more segments than this (0 = keep all). */
  retainSegments?: number;
}

export interface ReadResult {
  /** Offset of the first record returned: the asked offset, or the oldest retained one when that was deleted. */
  offset: number;
  records: Buffer[];
}

/** Every INDEX_EVERY-th record's byte position is kept in memory, so a read seeks close to its offset. */
const INDEX_EVERY = 256;
const READ_CHUNK = 1 << 20;
const SEGMENT_NAME = /^(\d{20})\.seg$/;

interface Segment {
  base: number;
  path: string;
  /** Durable bytes and records (what readers may see). */
  bytes: number;
  count: number;
  /** Written but not yet synced (active segment only). */
  unsyncedBytes: number;
  unsyncedCount: number;
  /** Byte positions of records base, base+INDEX_EVERY, ...; null until first needed for a segment found on disk. */
  index: number[] | null;
}

interface PendingAppend {
  payloads: Uint8Array[];
  first: number;
  resolve(first: number): void;
  reject(error: Error): void;
}

export class StreamLog {
  private readonly segmentBytes: number;
  private readonly commitIntervalMs: number;
  readonly maxRecordBytes: number;
  private readonly retainBytes: number;
  private readonly retainSegments: number;
  private pending: PendingAppend[] = [];
  private assignedEnd: number;
  private timer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> | undefined;
  private failure: Error | undefined;
  private closed = false;
  private readonly listeners = new Set<() => void>();
  /** Where the record after the last read starts, so a consumer reading in order never rescans. */
  private readonly resume = new Map<number, { base: number; position: number }>();

  private constructor(
    readonly dir: string,
    private readonly segments: Segment[],
    private writer: FileHandle,
    /** Bytes cut from the last segment by open (a torn tail), 0 when it was clean. */
    readonly truncatedBytes: number,
    options: StreamLogOptions,
  ) {
    this.segmentBytes = options.segmentBytes ?? 64 << 20;
    this.commitIntervalMs = options.commitIntervalMs ?? 5;
    this.maxRecordBytes = options.maxRecordBytes ?? 1 << 20;
    this.retainBytes = options.retainBytes ?? 0;
    this.retainSegments = options.retainSegments ?? 0;
    this.assignedEnd = this.endOffset;
  }

  static async open(options: StreamLogOptions): Promise<StreamLog> {
    const dir = options.dir;
    await mkdir(dir, { recursive: true });
    const bases = (await readdir(dir))
      .map((name) => SEGMENT_NAME.exec(name)?.[1])
      .filter((b): b is string => b !== undefined)
      .map(Number)
      .sort((a, b) => a - b);
    if (bases.length === 0) {
      await createSegmentFile(dir, 0);
      bases.push(0);
    }
    const segments: Segment[] = [];
    for (let i = 0; i < bases.length - 1; i++) {
      const base = bases[i]!;
      const path = segmentPath(dir, base);
      segments.push({
        base,
        path,
        bytes: (await stat(path)).size,
        count: bases[i + 1]! - base,
        unsyncedBytes: 0,
        unsyncedCount: 0,
        index: null,
      });
    }
    const lastBase = bases[bases.length - 1]!;
    const lastPath = segmentPath(dir, lastBase);
    const writer = await open(lastPath, 'r+');
    const size = (await writer.stat()).size;
    const maxPayload = options.maxRecordBytes ?? 1 << 20;
    const { end, count, index } = await indexFile(writer, size, maxPayload);
    if (end < size) {
      await writer.truncate(end);
      await writer.datasync();
    }
    segments.push({ base: lastBase, path: lastPath, bytes: end, count, unsyncedBytes: 0, unsyncedCount: 0, index });
    return new StreamLog(dir, segments, writer, size - end, options);
  }

  /** Offset of the oldest retained record. */
  get startOffset(): number {
    return this.segments[0]!.base;
  }

  /** Offset the next durable record will get: every record below it is on disk. */
  get endOffset(): number {
    const active = this.active;
    return active.base + active.count;
  }

  get sizeBytes(): number {
    return this.segments.reduce((sum, s) => sum + s.bytes, 0);
  }

  get segmentCount(): number {
    return this.segments.length;
  }

  private get active(): Segment {
    return this.segments[this.segments.length - 1]!;
  }

  /** Calls `listener` each time records become durable; returns the unsubscribe function. */
  onDurable(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Resolves with the offset of the first record once all of them are on disk. */
  append(payloads: Uint8Array[]): Promise<number> {
    if (this.closed) return Promise.reject(new Error('stream log is closed'));
    if (this.failure) return Promise.reject(this.failure);
    const tooLarge = payloads.find((p) => p.length > this.maxRecordBytes);
    if (tooLarge)
      return Promise.reject(new RangeError(`record of ${tooLarge.length} bytes exceeds ${this.maxRecordBytes}`));
    if (payloads.length === 0) return Promise.resolve(this.assignedEnd);
    const first = this.assignedEnd;
    this.assignedEnd += payloads.length;
    return new Promise<number>((resolve, reject) => {
      this.pending.push({ payloads, first, resolve, reject });
      this.scheduleFlush();
    });
  }

  private scheduleFlush(): void {
    if (this.timer !== undefined || this.flushing !== undefined) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.flushing = this.flush().finally(() => {
        this.flushing = undefined;
        if (this.pending.length > 0) this.scheduleFlush();
      });
    }, this.commitIntervalMs);
  }

  private async flush(): Promise<void> {
    const batch = this.pending;
    this.pending = [];
    try {
      let buffers: Buffer[] = [];
      for (const append of batch) {
        for (const payload of append.payloads) {
          const record = encodeRecord(payload);
          const seg = this.active;
          const written = seg.count + seg.unsyncedCount;
          if (written > 0 && seg.bytes + seg.unsyncedBytes + record.length > this.segmentBytes) {
            await this.write(buffers);
            buffers = [];
            await this.roll();
          }
          const target = this.active;
          if ((target.count + target.unsyncedCount) % INDEX_EVERY === 0)
            target.index!.push(target.bytes + target.unsyncedBytes);
          target.unsyncedBytes += record.length;
          target.unsyncedCount++;
          buffers.push(record);
        }
      }
      await this.write(buffers);
      await this.sync();
      await this.enforceRetention();
    } catch (e) {
      this.failure = e as Error;
      for (const append of [...batch, ...this.pending]) append.reject(this.failure);
      this.pending = [];
      return;
    }
    for (const append of batch) append.resolve(append.first);
    for (const listener of this.listeners) listener();
  }

  /** Writes `buffers` after the active segment's written bytes (which `unsyncedBytes` already counts). */
  private async write(buffers: Buffer[]): Promise<void> {
    if (buffers.length === 0) return;
    const data = Buffer.concat(buffers);
    const seg = this.active;
    let position = seg.bytes + seg.unsyncedBytes - data.length;
    let done = 0;
    while (done < data.length) {
      const { bytesWritten } = await this.writer.write(data, done, data.length - done, position);
      done += bytesWritten;
      position += bytesWritten;
    }
  }

  private async sync(): Promise<void> {
    const seg = this.active;
    if (seg.unsyncedCount === 0) return;
    await this.writer.datasync();
    seg.bytes += seg.unsyncedBytes;
    seg.count += seg.unsyncedCount;
    seg.unsyncedBytes = 0;
    seg.unsyncedCount = 0;
  }

  private async roll(): Promise<void> {
    await this.sync();
    const next = this.endOffset;
    await this.writer.close();
    const path = await createSegmentFile(this.dir, next);
    this.writer = await open(path, 'r+');
    this.segments.push({ base: next, path, bytes: 0, count: 0, unsyncedBytes: 0, unsyncedCount: 0, index: [] });
    // Readers of the rolled segment may now be told records exist past it.
    for (const listener of this.listeners) listener();
  }

  private async enforceRetention(): Promise<void> {
    const tooMany = () => this.retainSegments > 0 && this.segments.length > this.retainSegments;
    const tooBig = () => this.retainBytes > 0 && this.sizeBytes > this.retainBytes;
    while (this.segments.length > 1 && (tooMany() || tooBig())) {
      const oldest = this.segments.shift()!;
      // Unlinking an open file is safe on POSIX: a read in progress finishes on the old inode.
      await rm(oldest.path, { force: true });
    }
  }

  /**
   * Up to `maxRecords` durable records from `offset` (at least one when any exists, then up to `maxBytes` of
   * payload). An offset below the oldest retained record reads from that record; at or past the end, none.
   */
  async read(offset: number, maxRecords: number, maxBytes = READ_CHUNK): Promise<ReadResult> {
    if (!Number.isSafeInteger(offset) || offset < 0) throw new RangeError(`bad offset ${offset}`);
    const from = Math.max(offset, this.startOffset);
    if (from >= this.endOffset || maxRecords <= 0) return { offset: from, records: [] };
    const seg = this.segmentOf(from);
    const rel = from - seg.base;
    const available = Math.min(maxRecords, seg.count - rel);
    const handle = await open(seg.path, 'r');
    try {
      let position: number;
      let skip: number;
      const cached = this.resume.get(from);
      if (cached !== undefined && cached.base === seg.base) {
        position = cached.position;
        skip = 0;
      } else {
        if (seg.index === null) seg.index = (await indexFile(handle, seg.bytes, this.maxRecordBytes)).index;
        const slot = Math.floor(rel / INDEX_EVERY);
        position = seg.index[slot]!;
        skip = rel - slot * INDEX_EVERY;
      }
      const records: Buffer[] = [];
      let bytes = 0;
      const chunk = Math.max(READ_CHUNK, this.maxRecordBytes + HEADER_BYTES);
      scan: while (records.length < available && position < seg.bytes) {
        const length = Math.min(seg.bytes - position, chunk);
        const buf = await readExactly(handle, position, length);
        const { records: found, end } = scanRecords(buf, skip + available - records.length, this.maxRecordBytes);
        if (found.length === 0) throw new Error(`corrupt record in ${seg.path} at byte ${position}`);
        for (const r of found) {
          if (skip > 0) {
            skip--;
            continue;
          }
          if (records.length > 0 && bytes + r.payload.length > maxBytes) {
            position += r.position;
            break scan;
          }
          records.push(r.payload);
          bytes += r.payload.length;
        }
        position += end;
      }
      this.resume.clear();
      this.resume.set(from + records.length, { base: seg.base, position });
      return { offset: from, records };
    } finally {
      await handle.close();
    }
  }

  private segmentOf(offset: number): Segment {
    let lo = 0;
    let hi = this.segments.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (this.segments[mid]!.base <= offset) lo = mid;
      else hi = mid - 1;
    }
    return this.segments[lo]!;
  }

  /** Waits for appends already accepted, then closes the file; later appends are refused. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.timer !== undefined) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
    await this.flushing;
    if (this.pending.length > 0) await this.flush();
    this.listeners.clear();
    await this.writer.close();
  }
}

function segmentPath(dir: string, base: number): string {
  return join(dir, `${String(base).padStart(20, '0')}.seg`);
}

/** Creates an empty segment and syncs the directory, so the file itself survives a crash. */
async function createSegmentFile(dir: string, base: number): Promise<string> {
  const path = segmentPath(dir, base);
  await (await open(path, 'wx')).close();
  const dirHandle = await open(dir, 'r');
  try {
    await dirHandle.sync();
  } finally {
    await dirHandle.close();
  }
  return path;
}

async function readExactly(handle: FileHandle, position: number, length: number): Promise<Buffer> {
  const buf = Buffer.allocUnsafe(length);
  let done = 0;
  while (done < length) {
    const { bytesRead } = await handle.read(buf, done, length - done, position + done);
    if (bytesRead === 0) return buf.subarray(0, done);
    done += bytesRead;
  }
  return buf;
}

/** Walks a segment's valid records: how many, where the valid part ends, and the sparse position index. */
async function indexFile(
  handle: FileHandle,
  size: number,
  maxPayload: number,
): Promise<{ end: number; count: number; index: number[] }> {
  const index: number[] = [];
  let count = 0;
  let position = 0;
  const chunk = Math.max(4 * READ_CHUNK, maxPayload + HEADER_BYTES);
  while (position < size) {
    const buf = await readExactly(handle, position, Math.min(chunk, size - position));
    const { records, end, corrupt } = scanRecords(buf, Infinity, maxPayload);
    for (const r of records) {
      if (count % INDEX_EVERY === 0) index.push(position + r.position);
      count++;
    }
    position += end;
    if (corrupt || records.length === 0) break;
  }
  return { end: position, count, index };
}
