/** The chart: well-formed SVG that carries the figures, and escapes what it prints. */
import t from 'tap';
import type { Benchmark, RunOptions, SideResult } from '../src/benchmark.js';
import { buildReport, environment, formatReport } from '../src/report.js';
import { medianRound } from '../src/runner.js';
import { escapeXml, niceCeil, renderSvg } from '../src/svg.js';

const side = (system: string, ops: number, p50: number, p99: number): SideResult => ({
  system,
  members: 5,
  ops_per_sec: ops,
  ops: ops * 20,
  errors: 0,
  error_kinds: {},
  mean_ms: p50,
  p50_ms: p50,
  p90_ms: p99 / 2,
  p99_ms: p99,
  p999_ms: p99,
  max_ms: p99 * 2,
  duration_s: 20,
  warmup_s: 3,
  concurrency: 64,
  interrupted: false,
  server_cpu_s: 30,
  server_cpu_cores: 1.5,
  server_cpu_us_per_op: 700,
  client_cpu_cores: 0.3,
});
const bench: Benchmark = {
  name: 'kv',
  description: 'PUTs <fast> & "small"',
  title: () => 'kv: PUT <256> & friends',
  peers: ['etcd'],
  defaults: { durationS: 20, concurrency: 64, size: 256, warmupS: 3 },
  workload: () => ({ value_bytes: 256 }),
  runOurs: () => Promise.reject(new Error('not here')),
};
const o: RunOptions = {
  name: 'kv',
  vs: 'etcd',
  durationS: 20,
  warmupS: 3,
  concurrency: 64,
  out: '/tmp',
  routing: 'all',
  size: 256,
  keys: 100_000,
  rounds: 1,
  snapshotEvery: null,
  profileDir: null,
  noisyCores: 0.3,
};

/** Every tag opened is closed, in order. */
function balanced(svg: string): boolean {
  const stack: string[] = [];
  for (const m of svg.matchAll(/<(\/?)([a-zA-Z]+)[^>]*?(\/?)>/g)) {
    if (m[3] === '/') continue;
    if (m[1] === '/') {
      if (stack.pop() !== m[2]) return false;
    } else stack.push(m[2]!);
  }
  return stack.length === 0;
}

t.test('a report with a peer: ratios, verdict, and a chart with the numbers', async (t) => {
  const report = buildReport(
    bench,
    o,
    side('ours', 12_345, 4.2, 21.5),
    side('etcd 3.4.23', 10_000, 5, 25),
    environment(o, new Date('2026-01-02T03:04:05Z')),
  );
  t.equal(report.ratio, 1.23);
  t.equal(report.p99_ratio, 0.86);
  t.match(report.verdict, /^goal met against etcd: 123% of its throughput/);
  t.equal(report.command, 'npx bench kv --vs etcd --duration 20 --concurrency 64');
  t.match(formatReport(report), /ours\s+12345\s+4\.20\s+21\.50/);
  const svg = renderSvg(report);
  t.match(svg, /^<svg xmlns="http:\/\/www\.w3\.org\/2000\/svg"/);
  t.match(svg, /<\/svg>\n$/);
  t.ok(balanced(svg), 'tags are balanced');
  for (const text of ['12,345', '10,000', '4.20', '21.5', '>25<', 'etcd 3.4.23', '2026-01-02'])
    t.ok(svg.includes(text), `shows ${text}`);
  t.ok(svg.includes('kv: PUT &lt;256&gt; &amp; friends'), 'escapes the title');
  t.notMatch(svg.replace(/<[^>]*>/g, ''), /[<>]/, 'no raw angle brackets in text');
  t.notMatch(svg, /NaN|undefined|Infinity/);
});

t.test('a report against a target, and a missed goal', async (t) => {
  const raft = { ...bench, name: 'raft', peers: [], target: { ops_per_sec: 100_000, note: '' } };
  const report = buildReport(raft, { ...o, vs: null }, side('ours', 77_000, 20, 70), null, environment(o));
  t.equal(report.ratio, null);
  t.equal(report.target_ratio, 0.77);
  t.match(report.verdict, /target missed: 77% of the 100,000 ops\/s target/);
  const svg = renderSvg(report);
  t.ok(balanced(svg));
  t.ok(svg.includes('77,000') && svg.includes('100,000'));
});

t.test('helpers', async (t) => {
  t.equal(escapeXml('<a & "b">'), '&lt;a &amp; &quot;b&quot;&gt;');
  t.equal(niceCeil(0), 1);
  t.equal(niceCeil(110_000), 120_000);
  t.equal(niceCeil(2_010), 2_500);
  t.equal(niceCeil(7), 8);
  t.equal(niceCeil(1), 1);
});

t.test('medianRound keeps the median-throughput round whole and lists every round', async (t) => {
  t.equal(medianRound([]), null);
  const one = side('ours', 5, 1, 2);
  t.equal(medianRound([one]), one);
  const m = medianRound([side('ours', 300, 1, 30), side('ours', 100, 1, 10), side('ours', 200, 1, 20)])!;
  t.equal(m.ops_per_sec, 200);
  t.equal(m.p99_ms, 20);
  t.same(m.rounds_ops_per_sec, [300, 100, 200]);
  t.same(m.rounds_p99_ms, [30, 10, 20]);
  t.equal(medianRound([side('ours', 300, 1, 30), side('ours', 100, 1, 10)])!.ops_per_sec, 100);
});
