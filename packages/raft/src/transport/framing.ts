/**
 * Length-prefixed MessagePack frames over a byte stream: a 4-byte big-endian payload length, then the payload.
 * The decoder copes with frames split across chunks and many frames per chunk, and refuses frames whose
 * declared length is over a limit before buffering them, so a peer cannot make us allocate unbounded memory.
 */
import { decodeValue, encodeValue } from '../codec/msgpack.js';

/** Bytes of the length prefix. */
export const FRAME_HEADER_BYTES = 4;
/** Default limit on a frame's payload length. */
export const DEFAULT_MAX_FRAME_BYTES = 4 * 1024 * 1024;

/** The stream broke the framing protocol; the connection carrying it should be closed. */
export class FrameError extends Error {
  override name = 'FrameError';
}

/**
 * Encodes `value` as one frame (header + payload). Throws FrameError when the payload would be longer than
 * `maxFrameBytes`: such a frame would be refused by the receiver, so it must not be sent.
 */
export function encodeFrame(value: unknown, maxFrameBytes = DEFAULT_MAX_FRAME_BYTES): Buffer {
  const payload = encodeValue(value);
  if (payload.byteLength > maxFrameBytes) {
    throw new FrameError(`frame payload of ${payload.byteLength} bytes exceeds the limit of ${maxFrameBytes}`);
  }
  const frame = Buffer.allocUnsafe(FRAME_HEADER_BYTES + payload.byteLength);
  frame.writeUInt32BE(payload.byteLength, 0);
  payload.copy(frame, FRAME_HEADER_BYTES);
  return frame;
}

export interface FrameDecoderOptions {
  /** Longest payload accepted. Default {@link DEFAULT_MAX_FRAME_BYTES}. */
  maxFrameBytes?: number;
}

/**
 * Turns a byte stream into decoded values. Feed it every chunk in order with {@link push}; each complete frame
 * is decoded and handed to `onFrame` synchronously.
 */
export class FrameDecoder {
  private maxFrameBytes: number;
  /** Received bytes not yet consumed; the first chunk is consumed from `offset` on. */
  private chunks: Buffer[] = [];
  private offset = 0;
  private buffered = 0;
  /** Payload length of the frame being received, once its header has been read. */
  private frameLength: number | null = null;
  private failed = false;
  private decoded = 0;

  constructor(
    private readonly onFrame: (value: unknown) => void,
    options: FrameDecoderOptions = {},
  ) {
    this.maxFrameBytes = options.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES;
  }

  /** Bytes received but not yet part of a delivered frame. */
  get bufferedBytes(): number {
    return this.buffered;
  }

  /** Frames delivered so far (lets a caller see whether a push completed any). */
  get framesDecoded(): number {
    return this.decoded;
  }

  /**
   * Changes the limit for frames whose header has not been read yet (a connection allows larger frames once its
   * peer has authenticated).
   */
  setMaxFrameBytes(maxFrameBytes: number): void {
    this.maxFrameBytes = maxFrameBytes;
  }

  /** Frees the buffered bytes and refuses further input (the connection is being closed). */
  discard(): void {
    this.fail();
    this.chunks = [];
    this.offset = 0;
    this.frameLength = null;
  }

  /**
   * Consumes one chunk of the stream. Frames completed by it are delivered before this returns. Throws
   * FrameError on an empty or oversized frame or an undecodable payload (after delivering the frames that came
   * before it); the decoder then refuses all further input, since the stream position is lost.
   */
  push(chunk: Uint8Array): void {
    if (this.failed) throw new FrameError('stream already failed');
    if (chunk.byteLength === 0) return;
    const bytes = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    this.chunks.push(bytes);
    this.buffered += bytes.byteLength;

    for (;;) {
      if (this.frameLength === null) {
        if (this.buffered < FRAME_HEADER_BYTES) return;
        const length = this.take(FRAME_HEADER_BYTES).readUInt32BE(0);
        if (length === 0 || length > this.maxFrameBytes) {
          this.fail();
          throw new FrameError(`frame length ${length} outside 1..${this.maxFrameBytes}`);
        }
        this.frameLength = length;
      }
      if (this.buffered < this.frameLength) return;
      const payload = this.take(this.frameLength);
      this.frameLength = null;
      let value: unknown;
      try {
        value = decodeValue(payload);
      } catch (error) {
        this.fail();
        throw new FrameError(`undecodable frame: ${(error as Error).message}`);
      }
      this.decoded++;
      this.onFrame(value);
    }
  }

  private fail(): void {
    this.failed = true;
    this.chunks = [];
    this.buffered = 0;
  }

  /** Removes and returns the next `length` buffered bytes (a view when they lie in one chunk, else a copy). */
  private take(length: number): Buffer {
    const first = this.chunks[0]!;
    let result: Buffer;
    if (first.byteLength - this.offset >= length) {
      result = first.subarray(this.offset, this.offset + length);
      this.offset += length;
    } else {
      result = Buffer.allocUnsafe(length);
      let filled = 0;
      while (filled < length) {
        const chunk = this.chunks[0]!;
        const count = Math.min(length - filled, chunk.byteLength - this.offset);
        chunk.copy(result, filled, this.offset, this.offset + count);
        filled += count;
        this.offset += count;
        if (this.offset === chunk.byteLength) {
          this.chunks.shift();
          this.offset = 0;
        }
      }
    }
    if (this.chunks.length > 0 && this.offset === this.chunks[0]!.byteLength) {
      this.chunks.shift();
      this.offset = 0;
    }
    this.buffered -= length;
    return result;
  }
}
