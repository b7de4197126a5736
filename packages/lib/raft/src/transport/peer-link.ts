/**
 * The outbound side of the TCP transport for one peer: a lazily opened connection that authenticates (the
 * dialer's half of the handshake in handshake.ts) before it carries anything, reconnected with exponential
 * backoff, fed from a bounded queue. Delivery is best-effort (Raft tolerates loss), so when the
 * peer is slow or away the oldest queued messages are dropped rather than letting memory grow.
 */
import { type Socket, connect } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { DecodeError } from '../codec/parse.js';
import type { Logger } from '../logger.js';
import type { Message, NodeId, SnapshotRequest } from '../types.js';
import {
  FRAME_HEADER_BYTES,
  FrameDecoder,
  FrameError,
  arrayHeaderBytes,
  batchFrames,
  encodeFrame,
  encodeMessageFrame,
} from './framing.js';
import { HANDSHAKE_MAX_FRAME_BYTES, MIN_NONCE_BYTES, helloMac, macMatches, newNonce, welcomeMac } from './handshake.js';
import { SnapshotSender } from './snapshot-stream.js';
import {
  PROTOCOL_VERSION,
  parseWireFrame,
  type BeatTuple,
  type BeatsFrame,
  type HelloFrame,
  type PingFrame,
} from './wire.js';

/** A TCP endpoint. */
export interface HostPort {
  host: string;
  port: number;
}

/** Tuning shared by every link of a transport; see TcpTransportOptions for meanings and defaults. */
export interface PeerLinkSettings {
  maxFrameBytes: number;
  snapshotChunkBytes: number;
  maxQueueBytes: number;
  maxQueueMessages: number;
  backoffInitialMs: number;
  backoffMaxMs: number;
  connectTimeoutMs: number;
  stallTimeoutMs: number;
  /** The whole handshake must be done within this long of the connect. */
  handshakeTimeoutMs: number;
  /** The MAC key derived from the cluster secret. */
  key: Buffer;
  /** Diagnostics: 'debug' for expected trouble (peer down), 'warn' for things worth a look. */
  logger: Logger;
  /** A fresh snapshot stream number. */
  nextStreamId: () => number;
  /** Mutual TLS, when configured. */
  tls?: TransportTls;
}

/** This member's certificate and key and the CA of every member's certificate, PEM-encoded. */
export interface TransportTls {
  cert: string | Buffer;
  key: string | Buffer;
  ca: string | Buffer;
}

const PING_FRAME = encodeFrame({ kind: 'ping' } satisfies PingFrame);

/** Sends one member's messages to one peer. */
export class PeerLink {
  private socket: Socket | null = null;
  /** The socket is open and the peer has proven it holds the key: messages may flow. */
  private connected = false;
  private closed = false;
  private pumpScheduled = false;
  /** Encoded frames waiting for the socket, oldest first. */
  private queue: Buffer[] = [];
  private queueBytes = 0;
  /** The snapshot being streamed; only the newest one of each group is kept. */
  private snapshot: SnapshotSender | null = null;
  /** Snapshots of other groups waiting for the current stream to end (one stream at a time per connection). */
  private waitingSnapshots = new Map<string, SnapshotRequest>();
  private backoffMs: number;
  /** No connection attempt before this time (ms since epoch): the backoff after a failure. */
  private retryAt = 0;
  private retryTimer: NodeJS.Timeout | null = null;
  private stallTimer: NodeJS.Timeout | null = null;
  private handshakeTimer: NodeJS.Timeout | null = null;
  private droppedSinceLog = 0;
  /** Frames written to the socket (every kind after the handshake), and of those, heartbeat batches. */
  framesWritten = 0;
  beatFramesWritten = 0;
  /** Beat frames still queued (counted when written). */
  private readonly beatFrames = new WeakSet<Buffer>();
  /** Queued `msg` frames: consecutive ones leave as one `batch` frame (batchFrames). */
  private readonly messageFrames = new WeakSet<Buffer>();
  /** Messages written (heartbeat batches and snapshot chunks aside), each once, whether alone or in a batch frame. */
  messagesWritten = 0;

  constructor(
    private readonly selfId: NodeId,
    readonly peerId: NodeId,
    private address: HostPort,
    private readonly settings: PeerLinkSettings,
  ) {
    this.backoffMs = settings.backoffInitialMs;
  }

  /** Queues `message` (of `group`, when the transport carries many) and makes sure a connection is on its way. */
  enqueue(message: Message, group?: string): void {
    if (this.closed) return;
    if (message.type === 'snapshot') {
      // A newer snapshot supersedes one of the same group still streaming: the peer needs the latest state, not both.
      if (this.snapshot === null || this.snapshot.group === group) this.snapshot = this.newSender(message, group);
      else this.waitingSnapshots.set(group ?? '', message);
    } else {
      let frame: Buffer;
      try {
        frame = encodeMessageFrame(message, group, this.settings.maxFrameBytes);
      } catch (error) {
        const reason = error instanceof FrameError ? error.message : String(error);
        this.settings.logger.log('warn', `dropping ${message.type} to ${this.peerId}: ${reason}`);
        return;
      }
      this.messageFrames.add(frame);
      this.queue.push(frame);
      this.queueBytes += frame.byteLength;
      this.enforceQueueBounds();
    }
    this.kick();
  }

  /**
   * Queues one frame of coalesced heartbeats (see src/transport/coalesce.ts). A batch too large for one frame is
   * halved until each part fits (only thousands of shared groups with long names get there).
   */
  enqueueBeats(beats: BeatTuple[]): void {
    if (this.closed || beats.length === 0) return;
    let frame: Buffer;
    try {
      frame = encodeFrame({ kind: 'beats', beats } satisfies BeatsFrame, this.settings.maxFrameBytes);
    } catch (error) {
      if (error instanceof FrameError && beats.length > 1) {
        const half = Math.ceil(beats.length / 2);
        this.enqueueBeats(beats.slice(0, half));
        this.enqueueBeats(beats.slice(half));
      } else {
        this.settings.logger.log('warn', `dropping ${beats.length} heartbeats to ${this.peerId}: ${String(error)}`);
      }
      return;
    }
    this.beatFrames.add(frame);
    this.queue.push(frame);
    this.queueBytes += frame.byteLength;
    this.enforceQueueBounds();
    this.kick();
  }

  /** Queues a ping (a process saying it is alive), unless one is already waiting. */
  ping(): void {
    if (this.closed || this.queue.at(-1) === PING_FRAME) return;
    this.queue.push(PING_FRAME);
    this.queueBytes += PING_FRAME.byteLength;
    this.kick();
  }

  /** Points the link at a new address; an open connection to the old one is closed. */
  setAddress(address: HostPort): void {
    if (address.host === this.address.host && address.port === this.address.port) return;
    this.address = address;
    this.retryAt = 0;
    this.backoffMs = this.settings.backoffInitialMs;
    this.socket?.destroy();
  }

  /** Forgets every queued message and any snapshot being streamed (the link was blocked). */
  clearPending(): void {
    this.queue = [];
    this.queueBytes = 0;
    this.snapshot = null;
    this.waitingSnapshots.clear();
  }

  private newSender(message: SnapshotRequest, group: string | undefined): SnapshotSender {
    return new SnapshotSender(message, this.settings.nextStreamId(), this.settings.snapshotChunkBytes, group);
  }

  /** The next group's waiting snapshot becomes the stream, if any. */
  private nextSnapshot(): void {
    this.snapshot = null;
    const next = this.waitingSnapshots.entries().next();
    if (next.done === true) return;
    const [key, message] = next.value;
    this.waitingSnapshots.delete(key);
    this.snapshot = this.newSender(message, key === '' ? undefined : key);
  }

  /** Drops everything and closes the connection; resolves once the socket is fully closed. */
  close(): Promise<void> {
    this.closed = true;
    this.clearPending();
    this.clearTimer('retryTimer');
    this.clearTimer('stallTimer');
    this.clearTimer('handshakeTimer');
    const socket = this.socket;
    if (socket === null || socket.closed) return Promise.resolve();
    return new Promise((resolve) => {
      socket.once('close', () => resolve());
      socket.destroy();
    });
  }

  private get hasPending(): boolean {
    return this.queue.length > 0 || this.snapshot !== null;
  }

  private enforceQueueBounds(): void {
    const { maxQueueBytes, maxQueueMessages } = this.settings;
    while (this.queue.length > 1 && (this.queue.length > maxQueueMessages || this.queueBytes > maxQueueBytes)) {
      this.queueBytes -= this.queue.shift()!.byteLength;
      this.droppedSinceLog++;
    }
    // One line per burst of drops rather than one per message.
    if (this.droppedSinceLog >= 100) {
      this.settings.logger.log('debug', `dropped ${this.droppedSinceLog} queued messages to ${this.peerId}`);
      this.droppedSinceLog = 0;
    }
  }

  /** Writes if connected; otherwise connects now or once the backoff delay has passed. */
  private kick(): void {
    if (this.closed || !this.hasPending) return;
    if (this.socket !== null) {
      if (this.connected) this.schedulePump();
      return;
    }
    if (this.retryTimer !== null) return;
    const wait = this.retryAt - Date.now();
    if (wait <= 0) {
      this.connect();
    } else {
      this.retryTimer = setTimeout(() => {
        this.retryTimer = null;
        this.kick();
      }, wait);
      this.retryTimer.unref();
    }
  }

  private connect(): void {
    const tls = this.settings.tls;
    const peerId = this.peerId;
    const socket =
      tls === undefined
        ? connect({ host: this.address.host, port: this.address.port })
        : tlsConnect({
            host: this.address.host,
            port: this.address.port,
            cert: tls.cert,
            key: tls.key,
            ca: tls.ca,
            minVersion: 'TLSv1.3',
            // Members are named by id, not host name: the acceptor must be the member this link is for.
            checkServerIdentity: (_host, certificate) =>
              certificate.subject?.CN === peerId
                ? undefined
                : new Error(
                    `the certificate at ${this.address.host}:${this.address.port} is issued to "${String(certificate.subject?.CN)}", not ${peerId}`,
                  ),
          });
    this.socket = socket;
    socket.setNoDelay(true);
    socket.setTimeout(this.settings.connectTimeoutMs, () => socket.destroy(new Error('connect timed out')));
    const handshake = new DialerHandshake(this.selfId, this.peerId, this.settings.key);
    // The acceptor speaks only during the handshake; the decoder never needs more than handshake-sized frames.
    const decoder = new FrameDecoder(
      (frame) => {
        const reply = handshake.onFrame(frame);
        if (reply !== null) socket.write(reply);
        else this.onAuthenticated(socket);
      },
      { maxFrameBytes: HANDSHAKE_MAX_FRAME_BYTES },
    );
    socket.on(tls === undefined ? 'connect' : 'secureConnect', () => {
      socket.setTimeout(0);
      socket.setKeepAlive(true, 1000);
      this.handshakeTimer = setTimeout(() => {
        this.handshakeTimer = null;
        this.abort(socket, 'handshake timed out');
      }, this.settings.handshakeTimeoutMs);
    });
    socket.on('data', (chunk: Buffer) => {
      if (socket.destroyed) return;
      try {
        decoder.push(chunk);
      } catch (error) {
        this.abort(socket, error instanceof FrameError || error instanceof DecodeError ? error.message : String(error));
      }
    });
    socket.on('drain', () => {
      this.clearTimer('stallTimer');
      this.pump();
    });
    socket.on('error', (error) => this.settings.logger.log('debug', `link to ${this.peerId}: ${error.message}`));
    socket.on('close', () => {
      decoder.discard();
      this.onClose(socket);
    });
  }

  /** The peer proved it holds the key: start sending. */
  private onAuthenticated(socket: Socket): void {
    if (this.socket !== socket) return;
    this.clearTimer('handshakeTimer');
    this.connected = true;
    // Only a completed handshake counts as success: a peer with another secret is retried with growing delays.
    this.backoffMs = this.settings.backoffInitialMs;
    this.retryAt = 0;
    this.snapshot?.restart();
    this.pump();
  }

  /** A handshake failure: logged as a warning when the peer is not who it should be, else as expected trouble. */
  private abort(socket: Socket, reason: string): void {
    const level = reason.includes('MAC') ? 'warn' : 'debug';
    this.settings.logger.log(level, `closing link to ${this.peerId}: ${reason}`);
    socket.destroy();
  }

  private onClose(socket: Socket): void {
    if (this.socket !== socket) return;
    this.socket = null;
    this.connected = false;
    this.clearTimer('stallTimer');
    this.clearTimer('handshakeTimer');
    if (this.closed) return;
    // Wait before the next attempt, doubling up to the cap; the jitter keeps members from retrying in step.
    const delay = this.backoffMs * (0.5 + Math.random() * 0.5);
    this.backoffMs = Math.min(this.backoffMs * 2, this.settings.backoffMaxMs);
    this.retryAt = Date.now() + delay;
    this.kick();
  }

  /**
   * Pumps once the current turn of the event loop is over, so every message queued during it (a Ready's appends,
   * other groups' messages) leaves in one socket write instead of one write each: a write per message was the
   * largest single cost of a busy leader.
   */
  private schedulePump(): void {
    if (this.pumpScheduled) return;
    this.pumpScheduled = true;
    setImmediate(() => {
      this.pumpScheduled = false;
      this.pump();
    });
  }

  /** Writes queued frames, then snapshot chunks, until the socket wants us to wait for 'drain'. */
  private pump(): void {
    const socket = this.socket;
    if (socket === null || !this.connected || socket.writableNeedDrain) return;
    // Corked, the frames of this pump reach the kernel together (one writev) when it ends.
    socket.cork();
    try {
      this.pumpFrames(socket);
    } finally {
      socket.uncork();
    }
  }

  private pumpFrames(socket: Socket): void {
    for (;;) {
      let frame = this.queue.shift();
      if (frame !== undefined) {
        this.queueBytes -= frame.byteLength;
        if (this.messageFrames.has(frame)) {
          if (this.messageFrames.has(this.queue[0]!)) frame = this.takeBatch(frame);
          else this.messagesWritten++;
        }
      } else {
        // Plain messages go first so heartbeats and votes are not stuck behind a large snapshot.
        const sender = this.snapshot;
        const chunk = sender?.nextChunk() ?? null;
        if (chunk === null) return;
        if (sender!.done) this.nextSnapshot();
        try {
          frame = encodeFrame(chunk, this.settings.maxFrameBytes);
        } catch (error) {
          // Only possible when the header alone is huge (a giant member list); this runs in an event handler,
          // so drop the snapshot rather than throw.
          this.settings.logger.log('warn', `dropping snapshot to ${this.peerId}: ${String(error)}`);
          if (this.snapshot === sender) this.nextSnapshot();
          continue;
        }
      }
      this.framesWritten++;
      if (this.beatFrames.has(frame)) this.beatFramesWritten++;
      if (!socket.write(frame)) {
        // The peer is not reading fast enough. If it stops reading entirely (half-open connection after a
        // partition), give up on the connection instead of waiting for TCP's retransmission timeout.
        this.stallTimer ??= setTimeout(() => {
          this.stallTimer = null;
          socket.destroy(new Error('write stalled'));
        }, this.settings.stallTimeoutMs);
        return;
      }
    }
  }

  /**
   * `first` and the `msg` frames queued right after it, as one batch frame within the frame limit: the receiver
   * decodes one frame for all the messages of a write, whichever groups they belong to. Their order is kept.
   */
  private takeBatch(first: Buffer): Buffer {
    const frames = [first];
    let payloadBytes = first.byteLength - FRAME_HEADER_BYTES;
    for (;;) {
      const next = this.queue[0];
      if (next === undefined || !this.messageFrames.has(next)) break;
      const bytes = payloadBytes + next.byteLength - FRAME_HEADER_BYTES;
      if (bytes + arrayHeaderBytes(frames.length + 1) > this.settings.maxFrameBytes) break;
      this.queue.shift();
      this.queueBytes -= next.byteLength;
      frames.push(next);
      payloadBytes = bytes;
    }
    this.messagesWritten += frames.length;
    return frames.length === 1 ? first : batchFrames(frames);
  }

  private clearTimer(which: 'retryTimer' | 'stallTimer' | 'handshakeTimer'): void {
    const timer = this[which];
    if (timer !== null) clearTimeout(timer);
    this[which] = null;
  }
}

/**
 * The dialer's half of the handshake on one connection: answers the challenge with a hello, then checks the
 * welcome. Throws DecodeError on anything unexpected (the caller closes the connection).
 */
class DialerHandshake {
  private readonly nonce = newNonce();
  private challengeNonce: Uint8Array | null = null;
  private done = false;

  constructor(
    private readonly selfId: NodeId,
    private readonly peerId: NodeId,
    private readonly key: Buffer,
  ) {}

  /** Returns the frame to send in reply, or null once the peer is authenticated. */
  onFrame(value: unknown): Buffer | null {
    if (this.done) throw new DecodeError('the peer wrote after the handshake');
    const frame = parseWireFrame(value);
    if (this.challengeNonce === null) {
      if (frame.kind !== 'challenge') throw new DecodeError(`expected challenge, got ${frame.kind}`);
      if (frame.nonce.byteLength < MIN_NONCE_BYTES)
        throw new DecodeError(`challenge nonce of ${frame.nonce.byteLength} bytes`);
      this.challengeNonce = frame.nonce;
      const hello: HelloFrame = {
        kind: 'hello',
        version: PROTOCOL_VERSION,
        from: this.selfId,
        to: this.peerId,
        nonce: this.nonce,
        mac: helloMac(this.key, frame.nonce, this.nonce, this.selfId, this.peerId),
      };
      return encodeFrame(hello, HANDSHAKE_MAX_FRAME_BYTES);
    }
    if (frame.kind !== 'welcome') throw new DecodeError(`expected welcome, got ${frame.kind}`);
    const expected = welcomeMac(this.key, this.nonce, this.challengeNonce, this.peerId, this.selfId);
    if (!macMatches(frame.mac, expected))
      throw new DecodeError(`welcome from ${this.peerId} has a wrong MAC (different secret or not ${this.peerId})`);
    this.done = true;
    return null;
  }
}
