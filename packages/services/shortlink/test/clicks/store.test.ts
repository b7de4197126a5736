/**
 * The analytics store on a real LevelDB against a model: random batches of clicks (some links, some referer hosts,
 * the literal host "other", duplicates re-sent) applied one after the other, with the store sometimes reopened
 * (cold cache: counters read back from disk) or its cache kept tiny (evictions between batches), must give
 * exactly the model's stats: every click counted once, a link's first `maxReferers` distinct hosts (in the order
 * they first arrived) with their own counters and every later host under "other".
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import t from 'tap';
import { AnalyticsStore } from '../../src/workers/clicks/store.js';
import type { LinkStats } from '../../src/workers/clicks/record.js';
import type { StreamedClick } from '../../src/workers/clicks/wire.js';

const CODES = ['aaaaaaa', 'bbbbbbb', 'ccccccc'];
const HOSTS = ['h1.example', 'h2.example', 'h3.example', 'h4.example', 'other', null];
const DAY = Date.UTC(2026, 10, 25, 12);

interface Step {
  clicks: Array<{ code: number; host: number; country: boolean }>;
  /** Re-send this many of the previous batch's clicks first (at-least-once redelivery): they must be skipped. */
  resend: number;
  reopen: boolean;
}

const step = fc.record({
  clicks: fc.array(
    fc.record({ code: fc.nat(CODES.length - 1), host: fc.nat(HOSTS.length - 1), country: fc.boolean() }),
    { minLength: 1, maxLength: 30 },
  ),
  resend: fc.nat(5),
  reopen: fc.boolean(),
});

function model(steps: Step[], maxReferers: number): Map<string, LinkStats> {
  const stats = new Map<string, LinkStats>();
  const hosts = new Map<string, string[]>();
  for (const s of steps) {
    for (const c of s.clicks) {
      const code = CODES[c.code]!;
      const host = HOSTS[c.host] ?? 'direct';
      const st = stats.get(code) ?? { short_code: code, total: 0, by_day: {}, by_country: {}, by_referer: {} };
      stats.set(code, st);
      st.total++;
      st.by_day['2026-11-25'] = (st.by_day['2026-11-25'] ?? 0) + 1;
      const country = c.country ? 'DE' : 'unknown';
      st.by_country[country] = (st.by_country[country] ?? 0) + 1;
      const seen = hosts.get(code) ?? [];
      hosts.set(code, seen);
      // "other" is both a host name and the overflow counter: clicks from a host called "other" count there.
      if (host !== 'other' && !seen.includes(host) && seen.length < maxReferers) seen.push(host);
      const key = host === 'other' || !seen.includes(host) ? 'other' : host;
      st.by_referer[key] = (st.by_referer[key] ?? 0) + 1;
    }
  }
  return stats;
}

t.test('batches, redeliveries, reopens and a tiny cache give exactly the model counts', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'clicks-store-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  let run = 0;
  await fc.assert(
    fc.asyncProperty(
      fc.array(step, { minLength: 1, maxLength: 12 }),
      fc.integer({ min: 1, max: 3 }),
      fc.integer({ min: 1, max: 8 }),
      async (steps, maxReferers, cacheKeys) => {
        const path = join(dir, `run-${run++}`);
        const options = { maxReferers, cacheKeys };
        let store = await AnalyticsStore.open(path, options);
        let seq = 0;
        let offset = 0;
        let previous: StreamedClick[] = [];
        for (const s of steps) {
          if (s.reopen) {
            await store.close();
            store = await AnalyticsStore.open(path, options);
          }
          const fresh = s.clicks.map(
            (c): StreamedClick => ({
              producer: 'p',
              seq: seq++,
              short_code: CODES[c.code]!,
              timestamp: DAY,
              referer: HOSTS[c.host] === null ? null : `https://${HOSTS[c.host]}/x`,
              country: c.country ? 'DE' : null,
              user_agent: null,
            }),
          );
          const batch = [...previous.slice(-s.resend), ...fresh];
          offset += 1;
          await store.apply(batch, offset);
          previous = fresh;
        }
        await store.flush();
        const expected = model(steps, maxReferers);
        for (const code of CODES) {
          const want = expected.get(code) ?? { short_code: code, total: 0, by_day: {}, by_country: {}, by_referer: {} };
          t.same(await store.stats(code), want, `${code} after ${steps.length} batches`, { diagnostic: false });
        }
        t.equal(store.committedOffset, offset);
        await store.close();
      },
    ),
    { numRuns: 40 },
  );
});
