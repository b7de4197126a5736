/**
 * CPU per click of the analytics store alone (decode, dedup, aggregate, LevelDB), paced like `npx bench shortlink`:
 * RATE clicks/s (default 26,000) over 10,000 equally popular links, in blocks as 3 app servers send them every
 * 20 ms, one consumer batch every 200 ms, for SECONDS (default 12) after a 1 s warm-up. CPU is the process's
 * (LevelDB's threads included), from process.cpuUsage.
 * FLUSH_MS is the store's write interval (analytics_flush_ms; default the store's own).
 *   node packages/services/shortlink/dist/test/load/analytics-cpu.js [RATE] [SECONDS] [FLUSH_MS]
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AnalyticsStore } from '../../src/workers/clicks/store.js';
import { decodeRecord, encodeClicks } from '../../src/workers/clicks/wire.js';

const RATE = Number(process.argv[2] ?? 26_000);
const SECONDS = Number(process.argv[3] ?? 12);
const FLUSH_MS = process.argv[4] === undefined ? undefined : Number(process.argv[4]);
const LINKS = 10_000;
const APPS = 3;
const BATCHES_PER_S = 5;
const WARMUP_BATCHES = 5;
const dir = mkdtempSync(join(tmpdir(), 'analytics-cpu-'));
const store = await AnalyticsStore.open(join(dir, 'aggregates'), FLUSH_MS === undefined ? {} : { flushMs: FLUSH_MS });
const codes = Array.from({ length: LINKS }, (_, i) => `c${String(i).padStart(6, '0')}`);
const perBatch = Math.round(RATE / BATCHES_PER_S);
const perBlock = Math.max(1, Math.round(RATE / (APPS * 50)));
const seqs = new Array<number>(APPS).fill(0);
// Encoded up front, so the measured window holds only the consumer's work.
const batches: Uint8Array[][] = [];
for (let b = 0; b < (SECONDS + 1) * BATCHES_PER_S; b++) {
  const records: Uint8Array[] = [];
  for (let n = 0; n < perBatch; n += perBlock) {
    const app = records.length % APPS;
    const rows = Array.from({ length: perBlock }, () => ({
      short_code: codes[Math.floor(Math.random() * LINKS)]!,
      timestamp: Date.now(),
      referer: null,
      country: null,
      user_agent: null,
    }));
    records.push(encodeClicks(`app-${app}`, seqs[app]!, rows));
    seqs[app]! += rows.length;
  }
  batches.push(records);
}
const started = performance.now();
let cpu = process.cpuUsage();
let clicks = 0;
let offset = 0;
for (let b = 0; b < batches.length; b++) {
  if (b === WARMUP_BATCHES) {
    cpu = process.cpuUsage();
    clicks = 0;
  }
  const decoded = batches[b]!.flatMap(decodeRecord);
  offset += batches[b]!.length;
  await store.apply(decoded, offset);
  clicks += decoded.length;
  const due = started + ((b + 1) * 1000) / BATCHES_PER_S;
  await new Promise((resolve) => setTimeout(resolve, Math.max(0, due - performance.now())));
}
const used = process.cpuUsage(cpu);
await store.flush();
const withFlush = process.cpuUsage(cpu);
const us = (u: NodeJS.CpuUsage) => Math.round(((u.user + u.system) / clicks) * 100) / 100;
console.log(JSON.stringify({ clicks, us_per_click: us(used), us_per_click_with_last_write: us(withFlush) }));
await store.close();
rmSync(dir, { recursive: true, force: true });
