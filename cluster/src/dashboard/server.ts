/**
 * The dashboard's HTTP server: the page's static bundle (no token: it holds no data), the JSON API and the live
 * WebSocket (the cluster token as a bearer header or a login cookie), and the jepsen-like reports.
 */
import { createReadStream, existsSync, readFileSync, statSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  badRequest,
  HttpError,
  notFound,
  Reply,
  requireObject,
  Router,
  sendError,
  unauthorized,
  type JsonObject,
} from '@raftkit/http';
import {
  FAULT_ACTIONS,
  healMembers,
  partitionMembers,
  restartProcess,
  signalProcess,
  type ActionResult,
  type FaultAction,
} from '../actions.js';
import { CliError, findProcess, readState, tokenPath, type ClusterState } from '../state.js';
import { Collector, type RemoteSource } from './collector.js';
import { contentType, jepsenFile, listRuns } from './jepsen.js';
import { LiveHub } from './live.js';
import { probeCounters } from './probe.js';
import { Sessions } from './sessions.js';
import { Timeline } from './timeline.js';

const DEFAULT_WEB_DIR = fileURLToPath(new URL('../../../web/dist', import.meta.url));

interface DashboardOptions {
  dataRoot: string;
  jepsenDir: string;
  token: string;
  host?: string;
  port?: number;
  /** The page's bundle (index.html and assets/); default cluster/web/dist. */
  webDir?: string;
  intervalMs?: number;
  /** The slowest pace while nothing changes (collector.ts MAX_INTERVAL_MS). */
  maxIntervalMs?: number;
  /** With no live socket, polling stops this long after the last /api request (collector.ts IDLE_AFTER_MS). */
  idleAfterMs?: number;
  /** A cluster on other hosts, shown read-only beside the data root's (`--endpoints`). */
  remote?: RemoteSource;
}

interface RunningDashboard {
  port: number;
  url: string;
  collector: Collector;
  close(): Promise<void>;
}

/** Bodies are a token or a fault: a few hundred bytes. */
const MAX_BODY = 16 * 1024;
const NEEDS_CONFIRM: ReadonlySet<FaultAction> = new Set(['kill', 'restart', 'pause', 'partition']);
const SAFE_NAME = /^[A-Za-z0-9_-][A-Za-z0-9._-]*$/;

export async function startDashboard(options: DashboardOptions): Promise<RunningDashboard> {
  const timeline = new Timeline();
  const collector = new Collector({
    dataRoot: resolve(options.dataRoot),
    timeline,
    ...(options.intervalMs !== undefined ? { intervalMs: options.intervalMs } : {}),
    ...(options.maxIntervalMs !== undefined ? { maxIntervalMs: options.maxIntervalMs } : {}),
    ...(options.idleAfterMs !== undefined ? { idleAfterMs: options.idleAfterMs } : {}),
    ...(options.remote !== undefined ? { remote: options.remote } : {}),
  });
  const sessions = new Sessions(options.token);
  const live = new LiveHub(collector, timeline);
  const webDir = options.webDir ?? DEFAULT_WEB_DIR;
  const router = new Router({
    tokens: [options.token],
    maxBodyBytes: MAX_BODY,
    onError: (e) => process.stderr.write(`dashboard: ${String((e as Error)?.stack ?? e)}\n`),
  });

  // Every route here is "open" to the router: the server admits /api/* (bearer or cookie) before the router runs.
  router
    .post('/api/login', { admits: 'open' }, async (ctx) => {
      const body = requireObject(await ctx.json());
      if (typeof body.token !== 'string' || !sessions.tokenMatches(body.token)) throw unauthorized('wrong token');
      return new Reply(204, undefined, { 'set-cookie': Sessions.header(sessions.create()) });
    })
    // Polling may be parked (no page for a while): an overview older than two base rounds is polled anew first.
    .get('/api/overview', { admits: 'open' }, () => collector.fresh(2 * (options.intervalMs ?? 1_000)))
    .get('/api/timeline', { admits: 'open' }, (ctx) => {
      const sinceText = ctx.query.get('since') ?? '0';
      if (!/^\d{1,15}$/.test(sinceText))
        throw badRequest('invalid_field', 'since must be a non-negative integer (a seq from an earlier answer)', {
          field: 'since',
        });
      const cluster = ctx.query.get('cluster') ?? undefined;
      if (cluster !== undefined && collector.dataDirOf(cluster) === undefined)
        throw notFound(`no cluster named ${cluster} under the data root`);
      return { events: timeline.since(Number(sinceText), cluster) };
    })
    .post('/api/clusters/:name/faults', { admits: 'open' }, async (ctx) => {
      const dataDir = collector.dataDirOf(ctx.params.name!);
      if (dataDir === undefined) throw notFound(`no cluster named ${ctx.params.name} under the data root`);
      if (collector.isRemote(ctx.params.name!)) {
        // Signals and restarts happen where the process runs: on a remote host that is its service manager.
        throw new HttpError(
          409,
          'remote_cluster',
          `${ctx.params.name} runs on other hosts: kill, restart, pause, resume and partitions are done there (systemctl, docker), not from this dashboard`,
        );
      }
      const body = requireObject(await ctx.json());
      let state: ClusterState;
      try {
        state = readState(dataDir);
      } catch {
        throw notFound(`the cluster ${ctx.params.name} is gone (no readable cluster.json)`);
      }
      const fault = parseFault(body, state);
      if (NEEDS_CONFIRM.has(fault.action) && body.confirm !== true) {
        throw badRequest('confirmation_required', `${fault.action} is destructive: send "confirm": true`, {
          field: 'confirm',
        });
      }
      let result: ActionResult;
      try {
        result = await runFault(state, dataDir, fault);
      } catch (e) {
        // The action refused (the member is not running, was removed...): the cluster is as it was.
        if (e instanceof CliError) throw new HttpError(409, 'fault_refused', e.message);
        throw e;
      }
      timeline.ingestFaults(ctx.params.name!, dataDir);
      collector.hurry(); // the page wants to see what the fault did, at the base pace
      const event =
        timeline.faultEvent(result.fault.id) ??
        timeline.add(ctx.params.name!, 'fault', result.fault.member, null, result.fault.text, result.fault.at);
      return { ok: true, event, warnings: result.warnings };
    })
    .get('/api/jepsen', { admits: 'open' }, () => ({ runs: listRuns(options.jepsenDir) }))
    .get('/api/debug', { admits: 'open' }, () => ({
      collector: {
        ...collector.counters,
        httpCalls: probeCounters.httpCalls,
        httpFailures: probeCounters.httpFailures,
      },
      live: { sockets: live.size, ...live.counters },
      sessions: sessions.size,
    }));

  const server: Server = createServer((req, res) => {
    try {
      handle(req, res);
    } catch (e) {
      if (!res.headersSent)
        sendError(res, e instanceof HttpError ? e : new HttpError(500, 'internal', 'internal error'));
      else res.destroy();
    }
  });

  function handle(req: IncomingMessage, res: ServerResponse): void {
    const segments = pathSegments(req.url ?? '/');
    const top = segments[0];
    if (top === 'api' || top === 'jepsen') {
      const login = segments.length === 2 && segments[1] === 'login';
      if (!(top === 'api' && login) && !sessions.admits(req))
        throw unauthorized('send the dashboard token as "Authorization: Bearer <token>" or log in (POST /api/login)');
      if (top === 'api' && req.method !== 'GET' && req.method !== 'HEAD') refuseCrossSite(req);
      if (top === 'api') {
        // A page is looking: keep polling (collector.ts parks it IDLE_AFTER_MS after the last request or socket).
        // (/api/debug is how a test watches the collector, so it does not count as a page.)
        if (segments[1] !== 'debug') collector.demand();
        router.listener(req, res);
        return;
      }
      if (req.method !== 'GET' && req.method !== 'HEAD')
        throw new HttpError(405, 'method_not_allowed', 'use GET on this path', {}, { allow: 'GET' });
      sendFile(res, jepsenFile(options.jepsenDir, segments.slice(1)), 'no-store');
      return;
    }
    if (req.method !== 'GET' && req.method !== 'HEAD')
      throw new HttpError(405, 'method_not_allowed', 'use GET on this path', {}, { allow: 'GET' });
    // The page: index.html at / and its bundle under /assets (hashed names: cached).
    if (segments.length === 0 || (segments.length === 1 && segments[0] === 'index.html')) {
      const index = join(webDir, 'index.html');
      if (!existsSync(index)) throw notFound(`the page is not built (no ${index}); run make build`);
      sendFile(res, index, 'no-store');
      return;
    }
    if (top === 'assets' && segments.length >= 2 && segments.slice(1).every((s) => SAFE_NAME.test(s))) {
      const path = join(webDir, ...segments);
      if (!existsSync(path) || !statSync(path).isFile()) throw notFound(`no asset ${segments.slice(1).join('/')}`);
      // The bundle's names carry no content hash, so a cached copy must be revalidated after every `make build`.
      sendFile(res, path, 'no-cache');
      return;
    }
    throw notFound(`nothing at ${req.url}`);
  }

  server.on('upgrade', (req: IncomingMessage, socket, head: Buffer) => {
    socket.on('error', () => socket.destroy());
    let segments: string[];
    try {
      segments = pathSegments(req.url ?? '/');
    } catch {
      segments = [];
    }
    if (segments.length !== 2 || segments[0] !== 'api' || segments[1] !== 'live') {
      socket.end(rawError(404, 'Not Found', 'not_found', 'WebSockets are served at /api/live only'));
      return;
    }
    if (!sessions.admits(req)) {
      socket.end(rawError(401, 'Unauthorized', 'unauthorized', 'send the dashboard token or the login cookie'));
      return;
    }
    // A browser sends Origin on every WebSocket: another site's page (the cookie is SameSite=Strict, but a socket is
    // not a fetch) is refused; tools that send no Origin are admitted by their token as above.
    const origin = req.headers.origin;
    if (origin !== undefined && !sameHost(origin, req.headers.host)) {
      socket.end(rawError(403, 'Forbidden', 'forbidden', "the live socket is for the dashboard's own page"));
      return;
    }
    live.accept(req, socket, head);
  });

  const port = await new Promise<number>((resolvePort, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 6900, options.host ?? '127.0.0.1', () => {
      server.off('error', reject);
      resolvePort((server.address() as { port: number }).port);
    });
  });
  collector.start();
  const host = options.host ?? '127.0.0.1';
  return {
    port,
    url: `http://${host.includes(':') ? `[${host}]` : host}:${port}/`,
    collector,
    close: async () => {
      collector.stop();
      live.close();
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

type Fault =
  | { action: 'kill' | 'restart' | 'pause' | 'resume'; member: string }
  | { action: 'partition'; sides: string[][] }
  | { action: 'heal' };

/** The fault a body asks for, checked against the cluster: 400 naming the field otherwise. */
function parseFault(body: JsonObject, state: ClusterState): Fault {
  const action = body.action;
  if (typeof action !== 'string' || !(FAULT_ACTIONS as readonly string[]).includes(action)) {
    throw badRequest('invalid_action', `action must be one of ${FAULT_ACTIONS.join(', ')}`, { field: 'action' });
  }
  if (action === 'heal') return { action };
  if (action === 'partition') {
    const sides = body.sides;
    if (!Array.isArray(sides) || sides.length < 2)
      throw badRequest('invalid_sides', 'sides must be a list of at least two lists of member ids', { field: 'sides' });
    const seen = new Set<string>();
    const known = new Set(state.members.filter((m) => !m.removed).map((m) => m.id));
    for (const side of sides) {
      if (!Array.isArray(side) || side.length === 0)
        throw badRequest('invalid_sides', 'every side must be a non-empty list of member ids', { field: 'sides' });
      for (const id of side) {
        if (typeof id !== 'string') throw badRequest('invalid_sides', 'member ids are strings', { field: 'sides' });
        if (!known.has(id))
          throw badRequest('unknown_member', `no member ${id} in this cluster (members: ${[...known].join(', ')})`, {
            field: 'sides',
            member: id,
          });
        if (seen.has(id)) throw badRequest('invalid_sides', `${id} is on two sides`, { field: 'sides', member: id });
        seen.add(id);
      }
    }
    return { action, sides: sides as string[][] };
  }
  const member = body.member;
  if (typeof member !== 'string' || member.length === 0)
    throw badRequest('invalid_field', `${action} needs "member": a member or worker id`, { field: 'member' });
  const ids = [...state.members.map((m) => m.id), ...(state.workers ?? []).map((w) => w.id)];
  if (!ids.includes(member))
    throw badRequest('unknown_member', `no member or worker ${member} in this cluster (${ids.join(', ')})`, {
      field: 'member',
      member,
    });
  findProcess(state, member);
  return { action: action as 'kill' | 'restart' | 'pause' | 'resume', member };
}

async function runFault(state: ClusterState, dataDir: string, fault: Fault): Promise<ActionResult> {
  switch (fault.action) {
    case 'kill':
    case 'pause':
    case 'resume':
      return signalProcess(state, fault.action, fault.member, 'dashboard');
    case 'restart':
      return restartProcess(state, fault.member, 'dashboard');
    case 'partition':
      return partitionMembers(state, clusterToken(dataDir), fault.sides, 'dashboard');
    case 'heal':
      return healMembers(state, clusterToken(dataDir), 'dashboard');
  }
}

/** The token of the cluster's members (its token file: what they were started with). */
function clusterToken(dataDir: string): string {
  return readFileSync(tokenPath(dataDir), 'utf8').trim();
}

/** The raw path's segments, percent-decoded ("." and ".." kept, for the handlers to refuse); 400 on bad encoding. */
function pathSegments(url: string): string[] {
  const raw = url.split('?')[0]!;
  try {
    return raw
      .split('/')
      .filter((s) => s.length > 0)
      .map((s) => decodeURIComponent(s));
  } catch {
    throw badRequest('invalid_path', 'the path is not valid percent-encoding');
  }
}

function sendFile(res: ServerResponse, path: string, cache: string): void {
  const size = statSync(path).size;
  res.writeHead(200, {
    'content-type': contentType(path),
    'content-length': size,
    'cache-control': cache,
    'x-content-type-options': 'nosniff',
  });
  if (res.req.method === 'HEAD') {
    res.end();
    return;
  }
  const stream = createReadStream(path);
  stream.on('error', () => res.destroy());
  stream.pipe(res);
}

/**
 * A request that changes something (a fault, a login) must come from this dashboard's own page or from a tool:
 * the cookie goes with any request the browser makes to this host, and SameSite=Strict alone is not all of it (a
 * page on another port of 127.0.0.1 is same-site). A browser names the page's origin, so another origin is refused
 * (403); and the body must be declared JSON (415 otherwise), which a cross-origin form or a no-preflight fetch
 * (text/plain) cannot declare.
 */
function refuseCrossSite(req: IncomingMessage): void {
  const origin = req.headers.origin;
  if (origin !== undefined && !sameHost(origin, req.headers.host)) {
    throw new HttpError(
      403,
      'forbidden_origin',
      `a change to the dashboard is made from its own page, not from ${origin.slice(0, 200)}`,
    );
  }
  const type = (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
  if (type !== 'application/json') {
    throw new HttpError(
      415,
      'unsupported_media_type',
      `send the body as application/json (got ${type === '' ? 'no content-type' : type.slice(0, 100)})`,
    );
  }
}

function sameHost(origin: string, host: string | undefined): boolean {
  try {
    return host !== undefined && new URL(origin).host === host;
  } catch {
    return false;
  }
}

function rawError(status: number, reason: string, code: string, message: string): string {
  const body = JSON.stringify({ error: { code, message } });
  return `HTTP/1.1 ${status} ${reason}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`;
}
