/** The lock benchmark's --sweep: which rates it runs, and how the highest rate under the p99 goal is judged. */
import t from 'tap';
import { benchmarkFlags } from '../src/report.js';
import { DEFAULT_SWEEP, highestRateUnderGoal, roleCpu, sweepFromArgs, type SweepStep } from '../src/benchmarks/lock.js';

t.test(
  '--sweep alone runs the default rates; a list runs those, sorted and once each; absent is no sweep',
  async (t) => {
    t.equal(sweepFromArgs(['node', 'bench', 'lock', '--vs', 'etcd']), null);
    t.same(sweepFromArgs(['node', 'bench', 'lock', '--sweep']), DEFAULT_SWEEP);
    t.same(sweepFromArgs(['node', 'bench', 'lock', '--sweep', '--vs', 'etcd']), DEFAULT_SWEEP);
    t.same(DEFAULT_SWEEP, [500, 1000, 1500, 2000, 3000, 5000, 10_000], "the spec's rates up to 10,000");
    t.same(sweepFromArgs(['node', 'bench', 'lock', '--sweep', '2000,500,2000']), [500, 2000]);
    t.throws(() => sweepFromArgs(['node', 'bench', 'lock', '--sweep', '500,x']), /positive rates/);
    t.throws(() => sweepFromArgs(['node', 'bench', 'lock', '--sweep', '0']), /positive rates/);
  },
);

t.test('the highest rate under 50 ms counts only steps under the goal and without errors', async (t) => {
  const step = (rate: number, p99: number, errors = 0): SweepStep => ({
    rate,
    lock_ops_per_sec: rate,
    acquire_p50_ms: p99 / 2,
    acquire_p99_ms: p99,
    errors,
    server_cpu_us_per_op: null,
    load_avg_1m_before: 1,
  });
  t.equal(highestRateUnderGoal([]), 0);
  t.equal(highestRateUnderGoal([step(500, 60)]), 0, 'none under the goal');
  t.equal(
    highestRateUnderGoal([step(500, 20), step(1000, 49.9), step(1500, 50)]),
    1000,
    '50 ms itself is not under 50 ms',
  );
  t.equal(
    highestRateUnderGoal([step(500, 20), step(1000, 80), step(1500, 30)]),
    1500,
    'a noisy step below does not hide a higher one',
  );
  t.equal(highestRateUnderGoal([step(500, 20), step(1000, 30, 3)]), 500, 'a step with errors does not count');
});

t.test("the results file's command keeps the flags a benchmark reads for itself", async (t) => {
  t.same(benchmarkFlags(['lock', '--vs', 'etcd', '--sweep', '--duration', '10']), ['--sweep']);
  t.same(benchmarkFlags(['lock', '--sweep', '500,1000', '--rate', '2000']), ['--sweep', '500,1000', '--rate', '2000']);
  t.same(benchmarkFlags(['ratelimit', '--pin', '--layout', 'separate', '--rounds', '3']), [
    '--pin',
    '--layout',
    'separate',
  ]);
});

t.test("members' CPU per cycle by role: the leader's, and one follower's as the followers' mean", async (t) => {
  t.same(roleCpu({ leader_cpu_s: 0.5, followers_cpu_s: 2.4 }, 2_000, 4), {
    leader_cpu_us_per_cycle: 250,
    follower_cpu_us_per_cycle: 300,
  });
  t.same(
    roleCpu({ leader_cpu_s: 0.5, followers_cpu_s: 2.4 }, 0, 4),
    { leader_cpu_us_per_cycle: null, follower_cpu_us_per_cycle: null },
    'no cycles, no figure',
  );
});
