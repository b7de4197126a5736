/** Argument checking: unknown benchmarks and peers, out-of-range numbers, per-benchmark defaults. */
import t from 'tap';
import type { Benchmark } from '../src/benchmark.js';
import { parseRunOptions } from '../src/options.js';

const stub = (name: string, peers: string[], target?: number): Benchmark => ({
  name,
  description: name,
  title: () => name,
  peers,
  defaults: { durationS: 20, concurrency: 64, size: 256, warmupS: 3 },
  ...(target !== undefined ? { target: { ops_per_sec: target, note: '' } } : {}),
  workload: () => ({}),
  runOurs: () => Promise.reject(new Error('not here')),
});
const benchmarks = { kv: stub('kv', ['etcd']), raft: stub('raft', [], 100_000) };

t.test('defaults come from the benchmark', async (t) => {
  const o = parseRunOptions('kv', {}, benchmarks);
  t.match(o, {
    name: 'kv',
    vs: null,
    durationS: 20,
    concurrency: 64,
    size: 256,
    warmupS: 3,
    routing: 'all',
    keys: 100_000,
    rounds: 1,
    snapshotEvery: null,
    profileDir: null,
  });
  t.match(o.out, /bench\/results\/?$/);
});

t.test('flags override the defaults', async (t) => {
  const o = parseRunOptions(
    'kv',
    {
      vs: 'etcd',
      duration: '5',
      concurrency: '256',
      warmup: '0',
      routing: 'leader',
      size: '1024',
      keys: '10',
      out: '/tmp/x',
    },
    benchmarks,
  );
  t.match(o, {
    vs: 'etcd',
    durationS: 5,
    concurrency: 256,
    warmupS: 0,
    routing: 'leader',
    size: 1024,
    keys: 10,
    out: '/tmp/x',
  });
});

t.test('bad input is refused with a message naming the flag', async (t) => {
  t.throws(() => parseRunOptions('nope', {}, benchmarks), /unknown benchmark "nope"; known: kv, raft/);
  t.throws(() => parseRunOptions('kv', { vs: 'zookeeper' }, benchmarks), /runs --vs etcd, not "zookeeper"/);
  t.throws(() => parseRunOptions('raft', { vs: 'etcd' }, benchmarks), /raft has no peer.*100,000 ops\/s/);
  t.throws(() => parseRunOptions('kv', { duration: '0' }, benchmarks), /--duration must be a number from 1 to 3600/);
  t.throws(() => parseRunOptions('kv', { duration: 'ten' }, benchmarks), /--duration/);
  t.throws(() => parseRunOptions('kv', { concurrency: '1.5' }, benchmarks), /--concurrency must be an integer/);
  t.throws(() => parseRunOptions('kv', { concurrency: '' }, benchmarks), /--concurrency/);
  t.throws(() => parseRunOptions('kv', { concurrency: '20000' }, benchmarks), /--concurrency/);
  t.throws(() => parseRunOptions('kv', { routing: 'random' }, benchmarks), /--routing must be all or leader/);
  t.throws(() => parseRunOptions('kv', { warmup: '-1' }, benchmarks), /--warmup/);
  t.throws(() => parseRunOptions('kv', { rounds: '0' }, benchmarks), /--rounds must be an integer from 1 to 9/);
});
