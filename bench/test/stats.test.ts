/** Latency figures: exact nearest-rank quantiles at the end, a bucketed estimate on the progress line. */
import t from 'tap';
import { Histogram, Samples, summarize } from '../src/stats.js';

t.test('summarize gives nearest-rank quantiles', async (t) => {
  const xs = Array.from({ length: 1000 }, (_, i) => 1000 - i); // 1..1000 in reverse
  const s = summarize(xs);
  t.equal(s.count, 1000);
  t.equal(s.p50_ms, 500);
  t.equal(s.p90_ms, 900);
  t.equal(s.p99_ms, 990);
  t.equal(s.p999_ms, 999);
  t.equal(s.max_ms, 1000);
  t.equal(s.mean_ms, 500.5);
});

t.test('summarize of nothing is all zeros', async (t) => {
  t.same(summarize([]), { count: 0, mean_ms: 0, p50_ms: 0, p90_ms: 0, p99_ms: 0, p999_ms: 0, max_ms: 0 });
});

t.test('Samples grows past its first block', async (t) => {
  const s = new Samples();
  for (let i = 0; i < 40_000; i++) s.push(i);
  t.equal(s.length, 40_000);
  t.equal(s.view()[39_999], 39_999);
  t.equal(summarize(s.view()).max_ms, 39_999);
});

t.test('Histogram quantiles are within 2% of the truth', async (t) => {
  const h = new Histogram();
  const xs: number[] = [];
  for (let i = 0; i < 10_000; i++) {
    const x = 0.05 + ((i * 7919) % 10_000) / 50; // 0.05 .. 200 ms, scrambled
    xs.push(x);
    h.record(x);
  }
  const exact = summarize(xs);
  for (const [q, truth] of [
    [0.5, exact.p50_ms],
    [0.99, exact.p99_ms],
  ] as const) {
    const est = h.quantile(q);
    t.ok(est >= truth * 0.999 && est <= truth * 1.021, `q${q}: ${est} vs ${truth}`);
  }
  t.equal(new Histogram().quantile(0.99), 0);
});
