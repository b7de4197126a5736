/** Frames of the protocol: a msgpack value behind the shared length prefix (@raftkit/raft's FrameReader). */
import { Packr, Unpackr } from 'msgpackr';
import { lengthPrefixed } from '@raftkit/raft';
import { RpcError } from './errors.js';

const packr = new Packr({ useRecords: false });
const unpackr = new Unpackr({ useRecords: false });

/** Default limit of a frame's payload, both ways. */
export const DEFAULT_MAX_FRAME_BYTES = 1 << 20;
/** Largest frame read before the hello is verified: a hello is a token, far smaller. */
export const MAX_HELLO_FRAME_BYTES = 4096;
/** Calls per frame: keeps one frame's encoding and one handler burst short. */
export const MAX_CALLS_PER_FRAME = 1024;

export function encodeMessage(value: unknown): Buffer {
  return lengthPrefixed(packr.pack(value));
}

export function decodeMessage(payload: Buffer): unknown {
  try {
    return unpackr.unpack(payload);
  } catch {
    throw new RpcError('malformed', 'frame is not valid msgpack');
  }
}

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
