/**
 * The dashboard API's shapes, as the contract (issue 22) states them: what /api/overview, /api/timeline, /api/live
 * and /api/jepsen answer. The page only reads them; the CLI's dashboard server writes them.
 */

export type MemberState = 'leader' | 'follower' | 'candidate' | 'learner' | 'down' | 'paused' | 'removed';

export interface Metrics {
  requestsPerSec: number;
  p50Ms: number | null;
  p99Ms: number | null;
}

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
  metrics: Metrics;
}

export interface WorkerView {
  id: string;
  role: string;
  pid: number | null;
  alive: boolean;
  cpuPercent: number | null;
  rssBytes: number | null;
  address: string;
  metrics: Metrics;
}

export interface GroupMemberView {
  id: string;
  state: string;
  commit: number | null;
  applied: number | null;
}

export interface GroupView {
  name: string;
  leader: string | null;
  term: number | null;
  members: GroupMemberView[];
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

export type EventKind = 'leader' | 'election' | 'snapshot' | 'fault' | 'up' | 'down';

export interface TimelineEvent {
  seq: number;
  at: number;
  cluster: string;
  kind: EventKind;
  member: string | null;
  group: string | null;
  text: string;
}

export interface JepsenRun {
  name: string;
  workload: string;
  nemesis: string;
  valid: boolean | null;
  finishedAt: number | null;
  reportUrl: string;
}

export type FaultAction = 'kill' | 'restart' | 'pause' | 'resume' | 'partition' | 'heal';

export interface FaultRequest {
  action: FaultAction;
  member?: string;
  sides?: string[][];
  confirm?: true;
}

/** What /api/live pushes, at most once a second. */
export type LiveMessage = { type: 'overview'; overview: Overview } | { type: 'timeline'; events: TimelineEvent[] };
