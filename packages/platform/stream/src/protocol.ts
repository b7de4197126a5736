/**
 * The stream's calls, carried by @raftkit/rpc (length-prefixed msgpack frames, a hello with the cluster token,
 * pipelined calls matched by id). Produce answers are sent once the records are durable, in request order.
 */
import { RpcError } from '@raftkit/rpc';

export type Request =
  | { t: 'produce'; records: Uint8Array[] }
  | { t: 'fetch'; offset: number; max: number; maxBytes?: number; waitMs?: number }
  | { t: 'commit'; consumer: string; offset: number }
  | { t: 'committed'; consumer: string };

/** The answer to each kind of request. */
export interface Answers {
  produce: { offset: number; count: number };
  fetch: { offset: number; records: Uint8Array[]; start: number; end: number };
  commit: { offset: number };
  committed: { offset: number | null };
}

export type Answer = Answers[keyof Answers];

/** Largest frame after the hello: a produce batch or a fetch answer. */
export const MAX_FRAME_BYTES = 64 << 20;

function bad(message: string): RpcError {
  return new RpcError('bad_request', message);
}

/** Narrows an untrusted decoded value to a Request; throws an RpcError (bad_request) naming what is wrong. */
export function parseRequest(value: unknown): Request {
  if (typeof value !== 'object' || value === null) throw bad('request is not an object');
  const m = value as Record<string, unknown>;
  const isOffset = (v: unknown) => Number.isSafeInteger(v) && (v as number) >= 0;
  switch (m.t) {
    case 'produce':
      if (Array.isArray(m.records) && m.records.every((r) => r instanceof Uint8Array)) return m as Request;
      throw bad('produce needs records (byte strings)');
    case 'fetch':
      if (!isOffset(m.offset) || !Number.isSafeInteger(m.max) || (m.max as number) < 1)
        throw bad('fetch needs offset >= 0 and max >= 1');
      if (m.waitMs !== undefined && !isOffset(m.waitMs)) throw bad('fetch waitMs must be >= 0');
      if (m.maxBytes !== undefined && !isOffset(m.maxBytes)) throw bad('fetch maxBytes must be >= 0');
      return m as Request;
    case 'commit':
      if (typeof m.consumer === 'string' && isOffset(m.offset)) return m as Request;
      throw bad('commit needs consumer and offset');
    case 'committed':
      if (typeof m.consumer === 'string') return m as Request;
      throw bad('committed needs consumer');
    default:
      throw bad(`unknown request type ${JSON.stringify(m.t)}`);
  }
}
