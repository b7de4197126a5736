/**
 * The click path's worker roles. The click log's hosts (`clicklog`, click-log.ts) are started before these by the
 * cluster (cluster/src/log-host-role.ts: they run the event log's member runtime), then the analytics workers.
 */
import type { WorkerRole } from '@raftkit/http';
import { startAnalyticsWorker } from './analytics.js';

/**
 * Analytics workers `cluster up` starts by default (`--workers analytics=M` changes it; the layout is fixed for the
 * cluster's life, see partition.ts). One: with click blocks one partition and one consumer keep up with the
 * redirect rate, and on 2 shared cores more cost more CPU per redirect than they give (bench/RESULTS.md, shortlink,
 * findings); give a cluster more partitions and consumers when it has the cores for them.
 */
const DEFAULT_ANALYTICS_WORKERS = 1;

export const clickWorkerRoles: WorkerRole[] = [
  { role: 'analytics', count: DEFAULT_ANALYTICS_WORKERS, slot: 2, start: startAnalyticsWorker },
];
