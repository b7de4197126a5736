/** One client connection: hello first, then pipelined requests matched to answers by id. */
import { connect, type Socket } from 'node:net';
import { FrameDecoder, hostPort } from '@raftkit/http';
import { decodeFrame, encodeFrame, MAX_FRAME_BYTES, type Request, type Response } from './protocol.js';

type DistributiveOmit<T, K extends keyof T> = T extends unknown ? Omit<T, K> : never;
export type RequestBody = DistributiveOmit<Request, 'id'>;

/** An error answer from the server (`code` as sent), or a broken connection (`code` "disconnected"/"timeout"). */
export class StreamError extends Error {
  override name = 'StreamError';
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

interface Waiting {
  resolve(response: Response): void;
  reject(error: StreamError): void;
  timer: NodeJS.Timeout;
}

export class StreamConnection {
  private nextId = 1;
  private readonly waiting = new Map<number, Waiting>();
  private closeReason: StreamError | undefined;
  private readonly closeListeners: Array<(reason: StreamError) => void> = [];

  private constructor(private readonly socket: Socket) {
    const decoder = new FrameDecoder(MAX_FRAME_BYTES);
    socket.on('data', (chunk: Buffer) => {
      let messages: unknown[];
      try {
        decoder.push(chunk);
        messages = decoder.drain().map(decodeFrame);
      } catch (e) {
        return this.destroy(new StreamError('bad_frame', (e as Error).message));
      }
      for (const message of messages) this.settle(message as Response);
    });
    socket.on('error', (e) => this.destroy(new StreamError('disconnected', e.message)));
    socket.on('close', () => this.destroy(new StreamError('disconnected', 'connection closed')));
  }

  /** Connects and authenticates; rejects with a StreamError on refusal, failure or after `timeoutMs`. */
  static async open(address: string, token: string, timeoutMs: number): Promise<StreamConnection> {
    const [host, port] = hostPort(address);
    const socket = connect({ host, port, noDelay: true });
    const connection = new StreamConnection(socket);
    await connection.request({ t: 'hello', token }, timeoutMs);
    return connection;
  }

  get closed(): boolean {
    return this.closeReason !== undefined;
  }

  onClose(listener: (reason: StreamError) => void): void {
    if (this.closeReason) listener(this.closeReason);
    else this.closeListeners.push(listener);
  }

  /**
   * Sends a request; resolves with its answer, rejects with the server's error. A request unanswered after
   * `timeoutMs` breaks the whole connection: with pipelining, later answers could no longer be trusted in order.
   */
  request(body: RequestBody, timeoutMs: number): Promise<Response> {
    if (this.closeReason) return Promise.reject(this.closeReason);
    const id = this.nextId++;
    return new Promise<Response>((resolve, reject) => {
      const timer = setTimeout(() => this.destroy(new StreamError('timeout', `no answer within ${timeoutMs} ms`)), timeoutMs);
      this.waiting.set(id, { resolve, reject, timer });
      this.socket.write(encodeFrame({ ...body, id } as Request));
    });
  }

  private settle(response: Response): void {
    const waiting = this.waiting.get(response.id);
    if (waiting === undefined) {
      // An error with no matching request (id 0) is about the connection itself.
      if (response.t === 'error') this.destroy(new StreamError(response.code, response.message));
      return;
    }
    this.waiting.delete(response.id);
    clearTimeout(waiting.timer);
    if (response.t === 'error') waiting.reject(new StreamError(response.code, response.message));
    else waiting.resolve(response);
  }

  destroy(reason = new StreamError('disconnected', 'closed by client')): void {
    if (this.closeReason) return;
    this.closeReason = reason;
    this.socket.destroy();
    for (const w of this.waiting.values()) {
      clearTimeout(w.timer);
      w.reject(reason);
    }
    this.waiting.clear();
    for (const listener of this.closeListeners.splice(0)) listener(reason);
  }
}
