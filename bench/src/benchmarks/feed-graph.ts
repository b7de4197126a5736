/**
 * A power-law follow graph for `bench feed`, deterministic from a seed. Who is followed is Zipf-distributed over
 * the users (user u0 is the most followed, u1 next...: the ids carry the popularity rank, which keeps the report
 * readable), and how many each user follows is Pareto-distributed (most follow few, some follow hundreds), as in
 * measured social graphs. Pure: no I/O, no clock.
 */

interface GraphOptions {
  users: number;
  /** Mean followees per user (before the cap; the graph reports the real mean). */
  meanFollows: number;
  /** Nobody follows more than this many (bounds a reader's candidate set). */
  maxFollows: number;
  /** Zipf exponent of popularity: 1 makes u0 followed by most users; lower spreads followers out. */
  zipf: number;
  /** Pareto tail index of out-degree (> 1; 2.5: a heavy tail with a finite mean). */
  pareto: number;
  seed: number;
}

const DEFAULT_GRAPH: Omit<GraphOptions, 'users'> = {
  meanFollows: 25,
  maxFollows: 300,
  zipf: 0.9,
  pareto: 2.5,
  seed: 19,
};

export interface FollowGraph {
  users: number;
  /** followees[u]: whom user u follows (user indices). */
  followees: Uint32Array[];
  /** followers[u]: how many follow user u. */
  followerCounts: Uint32Array;
  follows: number;
}

/** mulberry32: a small, fast, seedable PRNG (uniform in [0, 1)). */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

export function userId(u: number): string {
  return `u${u}`;
}

export function generateGraph(users: number, options: Partial<Omit<GraphOptions, 'users'>> = {}): FollowGraph {
  const o = { ...DEFAULT_GRAPH, ...options };
  if (!Number.isInteger(users) || users < 2) throw new RangeError('a graph needs at least 2 users');
  const random = prng(o.seed);
  // Cumulative Zipf weights: a followee is the first index whose cumulative weight passes a uniform draw.
  const cumulative = new Float64Array(users);
  let total = 0;
  for (let u = 0; u < users; u++) cumulative[u] = total += 1 / (u + 1) ** o.zipf;
  const pick = (): number => {
    const x = random() * total;
    let lo = 0;
    let hi = users - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (cumulative[mid]! < x) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  };
  // Pareto with scale xm has mean xm * a / (a - 1).
  const xm = (o.meanFollows * (o.pareto - 1)) / o.pareto;
  const cap = Math.min(o.maxFollows, users - 1);
  const followees: Uint32Array[] = [];
  const followerCounts = new Uint32Array(users);
  let follows = 0;
  for (let u = 0; u < users; u++) {
    const want = Math.min(cap, Math.max(1, Math.round(xm * (1 - random()) ** (-1 / o.pareto))));
    const chosen = new Set<number>();
    // Popular users are drawn again and again; the attempt bound keeps a small graph from spinning.
    for (let attempts = 0; chosen.size < want && attempts < want * 20; attempts++) {
      const v = pick();
      if (v !== u) chosen.add(v);
    }
    const list = Uint32Array.from(chosen);
    followees.push(list);
    for (const v of list) followerCounts[v]!++;
    follows += list.length;
  }
  return { users, followees, followerCounts, follows };
}

/** The user with the most followers, and a median-ish ordinary one (the user at the median follower count). */
export function notableAuthors(graph: FollowGraph): { largest: number; ordinary: number } {
  let largest = 0;
  for (let u = 1; u < graph.users; u++) if (graph.followerCounts[u]! > graph.followerCounts[largest]!) largest = u;
  const byCount = Array.from(graph.followerCounts.keys())
    .filter((u) => graph.followerCounts[u]! > 0)
    .sort((a, b) => graph.followerCounts[a]! - graph.followerCounts[b]! || a - b);
  // The median of the users who have followers at all (an author nobody follows has no freshness to measure).
  const ordinary = byCount[Math.floor(byCount.length / 2)] ?? largest;
  return { largest, ordinary };
}

/** followers[u]: who follows u (the reverse of `followees`). */
export function followersOf(graph: FollowGraph): Uint32Array[] {
  const lists = Array.from(graph.followerCounts, (n) => new Uint32Array(n));
  const fill = new Uint32Array(graph.users);
  graph.followees.forEach((list, u) => {
    for (const v of list) lists[v]![fill[v]!++] = u;
  });
  return lists;
}
