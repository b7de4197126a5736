/**
 * The vocabulary shared by the pure core, the driver, storage and transports.
 * Everything here is plain data so that it can be persisted with msgpackr and sent over any transport.
 */

/** A member's identity inside one Raft group. Any non-empty string ("n1", "10.0.0.7:7001", ...). */
export type NodeId = string;

/** The member set. Voters count toward quorums; learners receive the log but never vote or count. */
export interface Configuration {
  voters: NodeId[];
  learners: NodeId[];
  /** Transport addresses of members, carried in the log so every member can reach a newly added one. */
  addresses?: Record<NodeId, string>;
}

/** One change to the member set. Applied one at a time (single-server changes, dissertation section 4.1). */
export type ConfigChange =
  | { type: 'addLearner'; node: NodeId; address?: string }
  | { type: 'promote'; node: NodeId }
  | { type: 'addVoter'; node: NodeId; address?: string }
  | { type: 'remove'; node: NodeId }
  /**
   * Written only by `RaftNode.start` with `forceNewCluster` (recovery after losing a quorum): `node` becomes the
   * only voter. Never proposed: a proposal of it is refused.
   */
  | { type: 'forceNewCluster'; node: NodeId };

/**
 * A log entry. `time` is the leader's clock (milliseconds) when it appended the entry; state machines read
 * time only from here, so every member computes the same thing (sessions and leases expire deterministically).
 */
export type Entry =
  | { index: number; term: number; time: number; kind: 'command'; data: Uint8Array }
  | { index: number; term: number; time: number; kind: 'config'; change: ConfigChange; config: Configuration }
  | { index: number; term: number; time: number; kind: 'noop' };

/** The state that must be on stable storage before the member answers any message that depends on it. */
export interface HardState {
  term: number;
  vote: NodeId | null;
  commit: number;
}

/** Describes a snapshot: the last entry it covers and the member set at that point. */
export interface SnapshotMeta {
  index: number;
  term: number;
  /** Leader-stamped time of the last entry covered; lets the leader keep entry time monotonic after restore. */
  time: number;
  config: Configuration;
}

/** A saved state of the state machine and the log position it covers. */
export interface Snapshot {
  meta: SnapshotMeta;
  data: Uint8Array;
}

/** A member's part in its group: pre-candidates and candidates are running an election. */
export type Role = 'follower' | 'precandidate' | 'candidate' | 'leader';

/**
 * A linearizable read that became safe: once `applied >= index`, the read identified by `context` may run.
 * `index` is -1 when the read was refused (no leader, leadership lost): retry, possibly elsewhere.
 */
export interface ReadState {
  index: number;
  context: string;
}

// ---------------------------------------------------------------------------------------------------------
// Messages between members. `term` 0 means "not term-bearing" (local forwarding requests).

interface MessageBase {
  from: NodeId;
  to: NodeId;
  term: number;
}

/** A (pre-)candidate asking for a vote. */
export interface VoteRequest extends MessageBase {
  type: 'vote' | 'prevote';
  lastIndex: number;
  lastTerm: number;
  /** Set when the election was started by a leadership transfer: voters ignore their leader lease. */
  transfer: boolean;
}

/** A vote granted or refused. */
export interface VoteResponse extends MessageBase {
  type: 'voteResp' | 'prevoteResp';
  reject: boolean;
}

/** The leader replicating entries (possibly none) after `prevIndex`/`prevTerm`, with its commit index. */
export interface AppendRequest extends MessageBase {
  type: 'append';
  prevIndex: number;
  prevTerm: number;
  entries: Entry[];
  commit: number;
}

/** A follower's answer to an append: how far its log now matches, or where to back up to. */
export interface AppendResponse extends MessageBase {
  type: 'appendResp';
  /** On success: the last index now matching the leader. On reject: the prevIndex that was rejected. */
  index: number;
  reject: boolean;
  /** On reject: the follower's hint for fast backtracking (last index it could match at most). */
  hintIndex: number;
  /** On reject: the term of the follower's entry at hintIndex (0 if none). */
  hintTerm: number;
}

/** The leader asserting its leadership (and confirming a read-index round). */
export interface HeartbeatRequest extends MessageBase {
  type: 'heartbeat';
  commit: number;
  /** Read-index round this heartbeat confirms leadership for (0 when none). */
  round: number;
  /** The group is idle and the leader stops ticking: an up-to-date follower may stop too (see quiesceTicks). */
  quiesce?: boolean;
}

/** A follower acknowledging a heartbeat. */
export interface HeartbeatResponse extends MessageBase {
  type: 'heartbeatResp';
  round: number;
}

/**
 * A whole snapshot for a lagging follower. The core emits it with empty `data`; the driver fills the data from
 * storage and the transport streams it in chunks (see snapshot-stream.ts), so it never travels as one frame.
 */
export interface SnapshotRequest extends MessageBase {
  type: 'snapshot';
  snapshot: Snapshot;
}

/** The leader telling the target of a leadership transfer to start an election at once. */
export interface TimeoutNow extends MessageBase {
  type: 'timeoutNow';
}

/** A follower forwarding client proposals to its leader. */
export interface ProposeForward extends MessageBase {
  type: 'propose';
  commands: Uint8Array[];
}

/** The outcome of a proposal that a member forwarded, as the member that applied it (its leader) computed it. */
export interface ForwardedResult {
  /** The request's identity (`client:seq`, `reg:nonce`), by which the forwarding member waits for it. */
  key: string;
  /** The entry's index: the forwarding member's local reads wait until it has applied this far. */
  index: number;
  /** The session result of applying the entry (plain data: a `SessionResult`). */
  result: unknown;
}

/**
 * A leader telling a member that forwarded proposals what they gave once applied (RaftNode option
 * `forwardedResults`; the core ignores it). Sent only for committed entries, so any member that applied one may
 * tell its outcome: the answer is the one the forwarding member's own apply would give.
 */
export interface ResultsForward extends MessageBase {
  type: 'results';
  results: ForwardedResult[];
}

/** A follower asking its leader for a read index on behalf of a local read. */
export interface ReadIndexRequest extends MessageBase {
  type: 'readIndex';
  context: string;
}

/** The leader's answer to a forwarded read-index request. */
export interface ReadIndexResponse extends MessageBase {
  type: 'readIndexResp';
  context: string;
  /** -1 when the leader could not serve the read (no longer leader, not yet committed in its term). */
  index: number;
}

/** What a member asks its leader to do on a caller's behalf. */
export type AdminRequest =
  | { op: 'change'; change: ConfigChange }
  /** Add as a learner, wait until it caught up (at most catchUpTimeoutMs), then promote. */
  | { op: 'addVoter'; node: NodeId; address: string; catchUpTimeoutMs: number }
  | { op: 'transfer'; to: NodeId };

/**
 * A member forwarding a membership change or a leadership transfer to its leader (RaftNode handles it; the core
 * ignores it). No answer: the forwarding member watches its own log and leader for the outcome.
 */
export interface AdminForward extends MessageBase {
  type: 'admin';
  request: AdminRequest;
}

/** Every message members exchange; the transport carries them opaquely. */
export type Message =
  | AdminForward
  | VoteRequest
  | VoteResponse
  | AppendRequest
  | AppendResponse
  | HeartbeatRequest
  | HeartbeatResponse
  | SnapshotRequest
  | TimeoutNow
  | ProposeForward
  | ResultsForward
  | ReadIndexRequest
  | ReadIndexResponse;

/** The `type` tag of a {@link Message}. */
export type MessageType = Message['type'];

// ---------------------------------------------------------------------------------------------------------
// The batch of work the core hands back after being stepped.

/** What a member believes now (not persisted): its role, its term and who leads. */
export interface SoftState {
  leader: NodeId | null;
  role: Role;
  term: number;
}

/**
 * One batch of work. The driver must, in this order:
 *  1. install `snapshot` (if any) into storage and the state machine,
 *  2. append `entries` (dropping any stored entries at or after entries[0].index) and persist `hardState`,
 *     syncing to disk,
 *  3. send `messages`,
 *  4. apply `committed` to the state machine, in order,
 *  5. serve `readStates` once applied >= their index,
 * then call `advance(ready)`.
 */
export interface Ready {
  softState: SoftState | null;
  hardState: HardState | null;
  snapshot: Snapshot | null;
  entries: Entry[];
  messages: Message[];
  committed: Entry[];
  readStates: ReadState[];
  /** Proposals dropped because this member could not accept them (no leader, transfer in progress). */
  droppedProposals: number;
}

// ---------------------------------------------------------------------------------------------------------
// The interfaces the driver performs the batch against.

/** How a Storage.append is written. */
export interface AppendOptions {
  /** false: no fsync needed (see Storage.append). Default true. */
  sync?: boolean;
}

/** Durable storage for one member of one group. All writes resolve only once synced to disk. */
export interface Storage {
  /** Everything needed to rebuild the core after a restart. */
  load(): Promise<{ hardState: HardState; snapshot: Snapshot | null; entries: Entry[] }>;
  /**
   * Atomically: drop stored entries with index >= entries[0].index, store `entries`, store `hardState` if given.
   * Must be synced before it resolves, unless `options.sync` is false: RaftNode asks that only for a hard state
   * whose term and vote are already durable and no entries (a new commit index, which needs no fsync). Such a
   * write must still land before any later one; an implementation may sync it anyway.
   */
  append(entries: Entry[], hardState: HardState | null, options?: AppendOptions): Promise<void>;
  /**
   * Store a snapshot and drop every entry it covers (and any entry that conflicts with it). Synced. Calls made
   * after it may complete before it does (LevelStorage writes a snapshot's chunks beside later appends):
   * RaftNode awaits it where order matters (a snapshot installed from the leader), and a snapshot it took covers
   * only applied entries, which no later append touches. A snapshot older than the stored one is dropped.
   */
  saveSnapshot(snapshot: Snapshot): Promise<void>;
  /** The newest stored snapshot, or null. */
  latestSnapshot(): Promise<Snapshot | null>;
  /** Drop entries with index <= upTo (they are covered by a saved snapshot). */
  compact(upTo: number): Promise<void>;
  /** Release the files; no call follows. */
  close(): Promise<void>;
}

/** Moves messages between members. Delivery is best-effort: Raft tolerates loss, duplication and reordering. */
export interface Transport {
  /** Start receiving; every message addressed to this member is handed to `onMessage`. */
  start(onMessage: (message: Message) => void): Promise<void>;
  /** Send best-effort (never throws, never blocks); a message to an unknown or unreachable peer is dropped. */
  send(message: Message): void;
  /** Make `id` reachable (membership change, or at start). */
  addPeer(id: NodeId, address: string): void;
  /** Forget `id`: no more messages to it, none accepted from it. */
  removePeer(id: NodeId): void;
  /** Stop sending and receiving and release the port. */
  close(): Promise<void>;
}

/**
 * The replicated state machine. Deterministic: no clock, randomness or I/O inside apply; time comes from
 * `entry.time`. `Result` is returned to the proposer.
 */
export interface StateMachine<Command, Result> {
  /**
   * Apply one committed command and return its result to the proposer. Throwing refuses the command: the
   * proposer gets an ApplyError, every member records the same failure, the group goes on (see the README's
   * state machine contract); changes made before the throw stay, so check before changing.
   */
  apply(command: Command, context: ApplyContext): Result;
  /**
   * The whole state, as bytes or as chunks; `restore` (or `restoreChunks`) of them must give a machine that behaves
   * identically. Chunks (an async iterable, such as an `async *snapshot()` generator) suit a state kept in many
   * pieces: no apply runs until the last chunk is read, so the generator may read the live state as it goes.
   */
  snapshot(): Uint8Array | AsyncIterable<Uint8Array>;
  /**
   * Optional, preferred over `snapshot` when present: the state as of this call, as chunks read afterwards while
   * later commands go on applying. The machine takes a consistent view of itself in the call (a copy of its
   * index, say, when its values are never changed in place) and encodes from that view; the chunks are read with
   * the event loop turning between them. A member then neither stops applying nor, when it leads, stops the
   * group's writes while a large state is encoded (every member reaches the same snapshot index at the same
   * moment, so a snapshot that blocks stalls the whole group at once). The bytes follow `snapshot`'s format:
   * `restore` takes either.
   */
  detachedSnapshot?(): AsyncIterable<Uint8Array>;
  /** Replace the whole state with a snapshot's bytes. */
  restore(data: Uint8Array): void;
  /**
   * Optional: replace the whole state from a snapshot's chunks (preferred over `restore` when present). The chunks
   * need not be those `snapshot` produced: only their concatenation is the snapshot.
   */
  restoreChunks?(chunks: AsyncIterable<Uint8Array>): Promise<void>;
}

/** Where the applied entry stands in the log, and the leader's time stamped on it. */
export interface ApplyContext {
  index: number;
  term: number;
  /** Leader-stamped time of the entry, in milliseconds. */
  time: number;
}
