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
  /** Replicas of each group of this kind; fewer while fewer processes are live (never more than there are). */
  replicas: number;
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
