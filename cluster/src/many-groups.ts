/**
 * The runtime of a member whose service declares kinds of many groups (log, collab, flash, auction, feed, notify): a
 * ManagedHost (one listener, one LevelDB, the meta group and every group the meta group gives this process), the
 * service's endpoints, the endpoints every member serves (member-admin.ts; status is the meta group's, with counts
 * of groups and leaders), and those of many groups: groups, hosts, catalog, leader balancing and spreading.
 */
import { ManagedHost, META_GROUP, RaftMetrics, type MetaResult, type RaftNode } from '@raftkit/raft';
import {
  badRequest,
  conflict,
  DEFAULT_REPLICAS,
  ServiceContext,
  groupOptionsOf,
  HttpError,
  jsonLogger,
  MetricsRegistry,
  processHttp,
  requireObject,
  unavailable,
  type OnRequestKind,
  type ServiceDefinition,
  parseJsonBody,
} from '@raftkit/http';
import { sessionTimeoutFromEnv } from './host-config.js';
import {
  MEMBER_PING_TICKS,
  NODE_ID,
  readyAddresses,
  registerMemberRoutes,
  splitAddress,
  type MemberAdmin,
  type MemberOptions,
  type RunningMember,
} from './member-admin.js';

/** RAFTKIT_PREFERRED_LEADER_DELAY_MS: milliseconds (0 .. 1 day); unset or not a number, the library's default. */
function preferredLeaderDelayMs(text: string | undefined): number | undefined {
  const ms = text === undefined ? NaN : Number(text);
  return Number.isInteger(ms) && ms >= 0 && ms <= 86_400_000 ? ms : undefined;
}

export async function startManyGroupsMember(
  definition: ServiceDefinition,
  options: MemberOptions,
): Promise<RunningMember> {
  // Each group of a grouped member would need its own forced configuration, and the meta group's placement of
  // them its own: not supported; such clusters recover from backups (docs/deployment.md).
  if (options.forceNewCluster === true)
    throw new Error('--force-new-cluster is for single-group services; restore a grouped service from backups');
  let term = 0;
  const logger = options.logger ?? jsonLogger(() => ({ member: options.id, term, service: definition.name }));
  const metrics = new MetricsRegistry();
  const joining = Object.keys(options.bootstrap).length === 0;
  const [raftHost, raftPort] = splitAddress(options.raftAddress);
  splitAddress(options.httpAddress);
  // The meta group records each process's advertised addresses: the others dial its Raft address and routers
  // (followers forwarding to a group's leader, workers) call its HTTP URL, https when the cluster runs TLS.
  const advertiseRaft = options.advertiseRaftAddress ?? options.raftAddress;
  const httpUrl = `${options.tls !== undefined ? 'https' : 'http'}://${options.advertiseHttpAddress ?? options.httpAddress}`;
  const sessions = sessionTimeoutFromEnv();
  const managed = await ManagedHost.open({
    id: options.id,
    listen: { host: raftHost, port: raftPort },
    secret: options.tokens[0] ?? '',
    ...(options.tls !== undefined ? { tls: options.tls } : {}),
    dataDir: options.dataDir,
    hosts: { ...(joining ? (options.peers ?? {}) : options.bootstrap), [options.id]: advertiseRaft },
    tickMs: options.tickMs ?? 100,
    ...(sessions !== undefined ? { sessions } : {}),
    pingTicks: MEMBER_PING_TICKS,
    metaMembers: joining ? [] : Object.keys(options.bootstrap),
    http: httpUrl,
    // An operator's (and tests') knob: how long a member leads a group before handing it to its preferred leader.
    preferredLeaderDelayMs: preferredLeaderDelayMs(process.env.RAFTKIT_PREFERRED_LEADER_DELAY_MS),
    logger,
    groupOptions: (name) => {
      const settings = groupOptionsOf(definition.kinds, name);
      return settings === null
        ? null
        : {
            requestTimeoutMs: options.requestTimeoutMs ?? 5_000,
            snapshotEvery: options.snapshotEvery ?? 100_000,
            ...settings,
          };
    },
    onError: (what, error) =>
      logger.log('warn', `reconcile: ${what} failed; retried`, { error: String((error as Error)?.message ?? error) }),
  });
  const meta = managed.meta;
  const raftMetrics = new RaftMetrics(metrics);
  raftMetrics.track(meta);
  const groupsGauge = metrics.gauge('raft_groups', 'Groups this process holds');
  const leadersGauge = metrics.gauge('raft_groups_led', 'Groups this process leads');
  // The service's groups, not counting the meta group every member runs (its role is the status row's role).
  const countGroups = (): { groups: number; leaders: number } => {
    const counts = managed.groupCounts();
    groupsGauge.set(counts.groups);
    leadersGauge.set(counts.leaders);
    return counts;
  };

  const http = processHttp({
    id: options.id,
    httpAddress: options.httpAddress,
    ...(options.tls !== undefined ? { tls: options.tls } : {}),
    tokens: options.tokens,
    service: definition.name,
    logger,
    metrics,
    health: () => {
      const status = meta.status();
      term = status.term;
      if (status.failed !== null)
        return { status: 'failing', role: status.role, leader: null, reason: `storage failed: ${status.failed}` };
      return { role: status.role, leader: meta.leaderId, ...countGroups() };
    },
  });
  const router = http.router;
  const firstKind = definition.kinds.find((k): k is OnRequestKind => k.provisioning === 'on request');
  const service = new ServiceContext({ managed }, router, metrics, logger, definition.name, options.replicas ?? null);

  const groupRow = (name: string, node: RaftNode<unknown, unknown>): Record<string, unknown> => {
    const s = node.status();
    return {
      group: name,
      member: options.id,
      role: s.role,
      leader: s.leader,
      term: s.term,
      commit: s.commit,
      applied: s.applied,
      last_index: s.lastIndex,
      voters: s.config.voters,
      learners: s.config.learners,
      quiesced: node.quiesced,
      // As the leader sees it: how far its slowest voter trails the commit index.
      lag:
        s.role === 'leader'
          ? Math.max(0, ...s.peers.filter((p) => p.id !== s.id && !p.learner).map((p) => s.commit - p.match))
          : null,
      // As the leader sees it: each follower's replication (match, next, mode, appends in flight).
      replication:
        s.role === 'leader'
          ? s.peers
              .filter((p) => p.id !== s.id)
              .map((p) => ({ id: p.id, match: p.match, next: p.next, state: p.state, inflight: p.inflight }))
          : null,
    };
  };

  const admin: MemberAdmin = {
    status() {
      const s = meta.status();
      term = s.term;
      return {
        id: s.id,
        role: s.role,
        term: s.term,
        leader_id: s.leader,
        commit_index: s.commit,
        applied_index: s.applied,
        last_index: s.lastIndex,
        voters: s.config.voters,
        learners: s.config.learners,
        group: META_GROUP,
        ...countGroups(),
        // What a group created now gets (its first kind's, the count a service's status speaks of), live hosts aside.
        replicas: options.replicas ?? firstKind?.replicas ?? DEFAULT_REPLICAS,
      };
    },
    async addMember(id, address) {
      // A new process: a learner of the meta group; POST /v1/cluster/spread then moves replicas onto it.
      await service.call(meta, () => managed.admit(id, address));
      return { id, address, meta: 'learner' };
    },
    async removeMember(id) {
      // Retire a process: every replica it holds moves to the others (the groups' leaders carry it out).
      const result = await service.call(meta, () => managed.proposeMeta({ t: 'retire', id, retiring: true }));
      if (!result.ok) throw conflict(result.code, result.message);
      // And out of the meta group itself (one single-server change), so its leader stops replicating to it.
      const config = meta.status().config;
      if (config.voters.includes(id) || config.learners.includes(id))
        await service.call(meta, () => meta.removeMember(id));
      return { id, retiring: true, moved: result.groups.map((g) => ({ group: g.name, members: g.members })) };
    },
    async transferLeader(to, body) {
      const name = typeof body.group === 'string' ? body.group : META_GROUP;
      const node = managed.group(name);
      if (node === undefined)
        throw new HttpError(404, 'group_not_found', `this member holds no group ${name}`, { group: name });
      if (!node.status().config.voters.includes(to))
        throw badRequest('invalid_field', `${to} is not a voter of ${name}`, { field: 'to' });
      const moved = await service.call(node, () => node.transferLeadership(to));
      if (!moved) throw unavailable(`leadership of ${name} did not move to ${to} in time`, 1);
      return { group: name, leader: to };
    },
    setBlocked: (ids) => managed.host.setBlocked(ids),
  };
  registerMemberRoutes(router, admin, { tokens: options.tokens, logger });
  router
    .get('/v1/cluster/groups', { admits: 'cluster' }, () => ({
      member: options.id,
      groups: managed.host.groupNames().map((name) => groupRow(name, managed.group(name)!)),
    }))
    .get('/v1/cluster/hosts', { admits: 'authenticated' }, () => ({
      hosts: managed
        .catalog()
        .hosts()
        .map((h) => ({ id: h.id, raft: h.raft, http: h.http, retiring: h.retiring })),
    }))
    .get('/v1/cluster/catalog', { admits: 'authenticated' }, async () => {
      const groups = await service.call(meta, () => managed.metaRead((m) => m.groups()));
      return { groups };
    })
    .post('/v1/cluster/balance', { admits: 'cluster' }, async (ctx) => {
      // Optional {leaders: {member: count}}: every member's own count, gathered by the caller (cluster balance).
      const text = (await ctx.text()).trim();
      const body = text.length === 0 ? {} : requireObject(parseJsonBody(text));
      let leaders: Record<string, number> | undefined;
      if (body.leaders !== undefined) {
        const given = body.leaders;
        if (typeof given !== 'object' || given === null || Array.isArray(given) || Object.keys(given).length > 1000) {
          throw badRequest('invalid_field', 'leaders must be an object of member id to count', { field: 'leaders' });
        }
        for (const [id, n] of Object.entries(given)) {
          if (!NODE_ID.test(id) || typeof n !== 'number' || !Number.isSafeInteger(n) || n < 0)
            throw badRequest('invalid_field', `leaders.${id.slice(0, 64)} must be a count`, { field: 'leaders' });
        }
        leaders = given as Record<string, number>;
      }
      const moved = await managed.balanceLeaders(leaders === undefined ? {} : { leaders });
      return { member: options.id, moved, ...countGroups() };
    })
    .post('/v1/cluster/spread', { admits: 'cluster' }, async () => {
      const result = await service.call(meta, () => managed.proposeMeta({ t: 'spread' }));
      return { moved: metaGroups(result).map((g) => ({ group: g.name, members: g.members })) };
    });
  definition.routes(service);

  const boundPort = await http.listen();
  logger.log('info', 'member ready', {
    ...readyAddresses(options, http.scheme, boundPort),
    tls: options.tls !== undefined,
    groups: managed.host.groupNames().length,
  });
  return {
    node: { stop: () => managed.close() },
    httpPort: boundPort,
    term: () => meta.status().term,
    async stop() {
      service.stop();
      await http.close();
      await managed.close();
    },
  };
}

function metaGroups(result: MetaResult): Array<{ name: string; members: string[] }> {
  if (!result.ok) throw conflict(result.code, result.message);
  return result.groups;
}
