/**
 * Length-prefixed frames ([u32 big-endian length][payload]) over a byte stream: the framing of the Raft transport
 * and of every other binary protocol built on this library (`@raftkit/rpc`). The reader hands out one frame at a
 * time, so a limit raised by one frame (a verified hello) applies only from the next; it copies each payload at
 * most once (a payload inside one chunk is a view), so a large frame arriving in many chunks costs linear time, and
 * it refuses a frame announcing more than `maxFrameBytes` before buffering it.
 */

/** A frame announced more bytes than the decoder's limit; the peer should be cut off. */
export class FrameTooLargeError extends RangeError {
  override name = 'FrameTooLargeError';
  readonly code = 'frame_too_large';
  constructor(
    readonly length: number,
    readonly limit: number,
  ) {
    super(`frame of ${length} bytes exceeds the limit of ${limit}`);
  }
}

/** A frame: the payload with its 4-byte length in front. */
export function lengthPrefixed(payload: Uint8Array): Buffer {
  const frame = Buffer.allocUnsafe(4 + payload.byteLength);
  frame.writeUInt32BE(payload.byteLength, 0);
  frame.set(payload, 4);
  return frame;
}

/**
 * Cuts a byte stream into frames' payloads. Feed it chunks in order with {@link FrameReader.push}; take frames
 * with {@link FrameReader.next}. It never decodes a payload: that is the protocol's business.
 */
export class FrameReader {
  private chunks: Buffer[] = [];
  /** Bytes of chunks[0] already consumed. */
  private offset = 0;
  private buffered = 0;

  /** @param maxFrameBytes Longest payload accepted; servers start it small and raise it once the peer's hello is verified. */
  constructor(public maxFrameBytes: number) {}

  /** Bytes received and not yet handed out as frames. */
  get bufferedBytes(): number {
    return this.buffered;
  }

  /** Appends one chunk of the stream (kept by reference, not copied). */
  push(chunk: Buffer): void {
    if (chunk.length === 0) return;
    this.chunks.push(chunk);
    this.buffered += chunk.length;
  }

  /** The next complete frame's payload, or null until more bytes arrive. Throws FrameTooLargeError. */
  next(): Buffer | null {
    if (this.buffered < 4) return null;
    const length = this.peekLength();
    if (length > this.maxFrameBytes) throw new FrameTooLargeError(length, this.maxFrameBytes);
    if (this.buffered < 4 + length) return null;
    this.consume(4);
    return this.consume(length);
  }

  /** Every complete frame buffered now (for a side whose limit never changes). */
  drain(): Buffer[] {
    const frames: Buffer[] = [];
    for (let frame = this.next(); frame !== null; frame = this.next()) frames.push(frame);
    return frames;
  }

  /** Drops everything buffered (the connection is closing). */
  clear(): void {
    this.chunks = [];
    this.offset = 0;
    this.buffered = 0;
  }

  private peekLength(): number {
    const first = this.chunks[0]!;
    if (first.length - this.offset >= 4) return first.readUInt32BE(this.offset);
    const head = Buffer.alloc(4);
    let filled = 0;
    for (let i = 0, from = this.offset; filled < 4; i++, from = 0)
      filled += this.chunks[i]!.copy(head, filled, from, Math.min(this.chunks[i]!.length, from + 4 - filled));
    return head.readUInt32BE(0);
  }

  /** Removes and returns the next `length` bytes: a view when they lie in one chunk, else one copy. */
  private consume(length: number): Buffer {
    if (length === 0) return Buffer.alloc(0);
    this.buffered -= length;
    const first = this.chunks[0]!;
    if (first.length - this.offset >= length) {
      const view = first.subarray(this.offset, this.offset + length);
      this.offset += length;
      if (this.offset === first.length) {
        this.chunks.shift();
        this.offset = 0;
      }
      return view;
    }
    const out = Buffer.allocUnsafe(length);
    let filled = 0;
    while (filled < length) {
      const chunk = this.chunks[0]!;
      const count = Math.min(length - filled, chunk.length - this.offset);
      chunk.copy(out, filled, this.offset, this.offset + count);
      filled += count;
      this.offset += count;
      if (this.offset === chunk.length) {
        this.chunks.shift();
        this.offset = 0;
      }
    }
    return out;
  }
}
