/**
 * The frames of the TCP transport's protocol. Each outbound connection carries one `hello`, then any mix of
 * `msg` and `snapChunk` frames in the sender's order. Connections are one-way: a member sends on the
 * connections it opened and receives on the ones it accepted.
 */
import type { Message, NodeId, SnapshotMeta } from '../types.js';
import {
  DecodeError,
  bytesField,
  fieldsOf,
  intField,
  nodeIdField,
  parseMessage,
  parseSnapshotMeta,
} from '../codec/parse.js';

/** Bumped when frames change incompatibly; a receiver closes connections announcing another version. */
export const PROTOCOL_VERSION = 1;

/** First frame on every connection: who is sending, and to whom it thinks it is talking. */
export interface HelloFrame {
  kind: 'hello';
  version: number;
  from: NodeId;
  to: NodeId;
}

/** Any message except 'snapshot', which always travels as chunks. */
export interface MessageFrame {
  kind: 'msg';
  message: Message;
}

/**
 * One piece of a 'snapshot' message. Chunks of a stream arrive in order on one connection, offsets contiguous
 * from 0 to `total`; each repeats the message header so the receiver can check they belong together.
 */
export interface SnapshotChunkFrame {
  kind: 'snapChunk';
  /** Sender-chosen stream number, distinct for each snapshot sent. */
  stream: number;
  from: NodeId;
  to: NodeId;
  term: number;
  meta: SnapshotMeta;
  /** Byte offset of `data` within the snapshot data. */
  offset: number;
  /** Length of the whole snapshot data. */
  total: number;
  data: Uint8Array;
}

export type WireFrame = HelloFrame | MessageFrame | SnapshotChunkFrame;

/**
 * Validates a decoded frame. Chunk data is returned without copying (it may alias the receive buffer);
 * message contents are copied by parseMessage. Throws DecodeError on anything malformed.
 */
export function parseWireFrame(value: unknown): WireFrame {
  const fields = fieldsOf(value, 'frame');
  switch (fields.kind) {
    case 'hello':
      return {
        kind: 'hello',
        version: intField(fields, 'version'),
        from: nodeIdField(fields, 'from'),
        to: nodeIdField(fields, 'to'),
      };
    case 'msg': {
      const message = parseMessage(fields.message);
      if (message.type === 'snapshot') throw new DecodeError('snapshot messages must travel as chunks');
      return { kind: 'msg', message };
    }
    case 'snapChunk': {
      const chunk: SnapshotChunkFrame = {
        kind: 'snapChunk',
        stream: intField(fields, 'stream'),
        from: nodeIdField(fields, 'from'),
        to: nodeIdField(fields, 'to'),
        term: intField(fields, 'term'),
        meta: parseSnapshotMeta(fields.meta),
        offset: intField(fields, 'offset'),
        total: intField(fields, 'total'),
        data: bytesField(fields, 'data', false),
      };
      if (chunk.offset + chunk.data.byteLength > chunk.total) throw new DecodeError('snapshot chunk past its total');
      return chunk;
    }
    default:
      throw new DecodeError(`frame.kind: unknown ${String(fields.kind)}`);
  }
}
