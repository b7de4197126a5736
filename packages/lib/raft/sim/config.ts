/**
 * What one simulated run is made of: cluster shape, timing, client load and a schedule of faults. A run is a
 * pure function of its SimConfig, and `configFromSeed` derives a whole SimConfig from one number, so a seed
 * replays exactly. fast-check builds SimConfigs directly (test/sim.property.test.ts) and shrinks their faults.
 */
import { Random } from './random.js';

export type PartitionShape = 'halves' | 'oneway' | 'bridge' | 'isolateLeader';

/**
 * One scheduled fault. `at` is virtual ms from the start; `pick` is a number in [0, 1) that chooses the victim(s)
 * among the members present when the fault fires (so a shrunk schedule still means something).
 */
export type Fault =
  | { kind: 'partition'; at: number; shape: PartitionShape; duration: number; pick: number }
  | { kind: 'crash'; at: number; target: 'leader' | 'any'; downtime: number; pick: number }
  | { kind: 'slowDisk'; at: number; duration: number; latency: number; pick: number }
  /** Power losses: for `duration`, every `every` ms a random member crashes in the middle of its next disk sync. */
  | { kind: 'powerLoss'; at: number; duration: number; every: number; downtime: number }
  | { kind: 'netStorm'; at: number; duration: number; drop: number; duplicate: number; maxDelay: number }
  | { kind: 'transfer'; at: number; pick: number }
  /** Leader churn: for `duration`, every newly elected leader crashes within `maxLife` ms, down for `downtime`. */
  | { kind: 'churn'; at: number; duration: number; maxLife: number; downtime: number }
  | { kind: 'addMember'; at: number }
  | { kind: 'removeMember'; at: number; pick: number }
  | { kind: 'readdMember'; at: number; pick: number };

type FaultKind = Fault['kind'];

/** Deliberate bugs on the simulator's side of the contract (the core's own mutations are in CoreOptions). */
export interface SimMutations {
  /** Send a Ready's messages before its hard state and entries are durable. */
  sendBeforePersist?: boolean;
  /** Write a new term or vote without a sync when a Ready has no entries (only entries and snapshots are synced). */
  syncOnlyEntries?: boolean;
  /** Serve reads from the local state machine without a read index. */
  staleLocalReads?: boolean;
  /** Apply session commands without deduplication (bypasses SessionStateMachine for commands). */
  noSessionDedup?: boolean;
  /** Never wake a quiesced follower whose leader's process has gone silent. */
  quiesceNeverWakes?: boolean;
  /** The heartbeat batch expander hands each heartbeat to the wrong group (src/transport/coalesce.ts, misroute). */
  brokenCoalescing?: boolean;
  /** The message batch expander hands each message to the wrong group (src/transport/batch.ts, misroute). */
  brokenBatching?: boolean;
  /**
   * With forwardedResults (which it turns on): a results message answers every write waiting at the member, each
   * with the message's first result, instead of only the writes it names.
   */
  resultsAnswerAll?: boolean;
  /**
   * A detached snapshot is saved under the index applied when it is saved, not the one it was taken at: its data
   * is older than its index (a view taken too early, or an index read too late). Detached snapshots on in every seed.
   */
  detachedIndexAtSave?: boolean;
}

export interface CoreMutations {
  grantStaleVote?: boolean;
  commitPreviousTermByCount?: boolean;
  skipPrevCheck?: boolean;
  ignoreHigherTerm?: boolean;
  countSelfUnpersisted?: boolean;
  commitNewsPastMatch?: boolean;
  [flag: string]: boolean | undefined;
}

export interface SimConfig {
  /** Seed of the run's own randomness (message delays, client choices, core election timers...). */
  seed: number;
  clusterSize: number;
  clients: number;
  keys: number;
  /** Length of the fault phase; then everything heals and liveness is checked. */
  faultMs: number;
  /** Virtual time allowed after healing for the cluster to settle and every client op to finish. */
  livenessMs: number;
  /** Each member saves a snapshot (and compacts) every this many applied entries. */
  snapshotEvery: number;
  /** RaftNode's followerWriteIntervalMs: a follower starts a write no sooner than this after its previous one. */
  followerWriteIntervalMs?: number;
  /** RaftNode's leaderWriteIntervalMs: the same for the leader. */
  leaderWriteIntervalMs?: number;
  /** RaftNode's forwardedResults: the leader sends each forwarded write's result to the member that forwarded it. */
  forwardedResults?: boolean;
  /**
   * Detached snapshots (RaftNode with a machine's `detachedSnapshot`): a member saves a snapshot it took up to this
   * many ms later, going on meanwhile; absent or 0: it saves at once and waits for the sync.
   */
  detachedSnapshotMs?: number;
  /** Member tick periods are tickMs * (1 ± up to tickSkew). */
  tickMs: number;
  tickSkew: number;
  electionTicks: number;
  heartbeatTicks: number;
  preVote: boolean;
  checkQuorum: boolean;
  leaseReads: boolean;
  /** Flow control: bytes of entries per append message, and append messages in flight per follower. */
  maxMessageBytes: number;
  maxInflightMessages: number;
  /** Baseline network during the fault phase. */
  drop: number;
  duplicate: number;
  minDelay: number;
  maxDelay: number;
  /** Snapshot data travels in chunks of this many bytes; losing one chunk loses the snapshot. */
  snapshotChunk: number;
  /** Disk sync latency range (ms) when the disk is healthy. */
  syncMin: number;
  syncMax: number;
  /** A client gives up on a member after this long and retries the same request elsewhere. */
  clientTimeoutMs: number;
  /** In the fault phase a client abandons an op after this many attempts (a write becomes "info"). */
  clientMaxAttempts: number;
  /** Mean think time between a client's ops. */
  thinkMs: number;
  faults: Fault[];
  /**
   * Share of writes that are poison: commands the state machine throws on. Each must come back to its client as
   * an apply_failed error, change no key, and leave the group going. Absent (0) in configs written before it.
   */
  poisonRate?: number;
  /**
   * Quiescence (CoreOptions.quiesceTicks): idle groups stop ticking; each node pings its peers every `pingTicks`
   * and wakes its quiesced core when the leader's node has been silent for an election timeout. 0 or absent: off.
   */
  quiesceTicks?: number;
  /** With quiescence: ticks between pings (src/groups/liveness.ts). Absent: 1. */
  pingTicks?: number;
  /**
   * With quiescence and one group: only a quiesced leader pings, and only its followers, as a RaftNode on its own
   * transport does (a GroupHost pings every peer process). Absent: false.
   */
  leaderPings?: boolean;
  /**
   * Raft groups per simulated process (multi-raft, as a GroupHost): each process holds one member of every group,
   * one storage device whose syncs all groups share (group commit), one ticker, coalesced heartbeats. Every
   * fault hits the process; every invariant and the linearizability check hold per group; each group has its
   * own clients. Absent: 1. Membership faults are not drawn with several groups (see the README).
   */
  groups?: number;
  coreMutations?: CoreMutations;
  simMutations?: SimMutations;
}

const SHAPES: PartitionShape[] = ['halves', 'oneway', 'bridge', 'isolateLeader'];

/** One random fault, with its parameters drawn from `rng`, at time `at`. */
function randomFault(rng: Random, at: number, kind: FaultKind): Fault {
  switch (kind) {
    case 'partition':
      return { kind, at, shape: rng.pick(SHAPES), duration: rng.int(100, 900), pick: rng.next() };
    case 'crash':
      return { kind, at, target: rng.chance(0.4) ? 'leader' : 'any', downtime: rng.int(20, 800), pick: rng.next() };
    case 'slowDisk':
      return { kind, at, duration: rng.int(100, 1200), latency: rng.int(5, 80), pick: rng.next() };
    case 'netStorm':
      return {
        kind,
        at,
        duration: rng.int(100, 800),
        drop: rng.float(0.05, 0.5),
        duplicate: rng.float(0, 0.2),
        maxDelay: rng.int(5, 60),
      };
    case 'transfer':
      return { kind, at, pick: rng.next() };
    case 'churn':
      return { kind, at, duration: rng.int(200, 1000), maxLife: rng.int(1, 40), downtime: rng.int(10, 200) };
    case 'powerLoss':
      return { kind, at, duration: rng.int(300, 1500), every: rng.int(20, 150), downtime: rng.int(10, 300) };
    case 'addMember':
      return { kind, at };
    case 'removeMember':
    case 'readdMember':
      return { kind, at, pick: rng.next() };
  }
}

const KIND_WEIGHTS: Array<[FaultKind, number]> = [
  ['partition', 5],
  ['crash', 5],
  ['slowDisk', 3],
  ['netStorm', 3],
  ['transfer', 3],
  ['churn', 2],
  ['powerLoss', 2],
  ['addMember', 1.5],
  ['removeMember', 1.5],
  ['readdMember', 1],
];

function weightedKind(rng: Random): FaultKind {
  const total = KIND_WEIGHTS.reduce((s, [, w]) => s + w, 0);
  let x = rng.float(0, total);
  for (const [kind, w] of KIND_WEIGHTS) {
    if ((x -= w) < 0) return kind;
  }
  return 'partition';
}

export type Profile = 'mixed' | 'churn' | 'calm';

/**
 * Everything a run needs, derived from one seed. Each seed draws a profile:
 * - mixed (70%): a random schedule of every fault kind, 3 or 5 members;
 * - churn (20%): long leader churn (each new leader crashes soon after election or right after its first
 *   commit) on a lossy network with one entry per append: many terms with partially replicated logs, which is
 *   where commit-rule bugs such as Raft's Figure 8 live;
 * - calm (10%): no faults at all, as a baseline.
 */
export function configFromSeed(seed: number): SimConfig {
  const rng = new Random(seed ^ 0x2545f491);
  const roll = rng.next();
  const profile: Profile = roll < 0.7 ? 'mixed' : roll < 0.9 ? 'churn' : 'calm';
  const churn = profile === 'churn';
  const faultMs = churn ? rng.int(4000, 8000) : rng.int(2000, 5000);
  const faults: Fault[] = [];
  if (profile === 'mixed') {
    const n = rng.int(3, Math.round(faultMs / 200));
    for (let i = 0; i < n; i++) faults.push(randomFault(rng, rng.int(50, faultMs - 50), weightedKind(rng)));
  } else if (churn) {
    // From (nearly) the start, so that client traffic stays light: a stream of fresh proposals after every
    // election keeps logs too uniform for the commit-rule interleavings this profile is after.
    faults.push({
      kind: 'churn',
      at: rng.int(50, 150),
      duration: faultMs,
      maxLife: rng.int(15, 30),
      downtime: rng.int(300, 500),
    });
    const n = rng.int(0, 3);
    for (let i = 0; i < n; i++) faults.push(randomFault(rng, rng.int(50, faultMs - 50), weightedKind(rng)));
  }
  faults.sort((a, b) => a.at - b.at);
  const checkQuorum = rng.chance(0.8);
  const tickSkew = rng.chance(0.3) ? 0 : rng.float(0, 0.2);
  const lossy = churn || rng.chance(0.5);
  const maxDelay = rng.int(2, 15);
  const config: SimConfig = {
    seed: rng.nextUint32(),
    clusterSize: churn || rng.chance(0.5) ? 3 : 5,
    clients: churn ? rng.int(1, 3) : rng.int(3, 8),
    keys: rng.int(1, 4),
    faultMs,
    livenessMs: 6000,
    snapshotEvery: rng.int(10, 60),
    tickMs: 10,
    tickSkew,
    electionTicks: 10,
    heartbeatTicks: rng.pick([1, 2, 3]),
    preVote: rng.chance(0.8),
    checkQuorum,
    // Lease reads trust bounded clock drift; they are exercised only where the skew is small.
    leaseReads: checkQuorum && tickSkew < 0.02 && rng.chance(0.2),
    // Small messages split a leader's catch-up into several appends (old-term entries acked without the new
    // leader's noop: the Figure 8 interleavings); small windows exercise flow control.
    maxMessageBytes: churn ? rng.pick([1, 1, 512]) : rng.pick([1, 512, 4096, 1 << 20]),
    maxInflightMessages: rng.pick([1, 4, 64]),
    drop: churn ? rng.float(0.1, 0.3) : lossy ? rng.float(0, 0.05) : 0,
    duplicate: lossy ? rng.float(0, 0.03) : 0,
    minDelay: rng.float(0.2, 1),
    maxDelay,
    snapshotChunk: rng.pick([256, 1024, 4096]),
    syncMin: 0.2,
    syncMax: rng.float(0.5, 3),
    clientTimeoutMs: rng.int(100, 400),
    clientMaxAttempts: rng.int(2, 6),
    thinkMs: rng.int(1, 15),
    faults,
    // From a stream of its own, so that every other field of a seed is what it was before poison existed.
    poisonRate: new Random(seed ^ 0x70150e).chance(0.3) ? 0.05 : 0,
    ...quiescence(seed),
    ...writeHolds(seed),
    ...forwardedResults(seed),
    ...detachedSnapshots(seed),
  };
  return withGroups(seed, config);
}

/** Membership faults: the simulator changes membership only with one group per process. */
const MEMBERSHIP: ReadonlySet<FaultKind> = new Set(['addMember', 'removeMember', 'readdMember']);

/**
 * Several groups per process in 30% of seeds (2..6), from a stream of its own (every other field stays what it
 * was, except that membership faults are dropped from such a seed's schedule). Clients are shared out over the
 * groups, at least one each, so that a run costs about what it did.
 */
function withGroups(seed: number, config: SimConfig): SimConfig {
  const rng = new Random(seed ^ 0x6a09e667);
  if (!rng.chance(0.3)) return config;
  const groups = rng.int(2, 6);
  return { ...config, groups, faults: config.faults.filter((f) => !MEMBERSHIP.has(f.kind)) };
}

/**
 * Quiescence in 40% of seeds, from a stream of its own (every other field stays what it was). Clients there think
 * longer between operations, so that the group goes idle, quiesces and is woken (by clients, faults, or a silent
 * leader) many times in a run.
 */
function quiescence(seed: number): Partial<SimConfig> {
  const rng = new Random(seed ^ 0x9e5ce);
  if (!rng.chance(0.4)) return {};
  return {
    quiesceTicks: rng.pick([2, 5, 20]),
    thinkMs: rng.int(50, 400),
    pingTicks: rng.pick([1, 2, 3]),
    leaderPings: rng.chance(0.5),
  };
}

/**
 * RaftNode's follower/leaderWriteIntervalMs in 30% of seeds, from a stream of its own (every other field stays
 * what it was): followers, the leader or both hold each next write back, applying what commits meanwhile.
 */
function writeHolds(seed: number): Partial<SimConfig> {
  const rng = new Random(seed ^ 0x5f3759df);
  if (!rng.chance(0.3)) return {};
  const interval = rng.pick([1, 3, 8, 20]);
  const who = rng.pick(['followers', 'leader', 'both']);
  return {
    ...(who !== 'leader' ? { followerWriteIntervalMs: interval } : {}),
    ...(who !== 'followers' ? { leaderWriteIntervalMs: interval } : {}),
  };
}

/**
 * RaftNode's forwardedResults in half of the seeds, from a stream of its own (every other field stays what it was):
 * writes forwarded to the leader are answered from the leader's result, before the forwarding member applies them.
 */
function forwardedResults(seed: number): Partial<SimConfig> {
  return new Random(seed ^ 0x2b992ddf).chance(0.5) ? { forwardedResults: true } : {};
}

/**
 * Detached snapshots in half of the seeds, from a stream of their own (every other field stays what it was): as
 * RaftNode does for a machine with `detachedSnapshot`, a member takes its snapshot at the applied index and goes on
 * (appending, applying, answering) while it is encoded; it saves it to disk a while later, behind whatever log
 * writes came meanwhile (LevelStorage records it after them), and compacts once that is durable. One at a time.
 */
function detachedSnapshots(seed: number): Partial<SimConfig> {
  const rng = new Random(seed ^ 0x3c6ef372);
  return rng.chance(0.5) ? { detachedSnapshotMs: rng.pick([1, 5, 20, 60]) } : {};
}

/** A one-line summary of a config, for reports. */
export function describeConfig(c: SimConfig): string {
  const kinds = new Map<string, number>();
  for (const f of c.faults) kinds.set(f.kind, (kinds.get(f.kind) ?? 0) + 1);
  const faults = [...kinds].map(([k, n]) => `${k}x${n}`).join(' ') || 'none';
  return (
    `${c.clusterSize} members, ${c.clients} clients, ${c.keys} keys, faults ${c.faultMs}ms [${faults}], ` +
    `snapshot every ${c.snapshotEvery}, skew ${c.tickSkew.toFixed(3)}, hb ${c.heartbeatTicks}, ` +
    `prevote ${c.preVote}, checkQuorum ${c.checkQuorum}, leaseReads ${c.leaseReads}, ` +
    `msg ${c.maxMessageBytes}B x${c.maxInflightMessages}` +
    ((c.poisonRate ?? 0) > 0 ? `, poison ${c.poisonRate}` : '') +
    ((c.quiesceTicks ?? 0) > 0
      ? `, quiesce after ${c.quiesceTicks} idle ticks, pings every ${c.pingTicks ?? 1}${c.leaderPings === true && (c.groups ?? 1) === 1 ? ' from the leader only' : ''}`
      : '') +
    ((c.groups ?? 1) > 1 ? `, ${c.groups} groups per process` : '') +
    (c.forwardedResults === true ? ', forwarded results' : '') +
    ((c.detachedSnapshotMs ?? 0) > 0 ? `, detached snapshots saved up to ${c.detachedSnapshotMs} ms later` : '')
  );
}
