/**
 * One member of one service's cluster: a RaftNode on LevelDB and TCP, the service's endpoints, and the
 * endpoints every member serves (health, metrics, status, client sessions, membership and fault control).
 */
import { combineObservers, LevelStorage, RaftMetrics, RaftNode, TcpTransport, type SoftState } from '@raftkit/raft';
import { sessionTimeoutFromEnv } from './host-config.js';
import {
  badRequest,
  conflict,
  HttpError,
  jsonLogger,
  MetricsRegistry,
  raftErrorToHttp,
  requireObject,
  requireString,
  deriveClientToken,
  hostPort,
  processHttp,
  Reply,
  ServiceContext,
  unavailable,
  type Logger,
  type ServiceDefinition,
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
}

export interface RunningMember {
  node: { stop(): Promise<void> };
  httpPort: number;
  /** The member's current Raft term (for log lines). */
  term(): number;
  stop(): Promise<void>;
}

const NODE_ID = /^[A-Za-z0-9._-]{1,64}$/;

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

export async function startMember<C, R>(definition: ServiceDefinition<C, R>, options: MemberOptions): Promise<RunningMember> {
  let term = 0;
  const logger = options.logger ?? jsonLogger(() => ({ member: options.id, term, service: definition.name }));
  const metrics = new MetricsRegistry();
  const raftMetrics = new RaftMetrics(metrics);
  let lastLeader: string | null = null;
  const [host, port] = splitAddress(options.raftAddress);
  // The cluster token is the members' shared secret; the transport derives its own key from it (see its docs).
  const transport = new TcpTransport({
    id: options.id,
    listen: { host, port },
    secret: options.tokens[0] ?? '',
    ...(options.tls !== undefined ? { tls: options.tls } : {}),
    logger,
  });
  const sessions = sessionTimeoutFromEnv();
  const node = await RaftNode.start<C, R>({
    id: options.id,
    storage: new LevelStorage(options.dataDir),
    transport,
    stateMachine: definition.createMachine(),
    bootstrap: options.bootstrap,
    peers: options.peers ?? {},
    forceNewCluster: options.forceNewCluster === true,
    tickMs: options.tickMs ?? 100,
    core: { quiesceTicks: MEMBER_QUIESCE_TICKS, ...(definition.raft?.heartbeatTicks !== undefined ? { heartbeatTicks: definition.raft.heartbeatTicks } : {}) },
    pingTicks: MEMBER_PING_TICKS,
    // As etcd: a snapshot encodes the whole state on the event loop, so taking one every 10,000 entries stalled
    // writes every few seconds under load (bench/RESULTS.md).
    snapshotEvery: options.snapshotEvery ?? 100_000,
    requestTimeoutMs: options.requestTimeoutMs ?? 5_000,
    followerWriteIntervalMs: definition.raft?.followerWriteIntervalMs ?? 0,
    leaderWriteIntervalMs: definition.raft?.leaderWriteIntervalMs ?? 0,
    forwardedResults: definition.raft?.forwardedResults ?? false,
    ...(sessions !== undefined ? { sessions } : {}),
    observer: combineObservers(raftMetrics.observer, {
      stateChanged(state: SoftState) {
        if (state.leader !== lastLeader) {
          logger.log('info', 'leader changed', { leader: state.leader, role: state.role, term: state.term });
          lastLeader = state.leader;
        }
        term = state.term;
      },
      snapshotSaved(bytes, index) {
        logger.log('info', 'snapshot saved', { bytes, index });
      },
      applyFailed(entry, message) {
        logger.log('error', 'the state machine failed on an entry; it is skipped on every member', { index: entry.index, error: message });
      },
      failed(error) {
        logger.log('error', 'storage failed: this member stopped taking part', { error: String(error.stack ?? error) });
        options.onFailure?.(error);
      },
    }),
  });
  raftMetrics.track(node);

  // Who may call what is declared on each route (see "Security model" in the root README): status and client
  // sessions take any token of the cluster (client libraries find the leader and open sessions with theirs);
  // membership, faults, token issuing and the route table take the cluster token only.
  const http = processHttp({
    id: options.id,
    httpAddress: options.httpAddress,
    ...(options.tls !== undefined ? { tls: options.tls } : {}),
    tokens: options.tokens,
    service: definition.name,
    logger,
    metrics,
    health: () => {
      const status = node.status();
      if (status.failed !== null) return { status: 'failing', role: status.role, leader: null, reason: `storage failed: ${status.failed}` };
      return { role: status.role, leader: node.leaderId };
    },
  });
  const router = http.router;
  const service = new ServiceContext<C, R>(node, router, metrics, logger);

  router
    .get('/v1/cluster/status', { admits: 'authenticated' }, () => statusBody(node))
    .post('/v1/tokens', { admits: 'cluster' }, async (ctx) => {
      const body = requireObject(await ctx.json());
      const client = requireString(body, 'client');
      return new Reply(201, { client, token: deriveClientToken(options.tokens[0]!, client) });
    })
    .post('/v1/client-sessions', { admits: 'authenticated' }, async () => {
      if (node.leaderId === null) throw unavailable('no leader is known', 1);
      try {
        const result = await node.submit({ t: 'register', nonce: `${options.id}:${Date.now()}:${Math.random()}` });
        if (!result.ok || !('client' in result)) throw new HttpError(500, 'internal', 'registration failed');
        return { client_id: result.client };
      } catch (e) {
        throw raftErrorToHttp(e);
      }
    })
    .post('/v1/cluster/members', { admits: 'cluster' }, async (ctx) => {
      const body = requireObject(await ctx.json());
      const id = requireString(body, 'id', { pattern: NODE_ID });
      const address = requireString(body, 'address', { minLength: 3, maxLength: 300 });
      splitAddress(address);
      requireLeader(node);
      try {
        await node.addVoter(id, address);
      } catch (e) {
        throw membershipError(e);
      }
      return statusBody(node);
    })
    .delete('/v1/cluster/members/:id', { admits: 'cluster' }, async (ctx) => {
      requireLeader(node);
      try {
        await node.removeMember(ctx.params.id!);
      } catch (e) {
        throw membershipError(e);
      }
      return statusBody(node);
    })
    .post('/v1/cluster/transfer-leader', { admits: 'cluster' }, async (ctx) => {
      const body = requireObject(await ctx.json());
      const to = requireString(body, 'to', { pattern: NODE_ID });
      requireLeader(node);
      if (!node.status().config.voters.includes(to)) throw badRequest('invalid_field', `${to} is not a voter`, { field: 'to' });
      const moved = await node.transferLeadership(to);
      if (!moved) throw unavailable(`leadership did not move to ${to} in time`, 1);
      return { leader: to };
    })
    .put('/v1/cluster/partition', { admits: 'cluster' }, async (ctx) => {
      const body = requireObject(await ctx.json());
      const blocked = body.blocked;
      if (!Array.isArray(blocked) || !blocked.every((b) => typeof b === 'string')) {
        throw badRequest('invalid_field', 'blocked must be a list of member ids', { field: 'blocked' });
      }
      transport.setBlocked(new Set(blocked as string[]));
      logger.log('warn', 'links cut', { blocked });
      return { blocked };
    })
    .delete('/v1/cluster/partition', { admits: 'cluster' }, () => {
      transport.setBlocked(new Set());
      logger.log('warn', 'links healed');
      return { blocked: [] };
    });
  definition.routes(service);

  const boundPort = await http.listen();
  logger.log('info', 'member ready', { ...readyAddresses(options, http.scheme, boundPort), tls: options.tls !== undefined });
  return {
    node,
    httpPort: boundPort,
    term: () => node.status().term,
    async stop() {
      service.stop();
      await http.close();
      await node.stop();
    },
  };
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

function statusBody<C, R>(node: RaftNode<C, R>): Record<string, unknown> {
  const s = node.status();
  return {
    id: s.id,
    role: s.role,
    term: s.term,
    leader_id: s.leader,
    commit_index: s.commit,
    applied_index: s.applied,
    last_log_index: s.lastIndex,
    snapshot_index: s.snapshotIndex,
    voters: s.config.voters,
    learners: s.config.learners,
    peers: s.peers
      .filter((p) => p.id !== s.id)
      .map((p) => ({ id: p.id, match_index: p.match, next_index: p.next, state: p.state, learner: p.learner, active: p.recentActive })),
  };
}

function requireLeader(node: { isLeader: boolean; leaderId: string | null }): void {
  if (node.isLeader) return;
  if (node.leaderId === null) throw unavailable('no leader is known', 1);
  throw new HttpError(421, 'not_leader', `send membership and leadership requests to the leader ${node.leaderId}`, { leader_id: node.leaderId });
}

function membershipError(e: unknown): unknown {
  if (e instanceof Error && e.name === 'ConfigChangeError') return conflict('membership_refused', e.message);
  return raftErrorToHttp(e);
}

/** "host:port" -> [host, port]; a 400 naming the address when malformed. */
export function splitAddress(address: string): [string, number] {
  try {
    return hostPort(address);
  } catch {
    throw badRequest('invalid_address', `expected host:port, got ${JSON.stringify(address)}`, { field: 'address' });
  }
}
