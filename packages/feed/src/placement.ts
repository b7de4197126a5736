/**
 * Where posts live: Raft groups `feed.posts.0 .. N-1`, each recorded in the meta group with a hash-slot range of
 * post ids (`data.slots`), so members and app workers map a post id to its group the same way (GroupRouter).
 * By post id and not by author: a prolific author's posts spread over every group, and post ids are random enough
 * in their low bits to spread evenly (spec rule 5).
 */
import { HASH_SLOTS, locateBySlot, type RouterGroup } from '@raftkit/http';

export const POSTS_GROUP_PREFIX = 'feed.posts.';
export const DEFAULT_POST_GROUPS = 4;

export function isPostsGroup(name: string): boolean {
  return name.startsWith(POSTS_GROUP_PREFIX) && /^\d{1,4}$/.test(name.slice(POSTS_GROUP_PREFIX.length));
}

export function postGroupPlan(count: number, replicas: number): Array<{ name: string; replicas: number; data: Record<string, unknown> }> {
  const per = Math.ceil(HASH_SLOTS / count);
  return Array.from({ length: count }, (_, i) => ({
    name: `${POSTS_GROUP_PREFIX}${i}`,
    replicas,
    data: { slots: [i * per, Math.min(HASH_SLOTS, (i + 1) * per) - 1] },
  }));
}

export function locatePost(postId: string, groups: readonly RouterGroup[]): string | null {
  return locateBySlot(
    postId,
    groups.filter((g) => isPostsGroup(g.name)),
  );
}
