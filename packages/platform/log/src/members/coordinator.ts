/**
 * The consumer-group coordinator as this member runs it for the topics' partitions 0 it leads: heartbeats are
 * answered from the leader's memory (CoordinatorLeases) with the replicated generation and assignment, and only
 * joins, leaves and expiries are proposed. A sweep proposes the expiry of each lease that lapsed on this clock.
 */
import { HttpError, type ServiceContext, unavailable } from '@raftkit/http';
import type { RaftNode } from '@raftkit/raft';
import { CoordinatorLeases } from '../lease-keeper.js';
import type { PartitionCommand, PartitionMachine, PartitionResult } from '../machine.js';
import { assignSlots, type GroupView } from '../membership.js';
import { parsePartitionGroup } from '../topics.js';

type PartitionNode = RaftNode<PartitionCommand, PartitionResult, PartitionMachine>;

/** How often the leader looks for lapsed leases: a dead member's partitions move within its lease and this. */
const EXPIRY_SWEEP_MS = 250;

interface HeartbeatAnswer extends GroupView {
  group: string;
  member: string;
  assigned: number[];
}

export class GroupCoordinator {
  /** By coordinator partition (its Raft group name). */
  private readonly leases = new Map<string, CoordinatorLeases>();
  /**
   * Runs only while this member keeps leases (it leads a coordinator partition some member heartbeats to), so a
   * member that coordinates nothing has no timer waking it. A new leader starts it at the first heartbeat it
   * answers, and its first look grants every member a full lease, so nobody lapses unseen meanwhile.
   */
  private sweeper: NodeJS.Timeout | null = null;
  private stopped = false;

  constructor(private readonly service: ServiceContext) {
    service.onStop(() => {
      this.stopped = true;
      this.idle();
    });
  }

  private sweeping(): void {
    if (this.sweeper !== null || this.stopped) return;
    this.sweeper = setInterval(() => {
      try {
        this.sweep();
      } catch (error) {
        // A member still starting (no catalogue yet) or stopping: the next sweep looks again.
        this.service.logger.log('warn', 'consumer-group expiry sweep failed', { error: String(error) });
      }
      if (this.leases.size === 0) this.idle();
    }, EXPIRY_SWEEP_MS);
    this.sweeper.unref();
  }

  private idle(): void {
    if (this.sweeper !== null) clearInterval(this.sweeper);
    this.sweeper = null;
  }

  /**
   * Joins `member` or renews its lease. On the partition's leader only (a follower answers 421 naming it, as a
   * fetch it cannot answer does); a member already in the group with the same slots and lease length is answered
   * from memory, anything else (a new member, another slot count, an expiry in flight) is a `join` entry.
   */
  async heartbeat(
    node: PartitionNode,
    raftGroup: string,
    group: string,
    member: string,
    slots: number,
    ttlMs: number,
  ): Promise<HeartbeatAnswer> {
    const now = Date.now();
    this.requireServingLeader(node, raftGroup);
    const leases = this.leasesOf(raftGroup, node);
    this.sweeping();
    const view = node.readLocal((m) => m.consumerGroup(group));
    const ttl = node.readLocal((m) => m.memberTtl(group, member));
    if (
      view !== null &&
      view.slots === slots &&
      ttl === ttlMs &&
      view.members.includes(member) &&
      !leases.isExpiring(group, member)
    ) {
      leases.renew(group, member, ttlMs, now);
      return { group, member, ...view, assigned: assignSlots(view.members, slots).get(member)! };
    }
    const result = await this.service
      .group(node)
      .write({ op: 'join', group, member, slots, ttlMs } satisfies PartitionCommand);
    if (result.op !== 'join') throw new HttpError(500, 'internal', 'unexpected result');
    if (!result.ok) throw new HttpError(409, result.code, result.message, { group });
    this.leasesOf(raftGroup, node).renew(group, member, ttlMs, now);
    const { generation, members, assigned } = result;
    return { group, member, generation, members, slots: result.slots, assigned };
  }

  /** Leaves at once (an entry), and forgets the member's lease. */
  async leave(node: PartitionNode, raftGroup: string, group: string, member: string) {
    const result = await this.service.group(node).write({ op: 'leave', group, member } satisfies PartitionCommand);
    if (result.op !== 'leave') throw new HttpError(500, 'internal', 'unexpected result');
    if (node.isLeader) this.leasesOf(raftGroup, node).forget(group, member);
    return result;
  }

  /**
   * 421 to the leader unless this member leads the partition, and 503 when it has not heard from a quorum of the
   * partition's processes for an election timeout: a quiesced leader cut off from the others does not notice that
   * it was deposed, and must not keep answering heartbeats the new leader does not see.
   */
  private requireServingLeader(node: PartitionNode, raftGroup: string): void {
    if (!node.isLeader) {
      if (node.leaderId === null) throw unavailable('the partition has no leader yet: it is electing one', 1);
      throw new HttpError(421, 'misdirected', `heartbeats go to the coordinator's leader, ${node.leaderId}`, {
        group: raftGroup,
        leader: node.leaderId,
      });
    }
    const host = this.service.managed.host;
    const voters = node.status().config.voters;
    const within = Math.max(10, host.pingTicks * 3);
    const heard = voters.filter((id) => id === node.id || host.heardFrom(id, within)).length;
    if (heard * 2 <= voters.length)
      throw unavailable('this leader has not heard from a quorum of the partition lately', 1, { group: raftGroup });
  }

  private leasesOf(raftGroup: string, node: PartitionNode): CoordinatorLeases {
    let leases = this.leases.get(raftGroup);
    if (leases === undefined) {
      leases = new CoordinatorLeases();
      this.leases.set(raftGroup, leases);
    }
    leases.sync(node.status().term);
    return leases;
  }

  /** Proposes the expiry of every lease lapsed on the partitions 0 this member leads. */
  private sweep(): void {
    const managed = this.service.managed;
    const now = Date.now();
    for (const raftGroup of this.leases.keys()) {
      if (managed.group(raftGroup)?.isLeader !== true) this.leases.delete(raftGroup);
    }
    for (const record of managed.catalog().groupsWithPrefix('log.')) {
      if (parsePartitionGroup(record.name)?.partition !== 0) continue;
      const node = managed.group<PartitionCommand, PartitionResult, PartitionMachine>(record.name);
      if (node === undefined || !node.isLeader) continue;
      const groups = node.readLocal((m) => m.coordinatedGroups());
      if (groups.length === 0) continue;
      const leases = this.leasesOf(record.name, node);
      const term = node.status().term;
      for (const { group, members } of groups) {
        const lapsed = leases.lapsed(group, members, now);
        if (lapsed.length === 0) continue;
        this.service
          .group(node)
          .write({ op: 'expire', group, members: lapsed } satisfies PartitionCommand)
          .catch(() => undefined)
          .finally(() => leases.settled(term, group, lapsed));
      }
    }
  }
}
