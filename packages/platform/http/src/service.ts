/**
 * The one context every service's routes get from the member process (ServiceContext), whatever runs its groups,
 * and the plumbing every service shares: writes through a group's replicated log with idempotent client sessions,
 * reads at the consistency the request asks for, and the mapping of Raft outcomes to HTTP answers (no leader or no
 * quorum is a 503 with Retry-After). The contract a service declares is in group-kinds.ts.
 */
import {
  ApplyError,
  CommandTooLargeError,
  type ManagedHost,
  type MetaResult,
  type RaftNode,
  SessionError,
  sessionFailure,
  StoppedError,
  TimeoutError,
  type StateMachine,
} from '@raftkit/raft';
import { isInternalCaller, type Principal } from './auth.js';
import { checkedCommand } from './command-route.js';
import { badRequest, conflict, HttpError, unavailable } from './errors.js';
import { DEFAULT_REPLICAS, type GroupKind, type OneGroupKind, type OnRequestKind } from './group-kinds.js';
import type { Logger } from './log.js';
import type { MetricsRegistry } from './metrics.js';
import { requirePrincipal, type Admission, type RequestContext, type Router } from './router.js';
import type { WorkerRoles } from './worker.js';

/** What a service gives the member process. */
export interface ServiceDefinition<C = unknown, R = unknown> {
  name: string;
  /**
   * Its kinds of group: either one kind provisioned as 'one group' (a single-group service), or kinds whose groups
   * are created on request (a group name no kind claims is left alone).
   */
  kinds: readonly GroupKind<C, R>[];
  /** Register the service's endpoints. */
  routes(service: ServiceContext<C, R>): void;
  /** Processes besides the Raft members (application servers, counter stores...), started by `cluster up`. */
  workers?: WorkerRoles;
  /** Node and V8 flags of the service's member processes (`cluster up` records them; every start of a member uses them). */
  memberNodeFlags?: readonly string[];
}

/**
 * One service made of several: each group name goes to the first kind that claims it, every part registers its
 * endpoints on the same members. A service that keeps its queues on the replicated event log hosts the log's
 * partitions in its own members this way (`combineServices('feed', [createLogService(), feedPart])`), so one
 * `cluster up` starts one set of processes and the log's endpoints and clients work on it unchanged.
 */
export function combineServices(name: string, parts: readonly ServiceDefinition[]): ServiceDefinition {
  const workers = parts.flatMap((part) => part.workers ?? []);
  // The member process runs every part, so it takes every part's flags (the event log's GC settings, say).
  const memberNodeFlags = [...new Set(parts.flatMap((part) => part.memberNodeFlags ?? []))];
  return {
    name,
    kinds: parts.flatMap((part) => part.kinds),
    routes(service: ServiceContext): void {
      for (const part of parts) part.routes(service);
    },
    ...(workers.length > 0 ? { workers } : {}),
    ...(memberNodeFlags.length > 0 ? { memberNodeFlags } : {}),
  };
}

/** Headers of an idempotent write: a client session from POST /v1/client-sessions and its sequence number. */
export const CLIENT_ID_HEADER = 'client-id';
export const CLIENT_SEQ_HEADER = 'client-seq';
export const CLIENT_ACK_HEADER = 'client-ack';

/** The response header naming the leader of the group a request was about, as this member knows it. */
export const GROUP_LEADER_HEADER = 'raft-leader';

/**
 * The groups behind a context, as the member process runs them: a one-group kind's RaftNode of its own, or a
 * ManagedHost whose meta group records the groups created on request. Routes never see the difference.
 */
export type ServiceGroups<C, R> = { one: RaftNode<C, R>; kind: OneGroupKind<C, R> } | { managed: ManagedHost };

/** A "propose this command" route: the command checked as the machine checks it, and the group it goes to. */
export interface CommandRoute<C, R> {
  admits: Admission;
  /** The command from the request body; throws CommandShapeError (answered 400 `invalid_command`) when malformed. */
  check(body: unknown): C;
  /**
   * The group the command goes to, on this member (usually requireGroup on a path parameter); a one-group service
   * leaves it out. Refuse a caller here before looking the group up, so a refused caller learns nothing of the
   * placement.
   */
  group?(ctx: RequestContext, command: C): RaftNode<C, R>;
  /** How the command is proposed, when not simply by `write` (an ordering of appends, an early answer). */
  propose?(ctx: RequestContext, node: RaftNode<C, R>, command: C, write: () => Promise<R>): Promise<unknown>;
}

/**
 * One group as a route uses it: writes through its log, reads at the consistency the request asks for, Raft
 * outcomes answered as HTTP (no leader or no quorum a 503 with Retry-After, an expired session 410...).
 */
export class ServiceGroup<C, R, M extends StateMachine<C, R> = StateMachine<C, R>> {
  constructor(
    readonly node: RaftNode<C, R, M>,
    /** The 503's words when no leader is known (a one-group service speaks of its cluster, a group of itself). */
    private readonly noLeader: string,
  ) {}

  /** The group's state machine on this member (for reads after a barrier). */
  get machine(): M {
    return this.node.readLocal((m) => m);
  }

  /**
   * Apply `command` through the log and return its result. With a request whose Client-Id and Client-Seq headers
   * name a client session, the write is idempotent across retries (to any member): its own session entry, which a
   * shared batch cannot be. Otherwise it is applied once per call, proposed by `viaBatch` when given (a service's
   * turn batcher, which proposes `command` with others of the same turn), else as an entry of its own.
   */
  async write(command: C, ctx?: RequestContext, viaBatch?: () => Promise<R>): Promise<R> {
    this.requireLeaderKnown();
    const session = ctx === undefined ? null : clientSession(ctx);
    try {
      if (session === null) return await (viaBatch === undefined ? this.node.propose(command) : viaBatch());
      const result = await this.node.submit({ t: 'command', ...session, command });
      if (!result.ok) throw sessionFailure(result);
      return (result as { result: R }).result;
    } catch (error) {
      throw raftErrorToHttp(error);
    }
  }

  /**
   * Wait until this member reflects every committed write; for a request that asks for a local read
   * (`consistency=serializable`), every write this member has answered (with forwardedResults a follower answers a
   * write from its leader's result, possibly before applying it), so a client sees its own writes on one member.
   */
  async readBarrier(ctx: RequestContext): Promise<void> {
    const consistency = ctx.query.get('consistency') ?? 'linearizable';
    if (consistency === 'serializable') return this.ownWritesApplied();
    if (consistency !== 'linearizable') {
      throw badRequest('invalid_query', 'consistency must be linearizable or serializable', { field: 'consistency' });
    }
    await this.call(() => this.node.readBarrier());
  }

  /** Wait until this member has applied every write it has answered (see readBarrier), before reading its state. */
  async ownWritesApplied(): Promise<void> {
    try {
      await this.node.ownWritesApplied();
    } catch (error) {
      throw raftErrorToHttp(error);
    }
  }

  /** Runs a Raft call on the group: a 503 while no leader is known, its errors mapped to HTTP answers. */
  async call<T>(work: () => Promise<T>): Promise<T> {
    this.requireLeaderKnown();
    try {
      return await work();
    } catch (error) {
      throw raftErrorToHttp(error);
    }
  }

  private requireLeaderKnown(): void {
    if (this.node.leaderId === null) throw unavailable(this.noLeader, 1);
  }
}

const ONE_GROUP_NO_LEADER = 'no leader is known: the cluster has no quorum or is electing one';
const GROUP_NO_LEADER = 'the group has no leader yet: it is electing one';

/**
 * What a service's routes get from the member process, whatever runs its groups: each group as a ServiceGroup
 * (`group()` for a one-group service, `group(name)` or `requireGroup(ctx, name)` for groups created on request),
 * `commandRoute`, `createGroups` for the kinds provisioned on request, `onStop`, the router, metrics and logger.
 */
export class ServiceContext<C = unknown, R = unknown> {
  private readonly stoppers: Array<() => void> = [];
  private readonly one: ServiceGroup<C, R> | null;

  constructor(
    private readonly groups: ServiceGroups<C, R>,
    readonly router: Router,
    readonly metrics: MetricsRegistry,
    readonly logger: Logger,
    /** The service these members serve (`notify`): its workers' service token is an internal caller. */
    readonly service: string,
    /**
     * The replica count the cluster set for the service's groups (`cluster up --set replicas=N`), or null: each
     * kind's own (see replicasOf).
     */
    readonly clusterReplicas: number | null = null,
  ) {
    this.one = 'one' in groups ? new ServiceGroup(groups.one, ONE_GROUP_NO_LEADER) : null;
  }

  /** Run `stop` when the member stops (background loops, open streams). */
  onStop(stop: () => void): void {
    this.stoppers.push(stop);
  }

  /** Called by the member process as it stops. */
  stop(): void {
    for (const stop of this.stoppers.splice(0)) stop();
  }

  /** The principal of an authenticated request (the router's before hook set it). */
  principal(ctx: RequestContext): Principal {
    return requirePrincipal(ctx);
  }

  /** Whether a request comes from an internal caller of this service: the cluster token or its workers' service token. */
  internal(principal: Principal | null): boolean {
    return isInternalCaller(principal, this.service);
  }

  /** The ManagedHost running the groups created on request (its meta group and catalogue); a TypeError otherwise. */
  get managed(): ManagedHost {
    if (!('managed' in this.groups)) throw new TypeError(`${this.service} runs one group: it has no meta group`);
    return this.groups.managed;
  }

  /**
   * A group as a ServiceGroup: no argument, the service's one group; a node (from requireGroup), that group; a
   * name, the group of that name on this member (404/421 as requireGroup).
   */
  group<C2 = C, R2 = R, M extends StateMachine<C2, R2> = StateMachine<C2, R2>>(
    which?: string | RaftNode<C2, R2, M>,
  ): ServiceGroup<C2, R2, M> {
    if (which === undefined) {
      if (this.one === null) throw new TypeError(`${this.service} has no 'one group' kind: name the group`);
      return this.one as unknown as ServiceGroup<C2, R2, M>;
    }
    const node = typeof which === 'string' ? this.locate<C2, R2, M>(which) : which;
    if (this.one !== null && (node as unknown) === this.one.node) return this.one as unknown as ServiceGroup<C2, R2, M>;
    return new ServiceGroup(node, GROUP_NO_LEADER);
  }

  /**
   * The group of that name, running on this member; otherwise a 421 `misdirected` naming the members that hold it
   * (`members: [{id, url}]`), a 503 while this member is placed in it but still starting its copy, or a 404 when
   * the meta group does not know it. Sets the leader header on `ctx`.
   */
  requireGroup<C2, R2, M extends StateMachine<C2, R2> = StateMachine<C2, R2>>(
    ctx: RequestContext,
    name: string,
  ): RaftNode<C2, R2, M> {
    const node = this.locate<C2, R2, M>(name);
    // Named when the answer leaves, not now: a call that waited through an election (a write forwarded from a
    // follower whose leader died) must name the new leader, or the client's router goes back to the dead one.
    const res = ctx.res;
    const writeHead = res.writeHead;
    res.writeHead = function (this: typeof res, ...args: Parameters<typeof writeHead>) {
      const leader = node.leaderId;
      if (leader !== null && !res.headersSent) res.setHeader(GROUP_LEADER_HEADER, leader);
      else if (leader === null) res.removeHeader(GROUP_LEADER_HEADER);
      return writeHead.apply(this, args);
    } as typeof writeHead;
    return node;
  }

  /**
   * Registers a POST route that writes the body's command (see CommandRoute) and answers its result. On a one-group
   * service the write takes the request's client-session headers (idempotent, as ServiceGroup.write); a group
   * created on request is written without them.
   */
  commandRoute(path: string, route: CommandRoute<C, R>): void;
  commandRoute<C2, R2>(
    path: string,
    route: CommandRoute<C2, R2> & { group(ctx: RequestContext, command: C2): RaftNode<C2, R2> },
  ): void;
  commandRoute<C2, R2>(path: string, route: CommandRoute<C2, R2>): void {
    // Refused when registered, not on each request: a route of groups created on request must say which group.
    if (route.group === undefined && this.one === null)
      throw new TypeError(`${path}: ${this.service} has no 'one group' kind, so the route must name its group`);
    this.router.post(path, { admits: route.admits }, async (ctx) => {
      const command = checkedCommand(await ctx.json(), route.check);
      if (route.group === undefined) return this.group<C2, R2>().write(command, ctx);
      const node = route.group(ctx, command);
      const write = (): Promise<R2> => this.group(node).write(command);
      return route.propose === undefined ? write() : route.propose(ctx, node, command, write);
    });
  }

  /** Processes registered in the catalogue and not retiring: where new replicas may go. */
  liveHosts(): number {
    return this.managed
      .catalog()
      .hosts()
      .filter((h) => !h.retiring).length;
  }

  /**
   * The replicas a new group of `kind` gets when its creator chooses none: the cluster's count, else the kind's,
   * else DEFAULT_REPLICAS; capped at the live processes (a 503 while none is registered). A group keeps the count it
   * was created with: a cluster started again with another count applies it to new groups only.
   */
  replicasOf(kind: OnRequestKind): number {
    const hosts = this.liveHosts();
    if (hosts < 1) throw unavailable('no hosts registered yet', 1);
    return Math.min(this.clusterReplicas ?? kind.replicas ?? DEFAULT_REPLICAS, hosts);
  }

  /**
   * Records new groups of an on-request `kind` in the meta group, each with replicasOf(kind) replicas (or `replicas`
   * when the caller chose one, as a topic's creator may). The meta group's answer is returned as it is: `exists`
   * when a group of that name is already recorded.
   */
  async createGroups(
    kind: OnRequestKind,
    groups: ReadonlyArray<{ name: string; data: Record<string, unknown> }>,
    options: { replicas?: number } = {},
  ): Promise<{ result: MetaResult; replicas: number }> {
    const bad = groups.find((g) => !kind.includes(g.name));
    if (bad !== undefined) throw new TypeError(`group ${bad.name} is not of kind ${kind.name}`);
    const replicas = options.replicas ?? this.replicasOf(kind);
    const planned = groups.map((g) => ({ name: g.name, replicas, data: g.data }));
    const managed = this.managed;
    const result = await this.call(managed.meta, () => managed.proposeMeta({ t: 'create', groups: planned }));
    return { result, replicas };
  }

  /** Runs a Raft call on a group (or the meta group), mapping its errors to HTTP answers (503 without a leader...). */
  async call<T>(node: RaftNode<unknown, unknown> | { leaderId: string | null }, work: () => Promise<T>): Promise<T> {
    if (node.leaderId === null) throw unavailable(GROUP_NO_LEADER, 1);
    try {
      return await work();
    } catch (error) {
      throw raftErrorToHttp(error);
    }
  }

  /** The group of that name on this member, or the 421/404 that says where it is (see requireGroup). */
  private locate<C2, R2, M extends StateMachine<C2, R2>>(name: string): RaftNode<C2, R2, M> {
    if ('one' in this.groups) {
      if (name === this.groups.kind.name) return this.groups.one as unknown as RaftNode<C2, R2, M>;
      throw new HttpError(404, 'group_not_found', `no group ${name}`, { group: name });
    }
    const node = this.groups.managed.group<C2, R2, M>(name);
    if (node !== undefined) return node;
    const catalog = this.groups.managed.catalog();
    const record = catalog.group(name);
    if (record === undefined)
      throw new HttpError(404, 'group_not_found', `no group ${name} (yet: the meta group may still be applying it)`, {
        group: name,
      });
    // Placed here but not started yet: the meta group applied the placement and the host is still opening its copy
    // (a group created a moment ago). Sending the client elsewhere would point it back here.
    if (record.members.includes(this.groups.managed.id))
      throw unavailable(`this member holds ${name} and is still starting its copy; retry`, 1);
    const members = record.members.map((id) => ({ id, url: catalog.host(id)?.http ?? null }));
    throw new HttpError(421, 'misdirected', `this member does not hold ${name}; ask one that does`, {
      group: name,
      members,
    });
  }
}

function clientSession(ctx: RequestContext): { client: string; seq: number; ack: number } | null {
  const client = ctx.req.headers[CLIENT_ID_HEADER];
  const seqText = ctx.req.headers[CLIENT_SEQ_HEADER];
  if (client === undefined && seqText === undefined) return null;
  if (typeof client !== 'string' || client.length === 0 || client.length > 64) {
    throw badRequest('invalid_header', 'Client-Id must be the id from POST /v1/client-sessions', {
      field: 'Client-Id',
    });
  }
  const seq = Number(seqText);
  if (typeof seqText !== 'string' || !Number.isSafeInteger(seq) || seq < 1) {
    throw badRequest('invalid_header', 'Client-Seq must be a positive integer', { field: 'Client-Seq' });
  }
  const ackText = ctx.req.headers[CLIENT_ACK_HEADER];
  const ack = ackText === undefined ? 0 : Number(ackText);
  if (!Number.isSafeInteger(ack) || ack < 0 || ack >= seq) {
    throw badRequest('invalid_header', 'Client-Ack must be an integer below Client-Seq', { field: 'Client-Ack' });
  }
  return { client, seq, ack };
}

/** The HTTP answer for an error out of the Raft layer. */
export function raftErrorToHttp(error: unknown): unknown {
  if (error instanceof HttpError) return error;
  if (error instanceof TimeoutError) {
    return unavailable(
      'not committed in time (no quorum?); the outcome is unknown: retry with the same Client-Id and Client-Seq to apply it at most once',
      1,
    );
  }
  if (error instanceof StoppedError) return unavailable('this member is shutting down', 1);
  // Commands are validated before they are proposed, so a machine that still throws is a bug: a 500 that says so,
  // and the same answer on a retry (the failure is recorded with the entry).
  if (error instanceof ApplyError) return new HttpError(500, error.code, error.message);
  if (error instanceof CommandTooLargeError)
    return new HttpError(413, 'command_too_large', error.message, { limit: error.limit });
  if (error instanceof SessionError) {
    return error.code === 'unknown_session'
      ? new HttpError(410, 'unknown_session', 'the client session expired or never existed: open a new one')
      : conflict('stale_sequence', 'this Client-Seq was already acknowledged (Client-Ack)');
  }
  return error;
}
