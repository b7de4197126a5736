/**
 * The contract for a service's processes that are not Raft members (application servers, counter stores, click
 * streams...). `cluster up` starts them after the members have a leader, records them beside the members, and
 * `cluster kill|pause|resume|restart|logs <id>` work on them as on members. A worker is stateless towards Raft:
 * it reaches the members over their HTTP API.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from './log.js';
import type { MetricsRegistry } from './metrics.js';
import { processHttp, type ProcessHttp } from './process-http.js';

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
  /**
   * The service the worker belongs to (`cluster up --service`): its router admits that service's service token
   * (deriveServiceToken) as an internal caller. Absent (a worker started by hand in a test): none is admitted.
   */
  service?: string;
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
  /**
   * Flags for the node process the launcher starts this role in (e.g. a larger young generation for a role whose
   * latency must not wait on frequent scavenges). Default none.
   */
  nodeFlags?: readonly string[];
  /**
   * The place (1-based) the role's ports begin at in the service's worker block; default the next free place
   * after the roles listed before it. For a role whose ports are the service's public endpoints (they must not
   * move when a role is added before it), and for a role added later that stays out of their way.
   */
  slot?: number;
  start(options: WorkerOptions): Promise<RunningWorker>;
}

/** A service's processes besides its Raft members, started in this order (dependencies first). */
export type WorkerRoles = readonly WorkerRole[];

export type WorkerHttp = Omit<ProcessHttp, 'listen'> & { port: number };

/** A worker's HTTP side (see processHttp), listening; its /healthz names its role. */
export async function serveWorkerHttp(
  options: WorkerOptions,
  setup: {
    fastPath?: (req: IncomingMessage, res: ServerResponse) => boolean;
    health?: () => Record<string, unknown>;
    /** The registry /metrics renders, when the worker built its parts (and their metrics) before listening. */
    metrics?: MetricsRegistry;
    /** The connections its listener may hold, instead of its share of the file limit (tests, small machines). */
    connectionBudget?: number;
  } = {},
): Promise<WorkerHttp> {
  const health = setup.health;
  const http = processHttp({
    id: options.id,
    httpAddress: options.httpAddress,
    tokens: options.tokens,
    ...(options.service !== undefined ? { service: options.service } : {}),
    logger: options.logger,
    ...(setup.metrics !== undefined ? { metrics: setup.metrics } : {}),
    ...(setup.fastPath !== undefined ? { fastPath: setup.fastPath } : {}),
    ...(setup.connectionBudget !== undefined ? { connectionBudget: setup.connectionBudget } : {}),
    health: () => ({ role: options.role, ...health?.() }),
  });
  const port = await http.listen();
  return {
    router: http.router,
    metrics: http.metrics,
    server: http.server,
    scheme: http.scheme,
    connections: http.connections,
    port,
    close: http.close,
  };
}
