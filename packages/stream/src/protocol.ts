/**
 * The TCP protocol: length-prefixed msgpack frames ([u32 big-endian length][msgpack], @raftkit/http's framing). A client opens with
 * `hello` (the cluster token), then pipelines requests; each answer carries the request's id. Produce acks are
 * sent once the records are durable, in request order.
 */
import { pack, unpack } from 'msgpackr';
import { encodeFrame as encodeSharedFrame } from '@raftkit/http';

export type Request =
  | { t: 'hello'; id: number; token: string }
  | { t: 'produce'; id: number; records: Uint8Array[] }
  | { t: 'fetch'; id: number; offset: number; max: number; maxBytes?: number; waitMs?: number }
  | { t: 'commit'; id: number; consumer: string; offset: number }
  | { t: 'committed'; id: number; consumer: string };

export type Response =
  | { t: 'welcome'; id: number }
  | { t: 'ack'; id: number; offset: number; count: number }
  | { t: 'records'; id: number; offset: number; records: Uint8Array[]; start: number; end: number }
  | { t: 'committed'; id: number; offset: number | null }
  | { t: 'error'; id: number; code: string; message: string };

export const MAX_FRAME_BYTES = 64 << 20;
/** Largest frame read before the hello is verified: a hello is a token, far smaller. */
export const MAX_HELLO_FRAME_BYTES = 4096;

export function encodeFrame(message: Request | Response): Buffer {
  return encodeSharedFrame(pack(message));
}

/** A frame's message; throws on bytes that are not msgpack. */
export function decodeFrame(frame: Buffer): unknown {
  return unpack(frame);
}

/** Narrows an untrusted decoded value to a Request, or returns a reason it is not one. */
export function parseRequest(value: unknown): Request | string {
  if (typeof value !== 'object' || value === null) return 'frame is not an object';
  const m = value as Record<string, unknown>;
  if (!Number.isSafeInteger(m.id)) return 'missing numeric id';
  const isOffset = (v: unknown) => Number.isSafeInteger(v) && (v as number) >= 0;
  switch (m.t) {
    case 'hello':
      return typeof m.token === 'string' ? (m as Request) : 'hello needs a token';
    case 'produce':
      return Array.isArray(m.records) && m.records.every((r) => r instanceof Uint8Array) ? (m as Request) : 'produce needs records (byte strings)';
    case 'fetch':
      if (!isOffset(m.offset) || !Number.isSafeInteger(m.max) || (m.max as number) < 1) return 'fetch needs offset >= 0 and max >= 1';
      if (m.waitMs !== undefined && !isOffset(m.waitMs)) return 'fetch waitMs must be >= 0';
      if (m.maxBytes !== undefined && !isOffset(m.maxBytes)) return 'fetch maxBytes must be >= 0';
      return m as Request;
    case 'commit':
      return typeof m.consumer === 'string' && isOffset(m.offset) ? (m as Request) : 'commit needs consumer and offset';
    case 'committed':
      return typeof m.consumer === 'string' ? (m as Request) : 'committed needs consumer';
    default:
      return `unknown request type ${JSON.stringify(m.t)}`;
  }
}
