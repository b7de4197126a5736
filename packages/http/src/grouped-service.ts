/**
 * The contract of a service built on many Raft groups per process (the event log, and later the editor, the flash
 * sale and the auction): the member process runs a ManagedHost (the meta group and the groups it records), and the
 * service names the state machine of each group and registers its endpoints. A request about a group this member
 * does not hold is answered 421 with the members that hold it, so clients route themselves (GroupRouter).
 */
import type { ManagedGroupOptions, ManagedHost, RaftNode, StateMachine } from '@raftkit/raft';
import { isInternalCaller, type Principal } from './auth.js';
import { HttpError, unavailable } from './errors.js';
import type { Logger } from './log.js';
import type { MetricsRegistry } from './metrics.js';
import type { RequestContext, Router } from './router.js';
import { raftErrorToHttp } from './service.js';
import type { WorkerRoles } from './worker.js';

/** The response header naming the leader of the group a request was about, as this member knows it. */
export const GROUP_LEADER_HEADER = 'raft-leader';

export interface GroupedServiceDefinition {
  name: string;
  /** The settings (state machine and options) of the group of that name, or null for a name the service ignores. */
  groupOptions(name: string): ManagedGroupOptions | null;
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
  requireGroup<C, R, M extends StateMachine<C, R> = StateMachine<C, R>>(ctx: RequestContext, name: string): RaftNode<C, R, M> {
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
    if (record === undefined) throw new HttpError(404, 'group_not_found', `no group ${name} (yet: the meta group may still be applying it)`, { group: name });
    const members = record.members.map((id) => ({ id, url: catalog.host(id)?.http ?? null }));
    throw new HttpError(421, 'misdirected', `this member does not hold ${name}; ask one that does`, { group: name, members });
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
 * One grouped service made of several: each group name goes to the first part that claims it, every part registers
 * its endpoints on the same members. A service that keeps its queues on the replicated event log hosts the log's
 * partitions in its own members this way (`combineGroupedServices('feed', [createLogService(), feedPart])`), so one
 * `cluster up` starts one set of processes and the log's endpoints and clients work on it unchanged.
 */
export function combineGroupedServices(name: string, parts: readonly GroupedServiceDefinition[]): GroupedServiceDefinition {
  const workers = parts.flatMap((part) => part.workers ?? []);
  return {
    name,
    groupOptions(groupName: string): ManagedGroupOptions | null {
      for (const part of parts) {
        const options = part.groupOptions(groupName);
        if (options !== null) return options;
      }
      return null;
    },
    routes(service: GroupedServiceContext): void {
      for (const part of parts) part.routes(service);
    },
    ...(workers.length > 0 ? { workers } : {}),
  };
}
