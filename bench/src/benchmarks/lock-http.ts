/**
 * The lock benchmark's request path: one keep-alive HTTP/1.1 connection per worker on a bare socket, one request
 * at a time (closed loop, no pipelining), the request written as one string and the answer parsed just enough
 * (status, Content-Length or chunked body). Used for both sides' acquires and releases.
 *
 * Why not undici's Pool.request as the other benchmarks: the load generator shares the 2 cores with the 5 members
 * it measures, and through undici it used more CPU than the whole cluster, so the rate at which a side crossed
 * 50 ms partly measured the client. This path does the same requests with far less (bench/RESULTS.md, lock,
 * findings). Setup and keep-alives (a few a second) still go through undici.
 */
import { connect, type Socket } from 'node:net';
import { REQUEST_TIMEOUT_MS } from '../http.js';
import { OpError } from '../load.js';

interface Pending {
  resolve: (body: string) => void;
  reject: (error: Error) => void;
}

const HEADER_END = Buffer.from('\r\n\r\n');

export class WorkerConnection {
  private socket: Socket | null = null;
  private pending: Pending | null = null;
  private chunks: Buffer[] = [];
  private received = 0;
  private readonly host: string;
  private readonly port: number;
  private readonly hostHeader: string;

  /** `origin` like http://127.0.0.1:8001; `headers`: extra header lines, each ending in \r\n. */
  constructor(
    origin: string,
    private readonly headers: string,
  ) {
    const url = new URL(origin);
    this.host = url.hostname;
    this.port = Number(url.port);
    this.hostHeader = url.host;
  }

  /** Sends one request and resolves with the body of a 2xx answer; any other status throws OpError("HTTP <status> <code>"). */
  request(method: 'POST' | 'GET' | 'DELETE', path: string, body: string): Promise<string> {
    if (this.pending !== null) return Promise.reject(new Error('one request at a time on a worker connection'));
    const socket = this.socket ?? this.open();
    return new Promise((resolve, reject) => {
      this.pending = { resolve, reject };
      socket.write(
        `${method} ${path} HTTP/1.1\r\nhost: ${this.hostHeader}\r\n${this.headers}content-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
      );
    });
  }

  close(): void {
    this.socket?.destroy();
    this.socket = null;
  }

  private open(): Socket {
    const socket = connect({ host: this.host, port: this.port, noDelay: true });
    // Idle for the request timeout while an answer is awaited: give up on this connection (a server that fell this
    // far behind is reported as errors, as undici's bodyTimeout did).
    socket.setTimeout(REQUEST_TIMEOUT_MS, () => {
      if (this.pending !== null) socket.destroy(new Error('request timed out'));
    });
    socket.on('data', (chunk: Buffer) => this.onData(chunk));
    socket.on('error', () => undefined);
    socket.on('close', () => {
      if (this.socket === socket) this.socket = null;
      this.chunks = [];
      this.received = 0;
      this.fail(new Error('connection closed'));
    });
    this.socket = socket;
    return socket;
  }

  private fail(error: Error): void {
    const p = this.pending;
    this.pending = null;
    p?.reject(error);
  }

  private onData(chunk: Buffer): void {
    this.chunks.push(chunk);
    this.received += chunk.length;
    const data = this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks, this.received);
    this.chunks = [data];
    const parsed = parseResponse(data);
    if (parsed === null) return;
    this.chunks = [];
    this.received = 0;
    if (parsed === 'malformed') {
      this.socket?.destroy();
      return;
    }
    const p = this.pending;
    this.pending = null;
    if (parsed.close) this.close();
    if (p === null) return;
    if (parsed.status < 200 || parsed.status > 299)
      p.reject(new OpError(`HTTP ${parsed.status}${codeIn(parsed.body)}`, parsed.body.slice(0, 300)));
    else p.resolve(parsed.body);
  }
}

/** A whole answer in `data`, null while it is incomplete, 'malformed' when it cannot be one. */
export function parseResponse(data: Buffer): { status: number; body: string; close: boolean } | null | 'malformed' {
  const end = data.indexOf(HEADER_END);
  if (end < 0) return data.length > 64 * 1024 ? 'malformed' : null;
  const head = data.toString('latin1', 0, end);
  const status = Number(head.slice(9, 12));
  if (!head.startsWith('HTTP/1.') || !Number.isInteger(status)) return 'malformed';
  const lower = head.toLowerCase();
  const close = /\r\nconnection: *close/.test(lower);
  const bodyStart = end + 4;
  const length = /\r\ncontent-length: *(\d+)/.exec(lower);
  if (length !== null) {
    const bodyEnd = bodyStart + Number(length[1]);
    if (data.length < bodyEnd) return null;
    return { status, body: data.toString('utf8', bodyStart, bodyEnd), close };
  }
  if (/\r\ntransfer-encoding: *chunked/.test(lower)) {
    const parts: string[] = [];
    let at = bodyStart;
    for (;;) {
      const lineEnd = data.indexOf('\r\n', at);
      if (lineEnd < 0) return null;
      const size = parseInt(data.toString('latin1', at, lineEnd), 16);
      if (!Number.isInteger(size) || size < 0) return 'malformed';
      if (size === 0) {
        // The last chunk, then (no trailers from either server) the empty line.
        return data.length < lineEnd + 4 ? null : { status, body: parts.join(''), close };
      }
      if (data.length < lineEnd + 2 + size + 2) return null;
      parts.push(data.toString('utf8', lineEnd + 2, lineEnd + 2 + size));
      at = lineEnd + 2 + size + 2;
    }
  }
  // No length: 1xx, 204 and 304 have no body; anything else would run to the close, which neither server does.
  return status === 204 || status === 304 || status < 200 ? { status, body: '', close } : 'malformed';
}

/** The error code in a JSON error body, ours ({"error": {"code"}}) or grpc-gateway's ({"error": "...", "code": n}). */
function codeIn(text: string): string {
  try {
    const body = JSON.parse(text) as { error?: { code?: unknown } | string };
    if (typeof body.error === 'object' && typeof body.error?.code === 'string') return ` ${body.error.code}`;
    if (typeof body.error === 'string') return ` ${body.error.slice(0, 60)}`;
  } catch {
    // not JSON
  }
  return '';
}
