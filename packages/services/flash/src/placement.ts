/**
 * Where a deal's shards live: a fixed set of inventory groups (Raft groups on the groups layer), shard i of every
 * deal in group i mod INVENTORY_GROUPS. Fixed, so a gateway finds any shard (and any reservation: its id names its
 * shard) without a lookup; several deals share the groups, each group's machine holds its shards of every deal.
 * The names are a SlotGroups set (`flash.inv.0..3`), spelled and recognised as every grouped service's are; the
 * groups carry no hash slots (a shard's group follows from its index, not from a key).
 */
import { SlotGroups } from '@raftkit/http';

/** Inventory groups: a deal of 20 shards has 5 in each; more groups cost more Raft traffic on a small machine. */
export const INVENTORY_GROUPS = 4;
export const GROUP_PREFIX = 'flash.inv.';
const INVENTORY = new SlotGroups(GROUP_PREFIX);

/** The inventory groups' command route (members register it, RaftInventory calls it through a GroupClient). */
export const FLASH_COMMAND_ROUTE = '/v1/flash/groups/:group/commands';

export function inventoryGroup(index: number): string {
  return INVENTORY.name(index);
}

/** The group holding shard `shard` of any deal. */
export function groupOfShard(shard: number): string {
  return inventoryGroup(shard % INVENTORY_GROUPS);
}

/** The group index of a group name, or null when the name is not an inventory group. */
export function parseInventoryGroup(name: string): number | null {
  if (!INVENTORY.includes(name)) return null;
  const index = Number(name.slice(GROUP_PREFIX.length));
  // Only the canonical spelling names a group (`flash.inv.03` is no group's name).
  return index < INVENTORY_GROUPS && inventoryGroup(index) === name ? index : null;
}

/** Indexes of the groups holding a deal of `shards` shards (group 0 always: it holds shard 0, the deal's record). */
export function groupsOfDeal(shards: number): number[] {
  return Array.from({ length: Math.min(shards, INVENTORY_GROUPS) }, (_, i) => i);
}

/** The units of each shard: the total split evenly, the remainder one each to the first shards. */
export function shardCounts(total: number, shards: number): number[] {
  const base = Math.floor(total / shards);
  const extra = total % shards;
  return Array.from({ length: shards }, (_, i) => base + (i < extra ? 1 : 0));
}
