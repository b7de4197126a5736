/** The click path's worker roles, in start order: the stream first, then its consumer. */
import type { WorkerRole } from '@raftkit/http';
import { startStreamWorker } from '@raftkit/stream';
import { startAnalyticsWorker } from './analytics.js';

/**
 * The click stream's group-commit window unless `stream_commit_ms` is set. Each commit costs an fdatasync, an ack
 * per producer and a socket write per producer (a producer sends what waited for the ack, see the stream README),
 * so at the stream's 5 ms those dominated the click path's CPU per redirect; a click reaching the stream 20 ms
 * later changes nothing for anyone (analytics batches wait up to 200 ms anyway).
 */
export const CLICK_COMMIT_MS = 20;

/**
 * Stream partitions and analytics workers `cluster up` starts by default (`--workers stream=N,analytics=M`
 * changes them; the layout is fixed for the cluster's life, see partition.ts). Two of each: one stream and one
 * consumer could not follow the redirect rate (CLICKS.md), and partitions by short code let both scale out.
 */
export const DEFAULT_CLICK_PARTITIONS = 2;
export const DEFAULT_ANALYTICS_WORKERS = 2;

export const clickWorkerRoles: WorkerRole[] = [
  {
    role: 'stream',
    count: DEFAULT_CLICK_PARTITIONS,
    start: (options) => startStreamWorker({ ...options, settings: { stream_commit_ms: String(CLICK_COMMIT_MS), ...options.settings } }),
  },
  { role: 'analytics', count: DEFAULT_ANALYTICS_WORKERS, start: startAnalyticsWorker },
];
