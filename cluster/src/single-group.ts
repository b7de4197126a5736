/**
 * The runtime of a member whose service is one group (kv, lock, ratelimit, shortlink, video's metadata): that group
 * is a RaftNode of its own on LevelDB and TCP, beside the service's endpoints, the endpoints every member serves
 * (member-admin.ts) and client sessions. A RaftNode of its own rather than a group of a GroupHost: a kv member
 * writes its entries with nothing shared to wait for, and its data folder keeps the layout it has always had.
 */
import { combineObservers, LevelStorage, RaftMetrics, RaftNode, TcpTransport, type SoftState } from '@raftkit/raft';
import { sessionTimeoutFromEnv } from './host-config.js';
import {
  badRequest,
  conflict,
  HttpError,
  jsonLogger,
  MetricsRegistry,
  oneGroupKind,
  raftErrorToHttp,
  processHttp,
  ServiceContext,
  unavailable,
  type ServiceDefinition,
} from '@raftkit/http';
import {
  MEMBER_PING_TICKS,
  MEMBER_QUIESCE_TICKS,
  readyAddresses,
  registerMemberRoutes,
  splitAddress,
  type MemberAdmin,
  type MemberOptions,
  type RunningMember,
} from './member-admin.js';

export async function startSingleGroupMember<C, R>(
  definition: ServiceDefinition<C, R>,
  options: MemberOptions,
): Promise<RunningMember> {
  let term = 0;
  const group = oneGroupKind(definition.kinds);
  if (group === null) throw new TypeError(`${definition.name} has no 'one group' kind`);
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
    stateMachine: group.createMachine(),
    bootstrap: options.bootstrap,
    peers: options.peers ?? {},
    forceNewCluster: options.forceNewCluster === true,
    tickMs: options.tickMs ?? 100,
    core: {
      quiesceTicks: MEMBER_QUIESCE_TICKS,
      ...(group.raft?.heartbeatTicks !== undefined ? { heartbeatTicks: group.raft.heartbeatTicks } : {}),
    },
    pingTicks: MEMBER_PING_TICKS,
    // As etcd: a snapshot encodes the whole state on the event loop, so taking one every 10,000 entries stalled
    // writes every few seconds under load (bench/RESULTS.md).
    snapshotEvery: options.snapshotEvery ?? 100_000,
    requestTimeoutMs: options.requestTimeoutMs ?? 5_000,
    followerWriteIntervalMs: group.raft?.followerWriteIntervalMs ?? 0,
    leaderWriteIntervalMs: group.raft?.leaderWriteIntervalMs ?? 0,
    forwardedResults: group.raft?.forwardedResults ?? false,
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
        logger.log('error', 'the state machine failed on an entry; it is skipped on every member', {
          index: entry.index,
          error: message,
        });
      },
      failed(error) {
        logger.log('error', 'storage failed: this member stopped taking part', { error: String(error.stack ?? error) });
        options.onFailure?.(error);
      },
    }),
  });
  raftMetrics.track(node);

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
      if (status.failed !== null)
        return { status: 'failing', role: status.role, leader: null, reason: `storage failed: ${status.failed}` };
      return { role: status.role, leader: node.leaderId };
    },
  });
  const router = http.router;
  const service = new ServiceContext<C, R>({ one: node, kind: group }, router, metrics, logger, definition.name);

  const admin: MemberAdmin = {
    status: () => statusBody(node),
    async addMember(id, address) {
      requireLeader(node);
      try {
        await node.addVoter(id, address);
      } catch (e) {
        throw membershipError(e);
      }
      return statusBody(node);
    },
    async removeMember(id) {
      requireLeader(node);
      try {
        await node.removeMember(id);
      } catch (e) {
        throw membershipError(e);
      }
      return statusBody(node);
    },
    async transferLeader(to) {
      requireLeader(node);
      if (!node.status().config.voters.includes(to))
        throw badRequest('invalid_field', `${to} is not a voter`, { field: 'to' });
      const moved = await node.transferLeadership(to);
      if (!moved) throw unavailable(`leadership did not move to ${to} in time`, 1);
      return { leader: to };
    },
    setBlocked: (ids) => transport.setBlocked(new Set(ids)),
  };
  registerMemberRoutes(router, admin, { tokens: options.tokens, logger });
  // Client sessions (idempotent writes) take any token of the cluster: client libraries open them with theirs.
  router.post('/v1/client-sessions', { admits: 'authenticated' }, async () => {
    if (node.leaderId === null) throw unavailable('no leader is known', 1);
    try {
      const result = await node.submit({ t: 'register', nonce: `${options.id}:${Date.now()}:${Math.random()}` });
      if (!result.ok || !('client' in result)) throw new HttpError(500, 'internal', 'registration failed');
      return { client_id: result.client };
    } catch (e) {
      throw raftErrorToHttp(e);
    }
  });
  definition.routes(service);

  const boundPort = await http.listen();
  logger.log('info', 'member ready', {
    ...readyAddresses(options, http.scheme, boundPort),
    tls: options.tls !== undefined,
  });
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
      .map((p) => ({
        id: p.id,
        match_index: p.match,
        next_index: p.next,
        state: p.state,
        learner: p.learner,
        active: p.recentActive,
      })),
  };
}

function requireLeader(node: { isLeader: boolean; leaderId: string | null }): void {
  if (node.isLeader) return;
  if (node.leaderId === null) throw unavailable('no leader is known', 1);
  throw new HttpError(421, 'not_leader', `send membership and leadership requests to the leader ${node.leaderId}`, {
    leader_id: node.leaderId,
  });
}

function membershipError(e: unknown): unknown {
  if (e instanceof Error && e.name === 'ConfigChangeError') return conflict('membership_refused', e.message);
  return raftErrorToHttp(e);
}
