/** The kv benchmark's issue-21 goal: 1.5x etcd's throughput at no more than 0.8x its p99, both at once. */
import t from 'tap';
import type { SideResult } from '../src/benchmark.js';
import { kvGoals } from '../src/benchmarks/kv.js';

function side(opsPerSec: number, p99Ms: number): SideResult {
  return { ops_per_sec: opsPerSec, p99_ms: p99Ms, concurrency: 64 } as unknown as SideResult;
}

t.test('met only when both the throughput and the p99 ratio are within the goal', async (t) => {
  const [met] = kvGoals(side(6000, 28), side(3800, 36));
  t.equal(met?.met, true, '1.58x at 0.78x');
  t.match(met?.detail, /1\.58x at 0\.78x/);
  t.match(met?.goal, /1\.5x .* 0\.8x .*64 in flight/);
  t.equal(kvGoals(side(6422, 25.4), side(4692, 30))[0]?.met, false, '1.37x at 0.85x: throughput short');
  t.equal(kvGoals(side(8000, 33), side(4000, 40))[0]?.met, false, '2x at 0.83x: p99 too high');
  t.equal(kvGoals(side(6000, 24), side(4000, 30))[0]?.met, true, 'exactly 1.5x at 0.8x is met');
});

t.test('no goal without a peer to judge against', async (t) => {
  t.same(kvGoals(side(6000, 28), null), []);
  t.same(kvGoals(side(6000, 28), side(0, 0)), [], 'a peer that did nothing is no yardstick');
});
