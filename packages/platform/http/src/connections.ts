/**
 * Connection limits for every listener of a process, so that idle or slow clients cannot take the file
 * descriptors storage and peers need (21,000 idle sockets on a member with `ulimit -n` 20,000 made LevelDB fail
 * with "Too many open files" and left the member behind).
 *
 * The process's soft file limit, minus a reserve for storage (LevelDB keeps up to 1,000 table files open), Raft
 * peers and outgoing calls, is the connection budget; it is split between the process's limited listeners by
 * weight, and recomputed as listeners come and go.
 *
 * At its cap, an HTTP listener closes its oldest idle connection (one with no request in flight: a keep-alive
 * connection between requests, or one that never sent a request) to make room, and refuses the new one only when
 * every connection is busy. Serving the newcomer keeps a member reachable for real clients while someone holds
 * thousands of silent sockets; the evicted keep-alive client merely reconnects. A binary-protocol listener (long
 * lived, pipelined connections where "idle" says little) refuses new connections at its cap (`maxConnections`).
 * HTTP connections must also send their first request's headers within `headersTimeout` (Node's own
 * headersTimeout only starts with the first byte), and idle keep-alive ones close after `keepAliveTimeout`.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { Server as HttpServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { Server as HttpsServer } from 'node:https';
import type { Server as NetServer, Socket } from 'node:net';

/** When the limit cannot be read (not Linux, no sh): a common default soft limit. */
export const FALLBACK_FILE_LIMIT = 4096;
/** "unlimited" is treated as this many: far beyond what one process serves. */
const UNLIMITED_FILES = 1 << 20;
/** Descriptors kept for storage, peers and outgoing calls: a fifth of the limit, at least 1,024, at most half. */
const RESERVE_SHARE = 0.2;
const MIN_RESERVE = 1024;

let softLimit: number | null = null;

/** The process's soft limit on open files (`ulimit -n`), read once. */
export function fileLimit(): number {
  softLimit ??= readFileLimit();
  return softLimit;
}

function parseLimit(text: string): number | null {
  const value = text.trim();
  if (value === 'unlimited') return UNLIMITED_FILES;
  const n = Number(value);
  return Number.isSafeInteger(n) && n > 0 ? n : null;
}

function readFileLimit(): number {
  // Node has no getrlimit: Linux tells us in /proc; elsewhere a shell (a child inherits our limit) does.
  try {
    const m = /^Max open files\s+(\S+)/m.exec(readFileSync('/proc/self/limits', 'utf8'));
    const n = m === null ? null : parseLimit(m[1]!);
    if (n !== null) return n;
  } catch {
    // Not Linux: ask a shell.
  }
  try {
    const n = parseLimit(
      execFileSync('sh', ['-c', 'ulimit -n'], {
        encoding: 'utf8',
        timeout: 2_000,
        stdio: ['ignore', 'pipe', 'ignore'],
      }),
    );
    if (n !== null) return n;
  } catch {
    // No shell either: the default below.
  }
  return FALLBACK_FILE_LIMIT;
}

/** Connections all listeners of a process may hold together, for a file limit of `limit`. */
export function connectionBudget(limit = fileLimit()): number {
  const reserve = Math.min(Math.max(MIN_RESERVE, Math.ceil(limit * RESERVE_SHARE)), Math.floor(limit / 2));
  return Math.max(1, limit - reserve);
}

export interface LimitOptions {
  /** Its part of the process's budget relative to the other limited listeners (default 1). */
  weight?: number;
  /** The budget to split instead of the one derived from the file limit (tests). */
  budget?: number;
  /** HTTP only: ms to send a request's headers, the first request's included (default 20 s). */
  headersTimeoutMs?: number;
  /** HTTP only: ms to receive a whole request (default 120 s; long polls answer later, that is not limited). */
  requestTimeoutMs?: number;
  /** HTTP only: ms an idle keep-alive connection stays open (default 30 s). */
  keepAliveTimeoutMs?: number;
}

export interface ConnectionLimit {
  /** The connections this listener may hold now (its share of the budget). */
  readonly max: number;
  /** Connections closed to make room (HTTP) or refused at the cap. */
  readonly evicted: number;
  readonly refused: number;
}

interface Limited {
  server: NetServer;
  weight: number;
  budget: number | undefined;
  max: number;
  apply(max: number): void;
}

const limited = new Set<Limited>();

/** Sockets taken over by an HTTP upgrade (WebSockets): in use as long as they live, so never evicted as idle. */
const upgraded = new WeakSet<object>();

/** Call from an 'upgrade' handler that keeps the socket: the listener's cap then never evicts it as idle. */
export function holdUpgraded(socket: object): void {
  upgraded.add(socket);
}

function rebalance(): void {
  let total = 0;
  for (const l of limited) total += l.weight;
  for (const l of limited) {
    const budget = l.budget ?? connectionBudget();
    l.max = Math.max(1, Math.floor((budget * l.weight) / total));
    l.apply(l.max);
  }
}

/**
 * Caps `server`'s connections at its share of the process's budget and sets the HTTP timeouts (for an
 * http.Server). Call once per listener, before or after listen; its share is released when it closes.
 */
export function limitServer(server: NetServer, options: LimitOptions = {}): ConnectionLimit {
  const weight = options.weight ?? 1;
  if (!(weight > 0)) throw new RangeError('weight must be positive');
  const counts = { evicted: 0, refused: 0 };
  const entry: Limited = { server, weight, budget: options.budget, max: 1, apply: () => undefined };
  if (server instanceof HttpServer || server instanceof HttpsServer) {
    limitHttp(server as HttpServer, entry, counts, options);
  } else {
    entry.apply = (max) => {
      server.maxConnections = max;
    };
    server.on('drop', () => counts.refused++);
  }
  limited.add(entry);
  server.once('close', () => {
    limited.delete(entry);
    rebalance();
  });
  rebalance();
  return {
    get max() {
      return entry.max;
    },
    get evicted() {
      return counts.evicted;
    },
    get refused() {
      return counts.refused;
    },
  };
}

/** The connection a response belongs to (a closed response may have let go of its socket). */
const ON_SOCKET = Symbol('socket');

function limitHttp(
  server: HttpServer,
  entry: Limited,
  counts: { evicted: number; refused: number },
  options: LimitOptions,
): void {
  const headersTimeout = options.headersTimeoutMs ?? 20_000;
  server.headersTimeout = headersTimeout;
  server.requestTimeout = Math.max(options.requestTimeoutMs ?? 120_000, headersTimeout);
  server.keepAliveTimeout = options.keepAliveTimeoutMs ?? 30_000;
  // Oldest first (a Set keeps insertion order), with the requests each has in flight.
  const open = new Set<Socket>();
  const inFlight = new Map<Socket, number>();
  /** Connections that have not sent a request yet (their no-request timer runs). */
  const waitingFirst = new Set<Socket>();
  // An HTTPS server's requests come on the TLS socket, told by 'secureConnection' (its handshakes are bounded by
  // the server's handshakeTimeout); a plain one's on the socket 'connection' gives.
  const event = server instanceof HttpsServer ? 'secureConnection' : 'connection';
  server.on(event, (socket: Socket) => {
    if (open.size >= entry.max && !evictOldestIdle()) {
      counts.refused++;
      socket.destroy();
      return;
    }
    open.add(socket);
    inFlight.set(socket, 0);
    // Until its first request: Node's server destroys a socket whose timeout fires with no request to tell.
    socket.setTimeout(headersTimeout);
    waitingFirst.add(socket);
    socket.once('close', () => {
      open.delete(socket);
      inFlight.delete(socket);
      waitingFirst.delete(socket);
    });
  });
  // One function for every response (no closure per request): `this` is the response that closed.
  function answered(this: ServerResponse & { [ON_SOCKET]?: Socket }): void {
    const socket = this[ON_SOCKET]!;
    const left = inFlight.get(socket);
    if (left !== undefined) inFlight.set(socket, left - 1);
  }
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    const socket = req.socket;
    const n = inFlight.get(socket);
    if (n === undefined) return;
    // The first request clears the no-request timer; later idle time is Node's keepAliveTimeout, which Node arms
    // and clears itself (clearing it again on every request showed in the request path's profile).
    if (waitingFirst.delete(socket)) socket.setTimeout(0);
    inFlight.set(socket, n + 1);
    (res as ServerResponse & { [ON_SOCKET]?: Socket })[ON_SOCKET] = socket;
    res.once('close', answered);
  });
  const evictOldestIdle = (): boolean => {
    for (const socket of open) {
      if (inFlight.get(socket) !== 0 || upgraded.has(socket)) continue;
      open.delete(socket);
      inFlight.delete(socket);
      socket.destroy();
      counts.evicted++;
      return true;
    }
    return false;
  };
}
