/**
 * The store's LevelDB key layouts (one LevelDB per store worker; a user's keys live on the partition of that user).
 * Each relation direction is one key prefix, so "who does X follow" and "who follows X" are each one range scan of
 * one prefix on one partition (spec rule 1). Inbox and outbox keys are bucketed by month (rule 4) and sort newest
 * first inside a bucket (the created_at part is inverted), holding ids and times only, never a score (rule 2).
 */

/** Keys sort in these separators' order: '/' is below every id character and '0' is below nothing we use after. */
const SEP = '/';
const TIME_MAX = 9_999_999_999_999;

export function month(at: number): string {
  const d = new Date(at);
  return `${d.getUTCFullYear()}${String(d.getUTCMonth() + 1).padStart(2, '0')}`;
}

/** The month bucket before `m` (yyyymm). */
function previousMonth(m: string): string {
  const y = Number(m.slice(0, 4));
  const mo = Number(m.slice(4));
  return mo === 1 ? `${y - 1}12` : `${y}${String(mo - 1).padStart(2, '0')}`;
}

/** The month `n` months before `m` (yyyymm). */
export function monthsBefore(m: string, n: number): string {
  let out = m;
  for (let i = 0; i < n; i++) out = previousMonth(out);
  return out;
}

/** The two buckets a feed read looks at (spec rule 4): the current month and the one before. */
export function readMonths(now: number): [string, string] {
  const m = month(now);
  return [m, previousMonth(m)];
}

function inverted(at: number): string {
  return String(TIME_MAX - at).padStart(13, '0');
}

export const keys = {
  following: (follower: string, followee = ''): string => `fwing${SEP}${follower}${SEP}${followee}`,
  followers: (followee: string, follower = ''): string => `fwers${SEP}${followee}${SEP}${follower}`,
  /** A followers_count change not yet folded into the profile (rule 3: the count is updated asynchronously). */
  countDelta: (followee = '', follower = ''): string => `cntd${SEP}${followee}${followee === '' ? '' : SEP}${follower}`,
  profile: (user = ''): string => `prof${SEP}${user}`,
  engagement: (user: string, author = ''): string => `eng${SEP}${user}${SEP}${author}`,
  inboxAll: 'inbox' + SEP,
  outboxAll: 'outbox' + SEP,
  inboxBucket: (user: string, m: string): string => `inbox${SEP}${user}${SEP}${m}${SEP}`,
  inbox: (user: string, createdAt: number, postId: string): string =>
    `inbox${SEP}${user}${SEP}${month(createdAt)}${SEP}${inverted(createdAt)}${postId}`,
  outboxBucket: (author: string, m: string): string => `outbox${SEP}${author}${SEP}${m}${SEP}`,
  outbox: (author: string, createdAt: number, postId: string): string =>
    `outbox${SEP}${author}${SEP}${month(createdAt)}${SEP}${inverted(createdAt)}${postId}`,
  seen: (user: string, postId = ''): string => `seen${SEP}${user}${SEP}${postId}`,
  snapshot: (user: string, rankedAt: number | null = null): string =>
    `snap${SEP}${user}${SEP}${rankedAt === null ? '' : String(rankedAt).padStart(13, '0')}`,
  threshold: 'cfg/threshold',
  /** The next offset of the partition's `feed-store` log partition this replica applies (replica.ts). */
  applied: 'cfg/applied',
};

/** The end of a prefix's range (every key starting with `prefix` is below it). */
export function prefixEnd(prefix: string): string {
  return prefix + '\xff';
}
