/**
 * Where auctions live: a fixed set of Raft groups `auction.0 .. auction.N-1`, each recorded in the meta group with
 * a hash-slot range (`data.slots`), so an auction id maps to its group by `hashSlot(id)` the same way on members,
 * gateways and clients (GroupRouter's default locator). The leader of an auction's group is its single writer.
 */
import { SlotGroups, type PlannedGroup, type RouterGroup } from '@raftkit/http';

const AUCTION_GROUPS = new SlotGroups('auction.');
export const GROUP_PREFIX = AUCTION_GROUPS.prefix;
/** Groups created at start-up. Few: every group costs heartbeats on a small machine; the slots allow a re-split later. */
export const DEFAULT_GROUP_COUNT = 4;

export function groupName(i: number): string {
  return AUCTION_GROUPS.name(i);
}

export function isAuctionGroup(name: string): boolean {
  return AUCTION_GROUPS.includes(name);
}

/** The meta group's records of the auction groups (their replicas are the kind's): slot ranges splitting the hash slots evenly. */
export function groupPlan(count: number): Array<Omit<PlannedGroup, 'replicas'>> {
  return AUCTION_GROUPS.records(count);
}

/** The group of an auction id among the catalogue's groups (auction groups only), or null. */
export function locateAuction(auctionId: string, groups: readonly RouterGroup[]): string | null {
  return AUCTION_GROUPS.locate(auctionId, groups);
}
