/**
 * The receiving side of one accepted connection: handshake, frame decoding, snapshot reassembly. Protocol
 * violations close this connection and nothing else; no exception escapes a socket event handler.
 */
import type { Socket } from 'node:net';
import type { Message, NodeId } from '../types.js';
import { DecodeError } from '../codec/parse.js';
import { FrameDecoder, FrameError } from './framing.js';
import type { TransportLog } from './peer-link.js';
import { SnapshotAssembler } from './snapshot-stream.js';
import { PROTOCOL_VERSION, parseWireFrame } from './wire.js';

/** What an inbound connection needs from its transport. */
export interface InboundSettings {
  selfId: NodeId;
  maxFrameBytes: number;
  maxSnapshotBytes: number;
  handshakeTimeoutMs: number;
  isBlocked: (peer: NodeId) => boolean;
  deliver: (message: Message) => void;
  log: TransportLog;
}

/** Reads messages from one peer's connection. */
export class InboundConnection {
  /** The sender named by the handshake; null until it arrives. */
  private peerId: NodeId | null = null;
  private readonly decoder: FrameDecoder;
  private readonly snapshots: SnapshotAssembler;
  /** Resolves once the socket has closed. */
  readonly closed: Promise<void>;

  constructor(
    private readonly socket: Socket,
    private readonly settings: InboundSettings,
  ) {
    this.decoder = new FrameDecoder((frame) => this.onFrame(frame), { maxFrameBytes: settings.maxFrameBytes });
    this.snapshots = new SnapshotAssembler(settings.maxSnapshotBytes, (reason) =>
      settings.log('debug', `snapshot from ${this.peerId ?? '?'} discarded: ${reason}`),
    );
    this.closed = new Promise((resolve) => socket.once('close', () => resolve()));
    socket.setNoDelay(true);
    socket.setKeepAlive(true, 1000);
    // A connection that never introduces itself is not one of ours.
    socket.setTimeout(settings.handshakeTimeoutMs, () => {
      if (this.peerId === null) this.abort('no handshake');
    });
    socket.on('data', (chunk: Buffer) => this.onData(chunk));
    socket.on('error', (error) => settings.log('debug', `inbound from ${this.peerId ?? '?'}: ${error.message}`));
    socket.on('close', () => this.snapshots.reset());
  }

  /** Closes the connection at once. */
  destroy(): void {
    this.socket.destroy();
  }

  private onData(chunk: Buffer): void {
    try {
      this.decoder.push(chunk);
    } catch (error) {
      if (error instanceof FrameError || error instanceof DecodeError) {
        this.abort(error.message);
      } else {
        this.abort(`unexpected: ${String(error)}`);
      }
    }
  }

  /** Handles one decoded frame. Throws DecodeError on protocol violations (the caller closes the socket). */
  private onFrame(value: unknown): void {
    if (this.socket.destroyed) return;
    const frame = parseWireFrame(value);
    if (this.peerId === null) {
      if (frame.kind !== 'hello') throw new DecodeError(`expected hello, got ${frame.kind}`);
      if (frame.version !== PROTOCOL_VERSION) throw new DecodeError(`unsupported protocol version ${frame.version}`);
      if (frame.to !== this.settings.selfId) throw new DecodeError(`hello addressed to ${frame.to}`);
      this.peerId = frame.from;
      this.socket.setTimeout(0);
      return;
    }
    if (frame.kind === 'hello') throw new DecodeError('second hello');
    if (this.settings.isBlocked(this.peerId)) return;
    if (frame.kind === 'msg') {
      this.accept(frame.message);
    } else {
      const message = this.snapshots.accept(frame);
      if (message !== null) this.accept(message);
    }
  }

  /** Delivers a message that really is from the handshaking peer and for us; drops anything else. */
  private accept(message: Message): void {
    if (message.from !== this.peerId || message.to !== this.settings.selfId) {
      this.settings.log('warn', `dropping ${message.type} ${message.from}->${message.to} on ${this.peerId}'s link`);
      return;
    }
    try {
      this.settings.deliver(message);
    } catch (error) {
      // The receiver's bug, not the peer's: keep the connection.
      this.settings.log('warn', `message handler threw on ${message.type} from ${message.from}: ${String(error)}`);
    }
  }

  private abort(reason: string): void {
    this.settings.log('warn', `closing inbound connection from ${this.peerId ?? this.socket.remoteAddress}: ${reason}`);
    this.socket.destroy();
  }
}
