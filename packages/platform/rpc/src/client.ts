/**
 * The client side. An RpcConnection is one socket: it says hello, pipelines calls (calls made in the same turn of
 * the event loop leave in one frame) and settles every call within its deadline. An RpcClient keeps one
 * connection to an address, dialing on first use and again after a loss.
 */
import { connect, type Socket } from 'node:net';
import { hostPort } from '@raftkit/http';
import { FrameReader } from '@raftkit/raft';
import { CallTable } from './call-table.js';
import { decodeMessage, DEFAULT_MAX_FRAME_BYTES, encodeMessage, isRecord, MAX_CALLS_PER_FRAME } from './codec.js';
import { fromErrorBody, RpcError, toRpcError } from './errors.js';

export interface RpcConnectionOptions {
  /** host:port of the server. */
  address: string;
  token: string;
  /** Default per-call timeout (ms, default 1,000). */
  timeoutMs?: number;
  /** Calls awaiting replies at most; more are refused at once with `overloaded` (default 10,000). */
  maxInFlight?: number;
  /** Largest frame sent or accepted (default 1 MiB; the server's limit should be the same). */
  maxFrameBytes?: number;
}

export interface CallOptions<T = unknown> {
  /** This call's deadline (ms); the connection's default otherwise. */
  timeoutMs?: number;
  /** Aborting settles the call at once with `cancelled` (its answer, if one comes, is ignored). */
  signal?: AbortSignal;
  /**
   * Turns the reply into the call's result before its promise settles (a decode that throws rejects the call
   * with what it threw). A client that maps every reply saves a `.then` per call this way: a promise, a reaction
   * and a microtask, which a client making tens of thousands of calls a second pays in scavenges. Options that
   * only carry a decode can be one constant object, so a call allocates nothing for them.
   */
  decode?: (reply: unknown) => T;
}

/** Who the server says the hello proved. */
export interface Welcome {
  kind: string;
  name: string;
}

/** A call awaiting its reply. A class, so every pending call has one shape. */
class Pending {
  resolve: (value: unknown) => void = settleNothing;
  reject: (error: unknown) => void = settleNothing;
  signal: AbortSignal | undefined = undefined;
  onAbort: (() => void) | undefined = undefined;

  constructor(
    /** performance.now() after which the call fails with `timeout`. */
    readonly deadline: number,
    readonly timeoutMs: number,
    readonly decode: ((reply: unknown) => unknown) | undefined,
  ) {}

  /** Settles with the reply (decoded, when the call has a decode). */
  answer(reply: unknown): void {
    if (this.decode === undefined) {
      this.resolve(reply);
      return;
    }
    let value: unknown;
    try {
      value = this.decode(reply);
    } catch (error) {
      this.reject(error);
      return;
    }
    this.resolve(value);
  }
}

function settleNothing(): void {}

/**
 * The one executor of every call's promise: it hands the promise's settle functions to the call being made
 * (`capturing`, set just before, since an executor runs at once). A closure per call would be one more object, and
 * one more context, for the young generation at every call.
 */
let capturing: Pending | null = null;
function capture(resolve: (value: unknown) => void, reject: (error: unknown) => void): void {
  capturing!.resolve = resolve;
  capturing!.reject = reject;
}

export class RpcConnection {
  /** Resolves when the server accepts the hello; rejects with the reason the connection closed before that. */
  readonly welcomed: Promise<Welcome>;
  private readonly socket: Socket;
  private readonly timeoutMs: number;
  private readonly maxInFlight: number;
  private readonly maxFrameBytes: number;
  private closeReason: RpcError | undefined;
  private readonly closeListeners: Array<(reason: RpcError) => void> = [];
  private nextId = 1;
  /** By id; not a Map (call-table.ts says why). */
  private readonly pending = new CallTable<Pending>();
  private outbox: [number, unknown][] = [];
  private flushScheduled = false;
  private welcome: { resolve(w: Welcome): void; reject(e: RpcError): void } | undefined;
  /**
   * One timer for every pending call's deadline instead of a setTimeout per call (arming and clearing a timer
   * per call was a visible share of the client's CPU at tens of thousands of calls per second). It is armed for
   * the earliest deadline; when it fires it fails the calls that are due and re-arms for the next one.
   */
  private deadlineTimer: NodeJS.Timeout | null = null;
  private timerAt = Infinity;

  /** Dials at once and sends the hello; calls may be made right away (they follow the hello on the wire). */
  constructor(private readonly options: RpcConnectionOptions) {
    const [host, port] = hostPort(options.address); // a malformed address fails here, not on the first call
    this.timeoutMs = options.timeoutMs ?? 1_000;
    this.maxInFlight = options.maxInFlight ?? 10_000;
    this.maxFrameBytes = options.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES;
    this.welcomed = new Promise<Welcome>((resolve, reject) => {
      this.welcome = { resolve, reject };
    });
    // Nobody may be listening for the welcome: its rejection is reported through the calls and onClose too.
    this.welcomed.catch(() => undefined);
    const reader = new FrameReader(this.maxFrameBytes);
    const socket = connect({ host, port, noDelay: true });
    this.socket = socket;
    socket.write(encodeMessage({ hello: options.token }));
    socket.on('data', (chunk: Buffer) => {
      try {
        reader.push(chunk);
        for (let frame = reader.next(); frame !== null && this.closeReason === undefined; frame = reader.next())
          this.onFrame(decodeMessage(frame));
      } catch (error) {
        const reason = toRpcError(error);
        this.close(reason.code === 'internal' ? new RpcError('malformed', 'malformed reply') : reason);
      }
    });
    socket.on('error', (error) => this.close(new RpcError('unavailable', `${options.address}: ${error.message}`)));
    socket.on('close', () => this.close(new RpcError('unavailable', `connection to ${options.address} closed`)));
  }

  /** Connects and waits for the server to accept the hello (rejects with the refusal, or `timeout`). */
  static async open(options: RpcConnectionOptions): Promise<RpcConnection> {
    const connection = new RpcConnection(options);
    const timeoutMs = options.timeoutMs ?? 1_000;
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new RpcError('timeout', `no welcome from ${options.address} within ${timeoutMs} ms`)),
        timeoutMs,
      );
    });
    try {
      await Promise.race([connection.welcomed, late]);
      return connection;
    } catch (error) {
      connection.close(toRpcError(error));
      throw toRpcError(error);
    } finally {
      clearTimeout(timer);
    }
  }

  get closed(): boolean {
    return this.closeReason !== undefined;
  }

  /** Calls `listener` once, with the reason, when the connection closes (at once if it has). */
  onClose(listener: (reason: RpcError) => void): void {
    if (this.closeReason !== undefined) listener(this.closeReason);
    else this.closeListeners.push(listener);
  }

  /** Sends one request; settles with its answer (decoded, see CallOptions) or an RpcError, always within the deadline. */
  call<T = unknown>(request: unknown, options?: CallOptions<T>): Promise<T> {
    if (this.closeReason !== undefined) return Promise.reject(this.closeReason);
    if (this.pending.size >= this.maxInFlight)
      return Promise.reject(
        new RpcError('overloaded', `${this.pending.size} calls in flight to ${this.options.address}`),
      );
    if (options?.signal?.aborted === true)
      return Promise.reject(new RpcError('cancelled', 'call aborted before it was sent'));
    const id = this.nextId;
    this.nextId = id >= 0x7fffffff ? 1 : id + 1;
    const timeoutMs = options?.timeoutMs ?? this.timeoutMs;
    const deadline = performance.now() + timeoutMs;
    if (deadline < this.timerAt) this.armDeadlines(deadline);
    const call = new Pending(deadline, timeoutMs, options?.decode);
    capturing = call;
    const promise = new Promise<unknown>(capture) as Promise<T>;
    capturing = null;
    if (options?.signal !== undefined) {
      const signal = options.signal;
      call.signal = signal;
      call.onAbort = () => this.settleError(id, new RpcError('cancelled', 'call aborted'));
      signal.addEventListener('abort', call.onAbort, { once: true });
    }
    this.pending.set(id, call);
    this.outbox.push([id, request]);
    if (!this.flushScheduled) {
      this.flushScheduled = true;
      setImmediate(this.flushNow);
    }
    return promise;
  }

  /** Closes the socket; pending calls fail with `reason` (default `closed`). */
  close(reason: RpcError = new RpcError('closed', 'connection closed by the client')): void {
    if (this.closeReason !== undefined) return;
    this.closeReason = reason;
    this.socket.destroy();
    if (this.deadlineTimer !== null) clearTimeout(this.deadlineTimer);
    this.deadlineTimer = null;
    this.outbox = [];
    const calls = this.pending.clear();
    for (const call of calls) {
      this.detach(call);
      call.reject(reason);
    }
    this.welcome?.reject(reason);
    for (const listener of this.closeListeners.splice(0)) listener(reason);
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
    for (const [id, call] of this.pending.entries()) {
      if (call.deadline <= now)
        this.settleError(
          id,
          new RpcError('timeout', `no reply from ${this.options.address} within ${call.timeoutMs} ms`),
        );
      else if (call.deadline < next) next = call.deadline;
    }
    if (next !== Infinity) this.armDeadlines(next);
  };

  private onFrame(message: unknown): void {
    if (Array.isArray(message)) {
      for (const reply of message) {
        if (!Array.isArray(reply) || typeof reply[0] !== 'number') continue;
        const call = this.pending.take(reply[0]);
        if (call === undefined) continue; // timed out or cancelled already
        this.detach(call);
        if (reply[1] === 0) call.answer(reply[2]);
        else call.reject(fromErrorBody(reply[2], 'remote error'));
      }
    } else if (isRecord(message) && isRecord(message.welcome)) {
      this.welcome?.resolve({ kind: String(message.welcome.kind ?? ''), name: String(message.welcome.name ?? '') });
    } else if (isRecord(message) && message.error !== undefined) {
      this.close(fromErrorBody(message.error, 'connection refused by the server'));
    }
  }

  private flush(): void {
    this.flushScheduled = false;
    const calls = this.outbox;
    this.outbox = [];
    for (let i = 0; i < calls.length; i += MAX_CALLS_PER_FRAME) {
      // Calls whose timeout fired (or that were cancelled) before the flush are not sent.
      const batch = calls.slice(i, i + MAX_CALLS_PER_FRAME).filter(([id]) => this.pending.has(id));
      if (batch.length === 0) continue;
      if (this.closeReason !== undefined || this.socket.destroyed) {
        for (const [id] of batch)
          this.settleError(id, new RpcError('unavailable', `connection to ${this.options.address} lost`));
        continue;
      }
      this.sendBatch(batch);
    }
  }

  /**
   * Writes calls as one frame, or, when together they are over the frame limit, as several (halving the batch):
   * only a single call too large for a frame fails, with `frame_too_large`.
   */
  private sendBatch(batch: Array<[number, unknown]>): void {
    let frame: Buffer;
    try {
      frame = encodeMessage(batch);
    } catch {
      if (batch.length > 1) {
        const half = Math.ceil(batch.length / 2);
        this.sendBatch(batch.slice(0, half));
        this.sendBatch(batch.slice(half));
      } else {
        this.settleError(batch[0]![0], new RpcError('bad_request', 'request could not be encoded'));
      }
      return;
    }
    if (frame.length - 4 <= this.maxFrameBytes) {
      this.socket.write(frame);
      return;
    }
    if (batch.length === 1) {
      this.settleError(
        batch[0]![0],
        new RpcError('frame_too_large', `the call needs ${frame.length - 4} bytes, the limit is ${this.maxFrameBytes}`),
      );
      return;
    }
    const half = Math.ceil(batch.length / 2);
    this.sendBatch(batch.slice(0, half));
    this.sendBatch(batch.slice(half));
  }

  private settleError(id: number, error: RpcError): void {
    const call = this.pending.take(id);
    if (call === undefined) return;
    this.detach(call);
    call.reject(error);
  }

  private detach(call: Pending): void {
    if (call.onAbort !== undefined) call.signal?.removeEventListener('abort', call.onAbort);
  }
}

export interface RpcClientOptions extends RpcConnectionOptions {
  /** After a failed or lost connection, calls fail at once with `unavailable` for this long (default 100 ms). */
  reconnectDelayMs?: number;
}

/**
 * A connection to one address that outlives its sockets: dialed on first use, redialed after a loss. Every call
 * settles within its timeout, with the reply or an RpcError (timeout, unavailable, overloaded, cancelled, closed,
 * or the server's error).
 */
export class RpcClient {
  private connection: RpcConnection | null = null;
  private retryAt = 0;
  private closed = false;
  private readonly reconnectDelayMs: number;

  constructor(private readonly options: RpcClientOptions) {
    hostPort(options.address); // a malformed address fails here, not on the first call
    this.reconnectDelayMs = options.reconnectDelayMs ?? 100;
  }

  call<T = unknown>(request: unknown, options?: CallOptions<T>): Promise<T> {
    if (this.closed) return Promise.reject(new RpcError('closed', 'client closed'));
    let connection = this.connection;
    if (connection === null) {
      if (Date.now() < this.retryAt)
        return Promise.reject(new RpcError('unavailable', `${this.options.address} unreachable (retrying shortly)`));
      connection = this.connection = new RpcConnection(this.options);
      const dialed = connection;
      dialed.onClose(() => {
        if (this.connection !== dialed) return;
        this.connection = null;
        this.retryAt = Date.now() + this.reconnectDelayMs;
      });
    }
    return connection.call(request, options);
  }

  /** Closes the connection; pending and later calls fail with `closed`. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.connection?.close(new RpcError('closed', 'client closed'));
    this.connection = null;
  }
}
