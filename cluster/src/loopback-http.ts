/**
 * One HTTP exchange with a process of a local cluster (plain HTTP on its loopback address), on node:http: the CLI
 * makes a handful of these and exits, and undici's load and its first request cost more CPU than the call itself
 * (cluster/README.md, "Cost of a call"); the dashboard's collector makes them every round. One deadline covers the
 * whole exchange (a paused process accepts the connection and never answers), and the answer's size is bounded.
 * Any failure (refused, reset, too slow, too large) is null: the callers say what a silent process means.
 */
import { request, type Agent } from 'node:http';

export interface LoopbackAnswer {
  status: number;
  text: string;
}

interface LoopbackRequest {
  /** host:port */
  address: string;
  method: string;
  path: string;
  /** Bearer token; empty: no Authorization header. */
  token: string;
  /** Sent as JSON. */
  body?: unknown;
  timeoutMs: number;
  /** Larger answers are dropped (null). Default 4 MB: a process's metrics are a few kB. */
  maxAnswerBytes?: number;
  /** Keep-alive connections (the dashboard's); default none: one connection for the one call. */
  agent?: Agent;
}

const DEFAULT_MAX_ANSWER = 4_000_000;

export function loopbackExchange(r: LoopbackRequest): Promise<LoopbackAnswer | null> {
  const colon = r.address.lastIndexOf(':');
  const payload = r.body === undefined ? undefined : JSON.stringify(r.body);
  const headers: Record<string, string> = {};
  if (r.token.length > 0) headers.authorization = `Bearer ${r.token}`;
  if (payload !== undefined) {
    headers['content-type'] = 'application/json';
    headers['content-length'] = String(Buffer.byteLength(payload));
  }
  const maxBytes = r.maxAnswerBytes ?? DEFAULT_MAX_ANSWER;
  return new Promise((resolve) => {
    let settled = false;
    const finish = (answer: LoopbackAnswer | null): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(answer);
    };
    const req = request(
      {
        host: r.address.slice(0, colon),
        port: Number(r.address.slice(colon + 1)),
        method: r.method,
        path: r.path,
        headers,
        agent: r.agent ?? false,
      },
      (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (chunk: Buffer) => {
          size += chunk.length;
          if (size > maxBytes) {
            req.destroy();
            finish(null);
          } else chunks.push(chunk);
        });
        res.on('error', () => finish(null));
        res.on('end', () => finish({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
      },
    );
    const timer = setTimeout(() => {
      req.destroy();
      finish(null);
    }, r.timeoutMs);
    req.on('error', () => finish(null));
    req.end(payload);
  });
}
