/** The dashboard's JSON shapes: the contract shared with the page (see the "Dashboard" section of cluster/README.md). */

export interface ProcessMetrics {
  /** HTTP requests answered per second since the previous poll. */
  requestsPerSec: number;
  /** Latency quantiles of the requests answered since the previous poll (null when none). */
  p50Ms: number | null;
  p99Ms: number | null;
}

export type MemberState = 'leader' | 'follower' | 'candidate' | 'learner' | 'down' | 'paused' | 'removed';

export interface MemberView {
  id: string;
  state: MemberState;
  pid: number | null;
  term: number | null;
  leader: string | null;
  commit: number | null;
  applied: number | null;
  lag: number | null;
  cpuPercent: number | null;
  rssBytes: number | null;
  httpAddress: string;
  raftAddress: string;
  groupsLed: number;
  metrics: ProcessMetrics;
}

export interface WorkerView {
  id: string;
  role: string;
  pid: number | null;
  alive: boolean;
  cpuPercent: number | null;
  rssBytes: number | null;
  address: string;
  metrics: ProcessMetrics;
}

export interface GroupView {
  name: string;
  leader: string | null;
  term: number | null;
  members: Array<{ id: string; state: string; commit: number | null; applied: number | null }>;
}

export interface ClusterView {
  name: string;
  service: string;
  dataDir: string;
  members: MemberView[];
  workers: WorkerView[];
  groups: GroupView[];
  partition: string[][] | null;
}

export interface Overview {
  generatedAt: number;
  clusters: ClusterView[];
}

export type TimelineKind = 'leader' | 'election' | 'snapshot' | 'fault' | 'up' | 'down';

export interface TimelineEvent {
  seq: number;
  at: number;
  cluster: string;
  kind: TimelineKind;
  member: string | null;
  group: string | null;
  text: string;
}

export interface JepsenRun {
  name: string;
  workload: string | null;
  nemesis: string | null;
  valid: boolean | null;
  finishedAt: number | null;
  reportUrl: string;
}
