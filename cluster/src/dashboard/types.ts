/** The dashboard's JSON shapes: the contract shared with the page (see the "Dashboard" section of cluster/README.md). */

export interface ProcessMetrics {
  /**
   * HTTP requests answered per second since the previous answered poll; null when this poll's /metrics call failed
   * (a gap in the chart, never a zero) or there is no earlier sample to take a difference from.
   */
  requestsPerSec: number | null;
  /** Latency quantiles of the requests answered since the previous poll (null when none). */
  p50Ms: number | null;
  p99Ms: number | null;
}

/**
 * `slow`: the process runs but answered its status later than SLOW_MS, or missed a few polls (not yet `down`, see
 * health.ts); `role` keeps what it last answered. `down`: its process is gone, or it missed DOWN_AFTER_MISSES polls
 * in a row over DOWN_AFTER_MS (then `pid` is still set).
 */
export type MemberState = 'leader' | 'follower' | 'candidate' | 'learner' | 'slow' | 'down' | 'paused' | 'removed';

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
  /** The role it last answered with (also while `slow` or `down` after missed polls); null if it never answered. */
  role: 'leader' | 'follower' | 'candidate' | 'learner' | null;
  /** The round trip of this poll's status call, ms; null when it did not answer. */
  latencyMs: number | null;
  /** Polls missed in a row (0 when the last one was answered). */
  missedPolls: number;
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
  /**
   * How old the oldest replica list behind this row is, ms: 0 when every running member answered this poll; a member
   * that missed its groups call keeps its last list (with this age) rather than dropping out of every group.
   */
  ageMs: number;
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
