/** The shortlink benchmark's pure parts: long URLs of an exact length, and redirects by cache from /metrics. */
import t from 'tap';
import { longUrl, redirectsByCache, sumMetric } from '../src/benchmarks/shortlink.js';

t.test('long URLs have exactly the asked length and differ per link', async (t) => {
  for (const size of [40, 80, 2048]) t.equal(longUrl(12345, size).length, size);
  t.not(longUrl(1, 80), longUrl(2, 80));
  t.ok(new URL(longUrl(9, 80)).protocol === 'https:');
  t.throws(() => longUrl(1, 10), /--size must be at least/);
});

t.test('redirects are counted by the cache that answered', async (t) => {
  const text = [
    '# HELP shortlink_redirects_total Redirect requests by outcome and the cache that answered',
    '# TYPE shortlink_redirects_total counter',
    'shortlink_redirects_total{cache="edge",outcome="redirect"} 900',
    'shortlink_redirects_total{cache="store",outcome="redirect"} 100',
    'shortlink_redirects_total{cache="edge",outcome="not_found"} 3',
    'shortlink_creates_total{outcome="created"} 7',
  ].join('\n');
  t.same(redirectsByCache(text), { redirects_from_edge: 900, redirects_from_store: 100, redirects_not_found: 3 });
  t.same(redirectsByCache(''), {});
});

t.test('sumMetric adds a counter over processes and label sets', async (t) => {
  const a =
    '# TYPE clicks_dropped_total counter\nclicks_dropped_total{reason="buffer_full"} 3\nclicks_dropped_total{reason="shutdown"} 2\nclicks_dropped_totals 99\n';
  const b = 'clicks_dropped_total 5\nanalytics_clicks_counted_total 7\n';
  t.equal(sumMetric([a, b], 'clicks_dropped_total'), 10);
  t.equal(sumMetric([a, b], 'analytics_clicks_counted_total'), 7);
  t.equal(sumMetric([], 'x'), 0);
});
