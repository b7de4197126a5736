/**
 * Where auctions live: a fixed set of Raft groups `auction.0 .. auction.N-1`, each recorded in the meta group with
 * a hash-slot range (`data.slots`), so an auction id maps to its group by `hashSlot(id)` the same way on members,
 * gateways and clients (GroupRouter's default locator). The leader of an auction's group is its single writer.
 */
import { HASH_SLOTS, locateBySlot, type RouterGroup } from '@raftkit/http';

export const GROUP_PREFIX = 'auction.';
/** Groups created at start-up. Few: every group costs heartbeats on a small machine; the slots allow a re-split later. */
export const DEFAULT_GROUP_COUNT = 4;

export function groupName(i: number): string {
  return `${GROUP_PREFIX}${i}`;
}

export function isAuctionGroup(name: string): boolean {
  return name.startsWith(GROUP_PREFIX) && /^\d{1,4}$/.test(name.slice(GROUP_PREFIX.length));
}

/** The meta group's records of the auction groups: slot ranges splitting 0..HASH_SLOTS-1 evenly. */
export function groupPlan(count: number, replicas: number): Array<{ name: string; replicas: number; data: Record<string, unknown> }> {
  const per = Math.ceil(HASH_SLOTS / count);
  return Array.from({ length: count }, (_, i) => ({
    name: groupName(i),
    replicas,
    data: { slots: [i * per, Math.min(HASH_SLOTS, (i + 1) * per) - 1] },
  }));
}

/** The group of an auction id among the catalogue's groups (auction groups only), or null. */
export function locateAuction(auctionId: string, groups: readonly RouterGroup[]): string | null {
  return locateBySlot(
    auctionId,
    groups.filter((g) => isAuctionGroup(g.name)),
  );
}
