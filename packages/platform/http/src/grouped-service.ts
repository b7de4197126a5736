/**
 * The contract of a service built on many Raft groups per process (the event log, and later the editor, the flash
 * sale and the auction): the member process runs a ManagedHost (the meta group and the groups it records), and the
 * service names the state machine of each group and registers its endpoints. A request about a group this member
 * does not hold is answered 421 with the members that hold it, so clients route themselves (GroupRouter).
 */
import type { ManagedGroupOptions, ManagedHost, MetaResult, RaftNode, StateMachine } from '@raftkit/raft';
import { isInternalCaller, type Principal } from './auth.js';
import { checkedCommand } from './command-route.js';
import { badRequest, HttpError, unavailable } from './errors.js';
import type { Logger } from './log.js';
import type { MetricsRegistry } from './metrics.js';
import type { Admission, RequestContext, Router } from './router.js';
import { raftErrorToHttp } from './service.js';
import type { WorkerRoles } from './worker.js';

/** The response header naming the leader of the group a request was about, as this member knows it. */
export const GROUP_LEADER_HEADER = 'raft-leader';

/**
 * One kind of group a service runs (the flash sale's inventory groups, the log's partitions): which group names are
 * its, the state machine and Raft options of each, and how many replicas each gets. Every group of the kind is
 * created through GroupedServiceContext.createGroups, so the replica count is decided here and only here.
 */
export interface GroupKind {
  /** A name for the kind (`inventory`, `partition`), for people reading logs and code. */
  name: string;
  /** Whether a group of that name is of this kind (the meta group's catalogue holds every service's groups). */
  includes(group: string): boolean;
  /** The settings of this member's copy of the group: its state machine and Raft options (observers...). */
  groupOptions(group: string): ManagedGroupOptions;
  /** Replicas of each group of this kind; fewer while fewer processes are live (never more than there are). */
  replicas: number;
}

/** The settings of the group of that name from the first kind that claims it, or null for a name no kind claims. */
export function groupOptionsOf(kinds: readonly GroupKind[], name: string): ManagedGroupOptions | null {
  const kind = kinds.find((k) => k.includes(name));
  return kind === undefined ? null : kind.groupOptions(name);
}

/** A "propose this command" route: the group it names, the command checked as the machine checks it. */
export interface CommandRoute<C, R> {
  admits: Admission;
  /** The command from the request body; throws CommandShapeError (answered 400 `invalid_command`) when malformed. */
  check(body: unknown): C;
  /**
   * The group the command goes to, on this member (usually requireGroup on a path parameter). Refuse a caller here
   * before looking the group up, so a refused caller learns nothing of the placement.
   */
  group(ctx: RequestContext, command: C): RaftNode<C, R>;
  /** How the command is proposed, when not simply by `write` (an ordering of appends, an early answer). */
  propose?(ctx: RequestContext, node: RaftNode<C, R>, command: C, write: () => Promise<R>): Promise<unknown>;
}

export interface GroupedServiceDefinition {
  name: string;
  /** The kinds of group the service runs; a group name no kind claims is left alone. */
  kinds: readonly GroupKind[];
  /** Register the service's endpoints. */
  routes(service: GroupedServiceContext): void;
  workers?: WorkerRoles;
}

export class GroupedServiceContext {
  private readonly stoppers: Array<() => void> = [];

  constructor(
    readonly managed: ManagedHost,
    readonly router: Router,
    readonly metrics: MetricsRegistry,
    readonly logger: Logger,
    /** The service these members serve (`notify`): its workers' service token is an internal caller. */
    readonly service: string,
  ) {}

  /** Whether a request comes from an internal caller of this service: the cluster token or its workers' service token. */
  internal(principal: Principal | null): boolean {
    return isInternalCaller(principal, this.service);
  }

  onStop(stop: () => void): void {
    this.stoppers.push(stop);
  }

  stop(): void {
    for (const stop of this.stoppers.splice(0)) stop();
  }

  /**
   * The group of that name, running on this member; otherwise a 421 `misdirected` naming the members that hold it
   * (`members: [{id, url}]`), or a 404 when the meta group does not know it. Sets the leader header on `ctx`.
   */
  requireGroup<C, R, M extends StateMachine<C, R> = StateMachine<C, R>>(
    ctx: RequestContext,
    name: string,
  ): RaftNode<C, R, M> {
    const node = this.managed.group<C, R, M>(name);
    if (node !== undefined) {
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
    const catalog = this.managed.catalog();
    const record = catalog.group(name);
    if (record === undefined)
      throw new HttpError(404, 'group_not_found', `no group ${name} (yet: the meta group may still be applying it)`, {
        group: name,
      });
    const members = record.members.map((id) => ({ id, url: catalog.host(id)?.http ?? null }));
    throw new HttpError(421, 'misdirected', `this member does not hold ${name}; ask one that does`, {
      group: name,
      members,
    });
  }

  /** Proposes `command` to the group and returns its result, with Raft outcomes answered as HTTP (see call). */
  write<C, R>(group: RaftNode<C, R>, command: C): Promise<R> {
    return this.call(group, () => group.propose(command));
  }

  /**
   * Waits until a read of the group on this member holds every committed write: a read barrier, unless the request
   * asks for a local read (`?consistency=serializable`), which waits only for the writes this member answered.
   */
  async readBarrier(group: RaftNode<unknown, unknown>, ctx: RequestContext): Promise<void> {
    const consistency = ctx.query.get('consistency') ?? 'linearizable';
    if (consistency === 'serializable') {
      try {
        return await group.ownWritesApplied();
      } catch (error) {
        throw raftErrorToHttp(error);
      }
    }
    if (consistency !== 'linearizable')
      throw badRequest('invalid_query', 'consistency must be linearizable or serializable', { field: 'consistency' });
    await this.call(group, () => group.readBarrier());
  }

  /** Registers a POST route that proposes the body's command to a group (see CommandRoute) and answers its result. */
  commandRoute<C, R>(path: string, route: CommandRoute<C, R>): void {
    this.router.post(path, { admits: route.admits }, async (ctx) => {
      const command = checkedCommand(await ctx.json(), route.check);
      const node = route.group(ctx, command);
      const write = (): Promise<R> => this.write(node, command);
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
   * Records new groups of `kind` in the meta group, each with the kind's replica count (or `replicas` when the
   * caller chose one, as a topic's creator may), capped at the live processes; a 503 while none is registered.
   * The meta group's answer is returned as it is: `exists` when a group of that name is already recorded.
   */
  async createGroups(
    kind: GroupKind,
    groups: ReadonlyArray<{ name: string; data: Record<string, unknown> }>,
    options: { replicas?: number } = {},
  ): Promise<{ result: MetaResult; replicas: number }> {
    const bad = groups.find((g) => !kind.includes(g.name));
    if (bad !== undefined) throw new TypeError(`group ${bad.name} is not of kind ${kind.name}`);
    let replicas = options.replicas;
    if (replicas === undefined) {
      const hosts = this.liveHosts();
      if (hosts < 1) throw unavailable('no hosts registered yet', 1);
      replicas = Math.min(kind.replicas, hosts);
    }
    const planned = groups.map((g) => ({ name: g.name, replicas: replicas!, data: g.data }));
    const result = await this.call(this.managed.meta, () => this.managed.proposeMeta({ t: 'create', groups: planned }));
    return { result, replicas };
  }

  /** Runs a Raft call on a group, mapping its errors to HTTP answers (503 without a leader, and so on). */
  async call<T>(node: RaftNode<unknown, unknown> | { leaderId: string | null }, work: () => Promise<T>): Promise<T> {
    if (node.leaderId === null) throw unavailable('the group has no leader yet: it is electing one', 1);
    try {
      return await work();
    } catch (error) {
      throw raftErrorToHttp(error);
    }
  }
}

/**
 * One grouped service made of several: each group name goes to the first kind that claims it, every part registers
 * its endpoints on the same members. A service that keeps its queues on the replicated event log hosts the log's
 * partitions in its own members this way (`combineGroupedServices('feed', [createLogService(), feedPart])`), so one
 * `cluster up` starts one set of processes and the log's endpoints and clients work on it unchanged.
 */
export function combineGroupedServices(
  name: string,
  parts: readonly GroupedServiceDefinition[],
): GroupedServiceDefinition {
  const workers = parts.flatMap((part) => part.workers ?? []);
  return {
    name,
    kinds: parts.flatMap((part) => part.kinds),
    routes(service: GroupedServiceContext): void {
      for (const part of parts) part.routes(service);
    },
    ...(workers.length > 0 ? { workers } : {}),
  };
}
