/**
 * The receiving side of one accepted connection: handshake (the acceptor's half, see handshake.ts), frame
 * decoding, snapshot reassembly. Protocol violations close this connection and nothing else; no exception
 * escapes a socket event handler.
 */
import type { Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import type { HeartbeatBatch } from './coalesce.js';
import type { Logger } from '../logger.js';
import type { Message, NodeId } from '../types.js';
import { DecodeError } from '../codec/parse.js';
import { FrameDecoder, FrameError, encodeFrame } from './framing.js';
import { HANDSHAKE_MAX_FRAME_BYTES, MIN_NONCE_BYTES, helloMac, macMatches, newNonce, welcomeMac } from './handshake.js';
import { SnapshotAssembler } from './snapshot-stream.js';
import {
  PROTOCOL_VERSION,
  parseWireFrame,
  tuplesToBatch,
  type ChallengeFrame,
  type HelloFrame,
  type WelcomeFrame,
} from './wire.js';

/** What an inbound connection needs from its transport. */
interface InboundSettings {
  selfId: NodeId;
  /** The MAC key derived from the cluster secret. */
  key: Buffer;
  maxFrameBytes: number;
  maxSnapshotBytes: number;
  /** The whole handshake must be done within this long of the accept. */
  handshakeTimeoutMs: number;
  /** A frame must be complete within this long of its first byte. */
  frameTimeoutMs: number;
  /** Whether `peer` is a member this transport talks to (only those may introduce themselves). */
  isKnownPeer: (peer: NodeId) => boolean;
  /** The connection is TLS: the dialer's certificate must name the member its hello speaks as. */
  tls: boolean;
  isBlocked: (peer: NodeId) => boolean;
  /** Something (a message, a chunk, a ping) arrived from `peer` after its handshake. */
  heard: (peer: NodeId) => void;
  /** Hands over a message (with its group, when the transport carries many). */
  deliver: (message: Message, group?: string) => void;
  /** Hands over a batch of coalesced heartbeats from the authenticated peer to this member. */
  deliverBeats: (batch: HeartbeatBatch) => void;
  logger: Logger;
}

/** Reads messages from one peer's connection. */
export class InboundConnection {
  /** The sender proven by the handshake; null until it completes. */
  private authenticatedPeer: NodeId | null = null;
  private readonly challengeNonce = newNonce();
  private readonly decoder: FrameDecoder;
  private readonly snapshots: SnapshotAssembler;
  private handshakeTimer: NodeJS.Timeout | null;
  private frameTimer: NodeJS.Timeout | null = null;
  /** Resolves once the socket has closed. */
  readonly closed: Promise<void>;

  constructor(
    private readonly socket: Socket,
    private readonly settings: InboundSettings,
  ) {
    // Until the peer has proven it holds the key, only handshake-sized frames are buffered.
    this.decoder = new FrameDecoder((frame) => this.onFrame(frame), { maxFrameBytes: HANDSHAKE_MAX_FRAME_BYTES });
    this.snapshots = new SnapshotAssembler(settings.maxSnapshotBytes, (reason) =>
      settings.logger.log('debug', `snapshot from ${this.peerName} discarded: ${reason}`),
    );
    this.closed = new Promise((resolve) => socket.once('close', () => resolve()));
    socket.setNoDelay(true);
    socket.setKeepAlive(true, 1000);
    // A deadline for the whole handshake, not an idle timeout: trickling bytes must not keep a stranger connected.
    this.handshakeTimer = setTimeout(() => {
      this.handshakeTimer = null;
      if (this.authenticatedPeer === null) this.abort('no handshake in time');
    }, settings.handshakeTimeoutMs);
    socket.on('data', (chunk: Buffer) => this.onData(chunk));
    socket.on('error', (error) => settings.logger.log('debug', `inbound from ${this.peerName}: ${error.message}`));
    socket.on('close', () => this.release());
    const challenge: ChallengeFrame = { kind: 'challenge', version: PROTOCOL_VERSION, nonce: this.challengeNonce };
    socket.write(encodeFrame(challenge, HANDSHAKE_MAX_FRAME_BYTES));
  }

  /** The authenticated peer, or null while the handshake is under way. */
  get peerId(): NodeId | null {
    return this.authenticatedPeer;
  }

  /** Closes the connection at once. */
  destroy(): void {
    this.socket.destroy();
  }

  private get peerName(): string {
    return (
      this.authenticatedPeer ?? `unauthenticated ${this.socket.remoteAddress ?? '?'}:${this.socket.remotePort ?? '?'}`
    );
  }

  private onData(chunk: Buffer): void {
    if (this.socket.destroyed) return;
    const before = this.decoder.framesDecoded;
    try {
      this.decoder.push(chunk);
    } catch (error) {
      if (error instanceof FrameError || error instanceof DecodeError) {
        this.abort(error.message);
      } else {
        this.abort(`unexpected: ${String(error)}`);
      }
      return;
    }
    this.watchFrameProgress(this.decoder.framesDecoded !== before);
  }

  /**
   * A frame that has started must finish within frameTimeoutMs of its start, so a peer cannot park a
   * half-sent frame (up to maxFrameBytes of buffer) on us indefinitely. Progress is counted in whole frames.
   */
  private watchFrameProgress(completedFrames: boolean): void {
    if (this.decoder.bufferedBytes === 0 || completedFrames) this.clearFrameTimer();
    if (this.decoder.bufferedBytes === 0 || this.frameTimer !== null) return;
    this.frameTimer = setTimeout(() => {
      this.frameTimer = null;
      this.abort(
        `frame incomplete after ${this.settings.frameTimeoutMs} ms (${this.decoder.bufferedBytes} bytes buffered)`,
      );
    }, this.settings.frameTimeoutMs);
  }

  /** Handles one decoded frame. Throws DecodeError on protocol violations (the caller closes the socket). */
  private onFrame(value: unknown): void {
    if (this.socket.destroyed) return;
    const frame = parseWireFrame(value);
    const peer = this.authenticatedPeer;
    if (peer === null) {
      if (frame.kind !== 'hello') throw new DecodeError(`expected hello, got ${frame.kind}`);
      this.authenticate(frame);
      return;
    }
    if (this.settings.isBlocked(peer)) return;
    this.settings.heard(peer);
    if (frame.kind === 'ping') return;
    if (frame.kind === 'msg') {
      this.accept(frame.message, frame.group);
    } else if (frame.kind === 'batch') {
      for (const item of frame.frames) this.accept(item.message, item.group);
    } else if (frame.kind === 'beats') {
      try {
        this.settings.deliverBeats(tuplesToBatch(peer, this.settings.selfId, frame.beats));
      } catch (error) {
        this.settings.logger.log('warn', `heartbeat batch handler threw: ${String(error)}`);
      }
    } else if (frame.kind === 'snapChunk') {
      // Every chunk of a stream comes from one sender's one snapshot, so the completing chunk names its group.
      const message = this.snapshots.accept(frame);
      if (message !== null) this.accept(message, frame.group);
    } else {
      throw new DecodeError(`unexpected ${frame.kind} after the handshake`);
    }
  }

  /** Checks the hello; on success answers with welcome and lets messages in. Throws DecodeError otherwise. */
  private authenticate(hello: HelloFrame): void {
    const { selfId, key } = this.settings;
    if (hello.to !== selfId) throw new DecodeError(`hello addressed to ${hello.to}`);
    if (hello.nonce.byteLength < MIN_NONCE_BYTES)
      throw new DecodeError(`hello nonce of ${hello.nonce.byteLength} bytes`);
    const expected = helloMac(key, this.challengeNonce, hello.nonce, hello.from, hello.to);
    if (!macMatches(hello.mac, expected))
      throw new DecodeError(`hello from "${hello.from}" has a wrong MAC (different secret?)`);
    // Checked after the MAC so that only key holders learn which ids are members.
    if (!this.settings.isKnownPeer(hello.from)) throw new DecodeError(`hello from "${hello.from}", not a known member`);
    if (this.settings.tls) {
      const named = (this.socket as TLSSocket).getPeerCertificate().subject?.CN;
      if (named !== hello.from)
        throw new DecodeError(`hello from "${hello.from}" over a certificate issued to "${String(named)}"`);
    }
    this.authenticatedPeer = hello.from;
    if (this.handshakeTimer !== null) clearTimeout(this.handshakeTimer);
    this.handshakeTimer = null;
    this.decoder.setMaxFrameBytes(this.settings.maxFrameBytes);
    const welcome: WelcomeFrame = {
      kind: 'welcome',
      mac: welcomeMac(key, hello.nonce, this.challengeNonce, selfId, hello.from),
    };
    this.socket.write(encodeFrame(welcome, HANDSHAKE_MAX_FRAME_BYTES));
  }

  /** Delivers a message that really is from the handshaking peer and for us; drops anything else. */
  private accept(message: Message, group: string | undefined): void {
    if (message.from !== this.authenticatedPeer || message.to !== this.settings.selfId) {
      this.settings.logger.log(
        'warn',
        `dropping ${message.type} ${message.from}->${message.to} on ${this.peerName}'s link`,
      );
      return;
    }
    try {
      this.settings.deliver(message, group);
    } catch (error) {
      // The receiver's bug, not the peer's: keep the connection.
      this.settings.logger.log(
        'warn',
        `message handler threw on ${message.type} from ${message.from}: ${String(error)}`,
      );
    }
  }

  private clearFrameTimer(): void {
    if (this.frameTimer !== null) clearTimeout(this.frameTimer);
    this.frameTimer = null;
  }

  /** Drops timers and buffers once the socket is gone. */
  private release(): void {
    if (this.handshakeTimer !== null) clearTimeout(this.handshakeTimer);
    this.handshakeTimer = null;
    this.clearFrameTimer();
    this.decoder.discard();
    this.snapshots.reset();
  }

  private abort(reason: string): void {
    this.settings.logger.log('warn', `closing inbound connection from ${this.peerName}: ${reason}`);
    this.release();
    this.socket.destroy();
  }
}
