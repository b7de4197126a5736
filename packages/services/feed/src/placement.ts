/**
 * Where posts live: Raft groups `feed.posts.0 .. N-1`, each recorded in the meta group with a hash-slot range of
 * post ids (`data.slots`), so members and app workers map a post id to its group the same way (GroupRouter).
 * By post id and not by author: a prolific author's posts spread over every group, and post ids are random enough
 * in their low bits to spread evenly (spec rule 5).
 */
import { SlotGroups, type PlannedGroup, type RouterGroup } from '@raftkit/http';

const POST_GROUPS = new SlotGroups('feed.posts.');
export const POSTS_GROUP_PREFIX = POST_GROUPS.prefix;
export const DEFAULT_POST_GROUPS = 4;

export function isPostsGroup(name: string): boolean {
  return POST_GROUPS.includes(name);
}

/** The meta group's records of the post groups (their replicas are the kind's). */
export function postGroupPlan(count: number): Array<Omit<PlannedGroup, 'replicas'>> {
  return POST_GROUPS.records(count);
}

export function locatePost(postId: string, groups: readonly RouterGroup[]): string | null {
  return POST_GROUPS.locate(postId, groups);
}
