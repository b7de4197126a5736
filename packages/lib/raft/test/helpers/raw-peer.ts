/**
 * A hand-driven TCP client for a TcpTransport's port: it writes whatever bytes a test gives it and collects the
 * frames the transport sends back, so tests can play an honest dialer, a replaying one or a hostile one.
 */
import { type Socket, connect } from 'node:net';
import { FrameDecoder, encodeFrame } from '../../src/transport/framing.js';
import {
  deriveTransportKey,
  helloMac,
  newNonce,
  welcomeMac,
  type TransportSecret,
} from '../../src/transport/handshake.js';
import { PROTOCOL_VERSION, parseWireFrame, type WireFrame } from '../../src/transport/wire.js';

export class RawPeer {
  readonly frames: WireFrame[] = [];
  /** Resolves once the transport (or the test) closed the connection. */
  readonly closed: Promise<void>;
  private readonly socket: Socket;
  private waiters: Array<() => void> = [];

  private constructor(socket: Socket) {
    this.socket = socket;
    const decoder = new FrameDecoder((value) => {
      this.frames.push(parseWireFrame(value));
      for (const wake of this.waiters.splice(0)) wake();
    });
    socket.on('data', (chunk: Buffer) => {
      try {
        decoder.push(chunk);
      } catch {
        socket.destroy();
      }
    });
    socket.on('error', () => {});
    this.closed = new Promise((resolve) => socket.once('close', () => resolve()));
    void this.closed.then(() => {
      for (const wake of this.waiters.splice(0)) wake();
    });
  }

  static async open(address: string): Promise<RawPeer> {
    const [host, port] = [
      address.slice(0, address.lastIndexOf(':')),
      Number(address.slice(address.lastIndexOf(':') + 1)),
    ];
    const socket = connect({ host, port });
    await new Promise<void>((resolve, reject) => {
      socket.once('connect', resolve);
      socket.once('error', reject);
    });
    return new RawPeer(socket);
  }

  get isClosed(): boolean {
    return this.socket.destroyed;
  }

  write(bytes: Uint8Array): void {
    if (!this.socket.destroyed) this.socket.write(bytes);
  }

  writeFrame(value: unknown): void {
    this.write(encodeFrame(value));
  }

  destroy(): void {
    this.socket.destroy();
  }

  /** The n-th frame received (0-based), or null if the connection closed first or `timeoutMs` passed. */
  async frame(n: number, timeoutMs = 5000): Promise<WireFrame | null> {
    const deadline = Date.now() + timeoutMs;
    while (this.frames.length <= n) {
      const left = deadline - Date.now();
      if (this.socket.destroyed || left <= 0) return null;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
    return this.frames[n]!;
  }

  /** Resolves true once closed, false if still open after `timeoutMs`. */
  async closesWithin(timeoutMs: number): Promise<boolean> {
    let timer: NodeJS.Timeout | undefined;
    const result = await Promise.race([
      this.closed.then(() => true),
      new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), timeoutMs))),
    ]);
    clearTimeout(timer);
    return result;
  }

  /**
   * Plays the honest dialer's half of the handshake as `from` to `to` with `secret`. Resolves with the hello it
   * sent (so a test can replay it) and whether the transport welcomed it with a valid MAC.
   */
  async handshake(
    secret: TransportSecret,
    from: string,
    to: string,
  ): Promise<{ hello: Record<string, unknown>; welcomed: boolean }> {
    const challenge = await this.frame(0);
    if (challenge === null || challenge.kind !== 'challenge') throw new Error('no challenge from the transport');
    const key = deriveTransportKey(secret);
    const nonce = newNonce();
    const hello = {
      kind: 'hello',
      version: PROTOCOL_VERSION,
      from,
      to,
      nonce,
      mac: helloMac(key, challenge.nonce, nonce, from, to),
    };
    this.writeFrame(hello);
    const welcome = await this.frame(1);
    const welcomed =
      welcome !== null &&
      welcome.kind === 'welcome' &&
      Buffer.compare(welcome.mac, welcomeMac(key, nonce, challenge.nonce, to, from)) === 0;
    return { hello, welcomed };
  }
}
