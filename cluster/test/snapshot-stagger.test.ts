/**
 * Members of one cluster take snapshots on different periods (src/host.ts staggeredSnapshotEvery), so that they
 * do not all stop to snapshot at the same log index: each member's period depends on its id's rank only, and no
 * two members of a cluster share one.
 */
import t from 'tap';
import { staggeredSnapshotEvery } from '../src/host.js';

t.test('five members: five periods from the base to 1.4 times it, by the rank of the id', async (t) => {
  const ids = ['n3', 'n1', 'n5', 'n2', 'n4'];
  const periods = Object.fromEntries(ids.map((id) => [id, staggeredSnapshotEvery(100_000, id, ids)]));
  t.same(periods, { n1: 100_000, n2: 110_000, n3: 120_000, n4: 130_000, n5: 140_000 });
  t.equal(staggeredSnapshotEvery(100_000, 'n4', ['n1', 'n2', 'n3', 'n5']), 130_000, 'the same whether the list names the member or not');
});

t.test('any cluster: periods distinct, within [base, 1.5 x base), the same on every start', async (t) => {
  for (const n of [1, 2, 3, 7, 9]) {
    const ids = Array.from({ length: n }, (_, i) => `member-${String.fromCharCode(97 + ((i * 7) % 26))}${i}`);
    const periods = ids.map((id) => staggeredSnapshotEvery(10_000, id, ids));
    t.equal(new Set(periods).size, n, `${n} members, ${n} periods`);
    t.ok(periods.every((p) => p >= 10_000 && p < 15_000), `${n} members: ${periods.join(', ')}`);
    t.same(ids.map((id) => staggeredSnapshotEvery(10_000, id, [...ids].reverse())), periods, 'order of the list does not matter');
  }
  t.equal(staggeredSnapshotEvery(1, 'a', ['a', 'b']), 1, 'a tiny base stays at least as often as asked for the first member');
});
