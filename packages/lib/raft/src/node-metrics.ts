/**
 * A member's Raft metrics in Prometheus form, fed by the node's observer hooks and read from its status: what an
 * operator of an embedded group needs first (term and leadership, commit and apply progress, proposals by
 * outcome, elections, fsync and apply latency, snapshot sizes, apply errors, storage failure).
 */
import { MetricsRegistry } from './metrics.js';
import type { NodeObserver, NodeStatus } from './node.js';
import type { Entry, SoftState } from './types.js';

/** What RaftMetrics reads at render time: a RaftNode fits. */
export interface MetricsSource {
  /** The member's state now. */
  status(): NodeStatus;
  readonly isLeader: boolean;
}

/** Observer hooks called in turn, so a node can feed metrics, logs and your own hooks at once. */
export function combineObservers(...observers: Array<NodeObserver | undefined>): NodeObserver {
  const list = observers.filter((o): o is NodeObserver => o !== undefined);
  return {
    stateChanged: (state: SoftState) => list.forEach((o) => o.stateChanged?.(state)),
    applied: (entry: Entry, ms: number) => list.forEach((o) => o.applied?.(entry, ms)),
    persisted: (entries: number, ms: number) => list.forEach((o) => o.persisted?.(entries, ms)),
    snapshotSaved: (bytes: number, index: number) => list.forEach((o) => o.snapshotSaved?.(bytes, index)),
    proposed: (outcome) => list.forEach((o) => o.proposed?.(outcome)),
    applyFailed: (entry: Entry, message: string) => list.forEach((o) => o.applyFailed?.(entry, message)),
    failed: (error: Error) => list.forEach((o) => o.failed?.(error)),
    membershipChanged: (config) => list.forEach((o) => o.membershipChanged?.(config)),
  };
}

/**
 * Raft metrics of one member in a MetricsRegistry (its own, or the process's): pass `observer` to
 * RaftNode.start (with combineObservers to keep your own), call `track(node)` once it started, and serve
 * `registry.render()` on GET /metrics.
 */
export class RaftMetrics {
  readonly registry: MetricsRegistry;
  /** The hooks that feed the counters and histograms. */
  readonly observer: NodeObserver;

  constructor(registry: MetricsRegistry = new MetricsRegistry()) {
    this.registry = registry;
    const proposals = registry.counter('raft_proposals_total', 'Proposals handed to the Raft core, by outcome');
    const forwarded = registry.counter(
      'raft_forwarded_proposals_total',
      'Proposals forwarded from this follower to the leader',
    );
    const applied = registry.counter('raft_applied_entries_total', 'Committed entries applied to the state machine');
    const elections = registry.counter('raft_elections_total', 'Elections this member started');
    const leaderChanges = registry.counter('raft_leader_changes_total', 'Times the known leader changed');
    const applyErrors = registry.counter(
      'raft_apply_errors_total',
      'Entries the state machine threw on or that were no request (skipped alike on every member)',
    );
    const apply = registry.histogram(
      'raft_apply_seconds',
      'Time to apply one entry',
      [0.00001, 0.00005, 0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05],
    );
    const fsync = registry.histogram('raft_fsync_seconds', 'Time to persist one batch with sync');
    const snapshotBytes = registry.histogram(
      'raft_snapshot_bytes',
      'Sizes of snapshots saved',
      [1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9],
    );
    let leader: string | null = null;
    this.observer = {
      stateChanged(state) {
        if (state.role === 'candidate') elections.inc();
        if (state.leader !== leader) {
          leaderChanges.inc();
          leader = state.leader;
        }
      },
      applied(_entry, ms) {
        applied.inc();
        apply.observe(ms / 1000);
      },
      persisted(_entries, ms) {
        fsync.observe(ms / 1000);
      },
      snapshotSaved(bytes) {
        snapshotBytes.observe(bytes);
      },
      proposed(outcome) {
        proposals.inc(1, { outcome });
        if (outcome === 'forwarded') forwarded.inc();
      },
      applyFailed() {
        applyErrors.inc();
      },
    };
  }

  /** Gauges read from the member's status at each render: term, commit, applied, leadership, storage failure. */
  track(node: MetricsSource): void {
    const gauge = (name: string, help: string, read: () => number): void => this.registry.gauge(name, help).set(read);
    gauge('raft_term', 'Current term', () => node.status().term);
    gauge('raft_commit_index', 'Commit index', () => node.status().commit);
    gauge('raft_applied_index', 'Applied index', () => node.status().applied);
    gauge('raft_is_leader', '1 when this member leads', () => (node.isLeader ? 1 : 0));
    gauge('raft_storage_failed', '1 once storage failed and this member stopped taking part', () =>
      node.status().failed === null ? 0 : 1,
    );
  }

  /** The registry in the Prometheus text format. */
  render(): string {
    return this.registry.render();
  }
}
