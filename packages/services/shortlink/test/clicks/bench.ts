/**
 * Benchmark of the analytics consumer path (not run by tap): synthetic clicks, encoded as the emitter does,
 * decoded, aggregated and written in batches to a fresh LevelDB store, then random per-link stats reads.
 *   node packages/services/shortlink/dist/test/clicks/bench.js [--clicks 10000000] [--links 1000000] [--batch 1000] [--dir DIR]
 * Link popularity is skewed (a few hot links, a long tail), clicks span 30 days, 20 countries and 50 referers.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { AnalyticsStore } from '../../src/workers/clicks/store.js';
import { decodeClick, encodeClick } from '../../src/workers/clicks/wire.js';

const { values } = parseArgs({
  options: {
    clicks: { type: 'string', default: '10000000' },
    links: { type: 'string', default: '1000000' },
    batch: { type: 'string', default: '1000' },
    dir: { type: 'string' },
  },
});
const clicks = Number(values.clicks);
const links = Number(values.links);
const batchSize = Number(values.batch);
const dir = values.dir ?? mkdtempSync(join(tmpdir(), 'clicks-bench-'));

// A small deterministic PRNG (mulberry32), so runs are comparable.
let state = 42;
const random = () => {
  state = (state + 0x6d2b79f5) | 0;
  let x = Math.imul(state ^ (state >>> 15), 1 | state);
  x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
  return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
};
/** Skewed link choice: link k has weight ~ 1/(k+1). */
const pickLink = () => Math.floor(Math.exp(random() * Math.log(links + 1))) - 1;
const code = (k: number) => `L${k.toString(36).padStart(6, '0')}`;
const countries = Array.from({ length: 20 }, (_, i) => String.fromCharCode(65 + (i % 26), 65 + ((i * 7) % 26)));
const day0 = Date.UTC(2026, 0, 1);

const store = await AnalyticsStore.open(join(dir, 'aggregates'));
const started = performance.now();
let offset = 0;
let lastReport = started;
while (offset < clicks) {
  const n = Math.min(batchSize, clicks - offset);
  const records = Array.from({ length: n }, (_, i) =>
    encodeClick('bench', offset + i, {
      short_code: code(pickLink()),
      timestamp: day0 + Math.floor(random() * 30) * 86_400_000 + Math.floor(random() * 86_400_000),
      referer: random() < 0.3 ? null : `https://ref${Math.floor(random() * 50)}.example/page`,
      country: countries[Math.floor(random() * countries.length)]!,
      user_agent: 'Mozilla/5.0 (bench)',
    }),
  );
  await store.apply(records.map(decodeClick), offset + n);
  offset += n;
  if (performance.now() - lastReport > 10_000) {
    lastReport = performance.now();
    console.log(`${offset} clicks, ${Math.round(offset / ((lastReport - started) / 1000))} clicks/s so far`);
  }
}
await store.flush();
const seconds = (performance.now() - started) / 1000;

const latencies: number[] = [];
let sum = 0;
for (let i = 0; i < 2_000; i++) {
  const k = i < 100 ? i : pickLink();
  const t0 = performance.now();
  const stats = await store.stats(code(k));
  latencies.push(performance.now() - t0);
  sum += stats.total;
}
latencies.sort((a, b) => a - b);
const pct = (p: number) => latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))]!.toFixed(2);
const hottest = await store.stats(code(0));
console.log(
  JSON.stringify({
    clicks,
    links,
    batch: batchSize,
    seconds: Number(seconds.toFixed(1)),
    clicks_per_second: Math.round(clicks / seconds),
    stats_reads: latencies.length,
    stats_read_ms: { p50: pct(0.5), p99: pct(0.99), max: pct(1) },
    hottest_link: {
      total: hottest.total,
      keys:
        1 +
        Object.keys(hottest.by_day).length +
        Object.keys(hottest.by_country).length +
        Object.keys(hottest.by_referer).length,
    },
    clicks_in_sampled_links: sum,
  }),
);
await store.close();
if (values.dir === undefined) rmSync(dir, { recursive: true, force: true });
