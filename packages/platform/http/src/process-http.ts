/**
 * The HTTP side every long-running process shares, a Raft member or a worker: a router whose routes each declare
 * whom they admit, GET /healthz and GET /metrics (open), GET /v1/routes (the route table, cluster token), a
 * request counter, and a listener under the process's connection limits. Made in two steps so a member can
 * register its service's routes before it listens.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { limitServer, type ConnectionLimit } from './connections.js';
import { watchGcPauses, type GcPauseWatch } from './gc-pauses.js';
import type { Logger } from './log.js';
import { MetricsRegistry, type Counter } from './metrics.js';
import { sendJson, Router } from './router.js';
import { clusterTls } from './tls.js';

/** What /healthz says beyond `status` and `id`; `status: 'failing'` answers 503 (a supervisor should act). */
export type HealthBody = Record<string, unknown> & { status?: 'ok' | 'failing' };

export interface ProcessHttpOptions {
  /** The process's id (member or worker id), in /healthz. */
  id: string;
  /** host:port to listen on (port 0 picks one). */
  httpAddress: string;
  /** Bearer tokens accepted: the cluster token first. */
  tokens: readonly string[];
  /** The service the process serves: its workers' service token passes `service` routes (RouterOptions.service). */
  service?: string;
  logger: Logger;
  /** The registry /metrics renders, when the process built its parts (and their metrics) before listening. */
  metrics?: MetricsRegistry;
  health?: () => HealthBody;
  /**
   * Sees every request first and returns true when it answered (a hot path that must not pay for routing); it
   * must only speed up a route the router declares, with the same admission.
   */
  fastPath?: (req: IncomingMessage, res: ServerResponse) => boolean;
  /**
   * Serve HTTPS with this certificate and key (PEM). Default: the process's cluster TLS (useClusterTls) when it
   * has a certificate, else plain HTTP; null forces plain HTTP.
   */
  tls?: { cert: string | Buffer; key: string | Buffer } | null;
  /** The connections the listener may hold, instead of its share of the file limit (tests, small machines). */
  connectionBudget?: number;
}

export interface ProcessHttp {
  router: Router;
  metrics: MetricsRegistry;
  /** An https.Server when serving TLS: it has every http.Server method and event this module's users take. */
  server: Server;
  /** "https" or "http": what the listener speaks. */
  scheme: 'http' | 'https';
  /** The listener's connection cap (its `max` follows the process's budget as listeners come and go). */
  connections: ConnectionLimit;
  /** Starts listening; resolves with the bound port. */
  listen(): Promise<number>;
  close(): Promise<void>;
}

export function processHttp(options: ProcessHttpOptions): ProcessHttp {
  const metrics = options.metrics ?? new MetricsRegistry();
  const requests = metrics.counter('http_requests_total', 'HTTP requests by method and status');
  // The dashboard draws latency quantiles from this (cluster/src/dashboard/metrics-text.ts).
  const latency = metrics.histogram('http_request_seconds', 'Time from a request to its response being sent');
  // Every process of a cluster says how long its own GC pauses were (process_gc_*), for reading a latency tail.
  let gc: GcPauseWatch | null = null;
  const router = new Router({
    tokens: options.tokens,
    ...(options.service !== undefined ? { service: options.service } : {}),
    onError: (error, req) =>
      options.logger.log('error', 'handler failed', { url: req.url, error: String((error as Error)?.stack ?? error) }),
  });
  router
    .get('/healthz', { admits: 'open' }, (ctx) => {
      const body = { status: 'ok', id: options.id, ...options.health?.() };
      sendJson(ctx.res, body.status === 'failing' ? 503 : 200, body);
    })
    .get('/metrics', { admits: 'open' }, (ctx) => {
      ctx.res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4' });
      ctx.res.end(metrics.render());
    })
    .get('/v1/routes', { admits: 'cluster' }, () => ({ routes: router.routes() }));
  const counted = new TurnCounts(requests);
  // One function for every response (no closure per request): `this` is the response that finished.
  function onFinish(this: TimedResponse): void {
    counted.add(this.req.method ?? '', this.statusCode);
    latency.observe((performance.now() - this[STARTED]) / 1000);
  }
  const fastPath = options.fastPath;
  const given = options.tls === undefined ? clusterTls() : options.tls;
  const tls =
    given !== null && given.cert !== undefined && given.key !== undefined ? { cert: given.cert, key: given.key } : null;
  const listener = (req: IncomingMessage, res: ServerResponse): void => {
    // Exact routes first, uncounted (Router.exact says what they skip).
    if (router.serveExact(req, res)) return;
    if (fastPath !== undefined) {
      // A throw here would escape the request event and end the process: no request may do that.
      let answered: boolean;
      try {
        answered = fastPath(req, res);
      } catch (error) {
        options.logger.log('error', 'fast path failed', {
          url: req.url,
          error: String((error as Error)?.stack ?? error),
        });
        if (!res.headersSent) sendJson(res, 500, { error: { code: 'internal', message: 'internal error' } });
        else res.destroy();
        return;
      }
      if (answered) return;
    }
    (res as TimedResponse)[STARTED] = performance.now();
    res.on('finish', onFinish);
    router.routedListener(req, res);
  };
  // TLS 1.3 only, as the Raft transport: every process of a cluster runs this code, so no older client needs more.
  const server = (
    tls === null ? createServer(listener) : createHttpsServer({ ...tls, minVersion: 'TLSv1.3' }, listener)
  ) as Server;
  const connections = limitServer(
    server,
    options.connectionBudget === undefined ? {} : { budget: options.connectionBudget },
  );
  return {
    router,
    metrics,
    server,
    connections,
    scheme: tls === null ? 'http' : 'https',
    listen: () => {
      gc ??= watchGcPauses(metrics);
      const [host, port] = hostPort(options.httpAddress);
      return new Promise<number>((resolve, reject) => {
        server.once('error', reject);
        server.listen(port, host, () => {
          server.off('error', reject);
          resolve((server.address() as { port: number }).port);
        });
      });
    },
    close: () =>
      new Promise<void>((resolve) => {
        gc?.stop();
        gc = null;
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

const STARTED = Symbol('started');
type TimedResponse = ServerResponse & { [STARTED]: number };

/**
 * Requests counted by method and status, handed to the labelled counter once per turn of the event loop: the
 * counter builds and escapes its series key on every call, which showed in the request path's profile. A count is
 * at most one turn late: a client that read its answer and then asks /metrics finds it counted.
 */
class TurnCounts {
  private readonly counts = new Map<string, { method: string; status: number; n: number }>();

  constructor(private readonly counter: Counter) {}

  add(method: string, status: number): void {
    // Methods are letters and statuses digits: the two joined are unambiguous.
    const key = method + status;
    const entry = this.counts.get(key);
    if (entry !== undefined) {
      entry.n++;
      return;
    }
    if (this.counts.size === 0) setImmediate(() => this.flush());
    this.counts.set(key, { method, status, n: 1 });
  }

  private flush(): void {
    for (const { method, status, n } of this.counts.values()) this.counter.inc(n, { method, status: String(status) });
    this.counts.clear();
  }
}

/** "host:port" -> [host, port] (throws a TypeError naming the address when malformed). */
export function hostPort(address: string): [string, number] {
  const m = /^(?:\[([^\]]+)\]|([^:]+)):(\d{1,5})$/.exec(address);
  const port = m ? Number(m[3]) : NaN;
  if (!m || port > 65535) throw new TypeError(`expected host:port, got ${JSON.stringify(address)}`);
  return [(m[1] ?? m[2])!, port];
}
