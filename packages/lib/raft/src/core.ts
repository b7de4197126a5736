/**
 * The Raft algorithm as a pure, deterministic state machine, in the manner of etcd's raft package: no I/O, no
 * timers, no ambient randomness. It is fed ticks, messages and proposals, and hands back one batch of work at a
 * time (`ready()`), which a driver performs and acknowledges (`advance()`).
 *
 * Covers: elections with randomized timeouts, pre-vote and check-quorum; pipelined replication with a bounded
 * in-flight window and fast log backtracking; snapshots; ReadIndex and (opt-in) lease reads; single-server
 * membership changes with learners; leadership transfer; forwarding of proposals and reads to the leader.
 */
import { invariant } from './assert.js';
import { RaftLog } from './log.js';
import { Progress } from './progress.js';
import { Prng } from './prng.js';
import type {
  AppendRequest,
  AppendResponse,
  ConfigChange,
  Configuration,
  Entry,
  HardState,
  HeartbeatRequest,
  HeartbeatResponse,
  Message,
  NodeId,
  ReadState,
  Ready,
  Role,
  Snapshot,
  SnapshotMeta,
  SnapshotRequest,
  SoftState,
  VoteRequest,
} from './types.js';

/**
 * @internal
 * Deliberately broken safety rules, for proving that the simulator catches each one. Never set in production.
 */
export interface Mutations {
  /** Grant votes without checking that the candidate's log is at least as up to date. */
  grantStaleVote?: boolean;
  /** Commit by replica count alone, including entries of earlier terms (the Figure 8 bug). */
  commitPreviousTermByCount?: boolean;
  /** Accept appends without checking that the previous entry matches. */
  skipPrevCheck?: boolean;
  /** A leader ignores messages of a higher term instead of stepping down. */
  ignoreHigherTerm?: boolean;
  /** A leader counts itself in the commit quorum for entries its own write has not yet made durable. */
  countSelfUnpersisted?: boolean;
  /** A leader's commit news (takeCommitNews) goes to every follower with its commit index, past what each is known to hold. */
  commitNewsPastMatch?: boolean;
}

/** The consensus core's identity and tuning (RaftNode passes its `core` option through). */
export interface CoreOptions {
  id: NodeId;
  /** Ticks without hearing from a leader before a follower campaigns; randomized in [n, 2n). Default 10. */
  electionTicks?: number;
  /** Ticks between leader heartbeats. Default 1. */
  heartbeatTicks?: number;
  /** Pre-vote (dissertation 9.6): a partitioned member cannot disrupt the cluster by raising terms. Default true. */
  preVote?: boolean;
  /** A leader that has not heard from a quorum for an election timeout steps down. Default true. */
  checkQuorum?: boolean;
  /** Serve reads on the leader's lease without a heartbeat round. Opt-in; requires checkQuorum. Default false. */
  leaseReads?: boolean;
  /**
   * Quiescence (for many groups per process): a leader whose group has been idle this many ticks (every member
   * caught up, everything committed, nothing pending) stops ticking and heartbeating, and tells its followers,
   * which stop too. Any proposal, read or message wakes the group. A quiesced follower cannot notice a dead leader
   * by itself: its driver must call `wake(silentTicks)` when the leader's process has been silent (GroupHost does,
   * from one ping per process pair per tick). A quiesced leader holds no lease. 0 (default): never.
   */
  quiesceTicks?: number;
  /** Append messages in flight per follower, by count. Default 64. */
  maxInflightMessages?: number;
  /** Append bytes in flight per follower. Default 8 MiB. */
  maxInflightBytes?: number;
  /** Upper bound on the entry bytes in one append message. Default 1 MiB. */
  maxMessageBytes?: number;
  /** Seed of the core's own PRNG (randomized election timeouts). Default: derived from the id. */
  seed?: number;
  /** @internal For the simulator's mutation check only: never in the published types. */
  mutations?: Mutations;
}

/** What a core starts from: the durable state a Storage loaded. */
export interface CoreState {
  hardState: HardState;
  /** Metadata of the snapshot the log starts after, or null for an empty log starting at index 1. */
  snapshot: SnapshotMeta | null;
  /** Entries after the snapshot, contiguous. */
  entries: Entry[];
  /** Member set when neither the snapshot nor the log carries one (a brand-new group). */
  initialConfig?: Configuration;
}

/** The leader's view of one follower's replication. */
export interface PeerStatus {
  id: NodeId;
  match: number;
  next: number;
  state: 'probe' | 'replicate' | 'snapshot';
  learner: boolean;
  recentActive: boolean;
  inflight: number;
}

/** A snapshot of the core's state for status pages and tests. */
export interface CoreStatus {
  id: NodeId;
  role: Role;
  term: number;
  vote: NodeId | null;
  leader: NodeId | null;
  commit: number;
  applied: number;
  firstIndex: number;
  lastIndex: number;
  snapshotIndex: number;
  config: Configuration;
  peers: PeerStatus[];
  transferee: NodeId | null;
  /** The group is quiesced on this member (no ticks until woken). */
  quiesced: boolean;
}

/** What became of a proposal: appended here, forwarded to the leader, or dropped (no leader known). */
export type ProposeOutcome = 'accepted' | 'forwarded' | 'dropped';

/** Why a membership change was refused. */
export class ConfigChangeError extends Error {
  override name = 'ConfigChangeError';
}

interface PendingRead {
  context: string;
  /** Who asked: this member (null) or a follower that forwarded the read. */
  from: NodeId | null;
  index: number;
  round: number;
}

/** Config entries in the log, newest last, so a truncation can fall back to the one before. */
interface ConfigMark {
  index: number;
  config: Configuration;
}

const EMPTY: Uint8Array = new Uint8Array(0);

/** The round of a leader's commit news (takeCommitNews): read rounds start at 1. */
const COMMIT_NEWS_ROUND = 0;

/**
 * The Raft algorithm for one member, pure and deterministic: no I/O, timers or ambient randomness. Feed it
 * `tick`, `step`, `propose` and `readIndex`; take work from `ready()`, perform it (persist, send, apply) and hand
 * it back with `advance()`. RaftNode is the driver that does this against a Storage and a Transport.
 */
export class RaftCore {
  readonly id: NodeId;
  private readonly electionTicks: number;
  private readonly heartbeatTicks: number;
  private readonly preVote: boolean;
  private readonly checkQuorum: boolean;
  private readonly leaseReads: boolean;
  private readonly quiesceTicks: number;
  private readonly maxInflightMessages: number;
  private readonly maxInflightBytes: number;
  private readonly maxMessageBytes: number;
  private readonly mutations: Mutations;
  private readonly random: Prng;

  private term: number;
  private vote: NodeId | null;
  private role: Role = 'follower';
  private leader: NodeId | null = null;
  private readonly log: RaftLog;

  /** The configuration in force: the newest config entry in the log, even uncommitted (dissertation 4.1). */
  private config: Configuration;
  private configMarks: ConfigMark[] = [];
  private baseConfig: Configuration;

  private electionElapsed = 0;
  private heartbeatElapsed = 0;
  /** Quiesced: ticks do nothing until a message, proposal, read or wake(). */
  private quiesced = false;
  /** Leader: consecutive ticks the group has been idle. */
  private idleTicks = 0;
  private randomizedElectionTimeout = 0;
  private votes = new Map<NodeId, boolean>();
  private progress = new Map<NodeId, Progress>();
  private transferee: NodeId | null = null;
  /** Index of the latest config entry a leader appended; no new change until it commits. */
  private pendingConfigIndex = 0;
  private now = 0;

  private readRound = 0;
  /** Leader-local tick count, and the tick each heartbeat round was sent at (for the read lease). */
  private leaderTicks = 0;
  private roundSentAt = new Map<number, number>();
  private pendingReads: PendingRead[] = [];
  /** Reads that arrived before this leader committed an entry of its term. */
  private readsAwaitingCommit: Array<{ context: string; from: NodeId | null }> = [];

  /** The snapshot the log starts after, for followers too far behind. */
  private snapshotMeta: SnapshotMeta | null;
  /** A snapshot received from the leader, to be installed by the driver. */
  private receivedSnapshot: Snapshot | null = null;

  // Outputs accumulated for the next Ready.
  private messages: Message[] = [];
  private readStates: ReadState[] = [];
  private forwardBuffer: Uint8Array[] = [];
  /** maybeCommit's working array, kept from call to call. */
  private readonly matchScratch: number[] = [];
  private droppedProposals = 0;
  private broadcastPending = false;
  /**
   * Leader: the commit index its followers were last told by a Ready or by takeCommitNews() (the commit index as of
   * then); a commit beyond it while a Ready is outstanding is news worth sending at once.
   */
  private commitToldUpTo = 0;
  private lastHardState: HardState;
  private lastSoftState: SoftState | null = null;
  /** Whether a Ready is out and not yet advanced: the driver must perform batches one at a time. */
  private readyOutstanding = false;
  /**
   * The last committed entry handed to the driver to apply (by ready() or takeCommitted()); `log.applied` catches
   * up with it at advance().
   */
  private handedOut = 0;

  constructor(options: CoreOptions, state: CoreState) {
    this.id = options.id;
    this.electionTicks = options.electionTicks ?? 10;
    this.heartbeatTicks = options.heartbeatTicks ?? 1;
    this.preVote = options.preVote ?? true;
    this.checkQuorum = options.checkQuorum ?? true;
    this.leaseReads = options.leaseReads ?? false;
    this.quiesceTicks = options.quiesceTicks ?? 0;
    invariant(!this.leaseReads || this.checkQuorum, 'lease reads require check-quorum');
    invariant(this.heartbeatTicks < this.electionTicks, 'heartbeat interval must be below the election timeout');
    this.maxInflightMessages = options.maxInflightMessages ?? 64;
    this.maxInflightBytes = options.maxInflightBytes ?? 8 * 1024 * 1024;
    this.maxMessageBytes = options.maxMessageBytes ?? 1024 * 1024;
    this.mutations = options.mutations ?? {};
    this.random = new Prng(options.seed ?? hashString(options.id));

    this.term = state.hardState.term;
    this.vote = state.hardState.vote;
    this.log = new RaftLog(state.snapshot, state.entries, state.hardState.commit);
    this.snapshotMeta = state.snapshot;
    this.baseConfig = state.snapshot?.config ?? state.initialConfig ?? { voters: [], learners: [] };
    for (const e of state.entries) if (e.kind === 'config') this.configMarks.push({ index: e.index, config: e.config });
    this.config = this.currentConfigFromLog();
    this.lastHardState = { ...state.hardState };
    this.resetElectionTimeout();
  }

  // ---------------------------------------------------------------------------------------------------------
  // Inputs

  /** Advance logical time by one tick. `now` is this member's clock in ms, used only to stamp new entries. */
  tick(now: number): void {
    this.now = Math.max(this.now, now);
    if (this.quiesced) return;
    if (this.role === 'leader') this.tickLeader();
    else this.tickElection();
  }

  /** Feed one message received from another member. */
  step(m: Message): void {
    if (m.to !== this.id) return;
    // A forwarded proposal's outcome is the driver's business (RaftNode's forwardedResults), not the protocol's.
    if (m.type === 'results') return;
    // A quiesced leader stays so for the answers to its quiescing heartbeat; anything else wakes the group.
    if (this.quiesced && !(this.role === 'leader' && m.type === 'heartbeatResp')) this.unquiesce();
    if (m.type === 'propose' || m.type === 'readIndex' || m.type === 'readIndexResp' || m.type === 'admin') {
      this.stepLocal(m);
      return;
    }
    if (m.term > this.term) {
      if (!this.acceptHigherTerm(m)) return;
    } else if (m.term < this.term) {
      this.stepLowerTerm(m);
      return;
    }
    switch (m.type) {
      case 'vote':
      case 'prevote':
        this.handleVoteRequest(m);
        return;
      default:
        break;
    }
    switch (this.role) {
      case 'leader':
        this.stepLeader(m);
        return;
      case 'candidate':
      case 'precandidate':
        this.stepCandidate(m);
        return;
      case 'follower':
        this.stepFollower(m);
        return;
    }
  }

  /** Propose a command. A follower forwards it to the leader it knows; without one it is dropped. */
  propose(command: Uint8Array): ProposeOutcome {
    this.unquiesce();
    if (this.role === 'leader') {
      if (this.transferee !== null) {
        this.droppedProposals++;
        return 'dropped';
      }
      this.appendEntries([{ kind: 'command', data: command }]);
      return 'accepted';
    }
    if (this.leader !== null && this.leader !== this.id) {
      this.forwardBuffer.push(command);
      return 'forwarded';
    }
    this.droppedProposals++;
    return 'dropped';
  }

  /**
   * Propose one membership change. Refused unless this member leads, has committed an entry of its term, and no
   * earlier change is still uncommitted: together these make single-server changes safe.
   */
  proposeConfigChange(change: ConfigChange): void {
    this.unquiesce();
    if (this.role !== 'leader') throw new ConfigChangeError('not the leader');
    if (this.transferee !== null) throw new ConfigChangeError('a leadership transfer is in progress');
    if (this.pendingConfigIndex > this.log.committed) {
      throw new ConfigChangeError('an earlier membership change is not committed yet');
    }
    if (this.log.term(this.log.committed) !== this.term) {
      throw new ConfigChangeError('the leader has not committed an entry of its term yet');
    }
    const config = applyChange(this.config, change);
    this.appendEntries([{ kind: 'config', change, config }]);
  }

  /**
   * Ask for a linearizable read. The answer comes in a later Ready's readStates with the same context: once
   * applied >= index, the read may be served from local state. Index -1 means refused.
   */
  readIndex(context: string): void {
    this.unquiesce();
    if (this.role === 'leader') {
      this.handleReadRequest(context, null);
      return;
    }
    if (this.leader !== null && this.leader !== this.id) {
      this.send({ type: 'readIndex', to: this.leader, term: 0, context });
      return;
    }
    this.readStates.push({ index: -1, context });
  }

  /** Hand leadership to `to` (a voter): it is caught up, then told to campaign at once. */
  transferLeadership(to: NodeId): void {
    this.unquiesce();
    if (this.role !== 'leader' || to === this.id || !this.config.voters.includes(to)) return;
    if (this.transferee === to) return;
    this.transferee = to;
    this.electionElapsed = 0; // the transfer is abandoned after one election timeout
    const pr = this.progress.get(to);
    if (pr === undefined) return;
    if (pr.match === this.log.lastIndex()) this.send({ type: 'timeoutNow', to, term: this.term });
    else this.sendAppend(to);
  }

  /** Start an election now (tests, or an operator forcing one). */
  campaign(): void {
    this.unquiesce();
    if (this.role === 'leader' || !this.promotable()) return;
    this.startElection();
  }

  /** A state-machine snapshot covering `meta.index` has been saved: entries up to it can be dropped. */
  compact(meta: SnapshotMeta): void {
    if (meta.index <= this.log.snapshotIndex) return;
    this.log.compact(meta);
    this.snapshotMeta = meta;
    // Config entries now covered by the snapshot become the base configuration.
    while (this.configMarks.length > 0 && this.configMarks[0]!.index <= meta.index) {
      this.baseConfig = this.configMarks.shift()!.config;
    }
  }

  /** Metadata for a snapshot of the state machine as it is now (at the applied index). */
  snapshotMetaForApplied(): SnapshotMeta {
    const index = this.log.applied;
    const term = this.log.term(index);
    invariant(term !== undefined, 'applied entry is not in the log');
    let config = this.baseConfig;
    for (const mark of this.configMarks) if (mark.index <= index) config = mark.config;
    const time = this.log.entry(index)?.time ?? this.snapshotMeta?.time ?? 0;
    return { index, term, time, config: cloneConfig(config) };
  }

  // ---------------------------------------------------------------------------------------------------------
  // Outputs

  /** Whether `ready()` has work to hand out (false while a Ready is outstanding). */
  hasReady(): boolean {
    if (this.readyOutstanding) return false;
    return (
      this.messages.length > 0 ||
      this.forwardBuffer.length > 0 ||
      this.broadcastPending ||
      this.readStates.length > 0 ||
      this.receivedSnapshot !== null ||
      this.log.unstableFrom <= this.log.lastIndex() ||
      this.nextToApply() < this.applyLimit() ||
      this.droppedProposals > 0 ||
      !sameHardState(this.hardState(), this.lastHardState) ||
      !sameSoftState(this.softState(), this.lastSoftState)
    );
  }

  /** The next batch of work; call `advance(ready)` once it is done, before asking again. */
  ready(): Ready {
    invariant(!this.readyOutstanding, 'ready() called again before advance()');
    if (this.broadcastPending) {
      this.broadcastPending = false;
      this.broadcastAppend();
    }
    this.messages.push(...this.takeForwards());
    this.forwardBuffer = [];
    this.commitToldUpTo = this.log.committed;
    const hs = this.hardState();
    const ss = this.softState();
    const snapshot = this.receivedSnapshot;
    const rd: Ready = {
      softState: sameSoftState(ss, this.lastSoftState) ? null : ss,
      hardState: sameHardState(hs, this.lastHardState) ? null : hs,
      snapshot,
      entries: this.log.takeUnstable(),
      messages: this.messages,
      committed: this.takeApplicable(),
      readStates: this.readStates,
      droppedProposals: this.droppedProposals,
    };
    this.receivedSnapshot = null;
    this.messages = [];
    this.readStates = [];
    this.droppedProposals = 0;
    this.lastHardState = hs;
    this.lastSoftState = ss;
    this.readyOutstanding = true;
    return rd;
  }

  /**
   * The client commands this follower has buffered for its leader, as one `propose` message, taken now: the
   * driver may send it at once, also while a Ready is outstanding. A forward carries nothing of this member's
   * state (src/ready-order.ts counts it among the messages that never wait for a write), so a command that
   * reaches a follower whose write is in flight need not wait for that write before it leaves. Empty when
   * nothing is buffered or no leader is known (the buffer then waits for the next Ready, as before).
   */
  takeForwards(): Message[] {
    if (this.forwardBuffer.length === 0 || this.leader === null) return [];
    const m: Message = { type: 'propose', from: this.id, to: this.leader, term: 0, commands: this.forwardBuffer };
    this.forwardBuffer = [];
    return [m];
  }

  /**
   * A leader's commit news, taken while a Ready is outstanding (its write in flight): one heartbeat to each follower
   * that holds entries committed since the followers were last told, carrying min(its match, the commit index), as
   * every heartbeat does. Without it the news waits for the leader's next Ready, i.e. for the leader's own write to
   * finish, and so does every client waiting on a follower for its write to apply. A heartbeat, not an append: it
   * adds no entries, so followers make no extra log write for it. It carries round 0, which no heartbeat of a
   * read round uses: a follower does not answer it (an answer would tell the leader nothing it needs; an older
   * member that does answer is ignored), so it changes nothing for leases or ReadIndex. The driver may send these before its write is durable only when the
   * outstanding Ready leaves the durable term and vote as they are (src/ready-order.ts); the core adds that its term
   * and vote have not moved since that Ready was handed out. Empty otherwise.
   */
  takeCommitNews(): Message[] {
    if (this.role !== 'leader' || !this.readyOutstanding || this.log.committed <= this.commitToldUpTo) return [];
    if (this.term !== this.lastHardState.term || this.vote !== this.lastHardState.vote) return [];
    const since = this.commitToldUpTo;
    this.commitToldUpTo = this.log.committed;
    const news: Message[] = [];
    const pastMatch = this.mutations.commitNewsPastMatch === true;
    for (const [id, pr] of this.progress) {
      if (id === this.id || (pr.state !== 'replicate' && !pastMatch)) continue;
      const commit = pastMatch ? this.log.committed : Math.min(pr.match, this.log.committed);
      if (commit <= since) continue;
      news.push({ type: 'heartbeat', from: this.id, to: id, term: this.term, commit, round: COMMIT_NEWS_ROUND });
    }
    return news;
  }

  /** The driver performed `rd`: its entries are durable, its messages sent, its committed entries applied. */
  advance(rd: Ready): void {
    invariant(this.readyOutstanding, 'advance() without an outstanding ready()');
    this.readyOutstanding = false;
    const last = rd.entries[rd.entries.length - 1];
    if (last !== undefined) this.log.persistedTo(last.index, last.term);
    if (rd.snapshot !== null) this.log.persisted = Math.max(this.log.persisted, rd.snapshot.meta.index);
    // Everything handed out (this batch's committed entries and any takeCommitted() since) is applied. A snapshot
    // stepped while this batch was out may already have moved `applied` past it; the driver applied entries the
    // snapshot also covers, and the next batch installs the snapshot over them.
    const lastApplied = rd.committed[rd.committed.length - 1];
    const upTo = Math.max(this.handedOut, lastApplied?.index ?? 0);
    if (upTo > this.log.applied) this.log.applied = upTo;
    if (this.role === 'leader') {
      const self = this.progress.get(this.id);
      if (self !== undefined) self.maybeUpdate(this.log.persisted);
      if (this.maybeCommit()) this.broadcastPending = true;
    }
  }

  /**
   * Entries committed since the outstanding Ready was handed out, for the driver to apply while that Ready's
   * write is in flight (they are durable on a majority already; this member's own write has nothing to do with
   * them), up to the last entry handed out for writing. Empty when no Ready is outstanding (the next Ready carries them) or a received snapshot waits to be
   * installed (entries after it must not apply before it). The driver applies them in order, after the
   * outstanding Ready's own committed entries, and must not take a snapshot of its machine meanwhile.
   */
  takeCommitted(): Entry[] {
    if (!this.readyOutstanding || this.receivedSnapshot !== null) return [];
    // Only entries already handed out for writing: one that arrived during this write is applied with the Ready
    // that writes it, so an entry is never applied on a member before that member has even begun to store it.
    return this.takeApplicable(this.log.unstableFrom - 1);
  }

  /** The configuration in force (the newest in the log). Do not mutate. */
  configuration(): Readonly<Configuration> {
    return this.config;
  }

  /**
   * Committed entries not yet applied, without building a whole status(): `appliedHere` is the driver's own applied
   * index, which may be ahead of what the core has been told.
   */
  applyBacklog(appliedHere: number): number {
    return Math.max(0, this.log.committed - Math.max(this.log.applied, appliedHere));
  }

  /** The core's state now, for status pages and tests. */
  status(): CoreStatus {
    return {
      id: this.id,
      role: this.role,
      term: this.term,
      vote: this.vote,
      leader: this.leader,
      commit: this.log.committed,
      applied: this.log.applied,
      firstIndex: this.log.firstIndex(),
      lastIndex: this.log.lastIndex(),
      snapshotIndex: this.log.snapshotIndex,
      config: cloneConfig(this.config),
      peers: [...this.progress].map(([id, pr]) => ({
        id,
        match: pr.match,
        next: pr.next,
        state: pr.state,
        learner: pr.learner,
        recentActive: pr.recentActive,
        inflight: pr.inflightCount,
      })),
      transferee: this.transferee,
      quiesced: this.quiesced,
    };
  }

  /** Whether the group is quiesced on this member (cheaper than status()). */
  isQuiesced(): boolean {
    return this.quiesced;
  }

  /**
   * Wakes a quiesced group. The driver calls it with `silentTicks`, the ticks since it last heard anything from
   * the leader's process, when that is an election timeout or more: the follower then counts that time as
   * elapsed, so it campaigns after the rest of a randomized timeout instead of a whole one.
   */
  wake(silentTicks = 0): void {
    const wasQuiesced = this.quiesced;
    this.unquiesce();
    if (wasQuiesced && this.role !== 'leader')
      this.electionElapsed = Math.max(this.electionElapsed, Math.min(silentTicks, this.electionTicks));
  }

  private unquiesce(): void {
    if (!this.quiesced) return;
    this.quiesced = false;
    this.idleTicks = 0;
    if (this.role !== 'leader') return;
    // Start over as a leader that has heard from nobody yet: check-quorum counts from now, and a read lease needs
    // a round acknowledged after waking. leaderTicks stood still while quiesced, so a round acknowledged before
    // (even the quiescing one) would look recent however long ago it was: forget them all.
    this.electionElapsed = 0;
    this.heartbeatElapsed = 0;
    this.roundSentAt.clear();
    for (const [id, pr] of this.progress) pr.recentActive = id === this.id;
    this.broadcastHeartbeat(this.nextRound());
  }

  /** Whether nothing is left to do in this group: every member has every entry, all committed, nothing pending. */
  private idle(): boolean {
    const last = this.log.lastIndex();
    if (this.log.committed !== last || this.log.term(last) !== this.term) return false;
    if (this.transferee !== null || this.pendingConfigIndex > this.log.committed) return false;
    if (this.pendingReads.length > 0 || this.readsAwaitingCommit.length > 0 || this.forwardBuffer.length > 0)
      return false;
    for (const [id, pr] of this.progress) {
      if (id === this.id) continue;
      if (pr.match !== last || pr.state !== 'replicate' || pr.inflightCount > 0 || pr.suspectsLoss) return false;
    }
    return true;
  }

  // ---------------------------------------------------------------------------------------------------------
  // Ticks

  private tickElection(): void {
    this.electionElapsed++;
    if (this.electionElapsed >= this.randomizedElectionTimeout && this.promotable()) {
      this.electionElapsed = 0;
      this.startElection();
    }
  }

  private tickLeader(): void {
    this.leaderTicks++;
    this.heartbeatElapsed++;
    this.electionElapsed++;
    if (this.electionElapsed >= this.electionTicks) {
      this.electionElapsed = 0;
      if (this.checkQuorum) {
        if (!this.quorumActive()) {
          this.becomeFollower(this.term, null);
          return;
        }
        for (const [id, pr] of this.progress) pr.recentActive = id === this.id;
      }
      this.transferee = null; // a transfer that did not finish in one election timeout is abandoned
    }
    for (const pr of this.progress.values()) {
      if (pr.state === 'snapshot') pr.snapshotTicks++;
    }
    if (this.quiesceTicks > 0) {
      this.idleTicks = this.idle() ? this.idleTicks + 1 : 0;
      if (this.idleTicks >= this.quiesceTicks) {
        this.quiesced = true;
        this.idleTicks = 0;
        this.broadcastHeartbeat(this.nextRound(), true);
        return;
      }
    }
    if (this.heartbeatElapsed >= this.heartbeatTicks) {
      this.heartbeatElapsed = 0;
      this.broadcastHeartbeat(this.nextRound());
    }
  }

  // ---------------------------------------------------------------------------------------------------------
  // Terms and roles

  /** Returns whether the message should be processed further after the term update. */
  private acceptHigherTerm(m: Message): boolean {
    if (m.type === 'vote' || m.type === 'prevote') {
      // A member that heard from a live leader within the election timeout ignores votes (leader stickiness),
      // unless the election comes from a leadership transfer.
      const inLease =
        this.checkQuorum && this.leader !== null && this.electionElapsed < this.electionTicks && !m.transfer;
      if (inLease) return false;
    }
    if (m.type === 'prevote') return true; // a pre-vote never changes our term
    if (m.type === 'prevoteResp' && !m.reject) return true; // carries the term the candidate will campaign at
    if (this.role === 'leader' && this.mutations.ignoreHigherTerm) return false;
    const leader = m.type === 'append' || m.type === 'heartbeat' || m.type === 'snapshot' ? m.from : null;
    const elapsed = this.electionElapsed;
    this.becomeFollower(m.term, leader);
    // Only granting a vote resets the election timer (handleVoteRequest): otherwise a stale member with a fast
    // clock could keep every member that can win from ever timing out.
    if (m.type === 'vote') this.electionElapsed = elapsed;
    return true;
  }

  private stepLowerTerm(m: Message): void {
    if ((this.checkQuorum || this.preVote) && (m.type === 'append' || m.type === 'heartbeat')) {
      // A stale leader (e.g. healed from a partition) learns our term and steps down; without this, with
      // pre-vote on, it could keep a member that voted elsewhere from ever hearing of the new term.
      this.send({
        type: 'appendResp',
        to: m.from,
        term: this.term,
        index: 0,
        reject: false,
        hintIndex: 0,
        hintTerm: 0,
      });
    } else if (m.type === 'prevote') {
      this.send({ type: 'prevoteResp', to: m.from, term: this.term, reject: true });
    }
  }

  private becomeFollower(term: number, leader: NodeId | null): void {
    const wasLeader = this.role === 'leader';
    if (term !== this.term) {
      this.term = term;
      this.vote = null;
    }
    this.role = 'follower';
    this.leader = leader;
    this.resetRoleState();
    if (wasLeader) this.failPendingReads();
  }

  private startElection(): void {
    if (this.preVote) {
      this.role = 'precandidate';
      this.leader = null;
      this.resetRoleState();
      this.requestVotes('prevote', this.term + 1, false);
    } else {
      this.startRealElection(false);
    }
  }

  /** `transfer`: started by a leadership transfer, so voters set their leader lease aside. */
  private startRealElection(transfer: boolean): void {
    this.becomeCandidate();
    this.requestVotes('vote', this.term, transfer);
  }

  private becomeCandidate(): void {
    invariant(this.role !== 'leader', 'a leader cannot become a candidate');
    this.term++;
    this.vote = this.id;
    this.role = 'candidate';
    this.leader = null;
    this.resetRoleState();
  }

  private requestVotes(type: 'vote' | 'prevote', term: number, transfer: boolean): void {
    this.votes = new Map([[this.id, true]]);
    if (this.tallyVotes() === 'won') {
      // A single voter wins at once.
      if (type === 'prevote') this.startRealElection(false);
      else this.becomeLeader();
      return;
    }
    for (const id of this.config.voters) {
      if (id === this.id) continue;
      this.send({ type, to: id, term, lastIndex: this.log.lastIndex(), lastTerm: this.log.lastTerm(), transfer });
    }
  }

  private tallyVotes(): 'won' | 'lost' | 'pending' {
    let granted = 0;
    let rejected = 0;
    for (const id of this.config.voters) {
      const v = this.votes.get(id);
      if (v === true) granted++;
      else if (v === false) rejected++;
    }
    const q = quorum(this.config.voters.length);
    if (granted >= q) return 'won';
    if (rejected > this.config.voters.length - q) return 'lost';
    return 'pending';
  }

  private becomeLeader(): void {
    invariant(this.role === 'candidate', 'only a candidate becomes leader');
    this.role = 'leader';
    this.leader = this.id;
    this.resetRoleState();
    this.progress = new Map();
    for (const id of members(this.config)) this.addProgress(id);
    const self = this.progress.get(this.id);
    if (self !== undefined) {
      self.match = this.log.persisted;
      self.becomeReplicate();
    }
    // Any config entry still uncommitted in our log blocks new changes until it commits.
    this.pendingConfigIndex = this.configMarks.length > 0 ? this.configMarks[this.configMarks.length - 1]!.index : 0;
    // An entry of our own term, so that earlier entries commit and reads can be served (section 5.4.2, 6.4).
    this.appendEntries([{ kind: 'noop' }]);
  }

  private resetRoleState(): void {
    this.electionElapsed = 0;
    this.heartbeatElapsed = 0;
    this.resetElectionTimeout();
    this.votes = new Map();
    this.transferee = null;
    if (this.role !== 'leader') this.progress = new Map();
  }

  private resetElectionTimeout(): void {
    this.randomizedElectionTimeout = this.electionTicks + this.random.below(this.electionTicks);
  }

  private promotable(): boolean {
    return this.config.voters.includes(this.id);
  }

  /** Whether `id` is a voter or learner of the configuration in force. */
  private isMember(id: NodeId): boolean {
    return this.config.voters.includes(id) || this.config.learners.includes(id);
  }

  private hardState(): HardState {
    return { term: this.term, vote: this.vote, commit: this.log.committed };
  }

  private softState(): SoftState {
    return { leader: this.leader, role: this.role, term: this.term };
  }

  // ---------------------------------------------------------------------------------------------------------
  // Votes

  private handleVoteRequest(m: VoteRequest): void {
    const isPre = m.type === 'prevote';
    const canVote =
      this.vote === m.from || (this.vote === null && this.leader === null) || (isPre && m.term > this.term);
    const upToDate = this.mutations.grantStaleVote || this.log.isUpToDate(m.lastIndex, m.lastTerm);
    const respType = isPre ? 'prevoteResp' : 'voteResp';
    if (canVote && upToDate) {
      // A granted pre-vote answers in the candidate's future term; it does not bind us to anything.
      this.send({ type: respType, to: m.from, term: m.term, reject: false });
      if (!isPre) {
        this.electionElapsed = 0;
        this.vote = m.from;
      }
    } else {
      this.send({ type: respType, to: m.from, term: this.term, reject: true });
    }
  }

  private stepCandidate(m: Message): void {
    switch (m.type) {
      case 'append':
      case 'heartbeat':
      case 'snapshot':
        this.becomeFollower(this.term, m.from);
        this.stepFollower(m);
        return;
      case 'voteResp':
      case 'prevoteResp': {
        const expected = this.role === 'precandidate' ? 'prevoteResp' : 'voteResp';
        if (m.type !== expected) return;
        this.votes.set(m.from, !m.reject);
        const outcome = this.tallyVotes();
        if (outcome === 'won') {
          if (this.role === 'precandidate') this.startRealElection(false);
          else this.becomeLeader();
        } else if (outcome === 'lost') {
          this.becomeFollower(this.term, null);
        }
        return;
      }
      case 'timeoutNow':
        return;
      default:
        return;
    }
  }

  // ---------------------------------------------------------------------------------------------------------
  // Follower

  private stepFollower(m: Message): void {
    switch (m.type) {
      case 'append':
        this.electionElapsed = 0;
        this.leader = m.from;
        this.handleAppend(m);
        return;
      case 'heartbeat':
        this.electionElapsed = 0;
        this.leader = m.from;
        this.handleHeartbeat(m);
        // Quiesce only when up to date: a follower that lacks entries keeps ticking (and so asks again).
        if (
          m.quiesce === true &&
          this.quiesceTicks > 0 &&
          this.log.committed === this.log.lastIndex() &&
          m.commit === this.log.committed
        )
          this.quiesced = true;
        return;
      case 'snapshot':
        this.electionElapsed = 0;
        this.leader = m.from;
        this.handleSnapshot(m);
        return;
      case 'timeoutNow':
        if (this.promotable()) this.startRealElection(true);
        return;
      default:
        return;
    }
  }

  private handleAppend(m: AppendRequest): void {
    const reply = (index: number, reject: boolean, hintIndex = 0, hintTerm = 0): void =>
      this.send({ type: 'appendResp', to: m.from, term: this.term, index, reject, hintIndex, hintTerm });
    if (m.prevIndex < this.log.committed) {
      // Everything up to our commit index is already settled; say how far we are.
      reply(this.log.committed, false);
      return;
    }
    if (this.mutations.skipPrevCheck || this.log.matchTerm(m.prevIndex, m.prevTerm)) {
      if (this.mutations.skipPrevCheck && this.log.term(m.prevIndex) === undefined) {
        reply(m.prevIndex, true, this.log.lastIndex(), this.log.lastTerm());
        return;
      }
      this.log.appendAfter(m.prevIndex, m.entries);
      this.onLogChanged(m.entries);
      const lastNew = m.prevIndex + m.entries.length;
      this.log.commitTo(Math.min(m.commit, lastNew));
      reply(lastNew, false);
      return;
    }
    // Fast backtracking: name the last index at which our log could still match, with its term.
    const hint = this.findConflictByTerm(Math.min(m.prevIndex, this.log.lastIndex()), m.prevTerm);
    reply(m.prevIndex, true, hint, this.log.term(hint) ?? 0);
  }

  private handleHeartbeat(m: HeartbeatRequest): void {
    // The leader sends min(match, commit), so committing to it never commits past what matches the leader.
    if (m.commit <= this.log.lastIndex()) this.log.commitTo(m.commit);
    if (m.round === COMMIT_NEWS_ROUND) return;
    this.send({ type: 'heartbeatResp', to: m.from, term: this.term, round: m.round });
    // The leader sends min(match, commit): more than we hold means we lost entries we acknowledged (a disk wiped
    // under our id). Refuse as an append would, so that even an idle leader learns it (Progress.maybeDecreaseTo).
    const last = this.log.lastIndex();
    if (m.commit > last)
      this.send({
        type: 'appendResp',
        to: m.from,
        term: this.term,
        index: m.commit,
        reject: true,
        hintIndex: last,
        hintTerm: this.log.lastTerm(),
      });
  }

  private handleSnapshot(m: SnapshotRequest): void {
    const meta = m.snapshot.meta;
    const reply = (index: number): void =>
      this.send({ type: 'appendResp', to: m.from, term: this.term, index, reject: false, hintIndex: 0, hintTerm: 0 });
    if (meta.index <= this.log.committed) {
      reply(this.log.committed);
      return;
    }
    if (this.log.matchTerm(meta.index, meta.term)) {
      // We already hold the entries it covers: just learn that they are committed.
      this.log.commitTo(meta.index);
      reply(meta.index);
      return;
    }
    this.log.restore(meta);
    this.snapshotMeta = meta;
    this.receivedSnapshot = m.snapshot;
    this.baseConfig = meta.config;
    this.configMarks = [];
    this.config = this.currentConfigFromLog();
    reply(meta.index);
  }

  /** Largest index <= `index` whose term is <= `term` (the point where our logs may still agree). */
  private findConflictByTerm(index: number, term: number): number {
    let i = index;
    while (i > this.log.snapshotIndex) {
      const t = this.log.term(i);
      if (t === undefined || t <= term) break;
      i--;
    }
    return i;
  }

  // ---------------------------------------------------------------------------------------------------------
  // Leader

  private stepLeader(m: Message): void {
    const pr = this.progress.get(m.from);
    switch (m.type) {
      case 'appendResp':
        if (pr === undefined) return;
        pr.recentActive = true;
        this.handleAppendResponse(m, pr);
        return;
      case 'heartbeatResp':
        if (pr === undefined) return;
        this.handleHeartbeatResponse(m, pr);
        return;
      default:
        return;
    }
  }

  private handleAppendResponse(m: AppendResponse, pr: Progress): void {
    if (m.reject) {
      let probe = m.hintIndex;
      if (m.hintTerm > 0) probe = this.findConflictByTerm(m.hintIndex, m.hintTerm);
      if (pr.maybeDecreaseTo(m.index, probe)) {
        if (pr.state === 'replicate') pr.becomeProbe();
        this.sendAppend(m.from);
      }
      return;
    }
    const wasPaused = pr.isPaused();
    if (pr.maybeUpdate(m.index)) {
      if (pr.state === 'probe') pr.becomeReplicate();
      else if (pr.state === 'snapshot' && pr.match >= pr.pendingSnapshot) pr.becomeProbe();
      // Batch the commit news for every follower into the next Ready (group commit).
      if (this.maybeCommit()) this.broadcastPending = true;
      if (wasPaused || pr.next <= this.log.lastIndex()) this.sendAppend(m.from);
      if (m.from === this.transferee && pr.match === this.log.lastIndex()) {
        this.send({ type: 'timeoutNow', to: m.from, term: this.term });
      }
    } else if (pr.state === 'snapshot' && m.index >= pr.pendingSnapshot) {
      pr.becomeProbe();
      this.sendAppend(m.from);
    }
  }

  private handleHeartbeatResponse(m: HeartbeatResponse, pr: Progress): void {
    pr.recentActive = true;
    if (m.round === COMMIT_NEWS_ROUND) return; // an older member answering commit news: nothing to learn
    if (pr.state === 'probe') pr.probeSent = false;
    // A full window whose appends were all lost would never drain: free one slot, so the next append either
    // fills the gap or is rejected and sends the follower back to probing.
    if (pr.state === 'replicate' && pr.isPaused()) pr.freeFirstOne();
    // A snapshot that has not been acknowledged for a long time was probably lost: probe again.
    if (pr.state === 'snapshot' && pr.snapshotTicks > 4 * this.electionTicks) pr.becomeProbe();
    if (pr.match < this.log.lastIndex()) this.sendAppend(m.from);
    if (m.round > pr.ackedRound) {
      pr.ackedRound = m.round;
      this.releaseReads();
    }
  }

  private stepLocal(m: Message): void {
    switch (m.type) {
      case 'propose':
        // Only the leader accepts forwarded proposals: forwarding them on could loop. The proposer retries.
        // And only from members of the configuration in force: anyone else has no business writing the log.
        if (this.role === 'leader' && this.transferee === null && this.isMember(m.from)) {
          this.appendEntries(m.commands.map((data) => ({ kind: 'command' as const, data })));
        } else {
          this.droppedProposals += m.commands.length;
        }
        return;
      case 'readIndex':
        if (this.role === 'leader') this.handleReadRequest(m.context, m.from);
        else this.send({ type: 'readIndexResp', to: m.from, term: 0, context: m.context, index: -1 });
        return;
      case 'readIndexResp':
        this.readStates.push({ index: m.index, context: m.context });
        return;
      default:
        return;
    }
  }

  private appendEntries(
    items: Array<
      | { kind: 'command'; data: Uint8Array }
      | { kind: 'noop' }
      | { kind: 'config'; change: ConfigChange; config: Configuration }
    >,
  ): void {
    // Entry time never goes backwards, even across leaders with skewed clocks.
    const time = Math.max(this.now, this.log.lastTime());
    let index = this.log.lastIndex();
    const term = this.term;
    const entries: Entry[] = items.map((item) => {
      index++;
      switch (item.kind) {
        case 'command':
          return { index, term, time, kind: 'command', data: item.data };
        case 'noop':
          return { index, term, time, kind: 'noop' };
        case 'config':
          return { index, term, time, kind: 'config', change: item.change, config: item.config };
      }
    });
    this.log.append(entries);
    this.onLogChanged(entries);
    this.broadcastPending = true;
  }

  private broadcastAppend(): void {
    for (const id of this.progress.keys()) if (id !== this.id) this.sendAppend(id);
  }

  private broadcastHeartbeat(round: number, quiesce = false): void {
    for (const [id, pr] of this.progress) {
      if (id === this.id) continue;
      const commit = Math.min(pr.match, this.log.committed);
      this.send(
        quiesce
          ? { type: 'heartbeat', to: id, term: this.term, commit, round, quiesce }
          : { type: 'heartbeat', to: id, term: this.term, commit, round },
      );
    }
  }

  /** Send the follower what it lacks: entries if we still have them, else our snapshot. */
  private sendAppend(to: NodeId): void {
    const pr = this.progress.get(to);
    if (pr === undefined || pr.isPaused()) return;
    const prevIndex = pr.next - 1;
    const prevTerm = this.log.term(prevIndex);
    if (prevTerm === undefined || pr.next <= this.log.snapshotIndex) {
      this.sendSnapshot(to, pr);
      return;
    }
    const { entries, bytes } =
      pr.next <= this.log.lastIndex() ? this.log.slice(pr.next, this.maxMessageBytes) : { entries: [], bytes: 0 };
    this.send({ type: 'append', to, term: this.term, prevIndex, prevTerm, entries, commit: this.log.committed });
    pr.sentAppend(prevIndex + entries.length, bytes, entries.length);
  }

  private sendSnapshot(to: NodeId, pr: Progress): void {
    const meta = this.snapshotMeta;
    invariant(meta !== null, 'entries are compacted but there is no snapshot');
    // The driver fills in the data from storage and streams it in chunks.
    this.send({ type: 'snapshot', to, term: this.term, snapshot: { meta, data: EMPTY } });
    pr.becomeSnapshot(meta.index);
  }

  /** Advance the commit index to the highest index stored on a quorum of voters, if it is of our term. */
  private maybeCommit(): boolean {
    if (this.mutations.countSelfUnpersisted) this.progress.get(this.id)?.maybeUpdate(this.log.lastIndex());
    // The highest index that a quorum of voters holds, without sorting (a busy leader asks at every acknowledgement;
    // a sort allocated on every call): the largest match that at least a quorum of matches reach.
    const matches = this.matchScratch;
    matches.length = 0;
    for (const id of this.config.voters) matches.push(this.progress.get(id)?.match ?? 0);
    if (matches.length === 0) return false;
    const needed = quorum(matches.length);
    let candidate = 0;
    for (const m of matches) {
      if (m <= candidate) continue;
      let reach = 0;
      for (const other of matches) if (other >= m) reach++;
      if (reach >= needed) candidate = m;
    }
    if (candidate <= this.log.committed) return false;
    // Section 5.4.2: only entries of the current term are committed by counting replicas.
    if (!this.mutations.commitPreviousTermByCount && this.log.term(candidate) !== this.term) return false;
    this.log.commitTo(candidate);
    this.onCommitAdvanced();
    return true;
  }

  private onCommitAdvanced(): void {
    if (this.readsAwaitingCommit.length > 0 && this.log.term(this.log.committed) === this.term) {
      const waiting = this.readsAwaitingCommit;
      this.readsAwaitingCommit = [];
      for (const r of waiting) this.handleReadRequest(r.context, r.from);
    }
    // A leader removed from the configuration steps down once the change is committed (section 4.2.2).
    if (!this.config.voters.includes(this.id) && this.pendingConfigIndex <= this.log.committed) {
      this.becomeFollower(this.term, null);
    }
  }

  private quorumActive(): boolean {
    let active = 0;
    for (const id of this.config.voters) {
      if (id === this.id || this.progress.get(id)?.recentActive) active++;
    }
    return active >= quorum(this.config.voters.length);
  }

  // ---------------------------------------------------------------------------------------------------------
  // Linearizable reads

  private handleReadRequest(context: string, from: NodeId | null): void {
    if (this.log.term(this.log.committed) !== this.term) {
      // Until an entry of this term commits we do not know the true commit index (section 6.4 step 1).
      this.readsAwaitingCommit.push({ context, from });
      return;
    }
    const index = this.log.committed;
    if (this.config.voters.length === 1 && this.config.voters[0] === this.id) {
      this.answerRead({ context, from, index, round: 0 });
      return;
    }
    if (this.leaseReads && this.leaseValid()) {
      this.answerRead({ context, from, index, round: 0 });
      return;
    }
    const round = this.nextRound();
    this.pendingReads.push({ context, from, index, round });
    this.broadcastHeartbeat(round);
  }

  /** A new heartbeat round, remembering when it was sent. */
  private nextRound(): number {
    const round = ++this.readRound;
    this.roundSentAt.set(round, this.leaderTicks);
    // Rounds far older than an election timeout can no longer make a lease valid.
    this.roundSentAt.delete(round - 4 * this.electionTicks - 64);
    return round;
  }

  /**
   * The read lease (dissertation 6.4.1): a quorum acknowledged a heartbeat sent at tick T, and each of those voters
   * refuses to help elect anyone else until an election timeout after receiving it (>= T), so no other leader can
   * exist before T + electionTicks. A margin of 2 ticks covers tick-rate drift; a transfer voids the lease, since
   * its election bypasses the voters' lease.
   */
  private leaseValid(): boolean {
    if (!this.checkQuorum || this.transferee !== null || this.quiesced) return false;
    const sent = this.config.voters
      .map((id) =>
        id === this.id ? this.leaderTicks : (this.roundSentAt.get(this.progress.get(id)?.ackedRound ?? 0) ?? -Infinity),
      )
      .sort((a, b) => b - a);
    const start = sent[quorum(sent.length) - 1] ?? -Infinity;
    return this.leaderTicks - start < this.electionTicks - 2;
  }

  private releaseReads(): void {
    while (this.pendingReads.length > 0) {
      const read = this.pendingReads[0]!;
      let acks = 0;
      for (const id of this.config.voters) {
        if (id === this.id || (this.progress.get(id)?.ackedRound ?? 0) >= read.round) acks++;
      }
      if (acks < quorum(this.config.voters.length)) return;
      this.pendingReads.shift();
      this.answerRead(read);
    }
  }

  private answerRead(read: PendingRead): void {
    if (read.from === null) this.readStates.push({ index: read.index, context: read.context });
    else this.send({ type: 'readIndexResp', to: read.from, term: 0, context: read.context, index: read.index });
  }

  private failPendingReads(): void {
    const failed = [...this.pendingReads, ...this.readsAwaitingCommit.map((r) => ({ ...r, index: -1, round: 0 }))];
    this.pendingReads = [];
    this.readsAwaitingCommit = [];
    for (const r of failed) this.answerRead({ ...r, index: -1 });
  }

  // ---------------------------------------------------------------------------------------------------------
  // Membership

  /** Keep the configuration equal to the newest config entry in the log (it takes effect when appended). */
  private onLogChanged(appended: Entry[]): void {
    // A follower's append may have truncated config entries.
    const last = this.log.lastIndex();
    while (this.configMarks.length > 0 && this.configMarks[this.configMarks.length - 1]!.index > last) {
      this.configMarks.pop();
    }
    for (const e of appended) {
      if (e.kind !== 'config') continue;
      // Drop marks at or after this index (replaced by this append).
      while (this.configMarks.length > 0 && this.configMarks[this.configMarks.length - 1]!.index >= e.index) {
        this.configMarks.pop();
      }
      this.configMarks.push({ index: e.index, config: e.config });
      if (this.role === 'leader') this.pendingConfigIndex = e.index;
    }
    const previous = this.config;
    this.config = this.currentConfigFromLog();
    if (previous !== this.config && this.role === 'leader') this.syncProgressWithConfig();
  }

  private currentConfigFromLog(): Configuration {
    const mark = this.configMarks[this.configMarks.length - 1];
    return mark !== undefined ? mark.config : this.baseConfig;
  }

  private syncProgressWithConfig(): void {
    const wanted = new Set(members(this.config));
    for (const id of [...this.progress.keys()]) if (!wanted.has(id)) this.progress.delete(id);
    for (const id of wanted) {
      const existing = this.progress.get(id);
      if (existing === undefined) this.addProgress(id);
      else existing.learner = this.config.learners.includes(id);
    }
    if (this.transferee !== null && !this.config.voters.includes(this.transferee)) this.transferee = null;
    // A smaller quorum may commit or release reads at once.
    if (this.maybeCommit()) this.broadcastPending = true;
    this.releaseReads();
  }

  private addProgress(id: NodeId): void {
    const pr = new Progress(
      this.log.lastIndex() + 1,
      this.config.learners.includes(id),
      this.maxInflightMessages,
      this.maxInflightBytes,
    );
    pr.recentActive = true; // a new member gets one election timeout before it counts as silent
    this.progress.set(id, pr);
  }

  // ---------------------------------------------------------------------------------------------------------

  /** The highest committed index the driver may apply now. */
  /** The first index not yet handed to the driver is this plus one. */
  private nextToApply(): number {
    return Math.max(this.log.applied, this.handedOut);
  }

  /** The committed entries not yet handed to the driver, marked handed out. */
  private takeApplicable(limit = Infinity): Entry[] {
    const entries = this.log.range(this.nextToApply() + 1, Math.min(limit, this.applyLimit()));
    const last = entries[entries.length - 1];
    if (last !== undefined) this.handedOut = last.index;
    return entries;
  }

  private applyLimit(): number {
    return Math.min(this.log.committed, this.log.lastIndex());
  }

  private send(m: DistributiveOmit<Message, 'from'>): void {
    if (m.to === this.id) return;
    this.messages.push({ ...m, from: this.id } as Message);
  }
}

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

function quorum(voters: number): number {
  return Math.floor(voters / 2) + 1;
}

function members(config: Configuration): NodeId[] {
  return [...config.voters, ...config.learners];
}

function cloneConfig(config: Configuration): Configuration {
  const copy: Configuration = { voters: [...config.voters], learners: [...config.learners] };
  if (config.addresses !== undefined) copy.addresses = { ...config.addresses };
  return copy;
}

/** The configuration after one change; throws ConfigChangeError when the change makes no sense. */
export function applyChange(config: Configuration, change: ConfigChange): Configuration {
  const isVoter = config.voters.includes(change.node);
  const isLearner = config.learners.includes(change.node);
  const addresses = { ...(config.addresses ?? {}) };
  const without = (list: NodeId[]): NodeId[] => list.filter((n) => n !== change.node);
  switch (change.type) {
    case 'addLearner':
      if (isVoter || isLearner) throw new ConfigChangeError(`${change.node} is already a member`);
      if (change.address !== undefined) addresses[change.node] = change.address;
      return { voters: [...config.voters], learners: [...config.learners, change.node], addresses };
    case 'addVoter':
      if (isVoter) throw new ConfigChangeError(`${change.node} is already a voter`);
      if (change.address !== undefined) addresses[change.node] = change.address;
      return { voters: [...config.voters, change.node], learners: without(config.learners), addresses };
    case 'promote':
      if (!isLearner) throw new ConfigChangeError(`${change.node} is not a learner`);
      return { voters: [...config.voters, change.node], learners: without(config.learners), addresses };
    case 'remove':
      if (!isVoter && !isLearner) throw new ConfigChangeError(`${change.node} is not a member`);
      if (isVoter && config.voters.length === 1) throw new ConfigChangeError('cannot remove the last voter');
      delete addresses[change.node];
      return { voters: without(config.voters), learners: without(config.learners), addresses };
    case 'forceNewCluster':
      throw new ConfigChangeError(
        'a forced configuration is written by RaftNode.start with forceNewCluster, never proposed',
      );
  }
}

function sameHardState(a: HardState, b: HardState): boolean {
  return a.term === b.term && a.vote === b.vote && a.commit === b.commit;
}

function sameSoftState(a: SoftState, b: SoftState | null): boolean {
  return b !== null && a.leader === b.leader && a.role === b.role && a.term === b.term;
}

function hashString(s: string): number {
  let h = 2166136261;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 16777619);
  return h >>> 0;
}
