/**
 * The meta group's state machine: which hosts exist (their Raft and HTTP addresses), which groups exist, which
 * hosts hold each, and what each serves (a plain `data` object: a topic's partition, a hash-slot range). Pure and
 * deterministic: placement of a new group's replicas is computed here, from the state, so every member agrees.
 */
import { Packr } from 'msgpackr';
import type { ApplyContext, NodeId, StateMachine } from '../types.js';

/** The name of the meta group on every host. */
export const META_GROUP = 'meta';
const NAME = /^[A-Za-z0-9._-]{1,128}$/;
const HOST_ID = /^[A-Za-z0-9._-]{1,64}$/;
const MAX_GROUPS_PER_COMMAND = 4096;
const MAX_DATA_BYTES = 16 * 1024;

/** A process of the cluster, as the meta group records it. */
export interface HostRecord {
  id: NodeId;
  /** The Raft listener, "host:port". */
  raft: string;
  /** The host's HTTP endpoint ("http://host:port"), when it serves one. */
  http: string | null;
  /** A retiring host gets no new replicas; its replicas are moved off (`members` changes). */
  retiring: boolean;
}

/** A group, as the meta group records it: where it should run and what it serves. */
export interface GroupRecord {
  name: string;
  /** The hosts that founded the group (its bootstrap voters): a founder starts it with these as voters. */
  founders: NodeId[];
  /** The hosts that should hold the group now. Differs from `founders` after a replica move. */
  members: NodeId[];
  /** What the group serves, for routers and services: plain JSON data. */
  data: Record<string, unknown>;
  /** Log index of the group's last change here. */
  version: number;
  /** The group's leader reported that its voters are `members` (a move finished): former members may drop it. */
  settled: boolean;
}

/** A change to the meta group's state (refused with `invalid` when malformed: see checkMetaCommand). */
export type MetaCommand =
  | { t: 'host'; id: NodeId; raft: string; http: string | null }
  | { t: 'retire'; id: NodeId; retiring: boolean }
  /** Create every group or none (a name already taken refuses the whole command). */
  | { t: 'create'; groups: Array<{ name: string; replicas: number; data: Record<string, unknown> }> }
  /**
   * Drop every group or none. A dropped name stays taken (a `create` of it is refused with `exists`) until each
   * host that may hold a copy (its members and founders) reported with `gone` that it deleted it, or was retired:
   * a new group of that name must never start from an old copy's log.
   */
  | { t: 'drop'; names: string[] }
  /** A host deleted its copy of a dropped group. */
  | { t: 'gone'; name: string; host: NodeId }
  /** Set the hosts that should hold a group (a replica move); the group's leader carries it out. */
  | { t: 'members'; name: string; members: NodeId[] }
  /** The group's leader: its voters are the members of `version` (ignored when the record changed since). */
  | { t: 'settled'; name: string; version: number }
  /**
   * Move replicas onto hosts holding fewer (a host added): while the fullest and emptiest eligible hosts differ
   * by more than one replica, one replica moves from the first to the second.
   */
  | { t: 'spread' };

/** What a meta command did: the groups it created, changed or dropped, or why it was refused (nothing changed). */
export type MetaResult =
  | { ok: true; groups: GroupRecord[] }
  | { ok: false; code: 'exists' | 'not_found' | 'no_hosts' | 'invalid'; message: string };

const packr = new Packr({ useRecords: false });

/** The meta group's state machine: hosts and groups (see the module comment). */
export class MetaMachine implements StateMachine<MetaCommand, MetaResult> {
  private hostMap = new Map<NodeId, HostRecord>();
  private groupMap = new Map<string, GroupRecord>();
  /** Dropped groups whose copies some hosts may still hold: name -> those hosts. */
  private droppedMap = new Map<string, NodeId[]>();

  /** Every registered host, by id order. */
  hosts(): HostRecord[] {
    return [...this.hostMap.values()].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  }

  /** The host of that id, if registered. */
  host(id: NodeId): HostRecord | undefined {
    return this.hostMap.get(id);
  }

  /** The group of that name, if it exists. */
  group(name: string): GroupRecord | undefined {
    return this.groupMap.get(name);
  }

  /** Every group, in creation order. */
  groups(): GroupRecord[] {
    return [...this.groupMap.values()];
  }

  /** Dropped groups some hosts have not reported deleting yet (their names cannot be created again meanwhile). */
  dropping(): Array<{ name: string; hosts: NodeId[] }> {
    return [...this.droppedMap].map(([name, hosts]) => ({ name, hosts: [...hosts] }));
  }

  /** Groups whose name starts with `prefix`, in creation order. */
  groupsWithPrefix(prefix: string): GroupRecord[] {
    return this.groups().filter((g) => g.name.startsWith(prefix));
  }

  /** How many groups each host should hold. */
  replicaCounts(): Map<NodeId, number> {
    const counts = new Map<NodeId, number>();
    for (const host of this.hostMap.keys()) counts.set(host, 0);
    for (const group of this.groupMap.values()) for (const m of group.members) counts.set(m, (counts.get(m) ?? 0) + 1);
    return counts;
  }

  apply(command: MetaCommand, context: ApplyContext): MetaResult {
    const invalid = checkMetaCommand(command);
    if (invalid !== null) return { ok: false, code: 'invalid', message: invalid };
    switch (command.t) {
      case 'host': {
        const old = this.hostMap.get(command.id);
        this.hostMap.set(command.id, {
          id: command.id,
          raft: command.raft,
          http: command.http,
          retiring: old?.retiring ?? false,
        });
        return { ok: true, groups: [] };
      }
      case 'retire': {
        const old = this.hostMap.get(command.id);
        if (old === undefined) return { ok: false, code: 'not_found', message: `no host ${command.id}` };
        this.hostMap.set(command.id, { ...old, retiring: command.retiring });
        if (!command.retiring) return { ok: true, groups: [] };
        // A retired host is not waited for: whatever copies it holds, it never runs a group again.
        for (const name of [...this.droppedMap.keys()]) this.gone(name, command.id);
        // Every replica of the retiring host moves to the eligible host holding the fewest.
        const counts = this.replicaCounts();
        const eligible = this.hosts()
          .filter((h) => !h.retiring)
          .map((h) => h.id);
        const moved: GroupRecord[] = [];
        for (const group of this.groupMap.values()) {
          if (!group.members.includes(command.id)) continue;
          const [to] = placeReplicas(
            eligible.filter((h) => !group.members.includes(h)),
            counts,
            1,
          );
          if (to === undefined) continue;
          counts.set(to, (counts.get(to) ?? 0) + 1);
          counts.set(command.id, (counts.get(command.id) ?? 1) - 1);
          moved.push(
            this.setMembers(
              group,
              group.members.map((m) => (m === command.id ? to : m)),
              context.index,
            ),
          );
        }
        return { ok: true, groups: moved };
      }
      case 'create': {
        for (const g of command.groups) {
          if (this.groupMap.has(g.name)) return { ok: false, code: 'exists', message: `group ${g.name} exists` };
          const holding = this.droppedMap.get(g.name);
          if (holding !== undefined)
            return {
              ok: false,
              code: 'exists',
              message: `group ${g.name} was dropped and ${holding.join(', ')} still hold a copy; retry shortly`,
            };
        }
        const counts = this.replicaCounts();
        const eligible = this.hosts()
          .filter((h) => !h.retiring)
          .map((h) => h.id);
        const created: GroupRecord[] = [];
        for (const g of command.groups) {
          if (eligible.length < g.replicas) {
            return {
              ok: false,
              code: 'no_hosts',
              message: `group ${g.name} needs ${g.replicas} hosts; ${eligible.length} can take replicas`,
            };
          }
        }
        // The first member is the group's preferred leader (ManagedHost hands leadership to it): the member that is
        // first of the fewest groups, so leaders spread even when every group is on every host.
        const firsts = new Map<NodeId, number>();
        for (const group of this.groupMap.values())
          if (group.members[0] !== undefined) firsts.set(group.members[0], (firsts.get(group.members[0]) ?? 0) + 1);
        for (const g of command.groups) {
          const placed = placeReplicas(eligible, counts, g.replicas);
          const [lead] = placeReplicas(placed, firsts, 1);
          const members = [lead!, ...placed.filter((m) => m !== lead)];
          firsts.set(lead!, (firsts.get(lead!) ?? 0) + 1);
          for (const m of members) counts.set(m, (counts.get(m) ?? 0) + 1);
          const record: GroupRecord = {
            name: g.name,
            founders: members,
            members,
            data: g.data,
            version: context.index,
            settled: true,
          };
          created.push(record);
        }
        for (const record of created) this.groupMap.set(record.name, record);
        return { ok: true, groups: created };
      }
      case 'drop': {
        const missing = command.names.find((n) => !this.groupMap.has(n));
        if (missing !== undefined) return { ok: false, code: 'not_found', message: `no group ${missing}` };
        const dropped = command.names.map((n) => this.groupMap.get(n)!);
        for (const g of dropped) {
          this.groupMap.delete(g.name);
          const holding = new Set([...g.members, ...g.founders].filter((h) => this.hostMap.get(h)?.retiring !== true));
          if (holding.size > 0) this.droppedMap.set(g.name, [...holding].sort());
        }
        return { ok: true, groups: dropped };
      }
      case 'gone':
        this.gone(command.name, command.host);
        return { ok: true, groups: [] };
      case 'members': {
        const old = this.groupMap.get(command.name);
        if (old === undefined) return { ok: false, code: 'not_found', message: `no group ${command.name}` };
        const unknown = command.members.find((m) => !this.hostMap.has(m));
        if (unknown !== undefined) return { ok: false, code: 'not_found', message: `no host ${unknown}` };
        return { ok: true, groups: [this.setMembers(old, [...command.members], context.index)] };
      }
      case 'settled': {
        const old = this.groupMap.get(command.name);
        if (old === undefined) return { ok: false, code: 'not_found', message: `no group ${command.name}` };
        if (old.version !== command.version) return { ok: true, groups: [] };
        const record = { ...old, settled: true };
        this.groupMap.set(command.name, record);
        return { ok: true, groups: [record] };
      }
      case 'spread': {
        const counts = this.replicaCounts();
        const eligible = this.hosts()
          .filter((h) => !h.retiring)
          .map((h) => h.id);
        const moved = new Map<string, GroupRecord>();
        for (let step = 0; step < this.groupMap.size; step++) {
          const order = placeReplicas(eligible, counts, eligible.length);
          const emptiest = order[0];
          const fullest = order[order.length - 1];
          if (
            emptiest === undefined ||
            fullest === undefined ||
            (counts.get(fullest) ?? 0) - (counts.get(emptiest) ?? 0) <= 1
          )
            break;
          const group = [...this.groupMap.values()].find(
            (g) => g.members.includes(fullest) && !g.members.includes(emptiest) && !moved.has(g.name),
          );
          if (group === undefined) break;
          counts.set(fullest, counts.get(fullest)! - 1);
          counts.set(emptiest, (counts.get(emptiest) ?? 0) + 1);
          moved.set(
            group.name,
            this.setMembers(
              group,
              group.members.map((m) => (m === fullest ? emptiest : m)),
              context.index,
            ),
          );
        }
        return { ok: true, groups: [...moved.values()] };
      }
    }
  }

  private gone(name: string, host: NodeId): void {
    const holding = this.droppedMap.get(name);
    if (holding === undefined) return;
    const left = holding.filter((h) => h !== host);
    if (left.length === 0) this.droppedMap.delete(name);
    else this.droppedMap.set(name, left);
  }

  private setMembers(old: GroupRecord, members: NodeId[], version: number): GroupRecord {
    const record: GroupRecord = { ...old, members, version, settled: false };
    this.groupMap.set(old.name, record);
    return record;
  }

  snapshot(): Uint8Array {
    return packr.pack({
      hosts: [...this.hostMap.values()],
      groups: [...this.groupMap.values()],
      dropped: [...this.droppedMap],
    });
  }

  restore(data: Uint8Array): void {
    const state = packr.unpack(data) as {
      hosts: HostRecord[];
      groups: GroupRecord[];
      dropped?: Array<[string, NodeId[]]>;
    };
    this.hostMap = new Map(state.hosts.map((h) => [h.id, h]));
    this.groupMap = new Map(state.groups.map((g) => [g.name, g]));
    this.droppedMap = new Map(state.dropped ?? []);
  }
}

/**
 * The `replicas` hosts holding the fewest replicas, ties broken by id; the first of them is listed first, which
 * makes founders' order rotate over hosts as groups are added.
 */
export function placeReplicas(eligible: NodeId[], counts: ReadonlyMap<NodeId, number>, replicas: number): NodeId[] {
  return [...eligible]
    .sort((a, b) => (counts.get(a) ?? 0) - (counts.get(b) ?? 0) || (a < b ? -1 : a > b ? 1 : 0))
    .slice(0, replicas);
}

/** Why `command` is not a MetaCommand, or null when it is (checked before anything changes). */
export function checkMetaCommand(command: unknown): string | null {
  if (typeof command !== 'object' || command === null) return 'a meta command is an object';
  const c = command as Record<string, unknown>;
  const hostId = (v: unknown): boolean => typeof v === 'string' && HOST_ID.test(v);
  switch (c.t) {
    case 'host':
      if (!hostId(c.id)) return 'host: id';
      if (typeof c.raft !== 'string' || c.raft.length > 300) return 'host: raft';
      if (c.http !== null && (typeof c.http !== 'string' || c.http.length > 300)) return 'host: http';
      return null;
    case 'retire':
      return hostId(c.id) && typeof c.retiring === 'boolean' ? null : 'retire: id, retiring';
    case 'create': {
      if (!Array.isArray(c.groups) || c.groups.length === 0 || c.groups.length > MAX_GROUPS_PER_COMMAND)
        return `create: 1..${MAX_GROUPS_PER_COMMAND} groups`;
      const names = new Set<string>();
      for (const g of c.groups as unknown[]) {
        if (typeof g !== 'object' || g === null) return 'create: a group is an object';
        const { name, replicas, data } = g as Record<string, unknown>;
        if (typeof name !== 'string' || !NAME.test(name) || name === META_GROUP)
          return `create: group name ${JSON.stringify(name)}`;
        if (names.has(name)) return `create: ${name} twice`;
        names.add(name);
        if (typeof replicas !== 'number' || !Number.isInteger(replicas) || replicas < 1 || replicas > 15)
          return 'create: replicas 1..15';
        if (typeof data !== 'object' || data === null || Array.isArray(data)) return 'create: data is an object';
        if (packr.pack(data).length > MAX_DATA_BYTES) return `create: data over ${MAX_DATA_BYTES} bytes`;
      }
      return null;
    }
    case 'drop':
      return Array.isArray(c.names) &&
        c.names.length > 0 &&
        c.names.length <= MAX_GROUPS_PER_COMMAND &&
        c.names.every((n) => typeof n === 'string' && NAME.test(n))
        ? null
        : 'drop: names';
    case 'members': {
      if (typeof c.name !== 'string' || !NAME.test(c.name)) return 'members: name';
      const members = c.members;
      if (!Array.isArray(members) || members.length === 0 || members.length > 15 || !members.every(hostId))
        return 'members: 1..15 host ids';
      return new Set(members).size === members.length ? null : 'members: a host twice';
    }
    case 'settled':
      return typeof c.name === 'string' &&
        NAME.test(c.name) &&
        typeof c.version === 'number' &&
        Number.isSafeInteger(c.version)
        ? null
        : 'settled: name, version';
    case 'gone':
      return typeof c.name === 'string' && NAME.test(c.name) && hostId(c.host) ? null : 'gone: name, host';
    case 'spread':
      return null;
    default:
      return `unknown meta command ${JSON.stringify(c.t)}`;
  }
}
