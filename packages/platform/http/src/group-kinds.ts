/**
 * The kinds of Raft group a service declares in its ServiceDefinition (service.ts): each with its state machine,
 * Raft options, how its groups are provisioned and how many replicas each gets. As hashicorp/raft's
 * NewRaft(conf, fsm, ...) hosts any FSM, the member process hosts any kind.
 */
import type { CoreOptions, ManagedGroupOptions, RaftNodeOptions, StateMachine } from '@raftkit/raft';

/**
 * Raft tuning of a one-group kind's members (the member process passes it on); default: the library's.
 * `heartbeatTicks` (the core's, in ticks) for a service whose members idle while others serve (each heartbeat is a
 * wake-up of every member); the write intervals (RaftNodeOptions of the same names) for one whose members are busy
 * writing (fewer, fuller rounds). member-tuning.ts names the measured settings.
 */
export type MemberRaftOptions<C, R> = Pick<CoreOptions, 'heartbeatTicks'> &
  Pick<RaftNodeOptions<C, R>, 'followerWriteIntervalMs' | 'leaderWriteIntervalMs' | 'forwardedResults'>;

/**
 * A kind with one group, there from the start on every member of the cluster (kv's store, lock's table): the
 * cluster's size is its replica count. The member process runs it as a RaftNode of its own (cluster/src/
 * single-group.ts): nothing shared to wait for on a write, and the data folder it has always had.
 */
export interface OneGroupKind<C, R> {
  name: string;
  provisioning: 'one group';
  createMachine(): StateMachine<C, R>;
  raft?: MemberRaftOptions<C, R>;
  /** Every member holds the group. */
  replicas: 'every member';
}

/**
 * A kind of many groups, each created when the service asks (ServiceContext.createGroups: the meta group records
 * it and places its replicas): the log's partitions, the flash sale's inventory groups. The member process runs a
 * ManagedHost (cluster/src/many-groups.ts). The replica count is decided here and only here.
 */
export interface OnRequestKind {
  /** A name for the kind (`inventory`, `partition`), for people reading logs and code. */
  name: string;
  provisioning: 'on request';
  /** Whether a group of that name is of this kind (the meta group's catalogue holds every service's groups). */
  includes(group: string): boolean;
  /** The settings of this member's copy of the group: its state machine and Raft options (observers...). */
  groupOptions(group: string): ManagedGroupOptions;
  /**
   * Replicas of each group of this kind when the cluster sets none (`cluster up --set replicas=N`, which wins for
   * every kind of the service); absent: DEFAULT_REPLICAS. Fewer while fewer processes are live (never more than
   * there are). A group keeps the count it was created with.
   */
  replicas?: number;
}

/**
 * Replicas of a group whose kind and cluster set none: 3. A group on 3 members survives one failure, and each write
 * waits for 2 fsyncs (of 3) rather than 3 (of 5); a process holds 3/5 of the groups rather than all of them, so a
 * cluster carries more groups. `--set replicas=5` buys surviving two failures at the price of those.
 */
export const DEFAULT_REPLICAS = 3;

/** The replica counts a cluster may set: odd (an even count tolerates no more failures than the odd below it). */
export const REPLICA_CHOICES: readonly number[] = [3, 5];

/**
 * Why `replicas` cannot be the count of a cluster of `members` members, or null when it can: 3 or 5, never more
 * than the members; 1 only on a cluster of one member (where nothing else is possible).
 */
export function replicasProblem(replicas: number, members: number): string | null {
  if (replicas === 1 && members === 1) return null;
  if (!REPLICA_CHOICES.includes(replicas))
    return `replicas must be 3 or 5 (1 on a 1-member cluster), not ${replicas}: 3 survives one failure, 5 two`;
  if (replicas > members) return `replicas=${replicas} needs at least ${replicas} members; the cluster has ${members}`;
  return null;
}

/** A kind of group a service runs; `provisioning` tells the member process how its groups come to be. */
export type GroupKind<C = unknown, R = unknown> = OneGroupKind<C, R> | OnRequestKind;

/**
 * The one-group kind of a definition, or null when its groups are all created on request. A definition mixing the
 * two is refused: the member process runs either one RaftNode or a ManagedHost.
 */
export function oneGroupKind<C, R>(kinds: readonly GroupKind<C, R>[]): OneGroupKind<C, R> | null {
  const one = kinds.filter((k): k is OneGroupKind<C, R> => k.provisioning === 'one group');
  if (one.length === 0) return null;
  if (kinds.length !== 1) throw new TypeError(`a 'one group' kind (${one[0]!.name}) must be its service's only kind`);
  return one[0]!;
}

/** The settings of the group of that name from the first on-request kind that claims it, or null if none does. */
export function groupOptionsOf(kinds: readonly GroupKind[], name: string): ManagedGroupOptions | null {
  const kind = kinds.find((k): k is OnRequestKind => k.provisioning === 'on request' && k.includes(name));
  return kind === undefined ? null : kind.groupOptions(name);
}
