/**
 * Request/response over TCP for the service's binary protocols (the counter store, the binary check protocol):
 * length-prefixed msgpack frames (4-byte big-endian length, then one msgpack value) on a node:net socket.
 *
 *   client -> server  { hello: token }                       first frame, always
 *                     [[id, request], [id, request], ...]     calls; many per frame (batching)
 *   server -> client  { welcome: { kind, name } }             after a good hello
 *                     [[id, 0, response] | [id, 1, {code, message}], ...]
 *                     { error: { code, message } }            fatal: the server closes the connection after it
 *
 * Requests are pipelined: a client may send calls without waiting, and replies carry the call's id. Input that is
 * not a frame of this protocol (oversized length, bad msgpack, wrong shape, no hello) gets an error frame and the
 * connection is closed; it never reaches the handler and never throws out of the server.
 */
import { connect, createServer, type Server, type Socket } from 'node:net';
import { Packr, Unpackr } from 'msgpackr';
import { encodeFrame as encodeShared, FrameDecoder, FrameTooLargeError, hostPort, limitServer, verifyToken, type Logger, type Principal } from '@raftkit/http';

/** A call that failed: `code` says why (timeout, unavailable, overloaded, closed, unauthorized, bad_request...). */
export class WireError extends Error {
  override name = 'WireError';
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

export interface WireErrorBody {
  code: string;
  message: string;
}

const DEFAULT_MAX_FRAME_BYTES = 1 << 20;
/** A peer that stops reading while we keep answering is cut off once this much output is queued for it. */
const MAX_QUEUED_OUTPUT_BYTES = 16 << 20;
const HELLO_TIMEOUT_MS = 5_000;
/** Largest frame read before the hello is verified: a hello is a token, far smaller. */
const MAX_HELLO_FRAME_BYTES = 4096;
/** Calls per frame: keeps one frame's encoding and one handler burst short. */
const MAX_CALLS_PER_FRAME = 1024;

const packr = new Packr({ useRecords: false });
const unpackr = new Unpackr({ useRecords: false });

function encodeFrame(value: unknown): Buffer {
  return encodeShared(packr.pack(value));
}

/** The shared decoder's refusal as this protocol's error. */
function wireError(error: unknown, fallback: string): WireError {
  if (error instanceof WireError) return error;
  if (error instanceof FrameTooLargeError) return new WireError('frame_too_large', error.message);
  return new WireError('malformed', fallback);
}

function decodeFrame(frame: Buffer): unknown {
  try {
    return unpackr.unpack(frame);
  } catch {
    throw new WireError('malformed', 'frame is not valid msgpack');
  }
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function errorBody(error: unknown): WireErrorBody {
  return error instanceof WireError ? { code: error.code, message: error.message } : { code: 'internal', message: 'internal error' };
}

/** The principal a hello's token proves, by the rules of every other endpoint (@raftkit/http's verifyToken). */
export function verifyHello(token: string, tokens: readonly string[]): Principal {
  try {
    return verifyToken(token, tokens);
  } catch {
    throw new WireError('unauthorized', 'wrong token in hello');
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Server

/** Answers one request. Throw a WireError to answer that call with an error; other exceptions answer `internal`. */
export type WireHandler = (request: unknown, principal: Principal) => unknown;

export interface WireServerOptions {
  /** host:port to listen on (port 0 picks one). */
  address: string;
  /** Accepted tokens, the cluster token first (WorkerOptions.tokens). */
  tokens: readonly string[];
  handler: WireHandler;
  maxFrameBytes?: number;
  logger?: Logger;
}

export interface WireServer {
  server: Server;
  port: number;
  close(): Promise<void>;
}

export async function serveWire(options: WireServerOptions): Promise<WireServer> {
  const maxFrameBytes = options.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES;
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
    new ServerConnection(socket, options, maxFrameBytes);
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
  server.on('error', (error) => options.logger?.log('error', 'wire server error', { error: String(error) }));
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

type Reply = [number, 0, unknown] | [number, 1, WireErrorBody];

class ServerConnection {
  private readonly decoder: FrameDecoder;
  private principal: Principal | null = null;
  private readonly helloTimer: NodeJS.Timeout;
  private outbox: Reply[] = [];
  private flushScheduled = false;
  private closed = false;
  private readonly maxFrameBytes: number;

  constructor(
    private readonly socket: Socket,
    private readonly options: WireServerOptions,
    maxFrameBytes: number,
  ) {
    this.decoder = new FrameDecoder(Math.min(MAX_HELLO_FRAME_BYTES, maxFrameBytes));
    this.maxFrameBytes = maxFrameBytes;
    socket.setNoDelay(true);
    this.helloTimer = setTimeout(() => this.fail(new WireError('unauthorized', 'no hello frame in time')), HELLO_TIMEOUT_MS);
    socket.on('data', (chunk: Buffer) => this.onData(chunk));
    socket.on('error', () => this.closeQuietly());
    socket.on('close', () => this.closeQuietly());
  }

  private onData(chunk: Buffer): void {
    if (this.closed) return;
    try {
      this.decoder.push(chunk);
      for (let frame = this.decoder.next(); frame !== null; frame = this.decoder.next()) {
        this.onFrame(decodeFrame(frame));
        if (this.closed) return;
      }
    } catch (error) {
      this.fail(wireError(error, 'malformed input'));
      return;
    }
    this.flush();
  }

  private onFrame(message: unknown): void {
    if (this.principal === null) {
      if (!isRecord(message) || typeof message.hello !== 'string') throw new WireError('unauthorized', 'the first frame must be { hello: token }');
      this.principal = verifyHello(message.hello, this.options.tokens);
      this.decoder.maxFrameBytes = this.maxFrameBytes;
      clearTimeout(this.helloTimer);
      this.write({ welcome: { kind: this.principal.kind, name: this.principal.name } });
      return;
    }
    if (!Array.isArray(message)) throw new WireError('malformed', 'expected an array of [id, request] calls');
    if (message.length > MAX_CALLS_PER_FRAME) throw new WireError('too_many_calls', `a frame carries at most ${MAX_CALLS_PER_FRAME} calls; this one had ${message.length}`);
    // Validate the whole frame before running any call, so a malformed frame runs none of its calls.
    for (const call of message) {
      if (!Array.isArray(call) || call.length !== 2 || !Number.isSafeInteger(call[0])) throw new WireError('malformed', 'each call must be [id, request]');
    }
    for (const [id, request] of message as [number, unknown][]) this.run(id, request);
  }

  private run(id: number, request: unknown): void {
    let result: unknown;
    try {
      result = this.options.handler(request, this.principal!);
    } catch (error) {
      this.reject(id, error);
      return;
    }
    if (result instanceof Promise) {
      result.then(
        (value: unknown) => this.queue([id, 0, value]),
        (error: unknown) => this.reject(id, error),
      );
    } else {
      this.outbox.push([id, 0, result]);
    }
  }

  private reject(id: number, error: unknown): void {
    if (!(error instanceof WireError)) this.options.logger?.log('error', 'wire handler failed', { error: String((error as Error)?.stack ?? error) });
    this.queue([id, 1, errorBody(error)]);
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
    if (this.closed || this.outbox.length === 0) return;
    const replies = this.outbox;
    this.outbox = [];
    for (let i = 0; i < replies.length; i += MAX_CALLS_PER_FRAME) this.write(replies.slice(i, i + MAX_CALLS_PER_FRAME));
  }

  private write(message: unknown): void {
    let frame: Buffer;
    try {
      frame = encodeFrame(message);
    } catch (error) {
      this.options.logger?.log('error', 'wire reply not encodable', { error: String(error) });
      this.fail(new WireError('internal', 'reply could not be encoded'));
      return;
    }
    this.socket.write(frame);
    if (this.socket.writableLength > MAX_QUEUED_OUTPUT_BYTES) this.fail(new WireError('overloaded', 'client does not read its replies'));
  }

  private fail(error: WireError): void {
    if (this.closed) return;
    this.closed = true;
    clearTimeout(this.helloTimer);
    this.socket.end(encodeFrame({ error: errorBody(error) }));
    // A peer that never reads must not hold the socket open.
    setTimeout(() => this.socket.destroy(), 1_000).unref();
  }

  private closeQuietly(): void {
    this.closed = true;
    clearTimeout(this.helloTimer);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Client

export interface WireClientOptions {
  /** host:port of the server. */
  address: string;
  token: string;
  /** Default per-call timeout (ms). */
  timeoutMs?: number;
  /** Calls awaiting replies at most; more are refused at once with `overloaded`. */
  maxInFlight?: number;
  maxFrameBytes?: number;
  /** After a failed or lost connection, calls fail at once for this long instead of redialing on every call. */
  reconnectDelayMs?: number;
}

interface Pending {
  resolve(value: unknown): void;
  reject(error: WireError): void;
  /** performance.now() after which the call fails with `timeout`. */
  deadline: number;
  timeoutMs: number;
}

/**
 * One pipelined connection to a wire server. Calls made in the same turn of the event loop leave in one frame.
 * Every call settles within its timeout: with the reply, or with a WireError (timeout, unavailable, overloaded,
 * closed, or the server's error). The connection is dialed on first use and redialed after a loss.
 */
export class WireClient {
  private readonly timeoutMs: number;
  private readonly maxInFlight: number;
  private readonly maxFrameBytes: number;
  private readonly reconnectDelayMs: number;
  private socket: Socket | null = null;
  private retryAt = 0;
  private closed = false;
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  private outbox: [number, unknown][] = [];
  private flushScheduled = false;
  /**
   * One timer for every pending call's deadline instead of a setTimeout per call (arming and clearing a timer
   * per call was a visible share of the client's CPU at tens of thousands of calls per second). It is armed for
   * the earliest deadline; when it fires it fails the calls that are due and re-arms for the next one.
   */
  private deadlineTimer: NodeJS.Timeout | null = null;
  private timerAt = Infinity;

  constructor(private readonly options: WireClientOptions) {
    hostPort(options.address); // a malformed address fails here, not on the first call
    this.timeoutMs = options.timeoutMs ?? 1_000;
    this.maxInFlight = options.maxInFlight ?? 10_000;
    this.maxFrameBytes = options.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES;
    this.reconnectDelayMs = options.reconnectDelayMs ?? 100;
  }

  call(request: unknown, timeoutMs = this.timeoutMs): Promise<unknown> {
    if (this.closed) return Promise.reject(new WireError('closed', 'client closed'));
    if (this.pending.size >= this.maxInFlight) return Promise.reject(new WireError('overloaded', `${this.pending.size} calls in flight to ${this.options.address}`));
    if (this.socket === null && !this.dial()) return Promise.reject(new WireError('unavailable', `${this.options.address} unreachable (retrying shortly)`));
    const id = this.nextId;
    this.nextId = id >= 0x7fffffff ? 1 : id + 1;
    const deadline = performance.now() + timeoutMs;
    if (deadline < this.timerAt) this.armDeadlines(deadline);
    return new Promise<unknown>((resolve, reject) => {
      this.pending.set(id, { resolve, reject, deadline, timeoutMs });
      this.outbox.push([id, request]);
      if (!this.flushScheduled) {
        this.flushScheduled = true;
        setImmediate(this.flushNow);
      }
    });
  }

  private readonly flushNow = (): void => this.flush();

  private armDeadlines(at: number): void {
    if (this.deadlineTimer !== null) clearTimeout(this.deadlineTimer);
    this.timerAt = at;
    // Unreferenced: a pending call always has a socket that keeps the process alive, or is failed at once.
    this.deadlineTimer = setTimeout(this.expire, Math.max(1, Math.ceil(at - performance.now()))).unref();
  }

  /** Fails the calls whose deadline has passed, then re-arms for the earliest remaining deadline. */
  private readonly expire = (): void => {
    this.deadlineTimer = null;
    this.timerAt = Infinity;
    const now = performance.now();
    let next = Infinity;
    for (const [id, call] of this.pending) {
      if (call.deadline <= now) {
        this.pending.delete(id);
        call.reject(new WireError('timeout', `no reply from ${this.options.address} within ${call.timeoutMs} ms`));
      } else if (call.deadline < next) next = call.deadline;
    }
    if (next !== Infinity) this.armDeadlines(next);
  };

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.socket?.destroy();
    this.socket = null;
    this.failAll(new WireError('closed', 'client closed'));
    if (this.deadlineTimer !== null) clearTimeout(this.deadlineTimer);
    this.deadlineTimer = null;
  }

  private dial(): boolean {
    if (Date.now() < this.retryAt) return false;
    const [host, port] = hostPort(this.options.address);
    const socket = connect({ host, port, noDelay: true });
    const decoder = new FrameDecoder(this.maxFrameBytes);
    this.socket = socket;
    socket.write(encodeFrame({ hello: this.options.token }));
    const lost = (error: WireError): void => {
      if (this.socket !== socket) return;
      this.socket = null;
      this.retryAt = Date.now() + this.reconnectDelayMs;
      socket.destroy();
      this.failAll(error);
    };
    socket.on('data', (chunk: Buffer) => {
      try {
        decoder.push(chunk);
        for (const frame of decoder.drain()) this.onFrame(decodeFrame(frame), lost);
      } catch (error) {
        lost(wireError(error, 'malformed reply'));
      }
    });
    socket.on('error', (error) => lost(new WireError('unavailable', `${this.options.address}: ${error.message}`)));
    socket.on('close', () => lost(new WireError('unavailable', `connection to ${this.options.address} closed`)));
    return true;
  }

  private onFrame(message: unknown, lost: (error: WireError) => void): void {
    if (Array.isArray(message)) {
      for (const reply of message) {
        if (!Array.isArray(reply)) continue;
        const call = this.pending.get(reply[0] as number);
        if (call === undefined) continue; // timed out already
        this.pending.delete(reply[0] as number);
        if (reply[1] === 0) call.resolve(reply[2]);
        else {
          const body = isRecord(reply[2]) ? reply[2] : {};
          call.reject(new WireError(String(body.code ?? 'internal'), String(body.message ?? 'remote error')));
        }
      }
    } else if (isRecord(message) && isRecord(message.error)) {
      lost(new WireError(String(message.error.code ?? 'internal'), String(message.error.message ?? 'connection refused by server')));
    }
  }

  private flush(): void {
    this.flushScheduled = false;
    const calls = this.outbox;
    this.outbox = [];
    const socket = this.socket;
    for (let i = 0; i < calls.length; i += MAX_CALLS_PER_FRAME) {
      // Calls whose timeout fired before the flush are not sent.
      const batch = calls.slice(i, i + MAX_CALLS_PER_FRAME).filter(([id]) => this.pending.has(id));
      if (batch.length === 0) continue;
      if (socket === null || socket.destroyed) {
        for (const [id] of batch) this.settleError(id, new WireError('unavailable', `connection to ${this.options.address} lost`));
        continue;
      }
      let frame: Buffer;
      try {
        frame = encodeFrame(batch);
      } catch {
        for (const [id] of batch) this.settleError(id, new WireError('bad_request', 'request could not be encoded'));
        continue;
      }
      if (frame.length - 4 > this.maxFrameBytes) {
        for (const [id] of batch) this.settleError(id, new WireError('frame_too_large', `calls need ${frame.length - 4} bytes, the limit is ${this.maxFrameBytes}`));
        continue;
      }
      socket.write(frame);
    }
  }

  private settleError(id: number, error: WireError): void {
    const call = this.pending.get(id);
    if (call === undefined) return;
    this.pending.delete(id);
    call.reject(error);
  }

  private failAll(error: WireError): void {
    const calls = [...this.pending.values()];
    this.pending.clear();
    this.outbox = [];
    for (const call of calls) call.reject(error);
  }
}
