import t from 'tap';
import { MetricsRegistry } from '../src/index.js';

t.test('a counter series handle adds to the same series as inc with the same labels', async (t) => {
  const registry = new MetricsRegistry();
  const calls = registry.counter('calls_total', 'Calls by outcome');
  const ok = calls.series({ service: 'demo', outcome: 'ok' });
  t.match(registry.render(), /calls_total\{outcome="ok",service="demo"\} 0/, 'the series shows from the start, at 0');
  ok.inc(3);
  ok.inc();
  // Labels in another order name the same series.
  calls.inc(2, { outcome: 'ok', service: 'demo' });
  calls.inc(1, { service: 'demo', outcome: 'timeout' });
  const text = registry.render();
  t.match(text, /calls_total\{outcome="ok",service="demo"\} 6/);
  t.match(text, /calls_total\{outcome="timeout",service="demo"\} 1/);
  t.notMatch(text, /^calls_total 0$/m, 'no empty unlabelled series beside the labelled ones');
});

t.test('a series label value is escaped as the text format needs', async (t) => {
  const registry = new MetricsRegistry();
  registry.counter('odd_total', 'Odd labels').series({ path: 'a"b\\c\nd' }).inc(2);
  t.match(registry.render(), /odd_total\{path="a\\"b\\\\c\\nd"\} 2/);
});
