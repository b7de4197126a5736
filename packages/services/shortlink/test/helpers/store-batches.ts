/**
 * Deterministic click batches for the analytics store's crash test (test/clicks/store-interval.test.ts), and the
 * child process it kills: `node store-batches.js <path> <flushMs>` applies batch after batch to the store at
 * <path>, consuming "stream offsets" from the one on disk (as the consumer does), and prints each offset it
 * counted, until killed.
 */
import type { StreamedClick } from '../../src/workers/clicks/wire.js';

export const CODES = ['aaaaaaa', 'bbbbbbb', 'ccccccc', 'ddddddd'];
export const HOSTS = ['h1.example', 'h2.example', 'h3.example', 'other', null];
export const DAY = Date.UTC(2026, 10, 26, 12);
/** Clicks per batch (record): the batch at stream offset o holds seqs [o * PER_BATCH, (o + 1) * PER_BATCH). */
export const PER_BATCH = 7;

/** The clicks of the record at stream offset `o` (the same on every call). */
export function batchAt(o: number): StreamedClick[] {
  return Array.from({ length: PER_BATCH }, (_, i) => {
    const n = o * PER_BATCH + i;
    // A small LCG of n: varied, and the same in both processes.
    const r = (Math.imul(n + 1, 2654435761) >>> 0) % 1000;
    const host = HOSTS[r % HOSTS.length];
    return {
      producer: 'p',
      seq: n,
      short_code: CODES[(r >> 3) % CODES.length]!,
      timestamp: DAY + (r % 3) * 86_400_000,
      referer: host === null || host === undefined ? null : `https://${host}/x`,
      country: r % 2 === 0 ? 'DE' : null,
      user_agent: null,
    };
  });
}

if (process.argv[1]?.endsWith('store-batches.js') && process.argv[2] !== undefined) {
  const { AnalyticsStore } = await import('../../src/workers/clicks/store.js');
  const store = await AnalyticsStore.open(process.argv[2], { maxReferers: 2, flushMs: Number(process.argv[3] ?? 20) });
  process.stdout.write(`start ${store.nextOffset}\n`);
  for (;;) {
    const o = store.nextOffset;
    await store.apply(batchAt(o), o + 1);
    process.stdout.write(`counted ${o + 1} durable ${store.committedOffset}\n`);
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
}
