/**
 * A userspace TCP proxy in front of one member's Raft port, aware of the Raft transport's framing, so it can
 * act per directed link without root:
 *
 * - Each connection a peer opens starts with a `hello` frame naming the sender (`from`): that tells the proxy
 *   which link (sender → this member) the connection carries. Raft connections are one-way (a member sends on
 *   the connections it opened), so the cut of link a→b is exactly "hold everything a sends on connections to b".
 * - A cut link is black-holed like a dropped packet stream: the proxy stops reading from the sender (its socket
 *   buffers fill, as TCP would under a DROP rule) and forwards nothing. If the partition heals while the
 *   connection lives, what was held is delivered late, as TCP would retransmit it; if the sender gives up on
 *   the connection first, what was held is lost.
 * - Packet faults act on whole frames (Raft messages): latency (+ jitter, order kept), loss (the message is
 *   dropped: stronger than packet loss on TCP, which only delays) and reordering (a message is held back and
 *   overtaken by later ones). Snapshot chunks and the hello are only ever delayed, never dropped or reordered.
 *
 * Used in-process (proxy mode: everything on 127.0.0.1) and, inside a network namespace, as a child process
 * (see proxy-main.ts) when the kernel has no netem for packet faults.
 */
import { connect, createServer, type Server, type Socket } from 'node:net';
import { Packr } from 'msgpackr';
import { Rng } from '../rng.js';

export interface PacketRule {
  /** Added to each frame's delivery time, in ms. */
  delayMs: number;
  /** Uniform jitter of ± this many ms on the delay (order still kept for frames not reordered). */
  jitterMs: number;
  /** Probability of dropping a message frame. */
  loss: number;
  /** Probability of holding a message frame back by `reorderDelayMs` so later frames overtake it. */
  reorder: number;
  reorderDelayMs: number;
}

export const NO_RULE: PacketRule = { delayMs: 0, jitterMs: 0, loss: 0, reorder: 0, reorderDelayMs: 0 };

export interface HostPort {
  host: string;
  port: number;
}

interface LinkProxyOptions {
  /** Id of the member behind this proxy. */
  targetId: string;
  listen: HostPort;
  /** Where the member really listens. */
  target: HostPort;
  seed: number;
  log?: (message: string) => void;
  /** Largest frame accepted before the connection is treated as garbage and simply piped. Default 64 MiB. */
  maxFrameBytes?: number;
}

interface ProxyStats {
  connections: number;
  framesForwarded: number;
  framesDropped: number;
  framesReordered: number;
}

const packr = new Packr({ useRecords: false, mapsAsObjects: true });

export class LinkProxy {
  private server: Server | null = null;
  private readonly cut = new Set<string>();
  private readonly rules = new Map<string, PacketRule>();
  private readonly connections = new Set<ProxiedConnection>();
  private readonly rng: Rng;
  readonly stats: ProxyStats = { connections: 0, framesForwarded: 0, framesDropped: 0, framesReordered: 0 };

  constructor(readonly options: LinkProxyOptions) {
    this.rng = Rng.derive(options.seed, `proxy/${options.targetId}`);
  }

  /** Starts listening; resolves with the bound port (useful with port 0). */
  async start(): Promise<number> {
    const server = createServer((socket) => this.accept(socket));
    this.server = server;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.options.listen.port, this.options.listen.host, () => {
        server.off('error', reject);
        resolve();
      });
    });
    return (server.address() as { port: number }).port;
  }

  /** Replaces the set of members whose messages to this member are lost. */
  setCut(sources: Iterable<string>): void {
    this.cut.clear();
    for (const s of sources) this.cut.add(s);
    for (const c of this.connections) c.update();
  }

  /** Sets (or with null clears) the packet rule for messages from `source` ("*" = every source). */
  setRule(source: string, rule: PacketRule | null): void {
    if (rule === null) this.rules.delete(source);
    else this.rules.set(source, rule);
  }

  clearRules(): void {
    this.rules.clear();
  }

  isCut(source: string): boolean {
    return this.cut.has(source);
  }

  ruleFor(source: string): PacketRule {
    return this.rules.get(source) ?? this.rules.get('*') ?? NO_RULE;
  }

  random(): number {
    return this.rng.float();
  }

  async close(): Promise<void> {
    for (const c of this.connections) c.destroy();
    const server = this.server;
    this.server = null;
    if (server !== null) await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  forget(connection: ProxiedConnection): void {
    this.connections.delete(connection);
  }

  log(message: string): void {
    this.options.log?.(message);
  }

  private accept(socket: Socket): void {
    this.stats.connections++;
    this.connections.add(new ProxiedConnection(this, socket, this.options.maxFrameBytes ?? 64 * 1024 * 1024));
  }
}

/** One sender's connection through the proxy. */
class ProxiedConnection {
  private readonly upstream: Socket;
  private upstreamReady = false;
  private source: string | null = null;
  private buffer: Buffer = Buffer.alloc(0);
  /** Frames read but not yet due, in arrival order (each with its own timer). */
  private readonly timers = new Set<NodeJS.Timeout>();
  /** Frames held while the link is cut, or waiting for the upstream connection. */
  private held: Buffer[] = [];
  private lastInOrder = 0;
  private closed = false;
  private passthrough = false;

  constructor(
    private readonly proxy: LinkProxy,
    private readonly down: Socket,
    private readonly maxFrameBytes: number,
  ) {
    const { target } = proxy.options;
    this.upstream = connect(target.port, target.host);
    this.upstream.setNoDelay(true);
    down.setNoDelay(true);
    this.upstream.on('connect', () => {
      this.upstreamReady = true;
      this.flushHeld();
    });
    // Anything the member writes back goes straight to the sender.
    this.upstream.on('data', (chunk) => {
      if (!down.destroyed) down.write(chunk);
    });
    this.upstream.on('error', () => this.destroy());
    this.upstream.on('close', () => this.destroy());
    down.on('data', (chunk) => this.onData(chunk));
    down.on('error', () => this.destroy());
    down.on('close', () => this.onDownClosed());
  }

  private get isCut(): boolean {
    return this.source !== null && this.proxy.isCut(this.source);
  }

  /** The proxy's cut set changed. */
  update(): void {
    if (this.closed) return;
    if (this.isCut) this.down.pause();
    else {
      this.flushHeld();
      this.down.resume();
    }
  }

  private onData(chunk: Buffer): void {
    if (this.passthrough) {
      this.emit(chunk);
      return;
    }
    this.buffer = this.buffer.length === 0 ? chunk : Buffer.concat([this.buffer, chunk]);
    while (this.buffer.length >= 4) {
      const length = this.buffer.readUInt32BE(0);
      if (length > this.maxFrameBytes) {
        // Not our protocol (or corrupt): stop interpreting and pipe bytes through unchanged.
        this.passthrough = true;
        const rest = this.buffer;
        this.buffer = Buffer.alloc(0);
        this.emit(rest);
        return;
      }
      if (this.buffer.length < 4 + length) return;
      const frame = this.buffer.subarray(0, 4 + length);
      this.buffer = this.buffer.subarray(4 + length);
      this.onFrame(Buffer.from(frame));
    }
  }

  private onFrame(frame: Buffer): void {
    if (this.source === null) {
      const hello = decode(frame);
      this.source = typeof hello?.from === 'string' ? hello.from : '?';
      if (this.isCut) this.down.pause();
      this.emit(frame);
      return;
    }
    const rule = this.proxy.ruleFor(this.source);
    if (rule === NO_RULE || (rule.delayMs === 0 && rule.jitterMs === 0 && rule.loss === 0 && rule.reorder === 0)) {
      this.emit(frame);
      return;
    }
    const isMessage = rule.loss > 0 || rule.reorder > 0 ? decode(frame)?.kind === 'msg' : false;
    if (isMessage && rule.loss > 0 && this.proxy.random() < rule.loss) {
      this.proxy.stats.framesDropped++;
      return;
    }
    const now = Date.now();
    let deliverAt = now + Math.max(0, rule.delayMs + (this.proxy.random() * 2 - 1) * rule.jitterMs);
    if (isMessage && rule.reorder > 0 && this.proxy.random() < rule.reorder) {
      this.proxy.stats.framesReordered++;
      deliverAt += rule.reorderDelayMs;
    } else {
      deliverAt = Math.max(deliverAt, this.lastInOrder);
      this.lastInOrder = deliverAt;
    }
    const timer = setTimeout(
      () => {
        this.timers.delete(timer);
        this.emit(frame);
      },
      Math.max(0, deliverAt - now),
    );
    this.timers.add(timer);
  }

  /** Sends a frame on, unless the link is cut or the member's side is not connected yet (then holds it). */
  private emit(bytes: Buffer): void {
    if (this.closed) return;
    if (this.isCut || !this.upstreamReady || this.held.length > 0) {
      this.held.push(bytes);
      if (!this.isCut) this.flushHeld();
      return;
    }
    this.write(bytes);
  }

  private flushHeld(): void {
    if (this.closed || this.isCut || !this.upstreamReady) return;
    const held = this.held;
    this.held = [];
    for (const bytes of held) this.write(bytes);
  }

  private write(bytes: Buffer): void {
    this.proxy.stats.framesForwarded++;
    if (!this.upstream.write(bytes)) {
      this.down.pause();
      this.upstream.once('drain', () => {
        if (!this.isCut) this.down.resume();
      });
    }
  }

  private onDownClosed(): void {
    if (this.closed) return;
    // The sender went away. Frames still in flight are delivered when due unless the link is cut (then lost).
    if (this.isCut || !this.upstreamReady) {
      this.destroy();
      return;
    }
    const finish = (): void => {
      this.flushHeld();
      this.upstream.end();
      this.closed = true;
      this.proxy.forget(this);
    };
    if (this.timers.size === 0) finish();
    else {
      const check = setInterval(() => {
        if (this.timers.size === 0 || this.closed) {
          clearInterval(check);
          if (!this.closed) finish();
        }
      }, 20);
    }
  }

  destroy(): void {
    if (this.closed) return;
    this.closed = true;
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    this.held = [];
    this.down.destroy();
    this.upstream.destroy();
    this.proxy.forget(this);
  }
}

function decode(frame: Buffer): Record<string, unknown> | null {
  try {
    const value: unknown = packr.unpack(frame.subarray(4));
    return typeof value === 'object' && value !== null ? (value as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}
