// What a member's answers over time mean on the dashboard (cluster/src/dashboard/health.ts), clock passed in:
// a late answer is slow, a few misses are slow, only misses in a row over DOWN_AFTER_MS are down, one answer
// brings the role back.
import t from 'tap';
import { DOWN_AFTER_MISSES, DOWN_AFTER_MS, judge, newHealth, SLOW_MS } from '../src/dashboard/health.js';

t.test('an answer in time shows the role; a late one is slow with its latency and role', async (t) => {
  const h = newHealth();
  t.same(judge(h, { role: 'leader', latencyMs: 12 }, 1_000), {
    state: 'leader',
    role: 'leader',
    latencyMs: 12,
    misses: 0,
  });
  t.same(judge(h, { role: 'leader', latencyMs: SLOW_MS + 100 }, 2_000), {
    state: 'slow',
    role: 'leader',
    latencyMs: SLOW_MS + 100,
    misses: 0,
  });
  t.same(
    judge(h, { role: 'follower', latencyMs: 40 }, 3_000).state,
    'follower',
    'a 40 ms answer (a busy member) is not slow',
  );
});

t.test(
  'misses are slow until there are enough of them over a long enough time, then down; an answer ends it',
  async (t) => {
    const h = newHealth();
    judge(h, { role: 'follower', latencyMs: 5 }, 0);
    let now = 2_000;
    for (let i = 1; i < DOWN_AFTER_MISSES; i++, now += 2_000) {
      const j = judge(h, null, now);
      t.equal(j.state, 'slow', `miss ${i}: slow`);
      t.equal(j.role, 'follower', 'its last role is kept');
      t.equal(j.misses, i);
    }
    t.equal(judge(h, null, now).state, 'down', `${DOWN_AFTER_MISSES} misses over ${now - 2_000} ms: down`);
    t.equal(judge(h, { role: 'follower', latencyMs: 8 }, now + 1_000).state, 'follower', 'it answers again: back');
  },
);

t.test('many misses in a short burst (fast polls) are not down before DOWN_AFTER_MS', async (t) => {
  const h = newHealth();
  judge(h, { role: 'leader', latencyMs: 5 }, 0);
  for (let i = 0; i < DOWN_AFTER_MISSES * 3; i++)
    t.equal(judge(h, null, 1_000 + i * 100).state, 'slow', `miss ${i + 1} after ${i * 100} ms`);
  t.equal(judge(h, null, 1_000 + DOWN_AFTER_MS).state, 'down', 'and down once the misses span the window');
});

t.test('a member that never answered is slow, not a guess at a role', async (t) => {
  const h = newHealth();
  t.same(judge(h, null, 0), { state: 'slow', role: null, latencyMs: null, misses: 1 });
});
