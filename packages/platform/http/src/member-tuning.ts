/**
 * Raft tuning and node flags a service's one-group kind may run with (a kind's `raft`, a definition's
 * `memberNodeFlags`), each with the measurement behind it.
 */
import type { MemberRaftOptions } from './group-kinds.js';

/** The Raft tuning and node flags a single-group service's members run with (BUSY_WRITERS, IDLE_MEMBERS). */
export interface MemberTuning {
  raft: MemberRaftOptions<unknown, unknown>;
  memberNodeFlags?: readonly string[];
}

/**
 * Raft write pacing for a service whose members are busy writing (kv, lock): the leader starts a log write (and a
 * round of appends) at most every 5 ms, a follower a log write at most every 3 ms, so a busy cluster spends its CPU
 * on requests rather than on rounds; a member whose writes come further apart waits for nothing (packages/lib/raft
 * README "Tuning"). A follower's interval is shorter because a commit
 * waits for two followers' acknowledgements after the leader's round, and an append that reaches a follower during
 * its hold waits for the hold's end: up to 5 ms at 5 ms, half of that for appends arriving at random (the
 * measurement: bench/RESULTS.md, kv findings, "write pacing").
 */
export const PACED_WRITES = { leaderWriteIntervalMs: 5, followerWriteIntervalMs: 3 } as const;

/**
 * Node flags for a process that shares its cores with the rest of a cluster (five members and the service's
 * workers on one machine): V8 collects garbage on the process's own thread only. By default a scavenge or a
 * major collection also wakes helper threads, one per core; on a machine whose cores are all busy with the other
 * members, those helpers take the cores from members in the middle of a request, so one process's collection
 * stalls the whole cluster (the measurement: bench/RESULTS.md, lock findings, "one GC thread per member").
 */
export const SINGLE_THREADED_GC: readonly string[] = ['--single-threaded-gc'];

/**
 * Node flags for a member that keeps what it writes (its Raft log until the next snapshot, its state machine):
 * V8 starts its next major collection only once the old generation has grown to four times what the previous one
 * left alive (1.1-1.4x by default on kv's members). Everything such a member appends survives its young
 * collections, so by default it marks and sweeps its whole heap every second or two under load, for a heap that
 * only grows; with this, a few times a run. The cost is
 * memory between collections: at most four times the live heap (the measurement: bench/RESULTS.md, kv findings,
 * "major collections spaced out").
 */
export const SPACED_MAJOR_GC: readonly string[] = ['--heap-growing-percent=300'];

/**
 * The tuning of a service whose five members are busy writing on one machine (kv, lock): paced Raft writes,
 * forwarded writes answered from the leader's result (RaftNodeOptions.forwardedResults), garbage collection on
 * the members' own threads, major collections spaced out.
 */
export const BUSY_WRITERS = {
  raft: { ...PACED_WRITES, forwardedResults: true },
  memberNodeFlags: [...SINGLE_THREADED_GC, ...SPACED_MAJOR_GC],
} as const satisfies MemberTuning;

/**
 * Ticks (100 ms each by default) between an idle leader's heartbeats, for a service whose members mostly idle
 * while its workers serve (shortlink's link store, the rate limiter's rules and tenants); the library's default is
 * every tick. Each heartbeat wakes the leader and every follower, each way: an idle 5-member cluster used ~45 ms of
 * CPU a second with 1, ~20 with 3 (shortlink README "Members' heartbeats"), and on a machine shared with the
 * workers every wake-up is a moment a worker may wait for a core. Failover is unchanged: the election timeout is
 * still 10-20 ticks, and a heartbeat every 3 leaves at least 3 in each (the simulator draws 1 to 3). Commit news,
 * read barriers and appends are sent at once either way; only an idle leader's "still here" waits 300 ms.
 */
export const IDLE_MEMBER_HEARTBEAT_TICKS = 3;

/** The tuning of a service whose members mostly idle while its workers serve: fewer heartbeats. */
export const IDLE_MEMBERS = {
  raft: { heartbeatTicks: IDLE_MEMBER_HEARTBEAT_TICKS },
} as const satisfies MemberTuning;
