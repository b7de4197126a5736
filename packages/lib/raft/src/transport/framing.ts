/**
 * Length-prefixed MessagePack frames over a byte stream: a 4-byte big-endian payload length, then the payload.
 * The decoder copes with frames split across chunks and many frames per chunk, and refuses frames whose
 * declared length is over a limit before buffering them, so a peer cannot make us allocate unbounded memory.
 */
import { entryArrayParts, writeEntryArray } from '../codec/entry-bytes.js';
import { decodeValue, encodeValue } from '../codec/msgpack.js';
import type { Message } from '../types.js';
import { FrameReader, FrameTooLargeError } from './frame-reader.js';

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

/** MessagePack's empty array: what `entries: []` encodes to. */
const EMPTY_ARRAY = 0x90;
const NO_ENTRIES: never[] = [];

/**
 * Encodes the frame `{ kind: 'msg', group?, message }`: the same frame as {@link encodeFrame} would make (the same
 * fields; only their order differs, which MessagePack readers ignore), but an append's entries are copied in from
 * each entry's cached encoding (codec/entry-bytes.ts) instead of being encoded again for every peer.
 *
 * How: the frame is encoded with `entries: []` as the last field of the last field, so its final byte is that
 * empty array; the array with the real entries then replaces that byte.
 */
export function encodeMessageFrame(
  message: Message,
  group: string | undefined,
  maxFrameBytes = DEFAULT_MAX_FRAME_BYTES,
): Buffer {
  if (message.type !== 'append' || message.entries.length === 0) {
    return encodeFrame(group === undefined ? { kind: 'msg', message } : { kind: 'msg', message, group }, maxFrameBytes);
  }
  const { entries } = message;
  // Spelled out rather than copied with a rest pattern, which costs more than encoding a small entry.
  const shell = {
    type: message.type,
    from: message.from,
    to: message.to,
    term: message.term,
    prevIndex: message.prevIndex,
    prevTerm: message.prevTerm,
    commit: message.commit,
    entries: NO_ENTRIES,
  };
  const prefix = encodeValue(
    group === undefined ? { kind: 'msg', message: shell } : { kind: 'msg', group, message: shell },
  );
  if (prefix[prefix.byteLength - 1] !== EMPTY_ARRAY) {
    // Not the layout this relies on (a msgpackr change): encode the whole frame the ordinary way.
    return encodeFrame(group === undefined ? { kind: 'msg', message } : { kind: 'msg', message, group }, maxFrameBytes);
  }
  const { parts, byteLength } = entryArrayParts(entries);
  const payloadBytes = prefix.byteLength - 1 + byteLength;
  if (payloadBytes > maxFrameBytes) {
    throw new FrameError(`frame payload of ${payloadBytes} bytes exceeds the limit of ${maxFrameBytes}`);
  }
  const frame = Buffer.allocUnsafe(FRAME_HEADER_BYTES + payloadBytes);
  frame.writeUInt32BE(payloadBytes, 0);
  prefix.copy(frame, FRAME_HEADER_BYTES, 0, prefix.byteLength - 1);
  writeEntryArray(frame, FRAME_HEADER_BYTES + prefix.byteLength - 1, parts);
  return frame;
}

/** MessagePack array headers: fixarray, array 16, array 32. */
const FIXARRAY = 0x90;
const ARRAY16 = 0xdc;
const ARRAY32 = 0xdd;

/** Bytes of the MessagePack header of an array of `n` items. */
export function arrayHeaderBytes(n: number): number {
  return n < 16 ? 1 : n < 0x10000 ? 3 : 5;
}

/**
 * One frame carrying the messages of several frames (the wire's `batch`, src/transport/wire.ts): its payload is a
 * MessagePack array whose items are the given frames' payloads, copied in as they are (each is already one encoded
 * value), so the receiver decodes one frame, once, for all of them. `frames` are whole frames (header and payload);
 * the caller keeps the result under the frame limit.
 */
export function batchFrames(frames: readonly Buffer[]): Buffer {
  let payloadBytes = arrayHeaderBytes(frames.length);
  for (const f of frames) payloadBytes += f.byteLength - FRAME_HEADER_BYTES;
  const out = Buffer.allocUnsafe(FRAME_HEADER_BYTES + payloadBytes);
  out.writeUInt32BE(payloadBytes, 0);
  let at = FRAME_HEADER_BYTES;
  const n = frames.length;
  if (n < 16) {
    out[at++] = FIXARRAY | n;
  } else if (n < 0x10000) {
    out[at++] = ARRAY16;
    out.writeUInt16BE(n, at);
    at += 2;
  } else {
    out[at++] = ARRAY32;
    out.writeUInt32BE(n, at);
    at += 4;
  }
  for (const f of frames) at += f.copy(out, at, FRAME_HEADER_BYTES);
  return out;
}

interface FrameDecoderOptions {
  /** Longest payload accepted. Default {@link DEFAULT_MAX_FRAME_BYTES}. */
  maxFrameBytes?: number;
}

/**
 * Turns a byte stream into decoded values. Feed it every chunk in order with {@link push}; each complete frame
 * is decoded and handed to `onFrame` synchronously. The cutting into frames is {@link FrameReader}'s.
 */
export class FrameDecoder {
  private readonly reader: FrameReader;
  private failed = false;
  private decoded = 0;

  constructor(
    private readonly onFrame: (value: unknown) => void,
    options: FrameDecoderOptions = {},
  ) {
    this.reader = new FrameReader(options.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES);
  }

  /** Bytes received but not yet part of a delivered frame. */
  get bufferedBytes(): number {
    return this.reader.bufferedBytes;
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
    this.reader.maxFrameBytes = maxFrameBytes;
  }

  /** Frees the buffered bytes and refuses further input (the connection is being closed). */
  discard(): void {
    this.fail();
  }

  /**
   * Consumes one chunk of the stream. Frames completed by it are delivered before this returns. Throws
   * FrameError on an empty or oversized frame or an undecodable payload (after delivering the frames that came
   * before it); the decoder then refuses all further input, since the stream position is lost.
   */
  push(chunk: Uint8Array): void {
    if (this.failed) throw new FrameError('stream already failed');
    if (chunk.byteLength === 0) return;
    this.reader.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength));
    for (;;) {
      let payload: Buffer | null;
      try {
        payload = this.reader.next();
      } catch (error) {
        this.fail();
        if (error instanceof FrameTooLargeError)
          throw new FrameError(`frame length ${error.length} outside 1..${error.limit}`);
        throw error;
      }
      if (payload === null) return;
      if (payload.byteLength === 0) {
        this.fail();
        throw new FrameError(`frame length 0 outside 1..${this.reader.maxFrameBytes}`);
      }
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
    this.reader.clear();
  }
}
