/**
 * Properties of the pure scoring and the in-memory features, over random candidate sets and event histories:
 * recency is monotone, affinity raises a post, diversity spreads authors, and the ranking is deterministic (the
 * same inputs in any order give the same answer). Plus the request parser, the engagement parser and the
 * recent-ranking cache, which the ranker process is built from.
 */
import fc from 'fast-check';
import t from 'tap';
import { RpcError } from '@raftkit/rpc';
import { fingerprint, RecentRankings } from '../../src/workers/ranker/cache.js';
import { encodeEngagement, parseEngagement } from '../../src/workers/ranker/engagement.js';
import { FeatureStore } from '../../src/workers/ranker/features.js';
import { baseScore, DEFAULT_WEIGHTS, rank, timeOrder } from '../../src/workers/ranker/score.js';
import {
  CONTENT_TYPES,
  NO_FEATURES,
  type Candidate,
  type EngagementEvent,
  type FeatureView,
} from '../../src/workers/ranker/types.js';
import { parseRankerRequest } from '../../src/workers/ranker/wire.js';

const NOW = 1_800_000_000_000;
const HOUR = 3_600_000;

const candidateArb = fc.record({
  post_id: fc.string({ minLength: 1, maxLength: 6 }),
  author_id: fc.constantFrom('a', 'b', 'c', 'd', 'e', 'f'),
  created_at: fc.integer({ min: NOW - 72 * HOUR, max: NOW + 60_000 }),
  content_type: fc.constantFrom(...CONTENT_TYPES),
  engagement: fc.record({ likes: fc.nat(5_000), comments: fc.nat(500), shares: fc.nat(500) }),
});
const candidatesArb = fc.uniqueArray(candidateArb, { selector: (c) => c.post_id, minLength: 1, maxLength: 60 });
const eventArb = fc.record({
  type: fc.constantFrom('like' as const, 'comment' as const, 'repost' as const),
  user_id: fc.constantFrom('v', 'w'),
  author_id: fc.constantFrom('a', 'b', 'c', 'd', 'e', 'f'),
  post_id: fc.string({ minLength: 1, maxLength: 6 }),
  at: fc.integer({ min: NOW - HOUR, max: NOW }),
});

function featuresFrom(events: EngagementEvent[]): FeatureStore {
  const store = new FeatureStore();
  for (const e of events) store.apply(e);
  return store;
}

t.test(
  'recency is monotone: a newer post never scores lower, and strictly higher while it is in the past',
  async () => {
    fc.assert(
      fc.property(
        candidateArb,
        fc.array(eventArb, { maxLength: 20 }),
        fc.integer({ min: 1, max: 48 * HOUR }),
        (c, events, newer) => {
          const features = featuresFrom(events);
          const older = { ...c, created_at: Math.min(c.created_at, NOW) - newer };
          const a = baseScore(older, 'v', features, NOW);
          const b = baseScore({ ...older, created_at: older.created_at + newer }, 'v', features, NOW);
          // Engagement totals spread over a shorter life are a higher lifetime velocity, which only helps the newer one.
          return b > a;
        },
      ),
    );
  },
);

t.test('recency decides between two posts alike in everything but age, once both are ranked', async () => {
  fc.assert(
    fc.property(fc.integer({ min: 0, max: 48 * HOUR }), fc.integer({ min: 1, max: 48 * HOUR }), (age, gap) => {
      const post = (id: string, author: string, at: number): Candidate => ({
        post_id: id,
        author_id: author,
        created_at: at,
        content_type: 'text',
        engagement: { likes: 0, comments: 0, shares: 0 },
      });
      const ranked = rank('v', [post('p1', 'a', NOW - age - gap), post('p2', 'b', NOW - age)], NO_FEATURES, NOW);
      return ranked[0]!.post_id === 'p2';
    }),
  );
});

t.test(
  'affinity raises: one more interaction with an author never lowers their post, and lifts it past an equal one',
  async () => {
    fc.assert(
      fc.property(
        candidatesArb,
        fc.array(eventArb, { maxLength: 30 }),
        fc.integer({ min: 0, max: 59 }),
        (candidates, events, pick) => {
          const target = candidates[pick % candidates.length]!;
          const before = featuresFrom(events);
          const after = featuresFrom([
            ...events,
            { type: 'like', user_id: 'v', author_id: target.author_id, post_id: 'elsewhere', at: NOW },
          ]);
          const a = baseScore(target, 'v', before, NOW);
          const b = baseScore(target, 'v', after, NOW);
          if (!(b > a)) return false;
          // Affinity is the viewer's own: another viewer's score does not move.
          return baseScore(target, 'w', before, NOW) === baseScore(target, 'w', after, NOW);
        },
      ),
    );
    const twins: Candidate[] = ['a', 'b'].map((author) => ({
      post_id: `p-${author}`,
      author_id: author,
      created_at: NOW - HOUR,
      content_type: 'text',
      engagement: { likes: 0, comments: 0, shares: 0 },
    }));
    t.equal(rank('v', twins, NO_FEATURES, NOW)[0]!.post_id, 'p-b', 'equal scores: the larger post_id first');
    const liked = featuresFrom([
      { type: 'comment', user_id: 'v', author_id: 'a', post_id: 'old', at: NOW - 10 * 60_000 },
    ]);
    t.equal(
      rank('v', twins, liked, NOW)[0]!.post_id,
      'p-a',
      "after the viewer commented on a's post, a's post comes first",
    );
    t.equal(rank('w', twins, liked, NOW)[0]!.post_id, 'p-b', 'another viewer is not affected');
  },
);

t.test('engagement velocity: a post liked in the last seconds outranks an equal post without likes', async () => {
  const posts: Candidate[] = ['a', 'b'].map((author) => ({
    post_id: `p-${author}`,
    author_id: author,
    created_at: NOW - 2 * HOUR,
    content_type: 'text',
    engagement: { likes: 0, comments: 0, shares: 0 },
  }));
  const features = new FeatureStore();
  for (let i = 0; i < 20; i++)
    features.apply({ type: 'like', user_id: `u${i}`, author_id: 'a', post_id: 'p-a', at: NOW - 5_000 + i * 100 });
  t.equal(rank('v', posts, features, NOW)[0]!.post_id, 'p-a');
  const fast = features.velocity('p-a', NOW)!;
  const later = features.velocity('p-a', NOW + 60_000)!;
  t.ok(later.fast < fast.fast / 10, 'the seconds-scale rate fades within a minute');
  t.ok(later.slow > fast.slow / 2, 'the minutes-scale rate keeps most of it');
});

t.test('content type weighs in: media above text above a lone comment, all else equal', async () => {
  const post = (type: Candidate['content_type']): Candidate => ({
    post_id: `p-${type}`,
    author_id: type,
    created_at: NOW - HOUR,
    content_type: type,
    engagement: { likes: 0, comments: 0, shares: 0 },
  });
  const ranked = rank('v', [post('comment'), post('text'), post('media')], NO_FEATURES, NOW).map((r) => r.post_id);
  t.same(ranked, ['p-media', 'p-text', 'p-comment']);
});

t.test('diversity spreads authors: with equal base scores, authors take turns', async () => {
  fc.assert(
    fc.property(fc.array(fc.integer({ min: 1, max: 8 }), { minLength: 1, maxLength: 6 }), (postsPerAuthor) => {
      const candidates: Candidate[] = [];
      postsPerAuthor.forEach((n, author) => {
        for (let i = 0; i < n; i++)
          candidates.push({
            post_id: `${author}-${i}`,
            author_id: `a${author}`,
            created_at: NOW - HOUR,
            content_type: 'text',
            engagement: { likes: 0, comments: 0, shares: 0 },
          });
      });
      const ranked = rank('v', candidates, NO_FEATURES, NOW);
      const authorOf = new Map(candidates.map((c) => [c.post_id, c.author_id]));
      // Round k (each author's k-th post) is served before round k+1 of anyone.
      const picked = new Map<string, number>();
      const rounds = ranked.map((r) => {
        const author = authorOf.get(r.post_id)!;
        const round = picked.get(author) ?? 0;
        picked.set(author, round + 1);
        return round;
      });
      for (let i = 1; i < rounds.length; i++) if (rounds[i]! < rounds[i - 1]!) return false;
      const firstRound = ranked.slice(0, postsPerAuthor.length).map((r) => authorOf.get(r.post_id));
      return new Set(firstRound).size === postsPerAuthor.length;
    }),
  );
  // A prolific author's slightly newer posts do not take the whole top of the feed.
  const candidates: Candidate[] = [];
  for (let i = 0; i < 10; i++)
    candidates.push({
      post_id: `big-${i}`,
      author_id: 'big',
      created_at: NOW - 60_000 * i,
      content_type: 'text',
      engagement: { likes: 0, comments: 0, shares: 0 },
    });
  for (let i = 0; i < 10; i++)
    candidates.push({
      post_id: `small-${i}`,
      author_id: `s${i}`,
      created_at: NOW - 20 * 60_000,
      content_type: 'text',
      engagement: { likes: 0, comments: 0, shares: 0 },
    });
  const top = rank('v', candidates, NO_FEATURES, NOW).slice(0, 6);
  t.ok(
    top.filter((r) => r.post_id.startsWith('big')).length <= 3,
    `at most 3 of the top 6 from one author: ${top.map((r) => r.post_id).join(' ')}`,
  );
  const without = rank('v', candidates, NO_FEATURES, NOW, { ...DEFAULT_WEIGHTS, diversity: 0 }).slice(0, 6);
  t.equal(
    without.filter((r) => r.post_id.startsWith('big')).length,
    6,
    'without the diversity term the big author would take all 6',
  );
});

t.test('deterministic: any order of the same candidates and the same events gives the same ranking', async () => {
  fc.assert(
    fc.property(candidatesArb, fc.array(eventArb, { maxLength: 30 }), fc.nat(), (candidates, events, seed) => {
      const shuffled = [...candidates];
      let s = seed;
      for (let i = shuffled.length - 1; i > 0; i--) {
        s = (s * 1_103_515_245 + 12_345) % 2 ** 31;
        const j = s % (i + 1);
        [shuffled[i], shuffled[j]] = [shuffled[j]!, shuffled[i]!];
      }
      const a = rank('v', candidates, featuresFrom(events), NOW);
      const b = rank('v', shuffled, featuresFrom(events), NOW);
      if (JSON.stringify(a) !== JSON.stringify(b)) return false;
      // A permutation of the candidates, scores non-increasing.
      if (a.length !== candidates.length || new Set(a.map((r) => r.post_id)).size !== a.length) return false;
      for (let i = 1; i < a.length; i++) if (a[i]!.score > a[i - 1]!.score) return false;
      return a.every((r) => Number.isFinite(r.score));
    }),
  );
});

t.test('a post_id given twice is ranked once; time order is newest first', async () => {
  const c: Candidate = {
    post_id: 'x',
    author_id: 'a',
    created_at: NOW - 1,
    content_type: 'text',
    engagement: { likes: 0, comments: 0, shares: 0 },
  };
  t.equal(rank('v', [c, { ...c }], NO_FEATURES, NOW).length, 1);
  const order = timeOrder([
    { ...c, post_id: 'b', created_at: NOW - 5 },
    { ...c, post_id: 'c', created_at: NOW - 1 },
    { ...c, post_id: 'a', created_at: NOW - 1 },
  ]).map((p) => p.post_id);
  t.same(order, ['c', 'a', 'b']);
});

t.test('features: affinity counts interactions per viewer and author; the maps stay bounded', async () => {
  const store = new FeatureStore({ maxPairs: 3, maxPosts: 2 });
  store.apply({ type: 'like', user_id: 'v', author_id: 'a', post_id: 'p1', at: NOW - 10 });
  store.apply({ type: 'comment', user_id: 'v', author_id: 'a', post_id: 'p2', at: NOW - 20 });
  t.same(
    store.affinity('v', 'a'),
    { interaction_count: 2, last_interaction_at: NOW - 10 },
    'a late event does not move last_interaction_at back',
  );
  t.equal(store.affinity('a', 'v'), undefined, 'direction matters');
  t.equal(store.affinity('v1', '2'), undefined);
  store.apply({ type: 'like', user_id: 'v1', author_id: '2', post_id: 'p3', at: NOW });
  t.equal(store.affinity('v', 'a1'), undefined, 'length-prefixed keys: (v1, 2) is not (v, 12)');
  store.apply({ type: 'like', user_id: 'x', author_id: 'y', post_id: 'p4', at: NOW });
  store.apply({ type: 'like', user_id: 'z', author_id: 'y', post_id: 'p5', at: NOW });
  t.equal(store.pairCount, 3);
  t.equal(store.postCount, 2);
  t.equal(store.affinity('v', 'a'), undefined, 'the least recently touched pair went first');
});

t.test('engagement records: encode and parse round-trip; anything malformed is null, never a throw', async () => {
  const e: EngagementEvent = { type: 'repost', user_id: 'u', author_id: 'a', post_id: 'p', at: NOW };
  t.same(parseEngagement(encodeEngagement(e)), e);
  for (const bad of [
    '',
    'nope',
    'null',
    '[]',
    '{"type":"view","user_id":"u","author_id":"a","post_id":"p","at":1}',
    '{"type":"like","user_id":1,"author_id":"a","post_id":"p","at":1}',
    '{"type":"like","user_id":"u","author_id":"a","post_id":"p","at":-1}',
    '{"type":"like","user_id":"u","author_id":"a","post_id":"p"}',
  ]) {
    t.equal(parseEngagement(bad), null, bad);
  }
});

t.test('rank requests: bad input is a bad_request naming the field', async () => {
  const ok = {
    op: 'rank',
    viewer: 'v',
    now: NOW,
    candidates: [
      {
        post_id: 'p',
        author_id: 'a',
        created_at: NOW,
        content_type: 'media',
        engagement: { likes: 1, comments: 0, shares: 0 },
      },
    ],
  };
  t.same(parseRankerRequest(ok), ok);
  const cases: Array<[unknown, RegExp]> = [
    [null, /op/],
    [{ op: 'nope' }, /op/],
    [{ ...ok, viewer: '' }, /viewer/],
    [{ ...ok, candidates: 'x' }, /candidates/],
    [{ ...ok, candidates: Array.from({ length: 2_001 }, () => ok.candidates[0]) }, /at most 2000/],
    [{ ...ok, candidates: [{ ...ok.candidates[0], content_type: 'gif' }] }, /candidates\[0\]\.content_type/],
    [{ ...ok, candidates: [{ ...ok.candidates[0], created_at: 1.5 }] }, /candidates\[0\]\.created_at/],
    [
      { ...ok, candidates: [{ ...ok.candidates[0], engagement: { likes: -1, comments: 0, shares: 0 } }] },
      /engagement\.likes/,
    ],
    [{ ...ok, candidates: [{ ...ok.candidates[0], engagement: null }] }, /engagement/],
    [{ ...ok, fresh: 'yes' }, /fresh/],
    [{ ...ok, now: 'soon' }, /now/],
    [{ op: 'affinity', viewer: 'v' }, /author/],
  ];
  for (const [raw, field] of cases) {
    let thrown: unknown = null;
    try {
      parseRankerRequest(raw);
    } catch (e) {
      thrown = e;
    }
    t.ok(
      thrown instanceof RpcError && thrown.code === 'bad_request' && field.test(thrown.message),
      `${JSON.stringify(raw)?.slice(0, 80)}: ${String(thrown)}`,
    );
  }
});

t.test(
  'recent rankings: the same candidate set within 60 s is served again; another set or an older entry is not',
  async () => {
    const cache = new RecentRankings(2, 60_000);
    const set = (ids: string[]): Candidate[] =>
      ids.map((post_id) => ({
        post_id,
        author_id: 'a',
        created_at: NOW,
        content_type: 'text',
        engagement: { likes: 0, comments: 0, shares: 0 },
      }));
    const print = fingerprint(set(['p1', 'p2']));
    t.equal(fingerprint(set(['p2', 'p1'])), print, 'the order of the candidates does not matter');
    t.not(fingerprint(set(['p1', 'p2', 'p3'])), print);
    t.not(fingerprint(set(['p1p', '2'])), fingerprint(set(['p1', 'p2'])), 'ids do not run into each other');
    const ranked = [
      { post_id: 'p2', score: 1 },
      { post_id: 'p1', score: 0 },
    ];
    cache.put('v', print, ranked, NOW);
    t.same(cache.get('v', print, NOW + 59_999)?.ranked, ranked);
    t.equal(cache.get('v', print, NOW + 60_000), undefined, 'expired at 60 s');
    t.equal(cache.get('v', fingerprint(set(['p1'])), NOW + 1), undefined, 'another candidate set');
    t.equal(cache.get('w', print, NOW + 1), undefined, 'another viewer');
    cache.put('w', print, ranked, NOW);
    cache.put('x', print, ranked, NOW);
    t.equal(cache.size, 2, 'bounded');
    t.equal(cache.get('v', print, NOW + 1), undefined, 'the least recently used viewer went first');
  },
);

// Scoring reads features only through FeatureView: a view answering nothing is the same as no features at all.
t.test('a feature view with no data scores like NO_FEATURES', async () => {
  const empty: FeatureView = { affinity: () => undefined, velocity: () => undefined };
  fc.assert(
    fc.property(
      candidatesArb,
      (c) => JSON.stringify(rank('v', c, empty, NOW)) === JSON.stringify(rank('v', c, NO_FEATURES, NOW)),
    ),
  );
});
