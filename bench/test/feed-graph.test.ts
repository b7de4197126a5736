/** The feed benchmark's follow graph: deterministic from its seed, power-law shaped, no self-follows or repeats. */
import t from 'tap';
import { followersOf, generateGraph, notableAuthors } from '../src/benchmarks/feed-graph.js';

t.test('the same seed gives the same graph; another seed another one', async () => {
  const a = generateGraph(2_000);
  const b = generateGraph(2_000);
  // Compared as text: tap's deep comparison of 2,000 arrays takes minutes.
  const text = (g: typeof a): string => JSON.stringify(g.followees.map((l) => Array.from(l)));
  t.ok(text(a) === text(b), 'same seed, same graph');
  t.ok(text(a) !== text(generateGraph(2_000, { seed: 20 })), 'another seed, another graph');
});

t.test('no self-follows or repeated follows; counts and reverse lists agree; out-degree capped', async () => {
  const g = generateGraph(3_000, { maxFollows: 120 });
  // One assertion per property (not per user): thousands of tap assertions cost minutes.
  const bad = { repeats: 0, self: 0, degree: 0, reverse: 0 };
  let total = 0;
  g.followees.forEach((list, u) => {
    if (new Set(list).size !== list.length) bad.repeats++;
    if (list.includes(u)) bad.self++;
    if (list.length < 1 || list.length > 120) bad.degree++;
    total += list.length;
  });
  const followers = followersOf(g);
  followers.forEach((list, v) => {
    if (list.length !== g.followerCounts[v]) bad.reverse++;
  });
  t.same(bad, { repeats: 0, self: 0, degree: 0, reverse: 0 });
  t.equal(total, g.follows);
  t.ok(
    followers[5]!.every((u) => g.followees[u]!.includes(5)),
    'the reverse lists hold real edges',
  );
});

t.test('power-law shape: a few authors hold many followers, the median few; the mean near what was asked', async () => {
  const g = generateGraph(10_000);
  const { largest, ordinary } = notableAuthors(g);
  t.equal(largest, 0, 'u0 is the most followed (ids carry the popularity rank)');
  t.ok(
    g.followerCounts[largest]! > 100 * g.followerCounts[ordinary]!,
    `largest ${g.followerCounts[largest]} vs ordinary ${g.followerCounts[ordinary]}`,
  );
  const mean = g.follows / g.users;
  t.ok(mean > 18 && mean < 32, `mean follows ${mean}`);
  const heavy = g.followees.filter((l) => l.length >= 100).length;
  t.ok(heavy > 0 && heavy < g.users / 10, `${heavy} users follow 100 or more: a heavy tail, not the bulk`);
});
