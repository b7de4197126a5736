/** The click path's worker roles, in start order: the stream first, then its consumer. */
import type { WorkerRole } from '@raftkit/http';
import { startStreamWorker } from '@raftkit/stream';
import { startAnalyticsWorker } from './analytics.js';

/**
 * The click stream's group-commit window unless `stream_commit_ms` is set. Each commit costs an fdatasync, an ack
 * per producer and a socket write per producer (a producer sends what waited for the ack, see the stream README),
 * so at the stream's 5 ms those dominated the click path's CPU per redirect. 50 ms (with 50 ms click blocks)
 * against 20: the stream's CPU per redirect 8.0-8.2 -> 5.0-5.3 us at a fixed 6,000 redirects/s (3 alternated
 * pairs; its cost is per commit and per block, so per second, not per click). 100 ms (with 100 ms click blocks)
 * against 50: 3.4-3.5 -> 1.8 us per redirect at a fixed 10,000 redirects/s (test/load/redirect-cpu.js, 2
 * alternated pairs, and 3 more with 1,000-click blocks). A click reaching the stream later changes nothing for
 * anyone: analytics writes its aggregates every 5 s (store.ts).
 */
export const CLICK_COMMIT_MS = 100;

/**
 * Stream partitions and analytics workers `cluster up` starts by default (`--workers stream=N,analytics=M`
 * changes them; the layout is fixed for the cluster's life, see partition.ts). One of each: with click blocks one
 * partition keeps up with the redirect rate, and on 2 shared cores a second stream and consumer cost more CPU per
 * redirect than they give (bench/RESULTS.md, shortlink, findings); give a cluster more partitions when it has the
 * cores for them.
 */
const DEFAULT_CLICK_PARTITIONS = 1;
const DEFAULT_ANALYTICS_WORKERS = 1;

export const clickWorkerRoles: WorkerRole[] = [
  {
    role: 'stream',
    count: DEFAULT_CLICK_PARTITIONS,
    start: (options) =>
      startStreamWorker({ ...options, settings: { stream_commit_ms: String(CLICK_COMMIT_MS), ...options.settings } }),
  },
  { role: 'analytics', count: DEFAULT_ANALYTICS_WORKERS, start: startAnalyticsWorker },
];
