/**
 * HTTP endpoints of the event log. Topics live in the meta group (one group record per partition); each partition
 * is its own Raft group on `replicas` of the processes. A request about a partition goes to a member that holds it
 * (any other answers 421 naming those that do; LogClient routes by itself); appends and commits are proposed there
 * (a follower forwards them to the leader), fetches read the local replica, which holds committed records only; a
 * follower with nothing at the offset sends the fetch to the leader (421), so a fetch always sees what was acknowledged.
 * See README.md for the contract.
 */
import {
  badRequest,
  conflict,
  forbidden,
  type ServiceContext,
  HttpError,
  notFound,
  SINGLE_THREADED_GC,
  SPACED_MAJOR_GC,
  Reply,
  requireInteger,
  requireObject,
  requireString,
  requireWellFormed,
  type ServiceDefinition,
  type OnRequestKind,
  type Principal,
  type RequestContext,
} from '@raftkit/http';
import type { ManagedGroupOptions, RaftNode } from '@raftkit/raft';
import {
  DEFAULT_RETENTION,
  GROUP_ID,
  MAX_KEY_CHARS,
  MAX_RECORDS_PER_APPEND,
  MAX_RETENTION_BYTES,
  MAX_VALUE_BYTES,
  PartitionMachine,
  PRODUCER_ID,
  recordSize,
  type AppendInput,
  type AppendResult,
  type PartitionCommand,
  type PartitionResult,
  type Retention,
} from '../machine.js';
import { AppendBatcher, type AppendRequest } from './append-batcher.js';
import {
  fetchRequestOf,
  serveLogRpc,
  type AppendAnswer,
  type FetchAnswer,
  type FetchRequest,
  type LogRpcHandlers,
} from './rpc-route.js';
import { GroupCoordinator } from './coordinator.js';
import { DEFAULT_MEMBER_TTL_MS, MAX_GROUP_SLOTS, MAX_MEMBER_TTL_MS, MIN_MEMBER_TTL_MS } from '../membership.js';
import {
  MAX_PARTITIONS,
  parsePartitionGroup,
  partitionData,
  partitionGroup,
  topicsOf,
  TOPIC_ACCESS,
  TOPIC_NAME,
  type PartitionData,
  type TopicAccess,
  type TopicInfo,
} from '../topics.js';

type PartitionNode = RaftNode<PartitionCommand, PartitionResult, PartitionMachine>;

/** Backpressure: appends this member is waiting on for one partition, beyond which it answers 429. */
export const MAX_PENDING_APPENDS = 2_000;
export const MAX_PENDING_BYTES = 32 * 1024 * 1024;
/** A leader whose applied index trails its commit index by more than this answers appends 429. */
const MAX_APPLY_BACKLOG = 20_000;
export const MAX_WAIT_MS = 30_000;

/** Per-process state of the service: long-poll waiters and appends in flight, by partition group. */
class PartitionWatch {
  private readonly waiters = new Map<string, Set<() => void>>();
  readonly pending = new Map<string, { count: number; bytes: number }>();

  notify(group: string): void {
    const set = this.waiters.get(group);
    if (set === undefined) return;
    this.waiters.delete(group);
    for (const wake of set) wake();
  }

  /** Resolves at the next apply on `group` or after `ms`, whichever comes first. */
  wait(group: string, ms: number, signal: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      let set = this.waiters.get(group);
      if (set === undefined) {
        set = new Set();
        this.waiters.set(group, set);
      }
      const done = (): void => {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        this.waiters.get(group)?.delete(done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      signal.addEventListener('abort', done);
      set.add(done);
    });
  }
}

export interface LogServiceOptions {
  /**
   * The access rule of a topic created without one (and of topics recorded before topics had one). Default
   * `client_write`: the log's own users read and write the topics they make. A service that keeps its queues on
   * the log (notify, feed) says `internal`, so its topics are its own processes' only.
   */
  defaultAccess?: TopicAccess;
}

/** The event log as a grouped service: one PartitionMachine per partition group. */
export function createLogService(options: LogServiceOptions = {}): ServiceDefinition {
  const watch = new PartitionWatch();
  const defaultAccess = options.defaultAccess ?? 'client_write';
  const partitions: OnRequestKind = {
    name: 'partition',
    provisioning: 'on request',
    includes: (name) => parsePartitionGroup(name) !== null,
    groupOptions: (name) => ({
      stateMachine: new PartitionMachine() as unknown as ManagedGroupOptions['stateMachine'],
      observer: { applied: () => watch.notify(name) },
    }),
    // The replicas of a topic created without `replicas`; its creator may ask for others (1..15).
    replicas: 3,
  };
  return {
    name: 'log',
    kinds: [partitions],
    // Every record a member appends stays in its machine (to the retention limit), as kv's writes do: garbage
    // collection on the member's own thread and major collections spaced out (README, Appends over the binary
    // route, has the measurement). Write pacing (PACED_WRITES) measured no better here and is left off.
    memberNodeFlags: [...SINGLE_THREADED_GC, ...SPACED_MAJOR_GC],
    routes: (service) => logRoutes(service, partitions, watch, defaultAccess),
  };
}

/** A partition a call names, checked: its topic, its number and its Raft group. */
interface PartitionTarget {
  topic: TopicInfo;
  partition: number;
  group: string;
}

/** What a call does to a topic: reads (fetch, offsets, description) or changes it (append, offset commit). */
type TopicUse = 'read' | 'write';

/**
 * 403 unless the caller may `use` the topic: the service's internal callers may do anything; a client token only
 * what the topic's access rule grants clients (see TopicAccess).
 */
function requireAccess(service: ServiceContext, principal: Principal | null, topic: TopicInfo, use: TopicUse): void {
  if (mayUse(service, principal, topic, use)) return;
  const name = principal?.name ?? 'none';
  if (topic.access === 'internal') {
    throw forbidden(
      `topic ${topic.name} is internal to ${service.service}: the cluster token or its own workers' token only, not ${name}`,
      { topic: topic.name, access: topic.access },
    );
  }
  throw forbidden(`clients may read topic ${topic.name} but not append to it or commit its offsets (${name})`, {
    topic: topic.name,
    access: topic.access,
  });
}

function mayUse(service: ServiceContext, principal: Principal | null, topic: TopicInfo, use: TopicUse): boolean {
  if (service.internal(principal)) return true;
  return topic.access === 'client_write' || (topic.access === 'client_read' && use === 'read');
}

function logRoutes(
  service: ServiceContext,
  partitionKind: OnRequestKind,
  watch: PartitionWatch,
  defaultAccess: TopicAccess,
): void {
  const managed = service.managed;
  const appended = service.metrics.counter('log_records_appended_total', 'Records appended through this member');
  const refused = service.metrics.counter(
    'log_appends_refused_total',
    'Appends refused by backpressure or sequence checks',
  );
  const batcher = new AppendBatcher();
  const coordinator = new GroupCoordinator(service);
  service.metrics
    .gauge(
      'log_append_entries_total',
      'Raft entries proposed for appends by this member (several appends of one turn share one)',
    )
    .set(() => batcher.entries);
  service.metrics
    .gauge('log_append_requests_batched_total', 'Appends this member proposed, alone or batched')
    .set(() => batcher.appends);

  const topicRecords = (topic: string) =>
    topicsOf(managed.catalog().groupsWithPrefix(partitionGroup(topic, 0).slice(0, -1)), defaultAccess).get(topic);

  // This member's copy of the meta group may not have applied a topic's creation yet (the create was answered by
  // another member): before answering 404, a read barrier brings it up to every create acknowledged so far.
  const findTopic = async (name: string) => {
    const local = topicRecords(name);
    if (local !== undefined) return local;
    await service.call(managed.meta, () => managed.meta.readBarrier());
    return topicRecords(name);
  };

  /** The partition a request names, once the caller is known to be allowed to `use` its topic. */
  const partitionOf = (ctx: RequestContext, use: TopicUse): Promise<PartitionTarget> =>
    partitionIn(ctx.principal, topicNameOf(ctx), ctx.params.partition ?? '', use);

  /** The partition `text` of topic `topicName`, once `principal` is known to be allowed to `use` the topic. */
  const partitionIn = async (
    principal: Principal | null,
    topicName: string,
    text: string,
    use: TopicUse,
  ): Promise<PartitionTarget> => {
    const topic = await findTopic(topicName);
    if (topic === undefined) throw notFound(`no topic ${topicName}`, { topic: topicName });
    requireAccess(service, principal, topic.info, use);
    if (!/^\d{1,9}$/.test(text))
      throw badRequest('invalid_partition', 'a partition is a number from 0', { field: 'partition' });
    const partition = Number(text);
    if (partition >= topic.info.partitions) {
      throw notFound(`topic ${topicName} has partitions 0..${topic.info.partitions - 1}`, {
        topic: topicName,
        partition: text,
      });
    }
    return { topic: topic.info, partition, group: partitionGroup(topicName, partition) };
  };

  /**
   * Appends a checked request to a partition this member holds: backpressure, the topic's retention first, then
   * the request joins this turn's entry of the partition (AppendBatcher). The HTTP route and the binary route share it.
   */
  const appendTo = async (
    { topic, partition, group }: PartitionTarget,
    node: PartitionNode,
    { records, producer, seq }: AppendRequest,
  ): Promise<AppendAnswer> => {
    const bytes = records.reduce((sum, r) => sum + recordSize(r), 0);
    const pending = watch.pending.get(group) ?? { count: 0, bytes: 0 };
    if (
      pending.count >= MAX_PENDING_APPENDS ||
      pending.bytes + bytes > MAX_PENDING_BYTES ||
      node.applyBacklog > MAX_APPLY_BACKLOG
    ) {
      refused.inc();
      throw new HttpError(
        429,
        'partition_behind',
        `partition ${partition} is behind (${pending.count} appends in flight here); retry shortly`,
        { partition },
        { 'retry-after': '1' },
      );
    }
    pending.count++;
    pending.bytes += bytes;
    watch.pending.set(group, pending);
    let result: AppendResult;
    try {
      // A partition's machine starts with the default retention; the topic's comes in a configure entry. Until
      // this member sees it applied, the configure goes into the log ahead of the append (it is idempotent), so
      // the first records of a topic are kept by its own limits, not the defaults until the periodic sync.
      const current = node.readLocal((m) => m.config);
      if (current.maxAgeMs !== topic.retention.maxAgeMs || current.maxBytes !== topic.retention.maxBytes) {
        await service.group(node).write({ op: 'configure', retention: topic.retention });
      }
      result = await service.call(node, () =>
        batcher.submit(group, (command) => node.propose(command), { records, producer, seq }, bytes),
      );
    } finally {
      pending.count--;
      pending.bytes -= bytes;
      if (pending.count === 0) watch.pending.delete(group);
    }
    if (result.op !== 'append') throw new HttpError(500, 'internal', 'unexpected result');
    if (!result.ok) {
      refused.inc();
      throw conflict(result.code, result.message, { partition, expected_seq: result.expected });
    }
    if (!result.duplicate) appended.inc(result.count);
    return { partition, base_offset: result.base, count: result.count, duplicate: result.duplicate };
  };

  /**
   * Records of a partition this member holds, from its local replica (which holds committed records only); with
   * `waitMs`, waits that long for one to arrive. The HTTP route and the binary route share it.
   */
  const fetchFrom = async (
    { partition, group }: PartitionTarget,
    node: PartitionNode,
    { offset, maxRecords, maxBytes, waitMs, linearizable }: FetchRequest,
    signal: AbortSignal,
  ): Promise<FetchAnswer> => {
    if (linearizable) await service.call(node, () => node.readBarrier());
    const deadline = Date.now() + waitMs;
    for (;;) {
      const result = node.readLocal((m) => m.fetch(offset, maxRecords, maxBytes));
      // A follower answers only what it holds: for an offset at or past its end it may simply not have applied
      // what the leader already acknowledged, so the caller is sent to the leader (an append acknowledged to a
      // client is then always seen by its next fetch), and long polls wait where appends land.
      if (result.records.length === 0 && !node.isLeader && !linearizable) tailOnLeader(node, group);
      const remaining = deadline - Date.now();
      if (result.records.length > 0 || remaining <= 0 || signal.aborted) {
        return {
          partition,
          records: result.records,
          next_offset: result.next,
          start_offset: result.start,
          end_offset: result.end,
        };
      }
      await watch.wait(group, remaining, signal);
    }
  };

  // Appends and fetches over the binary RPC transport (members/rpc-route.ts). Appends go to the partition's leader
  // only: a follower answers 421 naming the leader and the client sends that call over HTTP, which forwards and
  // routes. A fetch is answered by any replica of the partition, as over HTTP.
  const rpcHandlers: LogRpcHandlers = {
    append: async (principal, call) => {
      const target = await partitionIn(principal, call.topic, String(call.partition), 'write');
      const node = managed.group<PartitionCommand, PartitionResult, PartitionMachine>(target.group);
      if (node === undefined || !node.isLeader)
        throw new HttpError(421, 'misdirected', `this member does not lead ${target.group}`, {
          group: target.group,
          leader: node?.leaderId ?? null,
        });
      return appendTo(target, node as PartitionNode, appendRequestOf(call.body));
    },
    fetch: async (principal, call, signal) => {
      const target = await partitionIn(principal, call.topic, String(call.partition), 'read');
      const node = managed.group<PartitionCommand, PartitionResult, PartitionMachine>(target.group);
      if (node === undefined)
        throw new HttpError(421, 'misdirected', `this member holds no replica of ${target.group}`, {
          group: target.group,
        });
      return fetchFrom(target, node as PartitionNode, call.request, signal);
    },
  };
  serveLogRpc(service, rpcHandlers, MAX_WAIT_MS);

  const describeTopic = (info: TopicInfo, partitions: readonly { name: string; members: string[] }[]) => {
    const catalog = managed.catalog();
    return {
      name: info.name,
      partitions: info.partitions,
      replicas: info.replicas,
      retention: { max_age_ms: info.retention.maxAgeMs, max_bytes: info.retention.maxBytes },
      access: info.access,
      partition_groups: partitions.map((record, partition) => {
        const node = managed.group(record.name);
        return {
          partition,
          group: record.name,
          leader: node?.leaderId ?? null,
          members: record.members.map((id) => ({ id, url: catalog.host(id)?.http ?? null })),
        };
      }),
    };
  };

  // The meta group says what retention a topic has; each partition's leader brings its machine in line.
  const retentionSync = setInterval(() => {
    for (const record of managed.catalog().groupsWithPrefix('log.')) {
      const data = partitionData(record);
      const node = managed.group<PartitionCommand, PartitionResult, PartitionMachine>(record.name);
      if (data === null || node === undefined || !node.isLeader) continue;
      const current = node.readLocal((m) => m.config);
      if (current.maxAgeMs !== data.retention.maxAgeMs || current.maxBytes !== data.retention.maxBytes) {
        service
          .group(node)
          .write({ op: 'configure', retention: data.retention })
          .catch(() => undefined);
        continue;
      }
      // Appends trim as they go; an idle partition is trimmed by age here (the entry's time decides, on every member).
      const oldest = node.readLocal((m) => m.oldestTime);
      if (oldest !== null && oldest < Date.now() - current.maxAgeMs)
        service
          .group(node)
          .write({ op: 'trim' })
          .catch(() => undefined);
    }
  }, 1000);
  retentionSync.unref();
  service.onStop(() => clearInterval(retentionSync));

  service.router
    // The operator's, and the hosting service's own workers' (they make their queues as they start).
    .post('/v1/topics', { admits: 'service' }, async (ctx) => {
      const body = requireObject(await ctx.json());
      const name = requireString(body, 'name', { pattern: TOPIC_NAME });
      const access = body.access === undefined || body.access === null ? defaultAccess : accessOf(body.access);
      const partitions =
        body.partitions === undefined ? 1 : requireInteger(body, 'partitions', { min: 1, max: MAX_PARTITIONS });
      const replicas =
        body.replicas === undefined
          ? service.replicasOf(partitionKind)
          : requireInteger(body, 'replicas', { min: 1, max: 15 });
      const retention = retentionOf(body.retention);
      const info: TopicInfo = { name, partitions, replicas, retention, access };
      const groups = Array.from({ length: partitions }, (_, partition) => ({
        name: partitionGroup(name, partition),
        data: { ...info, partition } satisfies PartitionData as unknown as Record<string, unknown>,
      }));
      const meta = managed.meta;
      const { result } = await service.createGroups(partitionKind, groups, { replicas });
      if (!result.ok) {
        if (result.code === 'exists') {
          // A retried create of the same topic succeeds (the first may have been applied before its answer was lost).
          const existing = await service.call(meta, () =>
            managed.metaRead((m) => topicsOf(m.groupsWithPrefix(`log.${name}.`), defaultAccess).get(name)),
          );
          // A creator that chose no count takes the topic's: it may predate a change of the cluster's count.
          const asked =
            existing !== undefined && body.replicas === undefined
              ? { ...info, replicas: existing.info.replicas }
              : info;
          if (existing !== undefined && sameTopic(existing.info, asked))
            return new Reply(200, { ...describeTopic(existing.info, existing.partitions), created: false });
          // A deleted topic's name stays taken until every process has deleted its replicas (so none is reused).
          if (existing === undefined)
            throw new HttpError(
              409,
              'topic_being_deleted',
              `topic ${name} was deleted and some processes still hold its replicas: ${result.message}`,
              { topic: name },
              { 'retry-after': '1' },
            );
          throw conflict('topic_exists', `topic ${name} exists with other settings`, { topic: name });
        }
        if (result.code === 'no_hosts') throw badRequest('invalid_field', result.message, { field: 'replicas' });
        throw new HttpError(500, 'internal', result.message);
      }
      return new Reply(201, { ...describeTopic(info, result.groups), created: true });
    })
    // The topics the caller may read: an internal topic is not even listed to a client.
    .get('/v1/topics', { admits: 'authenticated' }, (ctx) => ({
      topics: [...topicsOf(managed.catalog().groupsWithPrefix('log.'), defaultAccess).values()]
        .filter((t) => mayUse(service, ctx.principal, t.info, 'read'))
        .map((t) => describeTopic(t.info, t.partitions)),
    }))
    .get('/v1/topics/:topic', { admits: 'authenticated' }, async (ctx) => {
      const name = topicNameOf(ctx);
      const topic = await findTopic(name);
      if (topic === undefined) throw notFound(`no topic ${name}`, { topic: name });
      requireAccess(service, ctx.principal, topic.info, 'read');
      return describeTopic(topic.info, topic.partitions);
    })
    .delete('/v1/topics/:topic', { admits: 'cluster' }, async (ctx) => {
      const name = topicNameOf(ctx);
      const topic = await findTopic(name);
      if (topic === undefined) throw notFound(`no topic ${name}`, { topic: name });
      const result = await service.call(managed.meta, () =>
        managed.proposeMeta({ t: 'drop', names: topic.partitions.map((p) => p.name) }),
      );
      if (!result.ok) throw notFound(result.message, { topic: name });
      return { name, deleted: true };
    })
    .post('/v1/topics/:topic/partitions/:partition/records', { admits: 'authenticated' }, async (ctx) => {
      const target = await partitionOf(ctx, 'write');
      const request = appendRequestOf(requireObject(await ctx.json()));
      const node = service.requireGroup<PartitionCommand, PartitionResult, PartitionMachine>(
        ctx,
        target.group,
      ) as PartitionNode;
      return appendTo(target, node, request);
    })
    .get('/v1/topics/:topic/partitions/:partition/records', { admits: 'authenticated' }, async (ctx) => {
      const target = await partitionOf(ctx, 'read');
      const request = fetchRequestOf(
        (name, fallback, min, max) => queryInteger(ctx, name, fallback, min, max),
        ctx.query.get('consistency') ?? undefined,
        MAX_WAIT_MS,
      );
      const node = service.requireGroup<PartitionCommand, PartitionResult, PartitionMachine>(
        ctx,
        target.group,
      ) as PartitionNode;
      return fetchFrom(target, node, request, closedSignal(ctx));
    })
    .get('/v1/topics/:topic/partitions/:partition', { admits: 'authenticated' }, async (ctx) => {
      const { partition, group } = await partitionOf(ctx, 'read');
      const node = service.requireGroup<PartitionCommand, PartitionResult, PartitionMachine>(
        ctx,
        group,
      ) as PartitionNode;
      const s = node.status();
      return node.readLocal((m) => ({
        partition,
        group,
        member: managed.id,
        role: s.role,
        leader: s.leader,
        term: s.term,
        commit: s.commit,
        applied: s.applied,
        start_offset: m.start,
        end_offset: m.end,
        bytes: m.heldBytes,
        producers: m.producerCount(),
        retention: { max_age_ms: m.config.maxAgeMs, max_bytes: m.config.maxBytes },
        consumer_groups: Object.fromEntries(m.groups()),
      }));
    })
    .post('/v1/topics/:topic/partitions/:partition/offsets/:group', { admits: 'authenticated' }, async (ctx) => {
      const { partition, group } = await partitionOf(ctx, 'write');
      const consumerGroup = consumerGroupOf(ctx);
      const body = requireObject(await ctx.json());
      const offset = requireInteger(body, 'offset', { min: 0 });
      const expect =
        body.expect === undefined || body.expect === null ? null : requireInteger(body, 'expect', { min: 0 });
      const generation =
        body.generation === undefined || body.generation === null
          ? null
          : requireInteger(body, 'generation', { min: 0 });
      const node = service.requireGroup<PartitionCommand, PartitionResult, PartitionMachine>(
        ctx,
        group,
      ) as PartitionNode;
      const result = await service
        .group(node)
        .write({ op: 'commit', group: consumerGroup, offset, expect, generation });
      if (result.op !== 'commit') throw new HttpError(500, 'internal', 'unexpected result');
      if (!result.ok) {
        if (result.code === 'offset_out_of_range')
          throw badRequest(result.code, result.message, { field: 'offset', partition });
        throw conflict(result.code, result.message, { partition, current: result.current });
      }
      return { partition, group: consumerGroup, offset: result.offset };
    })
    .get('/v1/topics/:topic/partitions/:partition/offsets/:group', { admits: 'authenticated' }, async (ctx) => {
      const { partition, group } = await partitionOf(ctx, 'read');
      const consumerGroup = consumerGroupOf(ctx);
      const node = service.requireGroup<PartitionCommand, PartitionResult, PartitionMachine>(
        ctx,
        group,
      ) as PartitionNode;
      // Linearizable: a consumer resuming after a failover reads the last offset committed anywhere.
      const committed = await service.call(node, () => node.read((m) => m.committed(consumerGroup)));
      return { partition, group: consumerGroup, offset: committed };
    })
    // Consumer-group membership lives on the topic's partition 0 (its coordinator); see membership.ts.
    .post('/v1/topics/:topic/groups/:group/members/:member', { admits: 'authenticated' }, async (ctx) => {
      const { node, consumerGroup, member } = await coordinatorOf(ctx);
      const body = requireObject(await ctx.json());
      const slots = requireInteger(body, 'slots', { min: 0, max: MAX_GROUP_SLOTS });
      const ttlMs =
        body.ttl_ms === undefined
          ? DEFAULT_MEMBER_TTL_MS
          : requireInteger(body, 'ttl_ms', { min: MIN_MEMBER_TTL_MS, max: MAX_MEMBER_TTL_MS });
      return coordinator.heartbeat(node, partitionGroup(topicNameOf(ctx), 0), consumerGroup, member, slots, ttlMs);
    })
    .delete('/v1/topics/:topic/groups/:group/members/:member', { admits: 'authenticated' }, async (ctx) => {
      const { node, consumerGroup, member } = await coordinatorOf(ctx);
      const result = await coordinator.leave(node, partitionGroup(topicNameOf(ctx), 0), consumerGroup, member);
      return { group: consumerGroup, member, left: result.left, generation: result.generation };
    });

  /** The coordinator of a consumer group of a topic: its partition 0, checked as an offset commit is. */
  async function coordinatorOf(
    ctx: RequestContext,
  ): Promise<{ node: PartitionNode; consumerGroup: string; member: string }> {
    const topicName = topicNameOf(ctx);
    const topic = await findTopic(topicName);
    if (topic === undefined) throw notFound(`no topic ${topicName}`, { topic: topicName });
    requireAccess(service, ctx.principal, topic.info, 'write');
    const consumerGroup = consumerGroupOf(ctx);
    const member = ctx.params.member ?? '';
    if (!GROUP_ID.test(member))
      throw badRequest('invalid_member', 'a member id is 1..128 of A-Z a-z 0-9 . _ : -', { field: 'member' });
    const node = service.requireGroup<PartitionCommand, PartitionResult, PartitionMachine>(
      ctx,
      partitionGroup(topicName, 0),
    ) as PartitionNode;
    return { node, consumerGroup, member };
  }
}

function topicNameOf(ctx: RequestContext): string {
  const name = ctx.params.topic ?? '';
  if (!TOPIC_NAME.test(name))
    throw badRequest('invalid_topic', `a topic name is 1..100 of A-Z a-z 0-9 _ -`, { field: 'topic' });
  return name;
}

function consumerGroupOf(ctx: RequestContext): string {
  const group = ctx.params.group ?? '';
  if (!GROUP_ID.test(group))
    throw badRequest('invalid_group', 'a consumer group id is 1..128 of A-Z a-z 0-9 . _ : -', { field: 'group' });
  return group;
}

function accessOf(value: unknown): TopicAccess {
  if (typeof value !== 'string' || !(TOPIC_ACCESS as readonly string[]).includes(value)) {
    throw badRequest('invalid_field', `access must be one of ${TOPIC_ACCESS.join(', ')}`, { field: 'access' });
  }
  return value as TopicAccess;
}

function retentionOf(value: unknown): Retention {
  if (value === undefined || value === null) return { ...DEFAULT_RETENTION };
  const r = requireObject(value, 'retention');
  return {
    maxAgeMs:
      r.max_age_ms === undefined
        ? DEFAULT_RETENTION.maxAgeMs
        : retentionInteger(r.max_age_ms, 'max_age_ms', 1000, Number.MAX_SAFE_INTEGER),
    maxBytes:
      r.max_bytes === undefined
        ? DEFAULT_RETENTION.maxBytes
        : retentionInteger(r.max_bytes, 'max_bytes', 1024, MAX_RETENTION_BYTES),
  };
}

function retentionInteger(value: unknown, name: string, min: number, max: number): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < min || value > max) {
    throw badRequest('invalid_field', `retention.${name} must be an integer from ${min} to ${max}`, {
      field: `retention.${name}`,
    });
  }
  return value;
}

/** The records, producer and sequence of an append's body (the HTTP route's JSON, the binary route's call). */
function appendRequestOf(body: Record<string, unknown>): AppendRequest {
  const records = recordsOf(body.records);
  const producer =
    body.producer === undefined || body.producer === null
      ? null
      : requireString(body, 'producer', { pattern: PRODUCER_ID });
  const seq = producer === null ? null : requireInteger(body, 'seq', { min: 0 });
  if (producer === null && body.seq !== undefined && body.seq !== null)
    throw badRequest('invalid_field', 'seq needs a producer', { field: 'seq' });
  return { records, producer, seq };
}

function recordsOf(value: unknown): AppendInput[] {
  if (!Array.isArray(value) || value.length === 0 || value.length > MAX_RECORDS_PER_APPEND) {
    throw badRequest('invalid_field', `records must be a list of 1..${MAX_RECORDS_PER_APPEND} records`, {
      field: 'records',
    });
  }
  return value.map((item, i) => {
    const field = `records[${i}]`;
    const r = requireObject(item, field);
    const v = r.value;
    if (typeof v !== 'string')
      throw badRequest('invalid_field', `${field}.value must be a string`, { field: `${field}.value` });
    if (Buffer.byteLength(v) > MAX_VALUE_BYTES)
      throw badRequest('invalid_field', `${field}.value is over ${MAX_VALUE_BYTES} bytes`, { field: `${field}.value` });
    requireWellFormed(v, `${field}.value`);
    const k = r.key;
    if (k !== undefined && k !== null && (typeof k !== 'string' || k.length > MAX_KEY_CHARS)) {
      throw badRequest(
        'invalid_field',
        `${field}.key must be a string of at most ${MAX_KEY_CHARS} characters, or null`,
        { field: `${field}.key` },
      );
    }
    if (typeof k === 'string') requireWellFormed(k, `${field}.key`);
    return { key: typeof k === 'string' ? k : null, value: v };
  });
}

function queryInteger(ctx: RequestContext, name: string, fallback: number, min: number, max: number): number {
  const text = ctx.query.get(name);
  if (text === null) return fallback;
  const n = Number(text);
  if (!/^\d+$/.test(text) || !Number.isSafeInteger(n) || n < min || n > max) {
    throw badRequest('invalid_query', `${name} must be an integer from ${min} to ${max}`, { field: name });
  }
  return n;
}

/** Aborted when the client goes away, so a long poll stops waiting for nobody. */
function closedSignal(ctx: RequestContext): AbortSignal {
  const controller = new AbortController();
  ctx.res.once('close', () => controller.abort());
  return controller.signal;
}

function sameTopic(a: TopicInfo, b: TopicInfo): boolean {
  return (
    a.partitions === b.partitions &&
    a.replicas === b.replicas &&
    a.retention.maxAgeMs === b.retention.maxAgeMs &&
    a.retention.maxBytes === b.retention.maxBytes &&
    a.access === b.access
  );
}

/**
 * A fetch a follower cannot answer in full (nothing at the offset): 421 naming the leader's holder list, with the
 * leader in the answer's group-leader header, so a router retries there; 503 while the group has no leader.
 */
function tailOnLeader(node: PartitionNode, group: string): void {
  if (node.leaderId === null)
    throw new HttpError(
      503,
      'unavailable',
      'the partition has no leader yet: it is electing one',
      { group },
      { 'retry-after': '1' },
    );
  throw new HttpError(
    421,
    'misdirected',
    `this replica holds nothing at that offset yet; ask the partition's leader, ${node.leaderId}`,
    { group, leader: node.leaderId },
  );
}
