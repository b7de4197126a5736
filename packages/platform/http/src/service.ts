/**
 * The contract between a service and the member process that hosts it, and the plumbing every service shares:
 * writes through the replicated log with idempotent client sessions, reads at the consistency the request asks
 * for, and the mapping of Raft outcomes to HTTP answers (no leader or no quorum is a 503 with Retry-After).
 */
import {
  ApplyError,
  CommandTooLargeError,
  type RaftNode,
  SessionError,
  sessionFailure,
  StoppedError,
  TimeoutError,
  type CoreOptions,
  type RaftNodeOptions,
  type StateMachine,
} from '@raftkit/raft';
import { badRequest, conflict, HttpError, unavailable } from './errors.js';
import type { Principal } from './auth.js';
import type { WorkerRoles } from './worker.js';
import type { Logger } from './log.js';
import type { MetricsRegistry } from './metrics.js';
import { checkedCommand } from './command-route.js';
import { requirePrincipal, type Admission, type RequestContext, type Router } from './router.js';

/**
 * Raft tuning of a single-group service's members (the member process passes it on); default: the library's.
 * `heartbeatTicks` (the core's, in ticks) for a service whose members idle while others serve (each heartbeat is a
 * wake-up of every member); the write intervals (RaftNodeOptions of the same names) for one whose members are busy
 * writing (fewer, fuller rounds).
 */
export type MemberRaftOptions<C, R> = Pick<CoreOptions, 'heartbeatTicks'> &
  Pick<RaftNodeOptions<C, R>, 'followerWriteIntervalMs' | 'leaderWriteIntervalMs' | 'forwardedResults'>;

/**
 * The one group kind of a single-group service (kv, lock...): one group, its state machine and Raft options, on
 * every member of the cluster (the cluster's size is its replica count). The grouped services' kinds are GroupKind
 * (grouped-service.ts): many groups, placed by the meta group.
 */
export interface OneGroupKind<C, R> {
  name: string;
  createMachine(): StateMachine<C, R>;
  raft?: MemberRaftOptions<C, R>;
  /** Every member holds the group. */
  replicas: 'every member';
}

/** What a single-group service gives the member process: its one group kind, its endpoints, its workers. */
export interface ServiceDefinition<C, R> {
  name: string;
  /** One kind with one group. */
  kinds: readonly [OneGroupKind<C, R>];
  /** Register the service's endpoints. */
  routes(service: ServiceContext<C, R>): void;
  /** Processes besides the Raft members (application servers, counter stores...), started by `cluster up`. */
  workers?: WorkerRoles;
  /** Node and V8 flags of the service's member processes (`cluster up` records them; every start of a member uses them). */
  memberNodeFlags?: readonly string[];
}

/** The Raft tuning and node flags a single-group service's members run with (BUSY_WRITERS, IDLE_MEMBERS). */
export interface MemberTuning {
  raft: MemberRaftOptions<unknown, unknown>;
  memberNodeFlags?: readonly string[];
}

/**
 * Raft write pacing for a service whose members are busy writing (kv, lock): the leader starts a log write (and a
 * round of appends) at most every 5 ms, a follower a log write at most every 3 ms, so a busy cluster spends its CPU
 * on requests rather than on rounds; a member whose writes come further apart waits for nothing (packages/lib/raft
 * README "Tuning"; bench/RESULTS.md, kv and lock "Write pacing"). A follower's interval is shorter because a commit
 * waits for two followers' acknowledgements after the leader's round, and an append that reaches a follower during
 * its hold waits for the hold's end: up to 5 ms at 5 ms, half of that for appends arriving at random (kv at 64 in
 * flight: 5,391 -> 6,310 PUT/s on average over five alternated runs, at equal or lower CPU per PUT; lock
 * unchanged).
 */
export const PACED_WRITES = { leaderWriteIntervalMs: 5, followerWriteIntervalMs: 3 } as const;

/**
 * Node flags for a process that shares its cores with the rest of a cluster (five members and the service's
 * workers on one machine): V8 collects garbage on the process's own thread only. By default a scavenge or a
 * major collection also wakes helper threads, one per core; on a machine whose cores are all busy with the other
 * members, those helpers take the cores from members in the middle of a request, so one process's collection
 * stalls the whole cluster. Measured on 2 cores (bench/RESULTS.md, lock "Latest", "One GC thread per member"):
 * lock acquire p99 at 5,000 lock ops/s 69-131 ms -> 48-49 ms, CPU per cycle 3% lower.
 */
export const SINGLE_THREADED_GC: readonly string[] = ['--single-threaded-gc'];

/**
 * Node flags for a member that keeps what it writes (its Raft log until the next snapshot, its state machine):
 * V8 starts its next major collection only once the old generation has grown to four times what the previous one
 * left alive (1.1-1.4x by default on kv's members). Everything such a member appends survives its young
 * collections, so by default it marked and swept its whole heap every 1-2 s under load (12-20 major collections in
 * a 25-s kv run, 11-21% of a follower's CPU in perf), for a heap that only grows; with this, 2-3. The cost is
 * memory between collections: at most four times the live heap (a kv member at 64 in flight: 230-297 MB resident
 * against 200-264 MB at the end of a 25-s run). Measured in bench/RESULTS.md (kv "Latest", "Major collections spaced out").
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

/** Headers of an idempotent write: a client session from POST /v1/client-sessions and its sequence number. */
export const CLIENT_ID_HEADER = 'client-id';
export const CLIENT_SEQ_HEADER = 'client-seq';
export const CLIENT_ACK_HEADER = 'client-ack';

export class ServiceContext<C, R> {
  private readonly stoppers: Array<() => void> = [];

  constructor(
    readonly node: RaftNode<C, R>,
    readonly router: Router,
    readonly metrics: MetricsRegistry,
    readonly logger: Logger,
  ) {}

  /** Run `stop` when the member stops (background loops, open streams). */
  onStop(stop: () => void): void {
    this.stoppers.push(stop);
  }

  /** Called by the member process as it stops. */
  stop(): void {
    for (const stop of this.stoppers.splice(0)) stop();
  }

  /** The principal of an authenticated request (the router's before hook set it). */
  principal(ctx: RequestContext): Principal {
    return requirePrincipal(ctx);
  }

  /** The service's state machine on this member (for reads after a barrier). */
  get machine(): StateMachine<C, R> {
    return this.node.readLocal((m) => m);
  }

  /**
   * Apply `command` through the log and return its result. With Client-Id and Client-Seq headers the write is
   * idempotent across retries (to any member): its own session entry, which a shared batch cannot be. Without
   * them it is applied once per request, proposed by `viaBatch` when given (a service's turn batcher, which
   * proposes `command` with others of the same turn), else as an entry of its own.
   */
  async write(ctx: RequestContext, command: C, viaBatch?: () => Promise<R>): Promise<R> {
    this.requireLeaderKnown();
    const session = clientSession(ctx);
    try {
      if (session === null) return await (viaBatch === undefined ? this.node.propose(command) : viaBatch());
      const result = await this.node.submit({ t: 'command', ...session, command });
      if (!result.ok) throw sessionFailure(result);
      return (result as { result: R }).result;
    } catch (error) {
      throw raftErrorToHttp(error);
    }
  }

  /**
   * Registers a POST route that writes the body's command (`check` as the machine checks it: a CommandShapeError is
   * a 400 `invalid_command`) and answers its result; idempotent with client-session headers, as `write`.
   */
  commandRoute(path: string, route: { admits: Admission; check(body: unknown): C }): void {
    this.router.post(path, { admits: route.admits }, async (ctx) =>
      this.write(ctx, checkedCommand(await ctx.json(), route.check)),
    );
  }

  /**
   * Wait until this member reflects every committed write; for a request that asks for a local read
   * (`consistency=serializable`), every write this member has answered (with forwardedResults a follower answers a
   * write from its leader's result, possibly before applying it), so a client sees its own writes on one member.
   */
  async readBarrier(ctx: RequestContext): Promise<void> {
    const consistency = ctx.query.get('consistency') ?? 'linearizable';
    if (consistency === 'serializable') return this.ownWritesApplied();
    if (consistency !== 'linearizable') {
      throw badRequest('invalid_query', 'consistency must be linearizable or serializable', { field: 'consistency' });
    }
    this.requireLeaderKnown();
    try {
      await this.node.readBarrier();
    } catch (error) {
      throw raftErrorToHttp(error);
    }
  }

  /** Wait until this member has applied every write it has answered (see readBarrier), before reading its state. */
  async ownWritesApplied(): Promise<void> {
    try {
      await this.node.ownWritesApplied();
    } catch (error) {
      throw raftErrorToHttp(error);
    }
  }

  private requireLeaderKnown(): void {
    if (this.node.leaderId === null)
      throw unavailable('no leader is known: the cluster has no quorum or is electing one', 1);
  }
}

function clientSession(ctx: RequestContext): { client: string; seq: number; ack: number } | null {
  const client = ctx.req.headers[CLIENT_ID_HEADER];
  const seqText = ctx.req.headers[CLIENT_SEQ_HEADER];
  if (client === undefined && seqText === undefined) return null;
  if (typeof client !== 'string' || client.length === 0 || client.length > 64) {
    throw badRequest('invalid_header', 'Client-Id must be the id from POST /v1/client-sessions', {
      field: 'Client-Id',
    });
  }
  const seq = Number(seqText);
  if (typeof seqText !== 'string' || !Number.isSafeInteger(seq) || seq < 1) {
    throw badRequest('invalid_header', 'Client-Seq must be a positive integer', { field: 'Client-Seq' });
  }
  const ackText = ctx.req.headers[CLIENT_ACK_HEADER];
  const ack = ackText === undefined ? 0 : Number(ackText);
  if (!Number.isSafeInteger(ack) || ack < 0 || ack >= seq) {
    throw badRequest('invalid_header', 'Client-Ack must be an integer below Client-Seq', { field: 'Client-Ack' });
  }
  return { client, seq, ack };
}

/** The HTTP answer for an error out of the Raft layer. */
export function raftErrorToHttp(error: unknown): unknown {
  if (error instanceof HttpError) return error;
  if (error instanceof TimeoutError) {
    return unavailable(
      'not committed in time (no quorum?); the outcome is unknown: retry with the same Client-Id and Client-Seq to apply it at most once',
      1,
    );
  }
  if (error instanceof StoppedError) return unavailable('this member is shutting down', 1);
  // Commands are validated before they are proposed, so a machine that still throws is a bug: a 500 that says so,
  // and the same answer on a retry (the failure is recorded with the entry).
  if (error instanceof ApplyError) return new HttpError(500, error.code, error.message);
  if (error instanceof CommandTooLargeError)
    return new HttpError(413, 'command_too_large', error.message, { limit: error.limit });
  if (error instanceof SessionError) {
    return error.code === 'unknown_session'
      ? new HttpError(410, 'unknown_session', 'the client session expired or never existed: open a new one')
      : conflict('stale_sequence', 'this Client-Seq was already acknowledged (Client-Ack)');
  }
  return error;
}
