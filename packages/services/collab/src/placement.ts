/**
 * Where documents live: the op-log groups `collab.0 .. collab.{G-1}`, each recorded in the meta group with a range
 * of hash slots of doc ids (`data.slots`), so members and workers map a document to its group the same way
 * (GroupRouter's default locator). A SlotGroups set, as the auction's and the feed's groups are.
 */
import { SlotGroups, slotRange } from '@raftkit/http';

export const GROUP_PREFIX = 'collab.';
export const DEFAULT_GROUPS = 4;
export const MAX_GROUPS = 64;

export const COLLAB_GROUPS = new SlotGroups(GROUP_PREFIX);

/** The op-log groups' command route (members register it, workers call it through a GroupClient). */
export const COLLAB_COMMAND_ROUTE = '/v1/collab/groups/:group/commands';

export function groupName(i: number): string {
  return COLLAB_GROUPS.name(i);
}

/** The hash-slot range of group i of n (the GroupRouter's default locator reads `data.slots`). */
export const slotsOf = slotRange;
