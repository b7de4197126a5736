/**
 * Consumer-group membership, kept by a topic's partition 0 (its "coordinator", as Kafka's group coordinator keeps
 * a group on one partition of __consumer_offsets). Pure and deterministic: a member's lease runs on entry time (the
 * leader's stamp), never on a member's clock, so every replica expires the same member at the same entry.
 *
 * A group assigns `slots` units of work (the partitions of the topics its members consume, in an order the
 * members agree on) to its live members: `assignSlots`, a pure function of the sorted member ids and the slot
 * count. The generation grows on every change of membership (a join, a leave, an expiry, another slot count), so
 * an offset commit that carries an older generation can be refused (the partition keeps the newest it saw).
 * Generations are drawn from one counter per coordinator, so a group dropped (no live member, the table full) and
 * formed again never reuses a number that a partition's fence already passed.
 */
export const MAX_GROUP_MEMBERS = 64;
/** Groups one coordinator partition keeps (groups without a live member are dropped first when full). */
export const MAX_COORDINATED_GROUPS = 256;
/** Work units one group spreads (the partitions of its topics). */
export const MAX_GROUP_SLOTS = 4096;
export const MIN_MEMBER_TTL_MS = 1_000;
export const MAX_MEMBER_TTL_MS = 60_000;
/**
 * A member's lease when the join does not say: a missed 3 s heartbeat and two seconds more (a heartbeat delayed by a
 * leader election or a loaded machine does not cost a rebalance).
 */
export const DEFAULT_MEMBER_TTL_MS = 8_000;

export interface GroupView {
  generation: number;
  slots: number;
  /** Live members, sorted. */
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

export interface GroupTableSnapshot {
  counter: number;
  groups: Array<[string, { generation: number; slots: number; leases: Array<[string, number]> }]>;
}

interface GroupState {
  generation: number;
  slots: number;
  /** Member id -> the entry time its lease ends. */
  leases: Map<string, number>;
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

  /** Joins or renews `member`'s lease until `time + ttlMs`, after expiring the leases ended by `time`. */
  join(group: string, member: string, slots: number, ttlMs: number, time: number): JoinResult {
    let state = this.groups.get(group);
    if (state === undefined) {
      if (this.groups.size >= MAX_COORDINATED_GROUPS) this.dropDeadGroups(time);
      if (this.groups.size >= MAX_COORDINATED_GROUPS)
        return {
          op: 'join',
          ok: false,
          code: 'too_many_groups',
          message: `a topic coordinates at most ${MAX_COORDINATED_GROUPS} consumer groups`,
        };
      state = { generation: 0, slots, leases: new Map() };
      this.groups.set(group, state);
    }
    let changed = this.expire(state, time);
    if (!state.leases.has(member)) {
      if (state.leases.size >= MAX_GROUP_MEMBERS) {
        if (changed) state.generation = ++this.counter;
        return {
          op: 'join',
          ok: false,
          code: 'too_many_members',
          message: `a consumer group has at most ${MAX_GROUP_MEMBERS} members`,
        };
      }
      changed = true;
    }
    if (state.slots !== slots) changed = true;
    state.slots = slots;
    state.leases.set(member, time + ttlMs);
    if (changed) state.generation = ++this.counter;
    const view = this.viewOf(state);
    return { op: 'join', ok: true, member, assigned: assignSlots(view.members, slots).get(member)!, ...view };
  }

  leave(group: string, member: string, time: number): LeaveResult {
    const state = this.groups.get(group);
    if (state === undefined) return { op: 'leave', ok: true, left: false, generation: 0 };
    let changed = this.expire(state, time);
    const left = state.leases.delete(member);
    if (left) changed = true;
    if (changed) state.generation = ++this.counter;
    return { op: 'leave', ok: true, left, generation: state.generation };
  }

  /** The group as of entry time `time` (leases ended by then left out), or null when unknown. */
  view(group: string, time: number): GroupView | null {
    const state = this.groups.get(group);
    if (state === undefined) return null;
    const members = [...state.leases].filter(([, until]) => until > time).map(([m]) => m);
    return { generation: state.generation, slots: state.slots, members: members.sort() };
  }

  get size(): number {
    return this.groups.size;
  }

  private viewOf(state: GroupState): GroupView {
    return { generation: state.generation, slots: state.slots, members: [...state.leases.keys()].sort() };
  }

  /** Drops the leases ended by `time`; true when one was. */
  private expire(state: GroupState, time: number): boolean {
    let changed = false;
    for (const [member, until] of state.leases) {
      if (until <= time) {
        state.leases.delete(member);
        changed = true;
      }
    }
    return changed;
  }

  private dropDeadGroups(time: number): void {
    for (const [name, state] of this.groups) {
      if ([...state.leases.values()].every((until) => until <= time)) this.groups.delete(name);
    }
  }

  snapshot(): GroupTableSnapshot {
    return {
      counter: this.counter,
      groups: [...this.groups].map(([name, s]) => [
        name,
        { generation: s.generation, slots: s.slots, leases: [...s.leases] },
      ]),
    };
  }

  restore(data: GroupTableSnapshot | undefined): void {
    this.counter = data?.counter ?? 0;
    this.groups = new Map(
      (data?.groups ?? []).map(([name, s]) => [
        name,
        { generation: s.generation, slots: s.slots, leases: new Map(s.leases) },
      ]),
    );
  }
}
