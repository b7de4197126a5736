/**
 * The frames of the TCP transport's protocol. Each connection starts with a handshake (handshake.ts): the
 * acceptor sends `challenge`, the dialer `hello`, the acceptor `welcome`. After it, the dialer sends any mix of
 * `msg` and `snapChunk` frames in its order and the acceptor sends nothing more: a member sends on the
 * connections it opened and receives on the ones it accepted.
 */
import type { BatchedBeat, HeartbeatBatch } from './coalesce.js';
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

/**
 * Bumped when frames change incompatibly; a receiver closes connections announcing another version.
 * 2: authenticated handshake (challenge, hello with nonce and MAC, welcome).
 * 3: `ping` and `beats` (coalesced heartbeats) frames, which a version-2 receiver would refuse mid-connection.
 * 4: `batch` frames (an array of `msg` frames: every group's messages of one write to a peer process).
 */
export const PROTOCOL_VERSION = 4;

/** Acceptor's first frame: the nonce the dialer's hello must answer. */
export interface ChallengeFrame {
  kind: 'challenge';
  version: number;
  nonce: Uint8Array;
}

/** Dialer's answer: who is sending, to whom it thinks it is talking, and the proof that it holds the key. */
export interface HelloFrame {
  kind: 'hello';
  version: number;
  from: NodeId;
  to: NodeId;
  /** The dialer's own nonce, which the acceptor's welcome must answer. */
  nonce: Uint8Array;
  /** helloMac(key, challenge nonce, nonce, from, to). */
  mac: Uint8Array;
}

/** Acceptor's proof that it holds the key too; the dialer sends messages only after checking it. */
export interface WelcomeFrame {
  kind: 'welcome';
  /** welcomeMac(key, hello nonce, challenge nonce, to, from). */
  mac: Uint8Array;
}

/** Any message except 'snapshot', which always travels as chunks. */
interface MessageFrame {
  kind: 'msg';
  message: Message;
  /** The Raft group the message belongs to, when the transport carries many (see TcpTransport.channel). */
  group?: string;
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
  /** The Raft group of the snapshot, when the transport carries many. */
  group?: string;
}

/** "I am alive": one per peer process per tick when groups may quiesce (their own messages then stop). */
export interface PingFrame {
  kind: 'ping';
}

/**
 * Coalesced heartbeats (src/transport/coalesce.ts): every heartbeat and heartbeat response one process sends another
 * in one flush, for all the groups they share. `from` and `to` are the connection's two ends, so each beat is a
 * tuple: [group, 0 = heartbeat | 1 = heartbeatResp, term, round, commit (0 for a response), quiesce 0 | 1].
 */
export interface BeatsFrame {
  kind: 'beats';
  beats: BeatTuple[];
}

export type BeatTuple = [group: string, type: 0 | 1, term: number, round: number, commit: number, quiesce: 0 | 1];

/**
 * The messages one process sends another in one write, of every group they share, in the order they were sent: on
 * the wire a MessagePack array of `msg` frames (src/transport/framing.ts, batchFrames) rather than a map.
 */
export interface BatchFrame {
  kind: 'batch';
  frames: MessageFrame[];
}

export type WireFrame =
  | ChallengeFrame
  | BatchFrame
  | HelloFrame
  | WelcomeFrame
  | MessageFrame
  | SnapshotChunkFrame
  | PingFrame
  | BeatsFrame;

/** The wire form of a batch's beats. */
export function beatsToTuples(beats: readonly BatchedBeat[]): BeatTuple[] {
  return beats.map((b) =>
    b.type === 'heartbeat'
      ? [b.group, 0, b.term, b.round, b.commit, b.quiesce === true ? 1 : 0]
      : [b.group, 1, b.term, b.round, 0, 0],
  );
}

/** A received batch of beats between the connection's ends `from` and `to`. */
export function tuplesToBatch(from: NodeId, to: NodeId, tuples: readonly BeatTuple[]): HeartbeatBatch {
  const beats: BatchedBeat[] = tuples.map(([group, type, term, round, commit, quiesce]) => {
    if (type === 1) return { group, type: 'heartbeatResp', term, round };
    return quiesce === 1
      ? { group, type: 'heartbeat', term, commit, round, quiesce: true }
      : { group, type: 'heartbeat', term, commit, round };
  });
  return { from, to, beats };
}

/**
 * Validates a decoded frame. Chunk data is returned without copying (it may alias the receive buffer);
 * message contents are copied by parseMessage. Throws DecodeError on anything malformed.
 */
export function parseWireFrame(value: unknown): WireFrame {
  if (Array.isArray(value)) {
    if (value.length === 0) throw new DecodeError('frame: an empty batch');
    return { kind: 'batch', frames: value.map(parseMessageFrame) };
  }
  const fields = fieldsOf(value, 'frame');
  switch (fields.kind) {
    case 'challenge':
      return { kind: 'challenge', version: supportedVersion(fields), nonce: bytesField(fields, 'nonce') };
    case 'hello':
      return {
        kind: 'hello',
        version: supportedVersion(fields),
        from: nodeIdField(fields, 'from'),
        to: nodeIdField(fields, 'to'),
        nonce: bytesField(fields, 'nonce'),
        mac: bytesField(fields, 'mac'),
      };
    case 'ping':
      return { kind: 'ping' };
    case 'welcome':
      return { kind: 'welcome', mac: bytesField(fields, 'mac') };
    case 'beats':
      return { kind: 'beats', beats: parseBeats(fields.beats) };
    case 'msg':
      return messageFrame(fields);
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
      const group = groupField(fields);
      if (group !== undefined) chunk.group = group;
      return chunk;
    }
    default:
      throw new DecodeError(`frame.kind: unknown ${String(fields.kind)}`);
  }
}

/** One item of a batch: a `msg` frame and nothing else. */
function parseMessageFrame(value: unknown): MessageFrame {
  const fields = fieldsOf(value, 'frame.batch item');
  if (fields.kind !== 'msg') throw new DecodeError(`frame.batch: an item of kind ${String(fields.kind)}`);
  return messageFrame(fields);
}

function messageFrame(fields: Record<string, unknown>): MessageFrame {
  const message = parseMessage(fields.message);
  if (message.type === 'snapshot') throw new DecodeError('snapshot messages must travel as chunks');
  const group = groupField(fields);
  return group === undefined ? { kind: 'msg', message } : { kind: 'msg', message, group };
}

/** Longest group name on the wire. */
export const MAX_GROUP_NAME = 128;

/** The optional group of a frame: absent, or a non-empty string of at most MAX_GROUP_NAME characters. */
function groupField(fields: Record<string, unknown>): string | undefined {
  const group = fields.group;
  if (group === undefined || group === null) return undefined;
  if (typeof group !== 'string' || group.length === 0 || group.length > MAX_GROUP_NAME)
    throw new DecodeError(`frame.group: expected a name of 1..${MAX_GROUP_NAME} characters`);
  return group;
}

/** Most beats in one frame (a process pair shares at most this many groups' heartbeats per flush). */
const MAX_BEATS = 1_000_000;

function parseBeats(value: unknown): BeatTuple[] {
  if (!Array.isArray(value) || value.length > MAX_BEATS)
    throw new DecodeError('frame.beats: expected an array of beats');
  const out: BeatTuple[] = [];
  for (const beat of value) {
    if (!Array.isArray(beat) || beat.length !== 6)
      throw new DecodeError('frame.beats: each beat is [group, type, term, round, commit, quiesce]');
    const [group, type, term, round, commit, quiesce] = beat as unknown[];
    if (typeof group !== 'string' || group.length === 0 || group.length > MAX_GROUP_NAME)
      throw new DecodeError(`frame.beats: a group is a name of 1..${MAX_GROUP_NAME} characters`);
    if ((type !== 0 && type !== 1) || (quiesce !== 0 && quiesce !== 1))
      throw new DecodeError('frame.beats: type and quiesce are 0 or 1');
    for (const n of [term, round, commit])
      if (!Number.isSafeInteger(n) || (n as number) < 0)
        throw new DecodeError('frame.beats: term, round and commit are non-negative integers');
    out.push([group, type, term as number, round as number, commit as number, quiesce]);
  }
  return out;
}

/** Checked before the other fields, so a peer of another version is told so rather than "missing field". */
function supportedVersion(fields: Record<string, unknown>): number {
  const version = intField(fields, 'version');
  if (version !== PROTOCOL_VERSION) throw new DecodeError(`unsupported protocol version ${version}`);
  return version;
}
