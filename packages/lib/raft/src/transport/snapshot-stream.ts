/**
 * Snapshots travel as a stream of chunk frames so that no frame exceeds the frame limit, however large the
 * snapshot, and so other messages can be interleaved between chunks (heartbeats keep flowing meanwhile).
 */
import type { SnapshotRequest } from '../types.js';
import { ownedBytes } from '../codec/msgpack.js';
import type { SnapshotChunkFrame } from './wire.js';

/** Cuts one 'snapshot' message into chunk frames on demand. Holds a reference to the data, not a copy. */
export class SnapshotSender {
  private offset = 0;
  private started = false;

  constructor(
    readonly message: SnapshotRequest,
    readonly stream: number,
    private readonly chunkBytes: number,
    /** The group the snapshot is for, when the transport carries many. */
    readonly group?: string,
  ) {}

  /** Whether every chunk has been produced. */
  get done(): boolean {
    return this.started && this.offset >= this.message.snapshot.data.byteLength;
  }

  /** Starts over from the first chunk (the connection carrying the stream broke). */
  restart(): void {
    this.offset = 0;
    this.started = false;
  }

  /** The next chunk, or null when done. An empty snapshot is one chunk with no data. */
  nextChunk(): SnapshotChunkFrame | null {
    if (this.done) return null;
    const { from, to, term, snapshot } = this.message;
    const end = Math.min(this.offset + this.chunkBytes, snapshot.data.byteLength);
    const chunk: SnapshotChunkFrame = {
      kind: 'snapChunk',
      stream: this.stream,
      from,
      to,
      term,
      meta: snapshot.meta,
      offset: this.offset,
      total: snapshot.data.byteLength,
      data: snapshot.data.subarray(this.offset, end),
    };
    if (this.group !== undefined) chunk.group = this.group;
    this.offset = end;
    this.started = true;
    return chunk;
  }
}

/** The stream being reassembled on one connection. */
interface Assembly {
  first: SnapshotChunkFrame;
  parts: Uint8Array[];
  received: number;
}

/**
 * Reassembles the chunk streams arriving on one connection. One stream at a time: a sender streams one
 * snapshot at a time per connection, so a new stream (offset 0) replaces an unfinished one, whose sender gave
 * up on it. Any chunk that does not continue the current stream exactly discards it: a broken stream is never
 * delivered.
 */
export class SnapshotAssembler {
  private current: Assembly | null = null;

  /**
   * @param maxSnapshotBytes streams announcing more data than this are refused.
   * @param onDiscard told why a stream was dropped (for logs).
   */
  constructor(
    private readonly maxSnapshotBytes: number,
    private readonly onDiscard: (reason: string) => void = () => {},
  ) {}

  /** Bytes held for the unfinished stream. */
  get bufferedBytes(): number {
    return this.current?.received ?? 0;
  }

  /** Takes one chunk; returns the whole 'snapshot' message when this chunk completes its stream. */
  accept(chunk: SnapshotChunkFrame): SnapshotRequest | null {
    if (chunk.offset === 0) {
      if (this.current !== null) this.discard(`stream ${this.current.first.stream} replaced by ${chunk.stream}`);
      if (chunk.total > this.maxSnapshotBytes) {
        this.onDiscard(`stream ${chunk.stream}: ${chunk.total} bytes exceeds the limit of ${this.maxSnapshotBytes}`);
        return null;
      }
      this.current = { first: chunk, parts: [], received: 0 };
    } else if (this.current === null) {
      // The start of this stream was discarded already; its remaining chunks are ignored silently.
      return null;
    }
    const assembly = this.current;
    const { first } = assembly;
    if (
      chunk.stream !== first.stream ||
      chunk.offset !== assembly.received ||
      chunk.total !== first.total ||
      chunk.meta.index !== first.meta.index ||
      chunk.meta.term !== first.meta.term ||
      (chunk.data.byteLength === 0 && chunk.total > 0)
    ) {
      this.discard(`stream ${first.stream}: chunk out of sequence`);
      return null;
    }
    assembly.parts.push(ownedBytes(chunk.data));
    assembly.received += chunk.data.byteLength;
    if (assembly.received < first.total) return null;

    this.current = null;
    const data = new Uint8Array(first.total);
    let offset = 0;
    for (const part of assembly.parts) {
      data.set(part, offset);
      offset += part.byteLength;
    }
    return {
      type: 'snapshot',
      from: first.from,
      to: first.to,
      term: first.term,
      snapshot: { meta: first.meta, data },
    };
  }

  /** Drops the unfinished stream (its connection closed). */
  reset(): void {
    if (this.current !== null) this.discard(`stream ${this.current.first.stream}: connection closed`);
  }

  private discard(reason: string): void {
    this.current = null;
    this.onDiscard(reason);
  }
}
