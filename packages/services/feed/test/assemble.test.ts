/** The read path's pure steps: merge and dedup, applying a ranking, the two-consecutive rule, the token. */
import t from 'tap';
import {
  applyRanking,
  decodeToken,
  encodeToken,
  limitConsecutive,
  mergeCandidates,
} from '../src/workers/app/assemble.js';
import { newPostId, postIdTime } from '../src/post-id.js';

const entry = (author: string, at: number) => ({ post_id: newPostId(at), author_id: author, created_at: at });

t.test('post ids sort by time and carry it', async (t) => {
  const a = newPostId(1_700_000_000_000);
  const b = newPostId(1_700_000_000_001);
  t.ok(a < b);
  t.equal(postIdTime(a), 1_700_000_000_000);
  t.equal(new Set(Array.from({ length: 1000 }, () => newPostId(5))).size, 1000, 'unique within one millisecond');
});

t.test('merge: de-duplicated by post_id, newest first, capped', async (t) => {
  const x = entry('a', 10);
  const y = entry('b', 20);
  const z = entry('c', 30);
  const merged = mergeCandidates(
    [
      [x, y],
      [y, z, x],
    ],
    10,
  );
  t.same(
    merged.map((m) => m.post_id),
    [z.post_id, y.post_id, x.post_id],
  );
  t.equal(mergeCandidates([[x, y, z]], 2).length, 2);
});

t.test('a ranking: ranked first, unknown and repeated ids ignored, the rest in time order', async (t) => {
  const [x, y, z] = [entry('a', 10), entry('b', 20), entry('c', 30)];
  const out = applyRanking(
    [x, y, z],
    [
      { post_id: x.post_id, score: 9 },
      { post_id: 'unknown', score: 8 },
      { post_id: x.post_id, score: 7 },
    ],
  );
  t.same(
    out.map((o) => o.post_id),
    [x.post_id, z.post_id, y.post_id],
  );
});

t.test('at most two consecutive posts of one author', async (t) => {
  const check = (authors: string[]): string[] => {
    const list = authors.map((a, i) => ({ author_id: a, i }));
    const out = limitConsecutive(list);
    t.same(
      [...out.map((o) => o.i)].sort((p, q) => p - q),
      list.map((l) => l.i),
      'a permutation: nothing lost',
    );
    return out.map((o) => o.author_id);
  };
  const noTriple = (a: string[]): boolean => a.every((x, i) => i < 2 || !(x === a[i - 1] && x === a[i - 2]));
  t.same(check(['a', 'a', 'b']), ['a', 'a', 'b'], 'kept when it holds');
  t.same(check(['a', 'a', 'a', 'b']), ['a', 'a', 'b', 'a']);
  // The ranked order put the others first; six a's need them spread out.
  const r = check(['b', 'c', 'a', 'b', 'c', 'a', 'a', 'a', 'a', 'a']);
  t.ok(noTriple(r), r.join(''));
  const many = check([...'aaaaaaaaaaaabbbbbcc']);
  t.ok(noTriple(many), many.join(''));
  t.same(check(['a', 'a', 'a']), ['a', 'a', 'a'], 'impossible: kept rather than dropped');
  for (let trial = 0; trial < 200; trial++) {
    const n = 1 + Math.floor(Math.random() * 30);
    const authors = Array.from({ length: n }, () => 'abcd'[Math.floor(Math.random() ** 2 * 4)]!);
    const counts = new Map<string, number>();
    for (const a of authors) counts.set(a, (counts.get(a) ?? 0) + 1);
    const top = Math.max(...counts.values());
    const out = check(authors);
    if (top <= 2 * (n - top + 1)) t.ok(noTriple(out), `feasible, so held: ${authors.join('')} -> ${out.join('')}`);
  }
});

t.test('2,000 candidates, one author most of them: done, rule held until impossible, nothing lost', async (t) => {
  const list = Array.from({ length: 2_000 }, (_, i) => ({ author_id: i % 4 === 0 ? `other${i % 300}` : 'heavy', i }));
  const out = limitConsecutive(list);
  t.equal(out.length, 2_000);
  t.equal(new Set(out.map((o) => o.i)).size, 2_000);
  // 500 others can separate at most 1,002 heavy posts: every other post up to there follows the rule.
  const authors = out.map((o) => o.author_id);
  const firstTriple = authors.findIndex((a, i) => i >= 2 && a === authors[i - 1] && a === authors[i - 2]);
  t.ok(firstTriple === -1 || firstTriple >= 1_400, `the first run of three is late: ${firstTriple}`);
  t.ok(authors.slice(0, 1_400).every((a, i, all) => i < 2 || !(a === all[i - 1] && a === all[i - 2])));
  const mixed = Array.from({ length: 2_000 }, (_, i) => ({ author_id: `a${Math.floor(Math.random() ** 3 * 300)}`, i }));
  const m = limitConsecutive(mixed).map((o) => o.author_id);
  const counts = new Map<string, number>();
  for (const a of m) counts.set(a, (counts.get(a) ?? 0) + 1);
  const top = Math.max(...counts.values());
  if (top <= 2 * (2_000 - top + 1))
    t.ok(
      m.every((a, i) => i < 2 || !(a === m[i - 1] && a === m[i - 2])),
      'feasible, so held',
    );
});

t.test('tokens: round trip; anything else is a 400 invalid_token', async (t) => {
  const tk = { user: 'ann', ranked_at: 1_700_000_000_000, post_id: newPostId() };
  t.same(decodeToken(encodeToken(tk)), tk);
  for (const bad of [
    '',
    '!!',
    'x'.repeat(400),
    Buffer.from('[2,"a",1,"x"]').toString('base64url'),
    Buffer.from('{}').toString('base64url'),
  ]) {
    t.throws(() => decodeToken(bad), { status: 400, code: 'invalid_token' }, bad.slice(0, 20));
  }
});
