/**
 * RaftNode: the driver that runs a pure RaftCore against real Storage, Transport and a StateMachine. It
 * performs each Ready in the order that keeps Raft safe (install snapshot; start the write; send what may go
 * before it is durable, src/ready-order.ts; apply what is committed; once synced, send the acknowledgements),
 * one batch at a time, and offers the application-facing API: propose with exactly-once retries,
 * linearizable reads, membership changes and leadership transfer.
 */
import { randomUUID } from 'node:crypto';
import { silentLogger, type Logger } from './logger.js';
import { ConfigChangeError, RaftCore, type CoreOptions, type CoreStatus } from './core.js';
import {
  decodeRequest,
  encodeRequest,
  SessionStateMachine,
  type SessionOptions,
  type SessionRequest,
  type SessionResult,
} from './sessions.js';
import { plainDataProblem } from './plain-data.js';
import { MAX_FORWARDED_RESULTS } from './codec/parse.js';
import { forceSoleVoter } from './recovery.js';
import { checkPingTicks, Liveness } from './groups/liveness.js';
import { readyAllowsEarlySends, readyMustSync, splitMessages } from './ready-order.js';
import { PacedTicker, type Ticker } from './ticker.js';
import type { ReadyTurn } from './turn.js';
import type {
  AdminForward,
  AdminRequest,
  ConfigChange,
  Configuration,
  Entry,
  ForwardedResult,
  HardState,
  Message,
  NodeId,
  Ready,
  Snapshot,
  SoftState,
  StateMachine,
  Storage,
  Transport,
} from './types.js';

/** Everything a member is made of: its id, state machine, storage, transport and tuning. */
export interface RaftNodeOptions<C, R, M extends StateMachine<C, R> = StateMachine<C, R>> {
  id: NodeId;
  storage: Storage;
  transport: Transport;
  /** Your state machine; `read` and `readLocal` hand it back with its own type. */
  stateMachine: M & StateMachine<C, R>;
  /**
   * The members of a brand-new group and their transport addresses. Ignored once the log or a snapshot holds a
   * configuration. A member joining an existing group passes an empty object and is added by the leader.
   */
  bootstrap?: Record<NodeId, string>;
  /**
   * Addresses of existing members, for a member joining a running group: it can answer the leader before the
   * configuration (which carries every address) reaches it through the log.
   */
  peers?: Record<NodeId, string>;
  /**
   * Recovery after losing a quorum, as etcd's `--force-new-cluster`: start this member on its storage as the only
   * voter of its group. It keeps what it had committed, drops its uncommitted tail, elects itself and serves
   * alone; add new members to it afterwards. Start with it once, then without it; never start the lost members
   * again on their old data (wipe them and add them as new members). See the README, "Losing a quorum".
   */
  forceNewCluster?: boolean;
  /**
   * Ticks from a ticker shared by many groups in one process (one timer for all, see GroupHost) instead of this
   * member's own interval of `tickMs`. Its period should be `tickMs`.
   */
  ticker?: Ticker;
  /**
   * The Ready pass shared by the groups of a process (GroupHost; src/turn.ts): this member drains its Ready in it,
   * beside every other group with work in this turn of the event loop, instead of after a turn of its own.
   */
  readyTurn?: ReadyTurn;
  /** Core tuning (election and heartbeat ticks, pre-vote, check-quorum, lease reads, flow control). */
  core?: Omit<Partial<CoreOptions>, 'id'>;
  /** Milliseconds per tick. Default 100 (so the default election timeout is 1 to 2 s). */
  tickMs?: number;
  /**
   * With quiescence (`core.quiesceTicks`) on a member of its own (no shared `ticker`): while its group is quiesced,
   * a leader pings its followers every this many ticks in place of heartbeats, and a quiesced follower whose leader
   * has been silent for an election timeout wakes and campaigns (src/groups/liveness.ts, as a GroupHost does for
   * its groups). Needs a transport with `ping` and `onPeerHeard` (TcpTransport). Default: a third of the election
   * timeout (3 ticks); under half of it.
   */
  pingTicks?: number;
  /** Take a snapshot and compact the log every this many applied entries. Default 10,000. */
  snapshotEvery?: number;
  /**
   * Also take a snapshot once the commands applied since the last one add up to this many bytes, so that a few
   * large entries cannot keep the in-memory log growing for `snapshotEvery` entries. Default 64 MiB.
   */
  snapshotLogBytes?: number;
  /** Give up on a proposal or read after this long (its outcome is then unknown). Default 10 s. */
  requestTimeoutMs?: number;
  /**
   * A follower starts its next log write no sooner than this many milliseconds after its previous one started:
   * the appends that arrive meanwhile share one write, one fsync and one acknowledgement. Under load a follower
   * otherwise writes as often as its disk lets it, and every round costs each follower a wake-up, a write, an fsync
   * and an answer whatever it carries. Trades up to this much commit latency for those rounds; a follower whose
   * writes come further apart than this anyway (an idle or lightly loaded group) waits for nothing. Meanwhile it
   * applies what commits and answers nothing late: the acknowledgement of the write just done has already left.
   * Default 0 (write as soon as there is something to write).
   */
  followerWriteIntervalMs?: number;
  /**
   * The same for the leader: it starts its next log write, and so its next round of appends, no sooner than this
   * after its previous one; what is proposed meanwhile waits and goes in one round. While it waits it applies what
   * the followers' acknowledgements commit and tells them at once; it counts itself in the quorum for its last
   * write only when the wait ends (a majority of followers commits meanwhile). Default 0.
   */
  leaderWriteIntervalMs?: number;
  /**
   * A proposal this member forwards to its leader is answered with the result the leader sends back once the entry
   * applies there, instead of after this member's own apply: a caller waits for a majority's writes and the leader's
   * apply, not also for this member's write (which may come later: followerWriteIntervalMs, a slow disk). As
   * leader, the member sends those results to whoever forwarded the proposals. Either way the answer is the one
   * this member's own apply gives: a result is only ever sent for a committed, applied entry. Local reads right
   * after such an answer may not show the write yet: {@link RaftNode.ownWritesApplied} waits until they do (read()
   * and readBarrier() need nothing more: a read index covers every committed write). Set it on every member.
   * Default false.
   */
  forwardedResults?: boolean;
  /**
   * Largest encoded command accepted. Default 2 MiB, well under the TCP transport's 4 MiB frame: a larger entry
   * could be appended but never reach a follower.
   */
  maxCommandBytes?: number;
  sessions?: SessionOptions;
  /** The clock that stamps entries on the leader. Default Date.now. */
  clock?: () => number;
  /** Told of what happens inside, for metrics, logs and watchers (several: combineObservers). */
  observer?: NodeObserver;
  /** Where the member logs what an operator should know (leader changes, snapshots, apply errors, storage failure). */
  logger?: Logger;
}

/** Per-call limits: give up after `timeoutMs` (default: the node's requestTimeoutMs) or when `signal` aborts. */
export interface CallOptions {
  timeoutMs?: number;
  signal?: AbortSignal;
}

/** Hooks into the driver's work; all optional, all called synchronously (keep them cheap). */
export interface NodeObserver {
  /** Role, leader or term changed. */
  stateChanged?(state: SoftState): void;
  /** An entry was applied, taking `ms` in the state machine. */
  applied?(entry: Entry, ms: number): void;
  /** A batch was persisted with sync. */
  persisted?(entries: number, ms: number): void;
  /** A snapshot of `bytes` was saved (taken here or received from the leader). */
  snapshotSaved?(bytes: number, index: number): void;
  /** A proposal was handed to the core. */
  proposed?(outcome: 'accepted' | 'forwarded' | 'dropped'): void;
  /** A forwarded proposal was answered with its leader's result, before this member applied it (forwardedResults). */
  answeredFromLeader?(): void;
  /** The state machine threw on an entry (or it was no request); the entry counts as applied, the group goes on. */
  applyFailed?(entry: Entry, message: string): void;
  /** Storage failed: this member stopped taking part (its transport is closed) and must be restarted. */
  failed?(error: Error): void;
  /**
   * The configuration this member works with changed: a membership change reached its log (Raft uses a
   * configuration from the moment it is appended, before it commits) or a snapshot replaced it.
   */
  membershipChanged?(config: Readonly<Configuration>): void;
}

/** The request could not be completed in time; whether it took effect is unknown (it may still). */
export class TimeoutError extends Error {
  override name = 'TimeoutError';
}

/** The request was refused by the replicated session layer. */
export class SessionError extends Error {
  override name = 'SessionError';
  constructor(readonly code: 'unknown_session' | 'stale_sequence') {
    super(
      code === 'unknown_session'
        ? 'the client session expired or never existed'
        : 'the sequence number was already acknowledged',
    );
  }
}

/** The member was stopped (or its storage failed) while the call was pending. */
export class StoppedError extends Error {
  override name = 'StoppedError';
}

/**
 * The state machine threw while applying the command (or the entry was not a request). Every member recorded the
 * same failure for that entry and the group went on; nothing of the command took effect unless the machine changed
 * its state before throwing (validate first, then mutate).
 */
export class ApplyError extends Error {
  override name = 'ApplyError';
  constructor(
    readonly code: 'apply_failed' | 'malformed_request',
    readonly detail: string,
  ) {
    super(
      code === 'apply_failed'
        ? `the state machine failed to apply the command: ${detail}`
        : `the entry is not a request: ${detail}`,
    );
  }
}

/** Turns a session-layer refusal into the error a caller sees. */
export function sessionFailure(result: { ok: false; error: string; message?: string }): Error {
  if (result.error === 'apply_failed' || result.error === 'malformed_request')
    return new ApplyError(result.error, result.message ?? '');
  return new SessionError(result.error === 'unknown_session' ? 'unknown_session' : 'stale_sequence');
}

/** The command is larger than maxCommandBytes; nothing was proposed. */
export class CommandTooLargeError extends Error {
  override name = 'CommandTooLargeError';
  constructor(
    readonly bytes: number,
    readonly limit: number,
  ) {
    super(`the command is ${bytes} bytes encoded; the limit is ${limit}`);
  }
}

interface Waiter<T> {
  resolve: (value: T) => void;
  reject: (error: Error) => void;
}

interface PendingProposal<R> {
  data: Uint8Array;
  waiters: Array<Waiter<SessionResult<R>>>;
  deadline: number;
  nextRetry: number;
}

export interface NodeStatus extends CoreStatus {
  /** Milliseconds of the last fsync batch (persist step of a Ready). */
  lastPersistMs: number;
  /** Entries whose command the state machine threw on (or that were no request), since this member started. */
  applyErrors: number;
  lastApplyError: { index: number; message: string } | null;
  /** Why this member stopped taking part (storage failed), or null while it runs. */
  failed: string | null;
}

/** A transport that can say "this process is alive" and tell who was heard from (TcpTransport). */
interface PingingTransport extends Transport {
  ping(peer: NodeId): void;
  onPeerHeard(listener: (peer: NodeId) => void): void;
}

function canPing(transport: Transport): transport is PingingTransport {
  const t = transport as Partial<PingingTransport>;
  return typeof t.ping === 'function' && typeof t.onPeerHeard === 'function';
}

/** Quiescence on a member's own transport: its pings and its leader's silence (refused without a way to ping). */
function livenessFor(transport: Transport, pingTicks: number | undefined, electionTicks: number): Liveness {
  if (!canPing(transport)) {
    throw new RangeError(
      'quiescence (core.quiesceTicks) on a member of its own needs a transport with ping and onPeerHeard (TcpTransport), or a shared ticker whose owner wakes it (GroupHost)',
    );
  }
  const ticks = pingTicks ?? Math.max(1, Math.floor(electionTicks / 3));
  checkPingTicks(ticks, electionTicks);
  return new Liveness(ticks);
}

/**
 * One member of one Raft group: drives a RaftCore against a Storage, a Transport and your StateMachine, with
 * exactly-once client sessions. Start it with `RaftNode.start(options)`; propose and read on any member.
 */
export class RaftNode<C, R, M extends StateMachine<C, R> = StateMachine<C, R>> {
  readonly id: NodeId;
  private readonly core: RaftCore;
  private readonly machine: SessionStateMachine<C, R>;
  private readonly storage: Storage;
  private readonly transport: Transport;
  private readonly tickMs: number;
  private readonly snapshotEvery: number;
  private readonly snapshotLogBytes: number;
  /** Bytes of command entries applied since the last snapshot. */
  private bytesSinceSnapshot = 0;
  private readonly requestTimeoutMs: number;
  private readonly maxCommandBytes: number;
  private readonly retryMs: number;
  private readonly clock: () => number;
  private readonly observer: NodeObserver;
  private readonly logger: Logger;
  private readonly userMachine: M;

  /** What ticks this member: its own timer, or a ticker shared by the groups of its process. */
  private ticker: Ticker | null = null;
  /** Stops this member's ticks (its subscription to its ticker). */
  private stopTicking: (() => void) | null = null;
  /** A quiescing member on its own transport: its pings and its leader's silence (null: the ticker's owner's job). */
  private liveness: Liveness | null = null;
  private readonly electionTicks: number;
  private processing = false;
  private readonly readyTurn: ReadyTurn | null;
  private stopped = false;
  private applied: number;
  private lastSnapshotIndex: number;
  /** A detached snapshot is being encoded (maybeSnapshot): no second one starts until it is. */
  private snapshotting = false;
  private softState: SoftState;
  private knownConfig: Readonly<Configuration> | null = null;
  private knownLeader: NodeId | null = null;
  /** Every address learned (bootstrap, configurations), so a configuration without addresses loses none. */
  private readonly addressBook = new Map<NodeId, string>();
  private readonly connected = new Map<NodeId, string>();
  private lastPersistMs = 0;
  private readonly followerWriteIntervalMs: number;
  private readonly leaderWriteIntervalMs: number;
  private readonly forwardedResults: boolean;
  /** As leader, with forwardedResults: which member forwarded each command accepted from a follower, by its bytes. */
  private readonly forwardedBy = new WeakMap<Uint8Array, NodeId>();
  /** As leader, with forwardedResults: results of applied forwarded commands, to send to their members. */
  private readonly resultsToSend = new Map<NodeId, ForwardedResult[]>();
  /** The highest index of a write this member answered from its leader's result (ownWritesApplied waits for it). */
  private answeredAhead = 0;
  /** A Ready's write is in flight: newly committed entries may apply at once (core.takeCommitted()). */
  private writeInFlight = false;
  /** Whether the Ready whose write is in flight leaves the durable term and vote as they are (src/ready-order.ts). */
  private writeAllowsEarlySends = false;
  private forwardFlushScheduled = false;
  /** The hard state storage last confirmed durable: which messages may precede a write depends on it. */
  private durableHardState: HardState;
  /** The newest hard state not yet written: only its commit index differs from what storage holds. */
  private unwrittenHardState: HardState | null = null;
  private applyErrors = 0;
  private lastApplyError: { index: number; message: string } | null = null;

  /** This node's own client session, registered lazily, for propose(). */
  private session: ClientSession | null = null;
  private registering: Promise<string> | null = null;
  /** Requests waiting for their entry to apply, by requestKey(): `client:seq`, `reg:nonce` or `raw:uuid`. */
  private readonly pending = new Map<string, PendingProposal<R>>();
  private readonly reads = new Map<string, Waiter<number> & { deadline: number; nextRetry: number }>();
  private appliedWaiters: Array<{ index: number; waiter: Waiter<void> }> = [];
  private failure: Error | null = null;
  /** Admin requests (forwarded or our own) being carried out as leader, by their JSON. */
  private readonly adminRunning = new Set<string>();

  private constructor(
    options: RaftNodeOptions<C, R, M>,
    core: RaftCore,
    machine: SessionStateMachine<C, R>,
    applied: number,
    durableHardState: HardState,
  ) {
    this.durableHardState = { ...durableHardState };
    this.id = options.id;
    this.core = core;
    this.machine = machine;
    this.storage = options.storage;
    this.transport = options.transport;
    this.tickMs = options.tickMs ?? 100;
    this.snapshotEvery = options.snapshotEvery ?? 10_000;
    this.snapshotLogBytes = options.snapshotLogBytes ?? 64 * 1024 * 1024;
    this.requestTimeoutMs = options.requestTimeoutMs ?? 10_000;
    this.followerWriteIntervalMs = options.followerWriteIntervalMs ?? 0;
    this.leaderWriteIntervalMs = options.leaderWriteIntervalMs ?? 0;
    this.forwardedResults = options.forwardedResults ?? false;
    this.maxCommandBytes = options.maxCommandBytes ?? 2 * 1024 * 1024;
    this.electionTicks = options.core?.electionTicks ?? 10;
    this.retryMs = this.tickMs * this.electionTicks;
    this.clock = options.clock ?? Date.now;
    this.observer = options.observer ?? {};
    this.logger = options.logger ?? silentLogger;
    this.userMachine = options.stateMachine;
    this.readyTurn = options.readyTurn ?? null;
    this.applied = applied;
    this.lastSnapshotIndex = applied;
    this.softState = { leader: null, role: 'follower', term: core.status().term };
  }

  /** Recover from storage (or bootstrap a new group), start the transport and the ticker. */
  static async start<C, R, M extends StateMachine<C, R> = StateMachine<C, R>>(
    options: RaftNodeOptions<C, R, M>,
  ): Promise<RaftNode<C, R, M>> {
    const liveness =
      options.ticker === undefined && (options.core?.quiesceTicks ?? 0) > 0
        ? livenessFor(options.transport, options.pingTicks, options.core?.electionTicks ?? 10)
        : null;
    let stored = await options.storage.load();
    const bootstrap = options.bootstrap ?? {};
    const initialConfig: Configuration = { voters: Object.keys(bootstrap), learners: [], addresses: { ...bootstrap } };
    if (
      options.forceNewCluster === true &&
      (await forceSoleVoter(options.storage, stored, options.id, initialConfig, (options.clock ?? Date.now)()))
    ) {
      options.logger?.log('warn', 'forced a new cluster: this member is now the only voter', {
        member: options.id,
        commit: stored.hardState.commit,
      });
      stored = await options.storage.load();
    }
    const machine = new SessionStateMachine<C, R>(options.stateMachine, options.sessions);
    if (stored.snapshot !== null) await machine.restoreAsync(stored.snapshot.data);
    const core = new RaftCore(
      { seed: hashSeed(options.id), ...options.core, id: options.id },
      { hardState: stored.hardState, snapshot: stored.snapshot?.meta ?? null, entries: stored.entries, initialConfig },
    );
    const node = new RaftNode<C, R, M>(options, core, machine, stored.snapshot?.meta.index ?? 0, stored.hardState);
    for (const [id, address] of Object.entries({ ...options.peers, ...bootstrap })) node.addressBook.set(id, address);
    node.syncPeers();
    if (liveness !== null) {
      (options.transport as PingingTransport).onPeerHeard((peer) => liveness.heard(peer));
      node.liveness = liveness;
    }
    await options.transport.start((m) => node.receive(m));
    // A member of its own paces its own timer down while its group is quiesced, to one wake-up per ping.
    node.ticker = options.ticker ?? new PacedTicker({ periodMs: node.tickMs, idleTicks: liveness?.pingTicks ?? 1 });
    node.stopTicking = node.ticker.subscribe(
      () => node.tick(),
      () => node.idle,
    );
    node.kick();
    return node;
  }

  // ---------------------------------------------------------------------------------------------------------
  // Application API

  /**
   * Propose a command; resolves with its result once applied. Retries are deduplicated (exactly once). On a
   * timeout or abort the outcome is unknown: the command may still apply.
   */
  async propose(command: C, options: CallOptions = {}): Promise<R> {
    // Checked before a sequence number is spent on it (submit checks again, for its own callers).
    const problem = plainDataProblem(command);
    if (problem !== null) throw new TypeError(problem);
    const first = await this.proposeInSession(command, options);
    if (first.ok) return first.result;
    if (first.error !== 'unknown_session') throw sessionFailure(first);
    // The session lapsed while this member was quiet (sessions expire by entry time, whoever's entries those are).
    // The command was not applied (its entry found no session), so proposing it once more in a fresh session keeps
    // it exactly once; a second refusal would mean sessions expire faster than a registration commits.
    const second = await this.proposeInSession(command, options);
    if (second.ok) return second.result;
    throw sessionFailure(second);
  }

  /** One attempt of propose() in this member's own session: the refusal is returned, not thrown. */
  private async proposeInSession(
    command: C,
    options: CallOptions,
  ): Promise<{ ok: true; result: R } | { ok: false; error: string; message?: string }> {
    const session = await this.ensureSession();
    const seq = ++session.seq;
    try {
      const result = await this.submit(
        { t: 'command', client: session.client, seq, ack: session.acked, command },
        options,
      );
      if (result.ok) {
        session.usedAt = this.clock();
        return { ok: true, result: (result as { result: R }).result };
      }
      // Register again next time, unless a concurrent proposal already did.
      if (result.error === 'unknown_session' && this.session === session) this.session = null;
      return result;
    } finally {
      session.finished(seq);
    }
  }

  /**
   * Submit a session request on behalf of an external client (a service's HTTP layer passing the client's own
   * id and sequence number). Waits until applied; a retry of the same (client, seq) gets the first result.
   */
  submit(request: SessionRequest<C>, options: CallOptions = {}): Promise<SessionResult<R>> {
    this.assertRunning();
    if (request.t !== 'register') {
      const problem = plainDataProblem(request.command);
      if (problem !== null) return Promise.reject(new TypeError(problem));
    }
    const data = encodeRequest(request);
    if (data.byteLength > this.maxCommandBytes)
      return Promise.reject(new CommandTooLargeError(data.byteLength, this.maxCommandBytes));
    const deadline = Date.now() + (options.timeoutMs ?? this.requestTimeoutMs);
    const key = requestKey(request) ?? `raw:${randomUUID()}`;
    let waiter!: Waiter<SessionResult<R>>;
    const answer = new Promise<SessionResult<R>>((resolve, reject) => {
      waiter = { resolve, reject };
      const existing = this.pending.get(key);
      if (existing !== undefined) {
        existing.waiters.push(waiter);
        existing.deadline = Math.max(existing.deadline, deadline);
        return;
      }
      const entry = { data, waiters: [waiter], deadline, nextRetry: Date.now() + this.retryMs };
      this.pending.set(key, entry);
      this.proposeData(data, entry);
    });
    // An aborted caller stops waiting; the proposal itself stays until its deadline, since it may still apply.
    return abortable(answer, options.signal, () => {
      const entry = this.pending.get(key);
      if (entry !== undefined) entry.waiters = entry.waiters.filter((w) => w !== waiter);
    });
  }

  /** Resolves once this member's state reflects every write committed before the call (ReadIndex). */
  readBarrier(options: CallOptions = {}): Promise<void> {
    this.assertRunning();
    const context = randomUUID();
    const deadline = Date.now() + (options.timeoutMs ?? this.requestTimeoutMs);
    const barrier = new Promise<number>((resolve, reject) => {
      this.reads.set(context, { resolve, reject, deadline, nextRetry: Date.now() + this.retryMs });
      this.core.readIndex(context);
      this.kick();
    }).then((index) => this.waitApplied(index, deadline));
    return abortable(barrier, options.signal, () => this.reads.delete(context));
  }

  /** A linearizable read of your state machine (ReadIndex, then the query on this member). */
  async read<T>(query: (machine: M) => T, options: CallOptions = {}): Promise<T> {
    await this.readBarrier(options);
    return query(this.userMachine);
  }

  /**
   * Resolves once this member has applied every write it has answered: with forwardedResults a forwarded write is
   * answered from the leader's result, possibly before it applies here. Wait for it before a local (serializable)
   * read that must show the caller's own writes answered by this member. At once when there are none.
   */
  ownWritesApplied(options: CallOptions = {}): Promise<void> {
    this.assertRunning();
    return abortable(
      this.waitApplied(this.answeredAhead, Date.now() + (options.timeoutMs ?? this.requestTimeoutMs)),
      options.signal,
      () => {},
    );
  }

  /** Your state machine as this member has it now, possibly stale (serializable, not linearizable). */
  readLocal<T>(query: (machine: M) => T): T {
    return query(this.userMachine);
  }

  /** Add a member as a learner (receives the log, does not vote). On a follower it is forwarded to the leader. */
  async addLearner(id: NodeId, address: string): Promise<void> {
    this.addressBook.set(id, address);
    await this.changeMembership({ type: 'addLearner', node: id, address });
  }

  /** Promote a caught-up learner to voter. */
  async promote(id: NodeId): Promise<void> {
    await this.changeMembership({ type: 'promote', node: id });
  }

  /**
   * Add a learner, wait until it has caught up, then promote it: the safe way to grow the group. On a follower
   * it is forwarded to the leader, and resolves once this member's log shows the new voter.
   */
  async addVoter(id: NodeId, address: string, catchUpTimeoutMs = 30_000): Promise<void> {
    this.assertRunning();
    if (!this.isLeader) {
      this.addressBook.set(id, address);
      const deadline = Date.now() + catchUpTimeoutMs + this.requestTimeoutMs;
      const done = await this.forwardAdmin(
        { op: 'addVoter', node: id, address, catchUpTimeoutMs },
        () => this.core.configuration().voters.includes(id),
        deadline,
      );
      if (!done) throw new TimeoutError(`${id} did not become a voter in time`);
      return;
    }
    const config = this.core.configuration();
    if (config.voters.includes(id)) return;
    if (!config.learners.includes(id)) await this.addLearner(id, address);
    const deadline = Date.now() + catchUpTimeoutMs;
    for (;;) {
      const st = this.core.status();
      const peer = st.peers.find((p) => p.id === id);
      if (peer !== undefined && peer.match >= st.commit) break;
      if (Date.now() > deadline) throw new TimeoutError(`learner ${id} did not catch up in time`);
      await sleep(this.tickMs);
    }
    await this.promote(id);
  }

  /** Remove a voter or learner from the group. On a follower it is forwarded to the leader. */
  async removeMember(id: NodeId): Promise<void> {
    await this.changeMembership({ type: 'remove', node: id });
  }

  /**
   * Propose a change and wait until it is committed and applied here. On a follower the change is forwarded to
   * the leader (again every election timeout while it does not show) and this member waits for its own log to
   * show it.
   */
  async changeMembership(change: ConfigChange): Promise<void> {
    this.assertRunning();
    if (change.type === 'forceNewCluster')
      throw new ConfigChangeError(
        'a forced configuration is written by RaftNode.start with forceNewCluster, never proposed',
      );
    const deadline = Date.now() + this.requestTimeoutMs;
    if (!this.isLeader) {
      const done = await this.forwardAdmin(
        { op: 'change', change },
        () => reflects(this.core.configuration(), change),
        deadline,
      );
      // What the log shows may not be committed yet: a read barrier applies everything committed, then look again.
      if (done) await this.readBarrier({ timeoutMs: Math.max(1, deadline - Date.now()) });
      if (!done || !reflects(this.core.configuration(), change))
        throw new TimeoutError('the membership change did not show in time; try again');
      return;
    }
    for (;;) {
      try {
        this.core.proposeConfigChange(change);
        break;
      } catch (e) {
        // Waiting is right while an earlier change or this term's first commit is still in flight.
        const transient = e instanceof ConfigChangeError && /not committed yet|not committed an entry/.test(e.message);
        if (!transient || Date.now() > deadline) throw e;
        await sleep(this.tickMs);
      }
    }
    this.kick();
    const index = this.core.status().lastIndex;
    await this.waitApplied(index, deadline);
    if (!reflects(this.core.configuration(), change)) {
      throw new TimeoutError('the membership change was lost with a leader change; try again');
    }
  }

  /**
   * Hand leadership to `to`. Resolves true once `to` leads, false when the attempt ends without it. On a follower
   * the request is forwarded to the leader.
   */
  async transferLeadership(to: NodeId, timeoutMs = 5_000): Promise<boolean> {
    this.assertRunning();
    if (!this.isLeader) {
      if (this.softState.leader === to) return true;
      return this.forwardAdmin({ op: 'transfer', to }, () => this.softState.leader === to, Date.now() + timeoutMs);
    }
    this.core.transferLeadership(to);
    this.kick();
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      if (this.softState.leader === to) return true;
      await sleep(this.tickMs / 2);
    }
    return this.softState.leader === to;
  }

  /** Start an election now. */
  campaign(): void {
    this.core.campaign();
    this.kick();
  }

  /** This member's state now: role, term, indexes, peers' replication, apply errors, storage failure. */
  status(): NodeStatus {
    const core = this.core.status();
    return {
      ...core,
      // The machine's applied index: committed entries apply while a Ready's write is in flight, before the core
      // hears of them in advance().
      applied: Math.max(core.applied, this.applied),
      // A failed member is out of the group: it must not tell anyone it leads.
      ...(this.failure !== null ? { role: 'follower' as const, leader: null } : {}),
      lastPersistMs: this.lastPersistMs,
      applyErrors: this.applyErrors,
      lastApplyError: this.lastApplyError,
      failed: this.failure === null ? null : this.failure.message,
    };
  }

  /**
   * Whether a tick would do nothing here but count: the group is quiesced and nothing waits on this member (no
   * request, no read, no Ready being processed). Its ticker may then deliver ticks in batches (src/ticker.ts).
   */
  get idle(): boolean {
    return (
      this.core.isQuiesced() && this.pending.size === 0 && this.reads.size === 0 && !this.processing && !this.stopped
    );
  }

  /**
   * Committed entries this member has not applied yet: status().commit - status().applied, without building the
   * whole status (its peers and configuration), so a hot path may ask on every request.
   */
  get applyBacklog(): number {
    return this.core.applyBacklog(this.applied);
  }

  /** Whether this member's group is quiesced (idle: no ticks, no heartbeats; see CoreOptions.quiesceTicks). */
  get quiesced(): boolean {
    return this.core.isQuiesced();
  }

  /**
   * Wakes a quiesced group: the driver of many groups calls it when the leader's process has been silent for
   * `silentTicks` ticks (an election timeout or more), so the followers campaign instead of waiting forever.
   */
  wake(silentTicks = 0): void {
    if (this.stopped || !this.core.isQuiesced()) return;
    this.core.wake(silentTicks);
    this.kick();
  }

  get isLeader(): boolean {
    return this.failure === null && this.softState.role === 'leader';
  }

  get leaderId(): NodeId | null {
    return this.failure === null ? this.softState.leader : null;
  }

  /** Addresses of the members, as carried in the configuration. */
  addresses(): Record<NodeId, string> {
    return { ...(this.core.configuration().addresses ?? {}) };
  }

  /** Stop ticking, fail every waiting request, close the transport and storage. */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    this.stopTicking?.();
    this.stopTicking = null;
    const error = new StoppedError('the member stopped');
    this.failAll(error);
    await this.transport.close();
    while (this.processing) await sleep(1);
    if (this.unwrittenHardState !== null && this.failure === null) {
      // A clean stop keeps the commit index it knew (a crash would lose it, which is safe: it is relearned).
      await this.storage.append([], this.unwrittenHardState, { sync: false }).catch(() => undefined);
    }
    await this.storage.close();
  }

  // ---------------------------------------------------------------------------------------------------------
  // The loop

  private receive(m: Message): void {
    if (this.stopped) return;
    if (m.type === 'admin') {
      this.handleAdmin(m);
      return;
    }
    if (m.type === 'results') {
      this.takeResults(m.results);
      return;
    }
    if (m.type === 'propose' && this.forwardedResults) {
      // Remembered by the very bytes the core appends (a WeakMap: gone with the entry); looked up when it applies.
      for (const command of m.commands) this.forwardedBy.set(command, m.from);
    }
    this.core.step(m);
    if (this.writeInFlight) {
      this.applyCommittedNow();
      if (this.writeAllowsEarlySends) this.sendCommitNews();
    }
    this.kick();
  }

  /**
   * While this leader's write is in flight, tell the followers at once what a majority's acknowledgements just
   * committed (core.takeCommitNews): a client waiting on a follower then waits for the majority, not also for the
   * rest of the leader's write.
   */
  private sendCommitNews(): void {
    const news = this.core.takeCommitNews();
    if (news.length === 0) return;
    this.syncPeers();
    for (const m of news) this.transport.send(m);
  }

  /**
   * While a Ready's write is in flight, apply what the core has committed since (acknowledgements that arrived
   * meanwhile): a client's answer then waits for a majority's writes, not also for our next one.
   */
  private applyCommittedNow(): void {
    const entries = this.core.takeCommitted();
    if (entries.length === 0) return;
    for (const entry of entries) this.applyEntry(entry);
    this.releaseAppliedWaiters();
    this.sendResults();
  }

  /** forwardedResults, as leader: tell the members that forwarded the commands just applied what they gave. */
  private sendResults(): void {
    if (this.resultsToSend.size === 0) return;
    this.syncPeers();
    for (const [to, results] of this.resultsToSend) {
      for (let i = 0; i < results.length; i += MAX_FORWARDED_RESULTS) {
        const part = results.length <= MAX_FORWARDED_RESULTS ? results : results.slice(i, i + MAX_FORWARDED_RESULTS);
        this.transport.send({ type: 'results', from: this.id, to, term: 0, results: part });
      }
    }
    this.resultsToSend.clear();
  }

  /**
   * forwardedResults, as the forwarding member: answer the proposals these results are for. Each came from a member
   * that applied a committed entry, so it is the answer this member's own apply will give.
   */
  private takeResults(results: ForwardedResult[]): void {
    if (!this.forwardedResults) return;
    for (const { key, index, result } of results) {
      const waiting = this.pending.get(key);
      if (waiting === undefined) continue;
      this.pending.delete(key);
      if (index > this.answeredAhead) this.answeredAhead = index;
      this.observer.answeredFromLeader?.();
      for (const w of waiting.waiters) w.resolve(result as SessionResult<R>);
    }
  }

  /**
   * Send `request` to the leader, again every election timeout, until `done()` holds (true) or the deadline passes
   * (false). If this member becomes leader meanwhile it carries the request out itself.
   */
  private async forwardAdmin(request: AdminRequest, done: () => boolean, deadline: number): Promise<boolean> {
    let nextSend = 0;
    while (!done()) {
      this.assertRunning();
      const now = Date.now();
      if (now > deadline) return false;
      if (this.isLeader) {
        this.runAdmin(request);
        nextSend = now + this.retryMs;
      } else if (now >= nextSend && this.softState.leader !== null) {
        this.transport.send({ type: 'admin', from: this.id, to: this.softState.leader, term: 0, request });
        nextSend = now + this.retryMs;
      }
      await sleep(this.tickMs);
    }
    return true;
  }

  /** A member's forwarded request: carried out if this member leads and the sender is a member of the group. */
  private handleAdmin(m: AdminForward): void {
    if (!this.isLeader) return;
    const config = this.core.configuration();
    if (!config.voters.includes(m.from) && !config.learners.includes(m.from)) return;
    this.runAdmin(m.request);
  }

  /** Carry out an admin request as leader, once at a time per request (a forwarder repeats itself). */
  private runAdmin(request: AdminRequest): void {
    const key = JSON.stringify(request);
    if (this.adminRunning.has(key)) return;
    this.adminRunning.add(key);
    const work =
      request.op === 'change'
        ? this.changeMembership(request.change)
        : request.op === 'addVoter'
          ? this.addVoter(request.node, request.address, request.catchUpTimeoutMs)
          : this.transferLeadership(request.to);
    void work
      .catch((e: unknown) =>
        this.logger.log('debug', 'a forwarded admin request failed; the forwarder retries', {
          member: this.id,
          request: key,
          error: String(e),
        }),
      )
      .finally(() => this.adminRunning.delete(key));
  }

  /**
   * Once a tick, with liveness: a quiesced leader pings its followers every `pingTicks` (all the group hears of it
   * while quiesced); a quiesced follower whose leader has been silent for an election timeout is woken.
   */
  private livenessTick(liveness: Liveness): void {
    const pingNow = liveness.tick();
    if (!this.core.isQuiesced() || this.failure !== null) return;
    if (this.softState.role === 'leader') {
      if (!pingNow) return;
      const transport = this.transport as PingingTransport;
      const config = this.core.configuration();
      for (const peer of [...config.voters, ...config.learners]) if (peer !== this.id) transport.ping(peer);
      return;
    }
    const silent = liveness.wakeAfter(
      { quiesced: true, role: this.softState.role, leader: this.softState.leader },
      this.electionTicks,
    );
    if (silent !== null) {
      this.logger.log('info', 'the leader fell silent while the group was quiesced: waking', {
        member: this.id,
        leader: this.softState.leader,
        silentTicks: silent,
      });
      this.wake(silent);
    }
  }

  private tick(): void {
    if (this.stopped) return;
    if (this.liveness !== null) this.livenessTick(this.liveness);
    const wasQuiesced = this.core.isQuiesced();
    this.core.tick(this.clock());
    // A group that was quiesced before this tick, with nothing waiting, has nothing to do: no retries, no Ready
    // (thousands of idle groups). The tick that quiesces it still sends its quiescing heartbeats.
    if (wasQuiesced && this.pending.size === 0 && this.reads.size === 0) return;
    this.retryAndExpire();
    this.kick();
  }

  /** Run the Ready loop unless it is already running; it drains everything before returning. */
  private kick(): void {
    this.ticker?.busy?.();
    if (this.processing || this.stopped || this.failure !== null) return;
    this.processing = true;
    if (this.readyTurn !== null) this.readyTurn.schedule(this.runReadies);
    else setImmediate(this.runReadies);
  }

  /**
   * The Ready loop, started one turn of the event loop after the kick (its own, or the pass shared with the other
   * groups of the process) so that a burst of proposals and messages from this turn joins one batch.
   */
  private readonly runReadies = (): void => {
    void this.processReadies()
      .catch((e: unknown) => this.fail(e instanceof Error ? e : new Error(String(e))))
      .finally(() => {
        this.processing = false;
      });
  };

  private async processReadies(): Promise<void> {
    while (!this.stopped && this.core.hasReady()) {
      const rd = this.core.ready();
      await this.perform(rd);
      this.core.advance(rd);
      await this.maybeSnapshot();
      if (rd.softState !== null) {
        this.updateSoftState(rd.softState);
        this.syncPeers();
      }
    }
  }

  private async perform(rd: Ready): Promise<void> {
    if (rd.snapshot !== null) {
      await this.storage.saveSnapshot(rd.snapshot);
      this.observer.snapshotSaved?.(rd.snapshot.data.byteLength, rd.snapshot.meta.index);
      this.logger.log('info', 'snapshot installed from the leader', {
        member: this.id,
        index: rd.snapshot.meta.index,
        bytes: rd.snapshot.data.byteLength,
      });
      await this.machine.restoreAsync(rd.snapshot.data);
      this.applied = rd.snapshot.meta.index;
      this.lastSnapshotIndex = rd.snapshot.meta.index;
      this.bytesSinceSnapshot = 0;
    }
    // The write starts, then a leader's appends go out while it is in flight (src/ready-order.ts says which
    // messages may), so a commit waits for the slower of our write and a follower's, not for both in turn.
    let written: Promise<void> | null = null;
    if (rd.hardState !== null && !readyMustSync(rd, this.durableHardState)) {
      // Only the commit index moved: no write now (src/ready-order.ts says why it needs no fsync); it rides with
      // the next write, or is written unsynced when the member stops.
      this.unwrittenHardState = rd.hardState;
    } else if (rd.entries.length > 0 || rd.hardState !== null) {
      const hardState = rd.hardState ?? this.unwrittenHardState;
      this.unwrittenHardState = null;
      const started = performance.now();
      written = this.storage.append(rd.entries, hardState).then(() => {
        this.lastPersistMs = performance.now() - started;
      });
      // Awaited below; until then a failure must not count as unhandled.
      written.catch(() => {});
    }
    const { early, late } = splitMessages(rd, this.durableHardState);
    this.writeAllowsEarlySends = readyAllowsEarlySends(rd, this.durableHardState);
    if (early.length > 0) {
      this.syncPeers();
      // Never snapshots (those wait for storage): sent at once, so nothing below is applied out of order.
      for (const m of early) this.transport.send(m);
    }
    // Committed entries are durable on a majority already: apply them (and answer their clients) meanwhile.
    for (const entry of rd.committed) this.applyEntry(entry);
    for (const rs of rd.readStates) this.readResolved(rs.context, rs.index);
    if (rd.committed.length > 0) this.releaseAppliedWaiters();
    this.sendResults();
    if (written !== null) {
      // Entries committed during the write apply as their acknowledgements arrive (receive()).
      this.writeInFlight = true;
      try {
        await written;
      } finally {
        this.writeInFlight = false;
      }
      if (rd.hardState !== null) this.durableHardState = rd.hardState;
      this.observer.persisted?.(rd.entries.length, this.lastPersistMs);
    }
    this.syncPeers();
    for (const m of late) await this.send(m);
    if (written !== null) {
      const interval = this.softState.role === 'leader' ? this.leaderWriteIntervalMs : this.followerWriteIntervalMs;
      if (interval > 0) await this.holdNextWrite(interval);
    }
  }

  /**
   * followerWriteIntervalMs / leaderWriteIntervalMs: wait out the rest of the interval since this write started,
   * the Ready still outstanding (so what arrives meanwhile joins the next one) and counted as in flight (so entries
   * that commit meanwhile apply at once, and a leader sends its commit news).
   */
  private async holdNextWrite(interval: number): Promise<void> {
    const wait = interval - this.lastPersistMs;
    if (wait < 0.5) return;
    this.writeInFlight = true;
    try {
      await sleep(wait);
    } finally {
      this.writeInFlight = false;
    }
  }

  private async send(m: Message): Promise<void> {
    if (m.type === 'snapshot' && m.snapshot.data.byteLength === 0) {
      const snapshot: Snapshot | null = await this.storage.latestSnapshot();
      if (snapshot === null) return;
      this.transport.send({ ...m, snapshot });
      return;
    }
    this.transport.send(m);
  }

  private applyEntry(entry: Entry): void {
    this.applied = entry.index;
    const started = this.observer.applied !== undefined ? performance.now() : 0;
    if (entry.kind === 'command') {
      this.bytesSinceSnapshot += entry.data.byteLength;
      const request = decodeSafely<C>(entry.data);
      if (request === null) return; // not ours to understand; deterministic on every member
      const result = this.machine.applyRequest(request, { index: entry.index, term: entry.term, time: entry.time });
      if (!result.ok && (result.error === 'apply_failed' || result.error === 'malformed_request')) {
        this.applyErrors++;
        this.lastApplyError = { index: entry.index, message: result.message };
        this.observer.applyFailed?.(entry, result.message);
        this.logger.log('error', 'the state machine failed on an entry; it counts as applied on every member', {
          member: this.id,
          index: entry.index,
          error: result.message,
        });
      }
      const origin = this.forwardedResults ? this.forwardedBy.get(entry.data) : undefined;
      // Followers usually wait for nothing: skip building the key then.
      const key = this.pending.size === 0 && origin === undefined ? null : requestKey(request);
      const waiting = key === null ? undefined : this.pending.get(key);
      if (waiting !== undefined) {
        this.pending.delete(key!);
        for (const w of waiting.waiters) w.resolve(result);
      }
      if (origin !== undefined && key !== null) {
        const results = this.resultsToSend.get(origin);
        const item: ForwardedResult = { key, index: entry.index, result };
        if (results === undefined) this.resultsToSend.set(origin, [item]);
        else results.push(item);
      }
    }
    if (this.observer.applied !== undefined) this.observer.applied(entry, performance.now() - started);
  }

  /**
   * Takes a snapshot when one is due. Awaited by the Ready loop: nothing is applied while a streamed one is read.
   * A machine with `detachedSnapshot` is instead encoded in the background from the view it took at this index,
   * while the loop goes on (one such snapshot at a time); saving it is the same either way.
   */
  private async maybeSnapshot(): Promise<void> {
    if (this.snapshotting) return;
    if (this.applied - this.lastSnapshotIndex < this.snapshotEvery && this.bytesSinceSnapshot < this.snapshotLogBytes)
      return;
    const meta = this.core.snapshotMetaForApplied();
    this.bytesSinceSnapshot = 0;
    if (this.machine.detaches) {
      const encode = this.machine.beginSnapshot();
      this.snapshotting = true;
      // Counted from here, so the next one is due snapshotEvery entries after this index, not after the encoding.
      this.lastSnapshotIndex = Math.max(this.lastSnapshotIndex, meta.index);
      void encode()
        .then((data) => {
          if (!this.stopped) this.saveTaken({ meta, data });
        })
        .catch((e: unknown) => this.fail(e instanceof Error ? e : new Error(String(e))))
        .finally(() => {
          this.snapshotting = false;
        });
      return;
    }
    const snapshot: Snapshot = { meta, data: await this.machine.snapshotAsync() };
    if (this.stopped) return;
    this.lastSnapshotIndex = meta.index;
    this.saveTaken(snapshot);
  }

  /**
   * Saves a snapshot this member took, then compacts the in-memory log to it. A snapshot installed from the leader
   * meanwhile may be newer: storage keeps the newer one, and compacting to an older index does nothing.
   */
  private saveTaken(snapshot: Snapshot): void {
    const meta = snapshot.meta;
    this.observer.snapshotSaved?.(snapshot.data.byteLength, meta.index);
    this.logger.log('info', 'snapshot taken', { member: this.id, index: meta.index, bytes: snapshot.data.byteLength });
    // Compact the in-memory log only once the snapshot is durable.
    void this.storage
      .saveSnapshot(snapshot)
      .then(() => {
        if (!this.stopped) this.core.compact(meta);
      })
      .catch((e: unknown) => this.fail(e instanceof Error ? e : new Error(String(e))));
  }

  private updateSoftState(state: SoftState): void {
    const leaderChanged = state.leader !== this.softState.leader;
    this.softState = state;
    this.observer.stateChanged?.(state);
    if (leaderChanged) {
      this.logger.log('info', 'leader changed', {
        member: this.id,
        leader: state.leader,
        role: state.role,
        term: state.term,
      });
      // Proposals and reads held by the old leader are probably lost: retry them soon.
      const soon = Date.now() + this.tickMs;
      for (const p of this.pending.values()) p.nextRetry = Math.min(p.nextRetry, soon);
      for (const r of this.reads.values()) r.nextRetry = Math.min(r.nextRetry, soon);
    }
  }

  /**
   * Keep the transport connected to the other members of the configuration in force, and to the leader even when
   * the configuration no longer has it: a leader that removes itself leads until that change commits (§4.2.2),
   * so followers must still answer it.
   */
  private syncPeers(): void {
    const config = this.core.configuration();
    const leader = this.softState.leader;
    if (config === this.knownConfig && leader === this.knownLeader) return;
    if (config !== this.knownConfig && this.knownConfig !== null && !sameMembers(config, this.knownConfig)) {
      this.observer.membershipChanged?.(config);
      this.logger.log('info', 'membership changed', {
        member: this.id,
        voters: config.voters,
        learners: config.learners,
      });
    }
    this.knownConfig = config;
    this.knownLeader = leader;
    for (const [id, address] of Object.entries(config.addresses ?? {})) this.addressBook.set(id, address);
    // Until a configuration reaches a joining member, it talks to every member it was told of.
    const members = new Set(
      config.voters.length + config.learners.length > 0
        ? [...config.voters, ...config.learners]
        : this.addressBook.keys(),
    );
    if (leader !== null) members.add(leader);
    members.delete(this.id);
    for (const id of members) {
      const address = this.addressBook.get(id);
      if (address !== undefined && this.connected.get(id) !== address) {
        this.transport.addPeer(id, address);
        this.connected.set(id, address);
      }
    }
    for (const id of [...this.connected.keys()]) {
      if (!members.has(id)) {
        this.transport.removePeer(id);
        this.connected.delete(id);
      }
    }
  }

  // ---------------------------------------------------------------------------------------------------------
  // Requests waiting for the log

  private async ensureSession(): Promise<ClientSession> {
    // A session unused for half the timeout is replaced before use rather than found expired by the log: the first
    // write after a quiet spell then costs one registration, not a refused command and a registration.
    if (this.session !== null && this.clock() - this.session.usedAt > this.machine.sessionTimeoutMs / 2)
      this.session = null;
    if (this.session !== null) return this.session;
    if (this.registering === null) {
      const nonce = `${this.id}:${randomUUID()}`;
      this.registering = this.submit({ t: 'register', nonce }).then((result) => {
        if (!result.ok || !('client' in result)) throw new SessionError('unknown_session');
        return result.client;
      });
      this.registering.then(
        (client) => {
          this.session = new ClientSession(client, this.clock());
          this.registering = null;
        },
        () => {
          this.registering = null;
        },
      );
    }
    await this.registering;
    if (this.session === null) await sleep(0);
    if (this.session === null) throw new SessionError('unknown_session');
    return this.session;
  }

  private proposeData(data: Uint8Array, pending: PendingProposal<R>): void {
    const outcome = this.core.propose(data);
    this.observer.proposed?.(outcome);
    // With no leader known, try again after a tick rather than a whole retry interval.
    pending.nextRetry = Date.now() + (outcome === 'dropped' ? this.tickMs : this.retryMs);
    if (outcome === 'forwarded' && this.processing) this.scheduleForwardFlush();
    this.kick();
  }

  /**
   * While the Ready loop is busy (this member's write in flight), send the commands forwarded during this turn at
   * the end of the turn instead of after the write: a forward waits for no write (core.takeForwards).
   */
  private scheduleForwardFlush(): void {
    if (this.forwardFlushScheduled) return;
    this.forwardFlushScheduled = true;
    setImmediate(() => {
      this.forwardFlushScheduled = false;
      if (this.stopped || this.failure !== null) return;
      const forwards = this.core.takeForwards();
      if (forwards.length === 0) return;
      this.syncPeers();
      for (const m of forwards) this.transport.send(m);
    });
  }

  private readResolved(context: string, index: number): void {
    const read = this.reads.get(context);
    if (read === undefined) return;
    if (index < 0) {
      read.nextRetry = Date.now() + this.tickMs;
      return;
    }
    this.reads.delete(context);
    read.resolve(index);
  }

  private waitApplied(index: number, deadline = Date.now() + this.requestTimeoutMs): Promise<void> {
    if (this.applied >= index) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const entry = { index, waiter: { resolve, reject } };
      this.appliedWaiters.push(entry);
      const timer = setTimeout(
        () => {
          const i = this.appliedWaiters.indexOf(entry);
          if (i >= 0) {
            this.appliedWaiters.splice(i, 1);
            reject(new TimeoutError(`index ${index} not applied in time`));
          }
        },
        Math.max(0, deadline - Date.now()),
      );
      timer.unref?.();
    });
  }

  private releaseAppliedWaiters(): void {
    if (this.appliedWaiters.length === 0) return;
    const still: typeof this.appliedWaiters = [];
    for (const w of this.appliedWaiters) {
      if (w.index <= this.applied) w.waiter.resolve();
      else still.push(w);
    }
    this.appliedWaiters = still;
  }

  /** Re-propose what has waited too long (same client and seq, so it applies once); time out what is overdue. */
  private retryAndExpire(): void {
    const now = Date.now();
    for (const [key, p] of this.pending) {
      if (now > p.deadline) {
        this.pending.delete(key);
        for (const w of p.waiters)
          w.reject(new TimeoutError('the proposal was not committed in time; it may still apply'));
      } else if (now >= p.nextRetry) {
        this.proposeData(p.data, p);
      }
    }
    for (const [context, r] of this.reads) {
      if (now > r.deadline) {
        this.reads.delete(context);
        r.reject(new TimeoutError('no leader confirmed the read in time'));
      } else if (now >= r.nextRetry) {
        r.nextRetry = now + this.retryMs;
        this.core.readIndex(context);
      }
    }
  }

  private failAll(error: Error): void {
    for (const p of this.pending.values()) for (const w of p.waiters) w.reject(error);
    this.pending.clear();
    for (const r of this.reads.values()) r.reject(error);
    this.reads.clear();
    for (const w of this.appliedWaiters) w.waiter.reject(error);
    this.appliedWaiters = [];
  }

  /**
   * Storage failed: this member cannot go on safely. It stops taking part at once (no ticks, its transport closed,
   * so the others stop hearing from it and elect a leader among themselves), callers see the error, and the
   * observer is told so that whoever runs the member restarts it from its durable state.
   */
  private fail(error: Error): void {
    if (this.failure !== null) return;
    this.failure = error;
    this.failAll(error);
    this.stopTicking?.();
    this.stopTicking = null;
    void this.transport.close().catch(() => undefined);
    this.logger.log('error', 'storage failed: this member stopped taking part and must be restarted', {
      member: this.id,
      error: error.message,
    });
    this.observer.failed?.(error);
  }

  private assertRunning(): void {
    if (this.stopped) throw new StoppedError('the member stopped');
    if (this.failure !== null) throw this.failure;
  }
}

/** This node's own session: hands out sequence numbers and tracks the prefix whose answers have all arrived. */
class ClientSession {
  seq = 0;
  /** Every seq <= acked has its answer: the replicated session may forget those results. */
  acked = 0;
  private readonly done = new Set<number>();

  constructor(
    readonly client: string,
    /** When a command in it (or its registration) last applied, on this member's clock. */
    public usedAt: number,
  ) {}

  finished(seq: number): void {
    this.done.add(seq);
    while (this.done.delete(this.acked + 1)) this.acked++;
  }
}

/** The key a request's reply is matched by when its entry applies; null for raw commands (no identity). */
function requestKey<C>(request: SessionRequest<C>): string | null {
  switch (request.t) {
    case 'command':
      return `${request.client}:${request.seq}`;
    case 'register':
      return `reg:${request.nonce ?? ''}`;
    case 'raw':
      return null;
  }
}

function decodeSafely<C>(data: Uint8Array): SessionRequest<C> | null {
  try {
    return decodeRequest<C>(data);
  } catch {
    return null;
  }
}

/** Whether the configuration shows the change as done (it may have been lost with a leader change). */
function reflects(config: Readonly<Configuration>, change: ConfigChange): boolean {
  switch (change.type) {
    case 'addLearner':
      return config.learners.includes(change.node) || config.voters.includes(change.node);
    case 'addVoter':
    case 'promote':
      return config.voters.includes(change.node);
    case 'remove':
      return !config.voters.includes(change.node) && !config.learners.includes(change.node);
    case 'forceNewCluster':
      return config.voters.length === 1 && config.voters[0] === change.node;
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

function hashSeed(id: string): number {
  let h = 2166136261;
  for (let i = 0; i < id.length; i++) h = Math.imul(h ^ id.charCodeAt(i), 16777619);
  return (h ^ Date.now()) >>> 0;
}

/**
 * `promise`, or a rejection with the signal's reason as soon as `signal` aborts (`forget` then drops the waiter).
 * Without a signal, `promise` itself.
 */
function abortable<T>(promise: Promise<T>, signal: AbortSignal | undefined, forget: () => void): Promise<T> {
  if (signal === undefined) return promise;
  if (signal.aborted) {
    forget();
    promise.catch(() => {});
    return Promise.reject(abortReason(signal));
  }
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => {
      forget();
      reject(abortReason(signal));
    };
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error instanceof Error ? error : new Error(String(error)));
      },
    );
  });
}

function abortReason(signal: AbortSignal): Error {
  return signal.reason instanceof Error ? signal.reason : new DOMException('the call was aborted', 'AbortError');
}

function sameMembers(a: Readonly<Configuration>, b: Readonly<Configuration>): boolean {
  const same = (x: readonly string[], y: readonly string[]): boolean =>
    x.length === y.length && x.every((id) => y.includes(id));
  return same(a.voters, b.voters) && same(a.learners, b.learners);
}
