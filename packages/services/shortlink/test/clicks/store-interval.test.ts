/**
 * The analytics store writes once per interval (store.ts): counted clicks wait in memory until the interval's
 * write, which is written by its timer without a flush, and a crash (SIGKILL of a real process, between or during
 * writes) loses the unwritten intervals whole, never part of one: consuming again from the offset on disk gives
 * exactly the counts of every batch once.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { AnalyticsStore } from '../../src/workers/clicks/store.js';
import type { LinkStats } from '../../src/workers/clicks/record.js';
import { batchAt, CODES } from '../helpers/store-batches.js';
import { refererHost } from '../../src/workers/clicks/aggregate.js';

const child = fileURLToPath(new URL('../helpers/store-batches.js', import.meta.url));

/** The stats of `code` after the batches at offsets [0, records), each counted once (referer cap 2). */
function model(records: number, code: string): LinkStats {
  const st: LinkStats = { short_code: code, total: 0, by_day: {}, by_country: {}, by_referer: {} };
  const hosts: string[] = [];
  for (let o = 0; o < records; o++) {
    for (const c of batchAt(o)) {
      if (c.short_code !== code) continue;
      st.total++;
      const day = new Date(c.timestamp).toISOString().slice(0, 10);
      st.by_day[day] = (st.by_day[day] ?? 0) + 1;
      const country = c.country ?? 'unknown';
      st.by_country[country] = (st.by_country[country] ?? 0) + 1;
      const host = refererHost(c.referer);
      if (host !== 'other' && !hosts.includes(host) && hosts.length < 2) hosts.push(host);
      const key = host === 'other' || !hosts.includes(host) ? 'other' : host;
      st.by_referer[key] = (st.by_referer[key] ?? 0) + 1;
    }
  }
  return st;
}

t.test('counted clicks are written by the interval timer, without a flush', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'clicks-interval-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const store = await AnalyticsStore.open(join(dir, 'agg'), { maxReferers: 2, flushMs: 300 });
  t.teardown(() => store.close());
  await store.apply(batchAt(0), 1);
  await store.apply(batchAt(1), 2);
  t.equal(store.nextOffset, 2, 'both batches counted in memory');
  t.equal(store.committedOffset, 0, 'nothing written before the interval ends');
  t.equal((await store.stats(CODES[0]!)).total, 0, 'stats read what is on disk');
  const started = Date.now();
  while (store.committedOffset < 2 && Date.now() - started < 10_000) await new Promise((r) => setTimeout(r, 20));
  t.equal(store.committedOffset, 2, `written by the timer after ${Date.now() - started} ms`);
  for (const code of CODES) t.same(await store.stats(code), model(2, code), `stats of ${code}`);
});

t.test(
  'SIGKILL at random moments: every batch is counted exactly once after resuming from the offset on disk',
  async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'clicks-crash-'));
    t.teardown(() => rmSync(dir, { recursive: true, force: true }));
    const path = join(dir, 'agg');
    let lost = 0;
    for (let round = 0; round < 6; round++) {
      const proc = spawn(process.execPath, [child, path, String(10 + round * 15)], {
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      let out = '';
      proc.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
      // Killed a while after it started counting (a loaded machine may take long to start it).
      const started = Date.now();
      while (!/^counted /m.test(out) && Date.now() - started < 60_000) await new Promise((r) => setTimeout(r, 10));
      await new Promise((r) => setTimeout(r, 100 + ((round * 211) % 400)));
      proc.kill('SIGKILL');
      await new Promise((r) => proc.once('exit', r));
      const counted = [...out.matchAll(/^counted (\d+)/gm)].map((m) => Number(m[1]));
      const reached = counted.at(-1) ?? 0;
      const store = await AnalyticsStore.open(path, { maxReferers: 2 });
      const durable = store.committedOffset;
      t.ok(durable <= reached, `round ${round}: ${durable} on disk of ${reached} counted when killed`);
      lost += reached - durable;
      await store.close();
    }
    t.ok(lost > 0, `some counted batches were lost to the kills (${lost} in all) and are counted again below`);
    // The consumer's way on: from the offset on disk, re-sending a few already counted records first (duplicates).
    const store = await AnalyticsStore.open(path, { maxReferers: 2, flushMs: 50 });
    const from = store.nextOffset;
    const end = from + 40;
    if (from > 0) await store.apply(batchAt(from - 1), from);
    for (let o = from; o < end; o++) await store.apply(batchAt(o), o + 1);
    await store.flush();
    t.equal(store.committedOffset, end);
    for (const code of CODES)
      t.same(await store.stats(code), model(end, code), `stats of ${code} after ${end} records`);
    await store.close();
  },
);
