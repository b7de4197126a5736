/**
 * A service's fixed set of Raft groups `<prefix>0 .. <prefix>N-1`, each recorded in the meta group with an even
 * share of the hash slots (`data.slots`), so members, workers and clients map a key to its group the same way
 * (GroupRouter's `locateBySlot`). The auction's groups, the editor's op logs and the feed's post store are such sets.
 */
import { HASH_SLOTS, locateBySlot, type GroupLocator, type RouterGroup } from './group-router.js';

/** A group as `managed.proposeMeta({ t: 'create', groups })` takes it. */
export interface PlannedGroup {
  name: string;
  replicas: number;
  data: { slots: [number, number] };
}

/** The hash-slot range of group i of n: 0..HASH_SLOTS-1 split evenly, the last range shorter when it does not divide. */
export function slotRange(i: number, n: number): [number, number] {
  const per = Math.ceil(HASH_SLOTS / n);
  return [i * per, Math.min(HASH_SLOTS, (i + 1) * per) - 1];
}

export class SlotGroups {
  /** `prefix` ends with the separator (`auction.`); an index has at most 4 digits. */
  constructor(readonly prefix: string) {}

  name(i: number): string {
    return `${this.prefix}${i}`;
  }

  /** Whether a group name is one of this set's (other services' groups share the catalogue). */
  includes(name: string): boolean {
    return name.startsWith(this.prefix) && /^\d{1,4}$/.test(name.slice(this.prefix.length));
  }

  /** The meta group's records of `count` groups of `replicas` members each. */
  plan(count: number, replicas: number): PlannedGroup[] {
    return this.records(count).map((g) => ({ ...g, replicas }));
  }

  /** The names and data of `count` groups, for ServiceContext.createGroups (which sets their replicas). */
  records(count: number): Array<Omit<PlannedGroup, 'replicas'>> {
    return Array.from({ length: count }, (_, i) => ({ name: this.name(i), data: { slots: slotRange(i, count) } }));
  }

  /** The group of `key` among the catalogue's groups of this set, or null. */
  readonly locate: GroupLocator = (key: string, groups: readonly RouterGroup[]) =>
    locateBySlot(
      key,
      groups.filter((g) => this.includes(g.name)),
    );
}
