/**
 * Transport over TCP: one outbound connection per peer (see peer-link.ts) for sending, accepted connections
 * (see inbound.ts) for receiving, length-prefixed MessagePack frames (framing.ts) on both. Every connection
 * starts with a mutual challenge-response over a shared secret (handshake.ts), and only members added with
 * addPeer may introduce themselves. Without `tls`, traffic is authenticated at connection setup but not encrypted;
 * with it, every connection is mutual TLS 1.3 and each end's certificate must name the member id it speaks as.
 */
import { type Server, createServer, type AddressInfo, type Socket } from 'node:net';
import { createServer as createTlsServer } from 'node:tls';
import { HeartbeatCoalescer, expandBatch, isBeat, type HeartbeatBatch } from './coalesce.js';
import type { Message, NodeId, Transport } from '../types.js';
import { DEFAULT_MAX_FRAME_BYTES } from './framing.js';
import { MAX_GROUP_NAME, beatsToTuples } from './wire.js';
import { deriveTransportKey, type TransportSecret } from './handshake.js';
import { InboundConnection } from './inbound.js';
import { silentLogger, type Logger } from '../logger.js';
import { PeerLink, type HostPort, type PeerLinkSettings, type TransportTls } from './peer-link.js';

export type { HostPort, TransportTls } from './peer-link.js';
export type { TransportSecret } from './handshake.js';

/** Who this member is, where it listens, the cluster's shared secret, and limits. */
export interface TcpTransportOptions {
  /** This member's id; peers' handshakes must name it. */
  id: NodeId;
  /**
   * Where to accept connections: `{ host, port }` or "host:port", such as this member's entry of the address map
   * every member is given, so each port is written once. Port 0 picks a free port (read it back with `address()`).
   */
  listen: HostPort | string;
  /**
   * The secret every member of the cluster shares (a string or bytes, non-empty; at least 32 random bytes is
   * the advice). Each connection starts with a challenge-response proving both ends hold it, so that nobody
   * without it can send this member a message. It is not used as a key directly: the transport derives its own
   * key from it, so the same secret may also serve another purpose (such as an HTTP bearer token).
   */
  secret: TransportSecret;
  /**
   * Mutual TLS on every connection (optional): this member's certificate and key and the CA that signs every
   * member's certificate, as PEM (read them from files). Each member's certificate must carry its member id as
   * its Common Name: a dialer checks that the acceptor's names the peer it meant to reach, and an acceptor that the
   * dialer's names the member its handshake speaks as. The shared-secret handshake still runs inside.
   */
  tls?: TransportTls;
  /** Longest frame payload sent or accepted. Default 4 MiB. */
  maxFrameBytes?: number;
  /** Snapshot data per chunk frame. Default 256 KiB; must leave room for the header within maxFrameBytes. */
  snapshotChunkBytes?: number;
  /** Largest snapshot accepted from a peer. Default 4 GiB. */
  maxSnapshotBytes?: number;
  /** Per-peer queue bound in bytes; the oldest messages are dropped beyond it. Default 16 MiB. */
  maxQueueBytes?: number;
  /** Per-peer queue bound in messages. Default 10 000. */
  maxQueueMessages?: number;
  /** First reconnect delay; doubles per failure up to `backoffMaxMs`. Defaults 50 ms and 2 s. */
  backoffInitialMs?: number;
  backoffMaxMs?: number;
  /** Give up on a connection attempt after this long. Default 3 s. */
  connectTimeoutMs?: number;
  /** Drop a connection whose peer has not read anything for this long while we have data for it. Default 10 s. */
  stallTimeoutMs?: number;
  /** The handshake (both directions) must complete within this long of connecting. Default 5 s. */
  handshakeTimeoutMs?: number;
  /**
   * Once a frame starts arriving on an accepted connection, it must be complete within this long or the
   * connection is closed and its buffer freed. Default 30 s (a full 4 MiB frame at 140 KB/s).
   */
  frameTimeoutMs?: number;
  /** Most accepted connections open at once, handshaking or not; more are closed at once. Default 256. */
  maxInboundConnections?: number;
  /** Diagnostics ('debug' for expected trouble such as a peer down, 'warn' for things worth a look); silent by default. */
  logger?: Logger;
  /**
   * Coalesce the heartbeats of the groups this transport carries (channel()): every heartbeat and heartbeat
   * response sent to one peer process within one turn of the event loop leaves in one frame (see
   * src/transport/coalesce.ts). Default true. Messages outside any group are never coalesced.
   */
  coalesceHeartbeats?: boolean;
}

/** What a TcpTransport sent to one peer process: frames written, and how many of them were heartbeat batches. */
export interface PeerWireStats {
  frames: number;
  /**
   * Messages sent (heartbeat batches, pings and snapshot chunks aside): the messages of one write leave in one
   * frame (a `batch` frame when there are several), so this exceeds `frames` under load.
   */
  messages: number;
  beatFrames: number;
  /** Heartbeats and responses sent inside those batches. */
  beats: number;
  /** Batches holding at least one heartbeat (a leader's), and at least one response (a follower's). */
  heartbeatBatches: number;
  responseBatches: number;
}

/** Wire counters of a TcpTransport (see `stats()`). */
export interface TransportStats {
  /** By peer process. */
  sent: Record<NodeId, PeerWireStats>;
  /** Heartbeat batches and the beats in them received from every peer. */
  beatFramesReceived: number;
  beatsReceived: number;
}

/** Room for a chunk frame's fields besides its data (ids, offsets, snapshot meta with the member list). */
const CHUNK_HEADER_ALLOWANCE = 64 * 1024;

/** Parses "host:port" or "[v6-address]:port"; `minPort` 0 allows port 0 (a listener picking a free port). */
export function parseHostPort(address: string, minPort = 1): HostPort {
  const match = /^(?:\[([^\]]+)\]|([^:]+)):(\d{1,5})$/.exec(address);
  const port = match === null ? NaN : Number(match[3]);
  if (match === null || !(port >= minPort && port <= 65535))
    throw new TypeError(`expected "host:port", got "${address}"`);
  return { host: (match[1] ?? match[2])!, port };
}

/** The Transport for real deployments: TCP between members, with interactive partitions via setBlocked. */
export class TcpTransport implements Transport {
  readonly id: NodeId;
  private readonly listenAt: HostPort;
  private readonly settings: PeerLinkSettings;
  private readonly maxSnapshotBytes: number;
  private readonly handshakeTimeoutMs: number;
  private readonly frameTimeoutMs: number;
  private readonly maxInboundConnections: number;
  private readonly key: Buffer;
  private refusedConnections = 0;
  private readonly links = new Map<NodeId, PeerLink>();
  private readonly inbound = new Set<InboundConnection>();
  private blocked: ReadonlySet<NodeId> = new Set();
  private server: Server | null = null;
  private onMessage: ((message: Message) => void) | null = null;
  private streamCounter = 0;
  private closed = false;
  /** Told of every frame from a peer after its handshake (liveness of peer processes). */
  private onHeard: ((peer: NodeId) => void) | null = null;
  /** The groups this transport carries besides its own messages (see channel()). */
  private readonly channels = new Map<string, GroupChannel>();
  /** Heartbeats of channels waiting for the flush at the end of this turn of the event loop. */
  private readonly coalescer: HeartbeatCoalescer | null;
  private flushScheduled = false;
  private readonly beatsSent = new Map<NodeId, { beats: number; heartbeatBatches: number; responseBatches: number }>();
  private beatFramesReceived = 0;
  private beatsReceived = 0;
  /** Peers sent a heartbeat batch since their last ping: that frame already said this process is alive. */
  private readonly aliveSaid = new Set<NodeId>();

  constructor(options: TcpTransportOptions) {
    if (options.id.length === 0) throw new TypeError('transport id must be non-empty');
    this.id = options.id;
    this.key = deriveTransportKey(options.secret);
    this.listenAt = typeof options.listen === 'string' ? parseHostPort(options.listen, 0) : options.listen;
    const maxFrameBytes = options.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES;
    const snapshotChunkBytes = options.snapshotChunkBytes ?? 256 * 1024;
    if (snapshotChunkBytes < 1 || snapshotChunkBytes + CHUNK_HEADER_ALLOWANCE > maxFrameBytes) {
      throw new RangeError(`snapshotChunkBytes must be in 1..maxFrameBytes - ${CHUNK_HEADER_ALLOWANCE}`);
    }
    this.settings = {
      maxFrameBytes,
      snapshotChunkBytes,
      maxQueueBytes: options.maxQueueBytes ?? 16 * 1024 * 1024,
      maxQueueMessages: options.maxQueueMessages ?? 10_000,
      backoffInitialMs: options.backoffInitialMs ?? 50,
      backoffMaxMs: options.backoffMaxMs ?? 2000,
      connectTimeoutMs: options.connectTimeoutMs ?? 3000,
      stallTimeoutMs: options.stallTimeoutMs ?? 10_000,
      handshakeTimeoutMs: options.handshakeTimeoutMs ?? 5000,
      key: this.key,
      logger: options.logger ?? silentLogger,
      nextStreamId: () => ++this.streamCounter,
      ...(options.tls !== undefined ? { tls: options.tls } : {}),
    };
    this.maxSnapshotBytes = options.maxSnapshotBytes ?? 4 * 1024 * 1024 * 1024;
    this.handshakeTimeoutMs = this.settings.handshakeTimeoutMs;
    this.frameTimeoutMs = options.frameTimeoutMs ?? 30_000;
    this.maxInboundConnections = options.maxInboundConnections ?? 256;
    this.coalescer = options.coalesceHeartbeats === false ? null : new HeartbeatCoalescer();
    for (const [name, value] of Object.entries({
      handshakeTimeoutMs: this.handshakeTimeoutMs,
      frameTimeoutMs: this.frameTimeoutMs,
      maxInboundConnections: this.maxInboundConnections,
    })) {
      if (!Number.isSafeInteger(value) || value < 1) throw new RangeError(`${name} must be a positive integer`);
    }
  }

  /** Starts listening; resolves once the port is bound (rejects if it cannot be). */
  start(onMessage: (message: Message) => void): Promise<void> {
    if (this.closed) return Promise.reject(new Error('transport is closed'));
    if (this.server !== null) return Promise.reject(new Error('transport already started'));
    this.onMessage = onMessage;
    const tls = this.settings.tls;
    let server: Server;
    if (tls === undefined) {
      server = createServer((socket) => this.accept(socket));
    } else {
      server = createTlsServer(
        {
          cert: tls.cert,
          key: tls.key,
          ca: tls.ca,
          requestCert: true,
          rejectUnauthorized: true,
          minVersion: 'TLSv1.3',
          handshakeTimeout: this.handshakeTimeoutMs,
        },
        (socket) => this.accept(socket),
      );
      // TLS handshakes happen before accept() counts the connection: the listener bounds them itself.
      server.maxConnections = this.maxInboundConnections;
      server.on('tlsClientError', (error) =>
        this.settings.logger.log('warn', `refused a TLS connection: ${error.message}`),
      );
    }
    this.server = server;
    return new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.listenAt.port, this.listenAt.host, () => {
        server.off('error', reject);
        server.on('error', (error) => this.settings.logger.log('warn', `server: ${error.message}`));
        resolve();
      });
    });
  }

  /** The bound address (useful with port 0). Only valid after start() resolved. */
  address(): HostPort {
    const bound = this.server?.address();
    if (bound === null || bound === undefined || typeof bound === 'string') throw new Error('transport not listening');
    return { host: (bound as AddressInfo).address, port: (bound as AddressInfo).port };
  }

  /** Queues `message` for its addressee. Never throws; unknown or blocked peers are dropped silently. */
  send(message: Message): void {
    if (this.closed || this.blocked.has(message.to)) return;
    const link = this.links.get(message.to);
    if (link === undefined) {
      this.settings.logger.log('debug', `no address for ${message.to}; dropping ${message.type}`);
      return;
    }
    link.enqueue(message);
  }

  /** Makes `id` reachable at "host:port" (re-adding with another address redirects the link). */
  addPeer(id: NodeId, address: string): void {
    if (this.closed) return;
    const hostPort = parseHostPort(address);
    const link = this.links.get(id);
    if (link === undefined) {
      this.links.set(id, new PeerLink(this.id, id, hostPort, this.settings));
    } else {
      link.setAddress(hostPort);
    }
  }

  /**
   * Forgets `id`: queued messages are dropped, the outbound connection closed, and so are its inbound
   * connections (only known members may send to us).
   */
  removePeer(id: NodeId): void {
    const link = this.links.get(id);
    if (link === undefined) return;
    this.links.delete(id);
    void link.close();
    for (const connection of this.inbound) if (connection.peerId === id) connection.destroy();
  }

  /**
   * Drops all traffic to and from `peers` from now on (replacing the previous set) to simulate a partition.
   * Connections stay open; messages already queued for a newly blocked peer are dropped.
   */
  setBlocked(peers: ReadonlySet<NodeId>): void {
    this.blocked = new Set(peers);
    for (const id of this.blocked) {
      this.links.get(id)?.clearPending();
      this.coalescer?.forget(id);
    }
  }

  /** Stops listening and closes every connection; resolves when all sockets and the server are closed. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const server = this.server;
    const serverClosed =
      server === null ? Promise.resolve() : new Promise<void>((resolve) => server.close(() => resolve()));
    const inbound = [...this.inbound];
    for (const connection of inbound) connection.destroy();
    const links = [...this.links.values()];
    this.links.clear();
    await Promise.all([serverClosed, ...inbound.map((c) => c.closed), ...links.map((link) => link.close())]);
  }

  /**
   * A Transport for one Raft group among many sharing this one: the same listener and one connection per peer
   * process carry every group's messages, each tagged with its group. The group's members are named by the ids of
   * the transports (one per process), so a group's peers are processes. Start this transport first (its own
   * handler may ignore everything); a channel's `close()` detaches the group, not the connections.
   */
  channel(group: string): Transport {
    if (group.length === 0 || group.length > MAX_GROUP_NAME)
      throw new RangeError(`a group name has 1..${MAX_GROUP_NAME} characters`);
    if (this.channels.has(group)) throw new Error(`group ${group} already has a channel`);
    const channel = new GroupChannel(this, group, () => this.channels.delete(group));
    this.channels.set(group, channel);
    return channel;
  }

  /**
   * Sends `peer` a ping: a frame saying this process is alive, for peers whose groups may be quiesced (and so
   * silent). Dropped like any message when the peer is blocked or unknown.
   */
  ping(peer: NodeId): void {
    if (this.closed || this.blocked.has(peer)) return;
    // Any frame tells the peer we are alive (onPeerHeard): a heartbeat batch since the last ping stands in for it.
    if (this.aliveSaid.delete(peer)) return;
    this.links.get(peer)?.ping();
  }

  /** Calls `listener` with the peer's id whenever anything arrives from it (a message, a chunk or a ping). */
  onPeerHeard(listener: (peer: NodeId) => void): void {
    this.onHeard = listener;
  }

  /** @internal A channel's send. */
  sendInGroup(message: Message, group: string): void {
    if (this.closed || this.blocked.has(message.to)) return;
    if (this.coalescer !== null && isBeat(message)) {
      this.coalescer.add(group, message);
      if (!this.flushScheduled) {
        this.flushScheduled = true;
        // setImmediate, not a microtask: every group's Ready loop yields once (RaftNode.processReadies) before it
        // sends, so the heartbeats of one shared tick all reach the coalescer within this turn of the loop.
        setImmediate(() => this.flushBeats());
      }
      return;
    }
    this.links.get(message.to)?.enqueue(message, group);
  }

  /** Sends every waiting heartbeat: one frame per peer process. */
  private flushBeats(): void {
    this.flushScheduled = false;
    if (this.coalescer === null || this.closed) return;
    for (const batch of this.coalescer.drain()) {
      if (this.blocked.has(batch.to)) continue;
      const link = this.links.get(batch.to);
      if (link === undefined) continue;
      let counts = this.beatsSent.get(batch.to);
      if (counts === undefined)
        this.beatsSent.set(batch.to, (counts = { beats: 0, heartbeatBatches: 0, responseBatches: 0 }));
      counts.beats += batch.beats.length;
      if (batch.beats.some((b) => b.type === 'heartbeat')) counts.heartbeatBatches++;
      if (batch.beats.some((b) => b.type === 'heartbeatResp')) counts.responseBatches++;
      link.enqueueBeats(beatsToTuples(batch.beats));
      this.aliveSaid.add(batch.to);
    }
  }

  /** A received batch of coalesced heartbeats, back to each group's channel. */
  private deliverBeats(batch: HeartbeatBatch): void {
    if (this.closed) return;
    this.beatFramesReceived++;
    this.beatsReceived += batch.beats.length;
    for (const { group, message } of expandBatch(batch)) this.channels.get(group)?.deliver(message);
  }

  /** Wire counters: frames sent to each peer process (and how many were heartbeat batches), batches received. */
  stats(): TransportStats {
    const sent: Record<NodeId, PeerWireStats> = {};
    for (const [id, link] of this.links) {
      const counts = this.beatsSent.get(id) ?? { beats: 0, heartbeatBatches: 0, responseBatches: 0 };
      sent[id] = {
        frames: link.framesWritten,
        messages: link.messagesWritten,
        beatFrames: link.beatFramesWritten,
        ...counts,
      };
    }
    return { sent, beatFramesReceived: this.beatFramesReceived, beatsReceived: this.beatsReceived };
  }

  private accept(socket: Socket): void {
    if (this.closed) {
      socket.destroy();
      return;
    }
    if (this.inbound.size >= this.maxInboundConnections) {
      socket.on('error', () => {});
      socket.destroy();
      // One line per burst: a flood of connections must not become a flood of log lines.
      if (this.refusedConnections++ % 100 === 0) {
        this.settings.logger.log(
          'warn',
          `refusing inbound connections: ${this.inbound.size} open (limit ${this.maxInboundConnections}); ${this.refusedConnections} refused so far`,
        );
      }
      return;
    }
    const connection = new InboundConnection(socket, {
      selfId: this.id,
      key: this.key,
      maxFrameBytes: this.settings.maxFrameBytes,
      maxSnapshotBytes: this.maxSnapshotBytes,
      handshakeTimeoutMs: this.handshakeTimeoutMs,
      frameTimeoutMs: this.frameTimeoutMs,
      isKnownPeer: (peer) => this.links.has(peer),
      heard: (peer) => this.onHeard?.(peer),
      tls: this.settings.tls !== undefined,
      isBlocked: (peer) => this.blocked.has(peer),
      deliver: (message, group) => {
        if (this.closed) return;
        if (group === undefined) this.onMessage?.(message);
        else this.channels.get(group)?.deliver(message);
      },
      deliverBeats: (batch) => this.deliverBeats(batch),
      logger: this.settings.logger,
    });
    this.inbound.add(connection);
    void connection.closed.then(() => this.inbound.delete(connection));
  }
}

/** One group's view of a shared TcpTransport (see TcpTransport.channel). */
class GroupChannel implements Transport {
  private handler: ((message: Message) => void) | null = null;
  private readonly peers = new Set<NodeId>();

  constructor(
    private readonly shared: TcpTransport,
    private readonly group: string,
    private readonly detach: () => void,
  ) {}

  get id(): NodeId {
    return this.shared.id;
  }

  start(onMessage: (message: Message) => void): Promise<void> {
    this.handler = onMessage;
    return Promise.resolve();
  }

  send(message: Message): void {
    if (this.handler !== null && this.peers.has(message.to)) this.shared.sendInGroup(message, this.group);
  }

  addPeer(id: NodeId, address: string): void {
    this.peers.add(id);
    // The connection to that process is shared by every group; adding it again is harmless.
    this.shared.addPeer(id, address);
  }

  removePeer(id: NodeId): void {
    // Other groups may still share the connection to that process: only this group stops using it.
    this.peers.delete(id);
  }

  close(): Promise<void> {
    this.handler = null;
    this.detach();
    return Promise.resolve();
  }

  /** A message of this group from a member of it. */
  deliver(message: Message): void {
    if (this.handler !== null && this.peers.has(message.from)) this.handler(message);
  }
}
