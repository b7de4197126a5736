/**
 * Consumer-group membership, kept by a topic's partition 0 (its "coordinator", as Kafka's group coordinator keeps
 * a group on one partition of __consumer_offsets). What is replicated here is who is in the group, its slot count
 * and its generation; it changes only by joins, leaves and expiries, each a Raft entry, so every replica holds the
 * same groups and the same assignment. Leases are not replicated: the coordinator's leader keeps them in memory
 * (CoordinatorLeases, lease-keeper.ts), answers heartbeats from there, and proposes an `expire` entry when one
 * lapses by its own clock, so an idle group writes nothing.
 *
 * A group assigns `slots` units of work (the partitions of the topics its members consume, in an order the
 * members agree on) to its live members: `assignSlots`, a pure function of the sorted member ids and the slot
 * count. The generation grows on every change of membership (a join, a leave, an expiry, another slot count), so
 * an offset commit that carries an older generation can be refused (the partition keeps the newest it saw).
 * Generations are drawn from one counter per coordinator, so a group dropped (no member left, the table full) and
 * formed again never reuses a number that a partition's fence already passed.
 */
export const MAX_GROUP_MEMBERS = 64;
/** Groups one coordinator partition keeps (groups without a member are dropped first when full). */
export const MAX_COORDINATED_GROUPS = 256;
/** Work units one group spreads (the partitions of its topics). */
export const MAX_GROUP_SLOTS = 4096;
export const MIN_MEMBER_TTL_MS = 1_000;
export const MAX_MEMBER_TTL_MS = 60_000;
/**
 * A member's lease when the join does not say: three missed 1 s heartbeats and one second more (a heartbeat
 * delayed by a leader election or a loaded machine does not cost a rebalance).
 */
export const DEFAULT_MEMBER_TTL_MS = 4_000;

export interface GroupView {
  generation: number;
  slots: number;
  /** Members, sorted. */
  members: string[];
}

export type JoinResult =
  | ({ op: 'join'; ok: true; member: string; assigned: number[] } & GroupView)
  | { op: 'join'; ok: false; code: 'too_many_members' | 'too_many_groups'; message: string };

export interface LeaveResult {
  op: 'leave';
  ok: true;
  left: boolean;
  generation: number;
}

export interface ExpireResult {
  op: 'expire';
  ok: true;
  /** The named members that were in the group (and are no longer). */
  expired: string[];
  generation: number;
}

/** A coordinated group as its leader's lease keeping needs it: each member with the lease length it asked for. */
export interface CoordinatedGroup {
  group: string;
  members: Array<[member: string, ttlMs: number]>;
}

export interface GroupTableSnapshot {
  counter: number;
  groups: Array<
    [
      string,
      {
        generation: number;
        slots: number;
        /** Member -> lease length. */
        members?: Array<[string, number]>;
        /** Snapshots taken when leases were replicated: member -> the entry time its lease ended. */
        leases?: Array<[string, number]>;
      },
    ]
  >;
}

interface GroupState {
  generation: number;
  slots: number;
  /** Member id -> the lease length (ms) it asked for. */
  members: Map<string, number>;
}

/**
 * Slot i goes to the (i mod n)-th of the sorted members: every member of one generation computes the same
 * assignment, each gets floor or ceil of slots/n, and a member that leaves and comes back gets the same slots.
 */
export function assignSlots(members: readonly string[], slots: number): Map<string, number[]> {
  const sorted = [...members].sort();
  const out = new Map<string, number[]>(sorted.map((m) => [m, []]));
  if (sorted.length === 0) return out;
  for (let i = 0; i < slots; i++) out.get(sorted[i % sorted.length]!)!.push(i);
  return out;
}

export class GroupTable {
  private groups = new Map<string, GroupState>();
  /** The last generation handed out, to any group. */
  private counter = 0;

  /**
   * Adds `member` (or records its lease length and the slot count again). A new member or another slot count is a
   * new generation; a member already in the group asking the same changes nothing.
   */
  join(group: string, member: string, slots: number, ttlMs: number): JoinResult {
    let state = this.groups.get(group);
    if (state === undefined) {
      if (this.groups.size >= MAX_COORDINATED_GROUPS) this.dropEmptyGroups();
      if (this.groups.size >= MAX_COORDINATED_GROUPS)
        return {
          op: 'join',
          ok: false,
          code: 'too_many_groups',
          message: `a topic coordinates at most ${MAX_COORDINATED_GROUPS} consumer groups`,
        };
      state = { generation: 0, slots, members: new Map() };
      this.groups.set(group, state);
    }
    let changed = false;
    if (!state.members.has(member)) {
      if (state.members.size >= MAX_GROUP_MEMBERS)
        return {
          op: 'join',
          ok: false,
          code: 'too_many_members',
          message: `a consumer group has at most ${MAX_GROUP_MEMBERS} members`,
        };
      changed = true;
    }
    if (state.slots !== slots) changed = true;
    state.slots = slots;
    state.members.set(member, ttlMs);
    if (changed) state.generation = ++this.counter;
    const view = this.viewOf(state);
    return { op: 'join', ok: true, member, assigned: assignSlots(view.members, slots).get(member)!, ...view };
  }

  leave(group: string, member: string): LeaveResult {
    const state = this.groups.get(group);
    if (state === undefined) return { op: 'leave', ok: true, left: false, generation: 0 };
    const left = state.members.delete(member);
    if (left) state.generation = ++this.counter;
    return { op: 'leave', ok: true, left, generation: state.generation };
  }

  /** Drops the named members whose leases lapsed on the leader's clock (those still in the group). */
  expire(group: string, members: readonly string[]): ExpireResult {
    const state = this.groups.get(group);
    if (state === undefined) return { op: 'expire', ok: true, expired: [], generation: 0 };
    const expired = members.filter((m) => state.members.delete(m));
    if (expired.length > 0) state.generation = ++this.counter;
    return { op: 'expire', ok: true, expired, generation: state.generation };
  }

  /** The group, or null when unknown. */
  view(group: string): GroupView | null {
    const state = this.groups.get(group);
    return state === undefined ? null : this.viewOf(state);
  }

  /** A member's lease length, or null when it is not in the group. */
  ttlOf(group: string, member: string): number | null {
    return this.groups.get(group)?.members.get(member) ?? null;
  }

  /** Every group that has members, with their lease lengths. */
  coordinated(): CoordinatedGroup[] {
    const out: CoordinatedGroup[] = [];
    for (const [group, state] of this.groups) {
      if (state.members.size > 0) out.push({ group, members: [...state.members] });
    }
    return out;
  }

  get size(): number {
    return this.groups.size;
  }

  private viewOf(state: GroupState): GroupView {
    return { generation: state.generation, slots: state.slots, members: [...state.members.keys()].sort() };
  }

  private dropEmptyGroups(): void {
    for (const [name, state] of this.groups) {
      if (state.members.size === 0) this.groups.delete(name);
    }
  }

  snapshot(): GroupTableSnapshot {
    return {
      counter: this.counter,
      groups: [...this.groups].map(([name, s]) => [
        name,
        { generation: s.generation, slots: s.slots, members: [...s.members] },
      ]),
    };
  }

  restore(data: GroupTableSnapshot | undefined): void {
    this.counter = data?.counter ?? 0;
    this.groups = new Map(
      (data?.groups ?? []).map(([name, s]) => [
        name,
        {
          generation: s.generation,
          slots: s.slots,
          // An older snapshot held lease ends, not lengths: its members keep the default length.
          members: new Map(s.members ?? (s.leases ?? []).map(([m]) => [m, DEFAULT_MEMBER_TTL_MS] as [string, number])),
        },
      ]),
    );
  }
}
