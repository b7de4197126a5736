/**
 * The server side: accepts connections, verifies each one's hello, runs its calls through one typed handler and
 * answers them in as few frames as possible. Nothing a peer sends reaches the handler unchecked, and nothing a
 * peer sends throws out of the server: bad input gets an error frame and the connection is closed.
 */
import { createServer, type Server, type Socket } from 'node:net';
import { hostPort, limitServer, verifyToken, type Logger, type MetricsRegistry, type Principal } from '@raftkit/http';
import { FrameReader } from '@raftkit/raft';
import {
  decodeMessage,
  DEFAULT_MAX_FRAME_BYTES,
  encodeMessage,
  isRecord,
  MAX_CALLS_PER_FRAME,
  MAX_HELLO_FRAME_BYTES,
} from './codec.js';
import { isExpectedError, RpcError, toRpcError, type RpcErrorBody } from './errors.js';

/** What a handler knows of the call beyond its request. */
export interface RpcContext {
  /** Who the connection's hello proved to be. */
  principal: Principal;
  /** Aborted when the connection closes: a long wait (a long poll) should stop then. */
  signal: AbortSignal;
}

/**
 * Answers one request. Throw (or reject with) an RpcError or an HttpError to answer with that error; anything else
 * is logged and answered `internal`.
 */
export type RpcHandler<Req, Res> = (request: Req, context: RpcContext) => Res | Promise<Res>;

export interface RpcServerOptions<Req, Res> {
  /** host:port to listen on (port 0 picks one). */
  address: string;
  /** Accepted cluster tokens, the current one first; client keys derived from them are verified too. */
  tokens: readonly string[];
  /**
   * Who may connect: `authenticated` (default: the cluster token or a client key) or `cluster` (the cluster token
   * only; a client key's hello is refused with `forbidden`).
   */
  admits?: 'authenticated' | 'cluster';
  /**
   * Turns an untrusted decoded request into the handler's type, or throws an RpcError (bad_request) naming what
   * is wrong. Without it the handler gets the decoded value as is (and must check it).
   */
  parse?: (raw: unknown) => Req;
  handler: RpcHandler<Req, Res>;
  /** Names the service in metrics and logs (default "rpc"). */
  name?: string;
  /** Largest frame accepted after the hello (default 1 MiB). */
  maxFrameBytes?: number;
  /** Calls of one connection awaiting their answers at most; more are answered `overloaded` (default 10,000). */
  maxInFlight?: number;
  /** A connection that has not said hello by then is closed (default 5 s). */
  helloTimeoutMs?: number;
  /** A peer that stops reading is cut off once this much output is queued for it (default 16 MiB). */
  maxQueuedOutputBytes?: number;
  metrics?: MetricsRegistry;
  logger?: Logger;
}

export interface RpcServer {
  server: Server;
  port: number;
  /** Stops accepting, cuts every connection off, and resolves when the listener is closed. */
  close(): Promise<void>;
}

interface ServerMetrics {
  served(count: number): void;
  failed(code: string): void;
  refused(code: string): void;
}

function serverMetrics(
  registry: MetricsRegistry | undefined,
  service: string,
  connections: () => number,
  inFlight: () => number,
): ServerMetrics {
  if (registry === undefined) return { served: () => undefined, failed: () => undefined, refused: () => undefined };
  const labels = { service };
  registry.gauge('rpc_connections', 'Open connections of a binary protocol').set(connections, labels);
  registry.gauge('rpc_calls_in_flight', 'Calls received and not yet answered').set(inFlight, labels);
  const calls = registry.counter('rpc_calls_total', 'Calls answered, by outcome (ok or the error code)');
  const refused = registry.counter('rpc_connections_refused_total', 'Connections closed by the server, by reason');
  // Counted a frame at a time, into a series whose label key is formatted once, not at every frame.
  const ok = calls.series({ service, outcome: 'ok' });
  return {
    served: (count) => ok.inc(count),
    failed: (code) => calls.inc(1, { service, outcome: code }),
    refused: (code) => refused.inc(1, { service, reason: code }),
  };
}

export async function serveRpc<Req = unknown, Res = unknown>(options: RpcServerOptions<Req, Res>): Promise<RpcServer> {
  const sockets = new Set<Socket>();
  let inFlight = 0;
  const metrics = serverMetrics(
    options.metrics,
    options.name ?? 'rpc',
    () => sockets.size,
    () => inFlight,
  );
  const shared: Shared<Req, Res> = {
    options,
    maxFrameBytes: options.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES,
    maxInFlight: options.maxInFlight ?? 10_000,
    maxQueuedOutputBytes: options.maxQueuedOutputBytes ?? 16 << 20,
    metrics,
    started: () => inFlight++,
    settled: () => inFlight--,
  };
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
    new ServerConnection(socket, shared);
  });
  // At its share of the process's descriptors it refuses new connections (the hello timeout drops silent ones).
  limitServer(server);
  const [host, port] = hostPort(options.address);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  server.on('error', (error) =>
    options.logger?.log('error', 'rpc server error', { service: options.name ?? 'rpc', error: String(error) }),
  );
  return {
    server,
    port: (server.address() as { port: number }).port,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

interface Shared<Req, Res> {
  options: RpcServerOptions<Req, Res>;
  maxFrameBytes: number;
  maxInFlight: number;
  maxQueuedOutputBytes: number;
  metrics: ServerMetrics;
  started(): void;
  settled(): void;
}

type Reply = [number, 0, unknown] | [number, 1, RpcErrorBody];

class ServerConnection<Req, Res> {
  private readonly reader: FrameReader;
  private principal: Principal | null = null;
  private readonly helloTimer: NodeJS.Timeout;
  private readonly aborter = new AbortController();
  private outbox: Reply[] = [];
  private okInOutbox = 0;
  private flushScheduled = false;
  private closed = false;
  private pending = 0;

  constructor(
    private readonly socket: Socket,
    private readonly shared: Shared<Req, Res>,
  ) {
    this.reader = new FrameReader(Math.min(MAX_HELLO_FRAME_BYTES, shared.maxFrameBytes));
    socket.setNoDelay(true);
    this.helloTimer = setTimeout(
      () => this.fail(new RpcError('unauthorized', 'no hello frame in time')),
      shared.options.helloTimeoutMs ?? 5_000,
    );
    socket.on('data', (chunk: Buffer) => this.onData(chunk));
    socket.on('error', () => this.closeQuietly());
    socket.on('close', () => this.closeQuietly());
  }

  private onData(chunk: Buffer): void {
    if (this.closed) return;
    try {
      this.reader.push(chunk);
      // One frame at a time: the hello raises the frame limit for the frames after it, not for those before.
      for (let frame = this.reader.next(); frame !== null; frame = this.reader.next()) {
        this.onFrame(decodeMessage(frame));
        if (this.closed) return;
      }
    } catch (error) {
      const refusal = toRpcError(error);
      this.fail(refusal.code === 'internal' ? new RpcError('malformed', 'malformed input') : refusal);
      return;
    }
    this.flush();
  }

  private onFrame(message: unknown): void {
    if (this.principal === null) {
      if (!isRecord(message) || typeof message.hello !== 'string')
        throw new RpcError('unauthorized', 'the first frame must be { hello: token }');
      let principal: Principal;
      try {
        principal = verifyToken(message.hello, this.shared.options.tokens);
      } catch {
        throw new RpcError('unauthorized', 'wrong token in hello');
      }
      if (this.shared.options.admits === 'cluster' && principal.kind !== 'cluster')
        throw new RpcError('forbidden', 'this protocol takes the cluster token only');
      this.principal = principal;
      this.reader.maxFrameBytes = this.shared.maxFrameBytes;
      clearTimeout(this.helloTimer);
      this.write({ welcome: { kind: principal.kind, name: principal.name } });
      return;
    }
    if (!Array.isArray(message)) throw new RpcError('malformed', 'expected an array of [id, request] calls');
    if (message.length > MAX_CALLS_PER_FRAME)
      throw new RpcError(
        'too_many_calls',
        `a frame carries at most ${MAX_CALLS_PER_FRAME} calls; this one had ${message.length}`,
      );
    // Validate the whole frame before running any call, so a malformed frame runs none of its calls.
    for (const call of message) {
      if (!Array.isArray(call) || call.length !== 2 || !Number.isSafeInteger(call[0]))
        throw new RpcError('malformed', 'each call must be [id, request]');
    }
    for (const [id, request] of message as [number, unknown][]) this.run(id, request);
  }

  private run(id: number, raw: unknown): void {
    const { options } = this.shared;
    if (this.pending >= this.shared.maxInFlight) {
      this.reject(
        id,
        new RpcError(
          'overloaded',
          `${this.pending} calls of this connection are in flight; the limit is ${this.shared.maxInFlight}`,
        ),
      );
      return;
    }
    let result: Res | Promise<Res>;
    try {
      const request = options.parse === undefined ? (raw as Req) : options.parse(raw);
      result = options.handler(request, { principal: this.principal!, signal: this.aborter.signal });
    } catch (error) {
      this.reject(id, error);
      return;
    }
    if (result instanceof Promise) {
      this.pending++;
      this.shared.started();
      result.then(
        (value: Res) => {
          this.settle();
          this.okInOutbox++;
          this.queue([id, 0, value]);
        },
        (error: unknown) => {
          this.settle();
          this.reject(id, error);
        },
      );
    } else {
      this.okInOutbox++;
      this.outbox.push([id, 0, result]);
    }
  }

  private settle(): void {
    this.pending--;
    this.shared.settled();
  }

  private reject(id: number, error: unknown): void {
    if (!isExpectedError(error))
      this.shared.options.logger?.log('error', 'rpc handler failed', {
        service: this.shared.options.name ?? 'rpc',
        error: String((error as Error)?.stack ?? error),
      });
    const answer = toRpcError(error);
    this.shared.metrics.failed(answer.code);
    this.queue([id, 1, answer.body()]);
  }

  /** Answers that settle later are gathered until the event loop turns, so they leave in as few frames as possible. */
  private queue(reply: Reply): void {
    this.outbox.push(reply);
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    setImmediate(() => {
      this.flushScheduled = false;
      this.flush();
    });
  }

  private flush(): void {
    if (this.okInOutbox > 0) {
      this.shared.metrics.served(this.okInOutbox);
      this.okInOutbox = 0;
    }
    if (this.closed || this.outbox.length === 0) return;
    const replies = this.outbox;
    this.outbox = [];
    for (let i = 0; i < replies.length; i += MAX_CALLS_PER_FRAME)
      this.writeReplies(replies.slice(i, i + MAX_CALLS_PER_FRAME));
  }

  /**
   * Replies as one frame, or as several when together they pass the frame limit (which the client applies too);
   * a single answer too large for a frame is replaced by a `frame_too_large` error for its call.
   */
  private writeReplies(replies: Reply[]): void {
    if (this.closed) return;
    let frame: Buffer;
    try {
      frame = encodeMessage(replies);
    } catch (error) {
      if (replies.length > 1) return this.halve(replies);
      this.shared.options.logger?.log('error', 'rpc reply not encodable', {
        service: this.shared.options.name ?? 'rpc',
        error: String(error),
      });
      return this.writeReplies([
        [replies[0]![0], 1, new RpcError('internal', 'the answer could not be encoded').body()],
      ]);
    }
    if (frame.length - 4 <= this.shared.maxFrameBytes) return this.writeFrame(frame);
    if (replies.length > 1) return this.halve(replies);
    this.writeReplies([
      [
        replies[0]![0],
        1,
        new RpcError(
          'frame_too_large',
          `the answer needs ${frame.length - 4} bytes, the limit is ${this.shared.maxFrameBytes}`,
        ).body(),
      ],
    ]);
  }

  private halve(replies: Reply[]): void {
    const half = Math.ceil(replies.length / 2);
    this.writeReplies(replies.slice(0, half));
    this.writeReplies(replies.slice(half));
  }

  private write(message: unknown): void {
    let frame: Buffer;
    try {
      frame = encodeMessage(message);
    } catch (error) {
      this.shared.options.logger?.log('error', 'rpc reply not encodable', {
        service: this.shared.options.name ?? 'rpc',
        error: String(error),
      });
      this.fail(new RpcError('internal', 'reply could not be encoded'));
      return;
    }
    this.writeFrame(frame);
  }

  private writeFrame(frame: Buffer): void {
    // Judged on what was queued before this frame, so one large answer to a reader that keeps up passes.
    const backlog = this.socket.writableLength;
    this.socket.write(frame);
    if (backlog > this.shared.maxQueuedOutputBytes)
      this.fail(new RpcError('overloaded', 'client does not read its replies'));
  }

  private fail(error: RpcError): void {
    if (this.closed) return;
    this.shared.metrics.refused(error.code);
    this.closeQuietly();
    this.socket.end(encodeMessage({ error: error.body() }));
    // A peer that never reads must not hold the socket open.
    setTimeout(() => this.socket.destroy(), 1_000).unref();
  }

  private closeQuietly(): void {
    if (this.closed) return;
    this.closed = true;
    clearTimeout(this.helloTimer);
    this.reader.clear();
    this.aborter.abort();
  }
}
