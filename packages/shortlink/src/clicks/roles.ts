/** The click path's worker roles, in start order: the stream first, then its consumer. */
import type { WorkerRole } from '@raftkit/http';
import { startStreamWorker } from '@raftkit/stream';
import { startAnalyticsWorker } from './analytics.js';

export const clickWorkerRoles: WorkerRole[] = [
  { role: 'stream', count: 1, start: startStreamWorker },
  { role: 'analytics', count: 1, start: startAnalyticsWorker },
];
