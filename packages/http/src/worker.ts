/**
 * The contract for a service's processes that are not Raft members (application servers, counter stores, click
 * streams...). `cluster up` starts them after the members have a leader, records them beside the members, and
 * `cluster kill|pause|resume|restart|logs <id>` work on them as on members. A worker is stateless towards Raft:
 * it reaches the members over their HTTP API.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { limitServer } from './connections.js';
import type { Logger } from './log.js';
import { MetricsRegistry } from './metrics.js';
import { Router } from './router.js';

/** Another process of the same cluster, as a worker sees it. */
export interface PeerAddress {
  id: string;
  /** For workers: the role; for members: "member". */
  role: string;
  /** host:port of its HTTP API. */
  httpAddress: string;
  /** host:port of its second listener (binary protocols), when it has one. */
  tcpAddress?: string;
}

export interface WorkerOptions {
  /** e.g. "app2": the role and its 1-based index. */
  id: string;
  role: string;
  index: number;
  /** A directory of its own (segments, LevelDB...), kept across restarts. */
  dataDir: string;
  /** host:port for its HTTP API. */
  httpAddress: string;
  /** host:port for a second listener (binary protocol); each worker gets one, most ignore it. */
  tcpAddress: string;
  /** The Raft members (role "member"), in id order. */
  members: PeerAddress[];
  /** Every worker of the cluster, this one included, in start order. */
  workers: PeerAddress[];
  /** Bearer tokens accepted: the cluster token first. */
  tokens: string[];
  /** Free-form settings from `cluster up --set key=value` (each service documents its own). */
  settings: Record<string, string>;
  logger: Logger;
}

export interface RunningWorker {
  httpPort: number;
  stop(): Promise<void>;
}

export interface WorkerRole {
  role: string;
  /** How many `cluster up` starts unless `--workers role=N` says otherwise. */
  count: number;
  start(options: WorkerOptions): Promise<RunningWorker>;
}

/** A service's processes besides its Raft members, started in this order (dependencies first). */
export type WorkerRoles = readonly WorkerRole[];

export interface WorkerHttp {
  router: Router;
  metrics: MetricsRegistry;
  server: Server;
  port: number;
  close(): Promise<void>;
}

/**
 * The HTTP side every worker shares: a router whose routes each declare whom they admit, /healthz and /metrics
 * (open), GET /v1/routes (the route table, cluster token), and a listener under the process's connection limits.
 * `fastPath` sees every request first and returns true when it answered (a hot path that must not pay for
 * routing); it must only speed up a route the router declares, with the same admission.
 */
export async function serveWorkerHttp(
  options: WorkerOptions,
  setup: {
    fastPath?: (req: IncomingMessage, res: ServerResponse) => boolean;
    health?: () => Record<string, unknown>;
    /** The registry /metrics renders, when the worker built its parts (and their metrics) before listening. */
    metrics?: MetricsRegistry;
  } = {},
): Promise<WorkerHttp> {
  const metrics = setup.metrics ?? new MetricsRegistry();
  const requests = metrics.counter('http_requests_total', 'HTTP requests by method and status');
  const router = new Router({
    tokens: options.tokens,
    onError: (error, req) => options.logger.log('error', 'handler failed', { url: req.url, error: String((error as Error)?.stack ?? error) }),
  });
  router
    .get('/healthz', { admits: 'open' }, () => ({ status: 'ok', id: options.id, role: options.role, ...(setup.health?.() ?? {}) }))
    .get('/metrics', { admits: 'open' }, (ctx) => {
      ctx.res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4' });
      ctx.res.end(metrics.render());
    })
    .get('/v1/routes', { admits: 'cluster' }, () => ({ routes: router.routes() }));
  const fastPath = setup.fastPath;
  const server = createServer((req, res) => {
    if (fastPath !== undefined && fastPath(req, res)) return;
    res.on('finish', () => requests.inc(1, { method: req.method ?? '', status: String(res.statusCode) }));
    router.listener(req, res);
  });
  limitServer(server);
  const [host, port] = hostPort(options.httpAddress);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  const bound = (server.address() as { port: number }).port;
  return {
    router,
    metrics,
    server,
    port: bound,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** "host:port" -> [host, port] (throws a TypeError naming the address when malformed). */
export function hostPort(address: string): [string, number] {
  const m = /^(?:\[([^\]]+)\]|([^:]+)):(\d{1,5})$/.exec(address);
  const port = m ? Number(m[3]) : NaN;
  if (!m || port > 65535) throw new TypeError(`expected host:port, got ${JSON.stringify(address)}`);
  return [(m[1] ?? m[2])!, port];
}
