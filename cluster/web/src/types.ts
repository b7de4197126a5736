/**
 * The dashboard API's shapes: the server's own declarations (cluster/src/dashboard/types.ts, type-only imports, so
 * nothing of the server is bundled), plus the two the page writes or receives as messages.
 */
import type { Overview, TimelineEvent } from '../../src/dashboard/types.js';
import type { FaultAction } from '../../src/actions.js';

export type {
  ClusterView,
  GroupView,
  JepsenRun,
  MemberState,
  MemberView,
  Overview,
  ProcessMetrics as Metrics,
  TimelineEvent,
  TimelineKind as EventKind,
  WorkerView,
} from '../../src/dashboard/types.js';
export type { FaultAction } from '../../src/actions.js';

/** The body of POST /api/clusters/NAME/faults. */
export interface FaultRequest {
  action: FaultAction;
  member?: string;
  sides?: string[][];
  confirm?: true;
}

/** What /api/live pushes, at most once a second. */
export type LiveMessage = { type: 'overview'; overview: Overview } | { type: 'timeline'; events: TimelineEvent[] };
