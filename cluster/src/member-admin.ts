/**
 * What every member process shares, whichever way it runs its service's groups (single-group.ts: the one group as a
 * RaftNode of its own; many-groups.ts: a ManagedHost with the meta group and the groups it records): its options,
 * the ready line, and the control endpoints the cluster CLI drives (status, tokens, membership of processes,
 * leadership transfer, fault control), registered here once over a MemberAdmin that each runtime implements.
 */
import {
  badRequest,
  deriveClientToken,
  hostPort,
  Reply,
  requireObject,
  requireString,
  type Logger,
  type Router,
} from '@raftkit/http';

export interface MemberOptions {
  id: string;
  /** LevelDB directory of this member. */
  dataDir: string;
  /** host:port for Raft traffic. */
  raftAddress: string;
  /** host:port for the HTTP API. */
  httpAddress: string;
  /**
   * Where the other members dial this one's Raft listener, and clients and members call its HTTP API, when that
   * is not the listen address (listening on 0.0.0.0, behind a NAT or a container's port mapping). Default: the
   * listen addresses.
   */
  advertiseRaftAddress?: string;
  advertiseHttpAddress?: string;
  /**
   * Mutual TLS (PEM): the Raft transport's (the certificate must name this member id) and the HTTPS certificate
   * of its HTTP API, whose calls to other members trust `ca`.
   */
  tls?: { cert: string | Buffer; key: string | Buffer; ca: string | Buffer };
  /** Members of a new cluster (id -> raft address); empty when joining an existing one. */
  bootstrap: Record<string, string>;
  /** When joining: the raft addresses of the members already there. */
  peers?: Record<string, string>;
  /** Bearer tokens accepted on protected endpoints. */
  tokens: string[];
  tickMs?: number;
  snapshotEvery?: number;
  requestTimeoutMs?: number;
  logger?: Logger;
  /**
   * Storage failed and the member stopped taking part (see RaftNode's observer.failed): whoever runs it should
   * stop it and start it again from its durable state. Without this the member stays out, saying so on /healthz.
   */
  onFailure?: (error: Error) => void;
  /**
   * Recovery after losing a quorum (the library's forceNewCluster, etcd's --force-new-cluster): start as the only
   * voter on this member's stored log. For one start only (docs/deployment.md, "Recovering when a quorum...").
   */
  forceNewCluster?: boolean;
  /**
   * A grouped service's replica count for the groups it creates (`cluster up --set replicas=N`, recorded with the
   * cluster and given to every start of every member); absent: each kind's own (ServiceContext.replicasOf).
   */
  replicas?: number;
}

export interface RunningMember {
  node: { stop(): Promise<void> };
  httpPort: number;
  /** The member's current Raft term (for log lines). */
  term(): number;
  stop(): Promise<void>;
}

export const NODE_ID = /^[A-Za-z0-9._-]{1,64}$/;

/**
 * Idle members cost next to nothing (issue 39: the whole `make up` stack at rest). A member's group quiesces after
 * 2 s without work (20 ticks: every member caught up, nothing pending), as the groups of a GroupHost do: no ticks of
 * work and no heartbeats until a request or a message wakes it; a quiesced leader pings its followers instead.
 */
export const MEMBER_QUIESCE_TICKS = 20;

/**
 * Ticks between the liveness pings of quiesced groups (the leader's to its followers in a member of one group,
 * every process's to every other in a member of many): every 300 ms rather than every tick. A follower still wakes
 * after an election timeout (10 ticks) of silence from its leader's process, so a failover takes as long as before.
 */
export const MEMBER_PING_TICKS = 3;

/**
 * The control a member's runtime gives the shared endpoints. Each answer is the endpoint's body; refusals are
 * thrown as HTTP errors (421 not the leader, 409 a refused change, 503 no leader).
 */
export interface MemberAdmin {
  /** GET /v1/cluster/status. */
  status(): Record<string, unknown>;
  /** POST /v1/cluster/members: a new process, `id` at Raft `address` (both checked). */
  addMember(id: string, address: string): Promise<Record<string, unknown>>;
  /** DELETE /v1/cluster/members/{id}. */
  removeMember(id: string): Promise<Record<string, unknown>>;
  /** POST /v1/cluster/transfer-leader: `to` checked; the rest of the body as the runtime reads it (a group name). */
  transferLeader(to: string, body: Record<string, unknown>): Promise<Record<string, unknown>>;
  /** PUT and DELETE /v1/cluster/partition: the member ids whose Raft links are cut (none: healed). */
  setBlocked(ids: string[]): void;
}

/**
 * The control endpoints every member serves, whatever its runtime. Who may call what is declared on each route (see
 * "Security model" in the root README): status takes any token of the cluster (client libraries find the leader
 * with theirs); membership, faults and token issuing take the cluster token only.
 */
export function registerMemberRoutes(
  router: Router,
  admin: MemberAdmin,
  options: { tokens: string[]; logger: Logger },
): void {
  const { logger } = options;
  router
    .get('/v1/cluster/status', { admits: 'authenticated' }, () => admin.status())
    .post('/v1/tokens', { admits: 'cluster' }, async (ctx) => {
      const body = requireObject(await ctx.json());
      const client = requireString(body, 'client');
      return new Reply(201, { client, token: deriveClientToken(options.tokens[0]!, client) });
    })
    .post('/v1/cluster/members', { admits: 'cluster' }, async (ctx) => {
      const body = requireObject(await ctx.json());
      const id = requireString(body, 'id', { pattern: NODE_ID });
      const address = requireString(body, 'address', { minLength: 3, maxLength: 300 });
      splitAddress(address);
      return admin.addMember(id, address);
    })
    .delete('/v1/cluster/members/:id', { admits: 'cluster' }, (ctx) => admin.removeMember(ctx.params.id!))
    .post('/v1/cluster/transfer-leader', { admits: 'cluster' }, async (ctx) => {
      const body = requireObject(await ctx.json());
      const to = requireString(body, 'to', { pattern: NODE_ID });
      return admin.transferLeader(to, body);
    })
    .put('/v1/cluster/partition', { admits: 'cluster' }, async (ctx) => {
      const body = requireObject(await ctx.json());
      const blocked = body.blocked;
      if (!Array.isArray(blocked) || !blocked.every((b) => typeof b === 'string')) {
        throw badRequest('invalid_field', 'blocked must be a list of member ids', { field: 'blocked' });
      }
      admin.setBlocked(blocked as string[]);
      logger.log('warn', 'links cut', { blocked });
      return { blocked };
    })
    .delete('/v1/cluster/partition', { admits: 'cluster' }, () => {
      admin.setBlocked([]);
      logger.log('warn', 'links healed');
      return { blocked: [] };
    });
}

/** What the ready line says: the URL and Raft address others use (advertised), and the listen ones when they differ. */
export function readyAddresses(options: MemberOptions, scheme: string, boundPort: number): Record<string, string> {
  const [httpHost, httpPort] = splitAddress(options.httpAddress);
  const listenHttp = `${httpHost}:${httpPort === 0 ? boundPort : httpPort}`;
  const http = options.advertiseHttpAddress ?? listenHttp;
  const raft = options.advertiseRaftAddress ?? options.raftAddress;
  return {
    http: `${scheme}://${http}`,
    raft,
    ...(http !== listenHttp ? { listen_http: listenHttp } : {}),
    ...(raft !== options.raftAddress ? { listen_raft: options.raftAddress } : {}),
  };
}

/** "host:port" -> [host, port]; a 400 naming the address when malformed. */
export function splitAddress(address: string): [string, number] {
  try {
    return hostPort(address);
  } catch {
    throw badRequest('invalid_address', `expected host:port, got ${JSON.stringify(address)}`, { field: 'address' });
  }
}
