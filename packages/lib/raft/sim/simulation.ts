/**
 * One deterministic simulated run: a cluster of SimNodes on a SimNetwork, clients issuing sessioned KV
 * operations, a fault schedule (partitions, crashes, slow disks, network storms, leadership transfers,
 * membership changes), then a heal and a liveness check, then a linearizability check of the client history.
 * Every invariant in invariants.ts is checked after every event. Same SimConfig => same run, event for event.
 */
import type { Configuration, Entry, Message, NodeId } from '../src/types.js';
import { SimClient, type ClientHost, type HistoryOp } from './client.js';
import type { Fault, PartitionShape, SimConfig } from './config.js';
import { HASH_SEED, mixNumber } from './hash.js';
import { Checker, fail, SimFailure } from './invariants.js';
import type { HistoryChecker, HistoryVerdict } from './linearizability.js';
import { SimNetwork, type LinkParams } from './network.js';
import { SimNode, type ClientReply, type ClientRequest, type NodeHost } from './node.js';
import { SimProcess, type ProcessHost } from './process.js';
import { EventQueue } from './queue.js';
import { Random } from './random.js';

export interface RunOptions {
  /** Keep the last `traceLines` lines of a readable trace (0: no trace, the fast default). */
  traceLines?: number;
  /** Print every trace line as it happens. */
  onTrace?: (line: string) => void;
  /** Check the client history for linearizability at the end. */
  checkHistory?: HistoryChecker | null;
  /** Abort the run (as a failure) after this many events: a guard against livelock in the simulator itself. */
  maxEvents?: number;
}

interface SimStats {
  events: number;
  virtualMs: number;
  ops: number;
  infoOps: number;
  retries: number;
  elections: number;
  crashes: number;
  snapshotsTaken: number;
  snapshotsInstalled: number;
  messages: number;
  dropped: number;
  snapshotsSent: number;
  membershipChanges: number;
  members: number;
  groups: number;
  /** Heartbeat batches between processes, and the heartbeats and responses they carried. */
  heartbeatBatches: number;
  batchedBeats: number;
  /** Disk sync requests of all groups, and the syncs that served them (group commit). */
  syncRequests: number;
  syncRounds: number;
}

export interface SimResult {
  ok: boolean;
  config: SimConfig;
  failure?: { invariant: string; message: string; time: number; event: number; stack?: string };
  stats: SimStats;
  /** A hash of every delivered message and applied entry: equal for equal runs. */
  fingerprint: number;
  linearizability: HistoryVerdict | null;
  history: HistoryOp[];
  trace: string[];
}

type Goal = { kind: 'add'; node: NodeId; deadline: number } | { kind: 'remove'; node: NodeId; deadline: number };

const CONTROL_PERIOD = 25;
const LIVENESS_PERIOD = 20;

function members(c: Configuration): NodeId[] {
  return [...c.voters, ...c.learners];
}

/**
 * One Raft group of the run: its member on each process, its own checker (every invariant holds per group), its
 * own clients and history (linearizability per group), and its committed configuration.
 */
class SimGroup implements NodeHost, ClientHost {
  readonly checker = new Checker();
  readonly nodes = new Map<NodeId, SimNode<SimProcess>>();
  readonly clients: SimClient[] = [];
  readonly history: HistoryOp[] = [];
  /** When each command tag first took effect (was applied by any member). */
  readonly firstApplied = new Map<string, number>();
  committedConfig: Configuration;
  committedConfigIndex = 0;
  membershipChanges = 0;

  constructor(
    readonly index: number,
    private readonly sim: Simulation,
    initialConfig: Configuration,
  ) {
    this.committedConfig = initialConfig;
  }

  get queue(): EventQueue {
    return this.sim.queue;
  }
  get rng(): Random {
    return this.sim.rng;
  }
  get config(): SimConfig {
    return this.sim.config;
  }
  get draining(): boolean {
    return this.sim.draining;
  }
  trace(line: () => string): void {
    if (!this.sim.tracing) return;
    this.sim.trace(this.sim.groups.length > 1 ? () => `g${this.index} ${line()}` : line);
  }
  fingerprint(x: number): void {
    this.sim.fingerprint(x);
  }

  reply(client: number, reply: ClientReply, from: NodeId): void {
    const c = this.clients[client]!;
    this.queue.after(this.rng.float(0.1, 1.5), () => c.onReply(reply, from));
  }

  send(node: NodeId, request: ClientRequest): void {
    const n = this.nodes.get(node);
    if (n === undefined) return;
    this.queue.after(this.rng.float(0.1, 1.5), () => n.request(request));
  }

  members(): NodeId[] {
    return this.sim.members();
  }

  durableHolders(index: number, term: number): number {
    let n = 0;
    for (const node of this.nodes.values()) if (node.holdsDurably(index, term)) n++;
    return n;
  }

  record(op: HistoryOp): void {
    this.history.push(op);
  }

  commandApplied(tag: string): void {
    if (!this.firstApplied.has(tag)) this.firstApplied.set(tag, this.queue.now);
  }

  onConfigApplied(node: SimNode, e: Entry & { kind: 'config' }): void {
    this.sim.onConfigApplied(this, node, e);
  }

  /**
   * The history the linearizability check sees. The clients' own view leaves an abandoned write pending for
   * ever (return = Infinity), which makes the search explode when there are many. The simulator knows more: a
   * write that no member ever applied never happened (dropped), and one that was applied took effect by the
   * time it was first applied (return = that time, output still unknown). Both only remove orderings that no
   * real execution could have had.
   */
  resolvedHistory(): HistoryOp[] {
    const out: HistoryOp[] = [];
    for (const op of this.history) {
      if (op.return !== Infinity || op.tag === undefined) {
        out.push(op);
        continue;
      }
      const applied = this.firstApplied.get(op.tag);
      if (applied !== undefined) out.push({ ...op, return: applied });
    }
    return out;
  }

  /** The member that leads in the highest term, if any. */
  leader(): SimNode<SimProcess> | null {
    let best: SimNode<SimProcess> | null = null;
    let bestTerm = -1;
    for (const n of this.nodes.values()) {
      const st = n.status();
      if (st !== null && st.role === 'leader' && st.term > bestTerm) {
        best = n;
        bestTerm = st.term;
      }
    }
    return best;
  }

  /** Why the group has not settled yet, or null when it has. */
  unsettled(): string | null {
    const name = this.sim.groups.length > 1 ? `group ${this.index}: ` : '';
    const busy = this.clients.filter((c) => !c.done);
    if (busy.length > 0) return `${name}clients still waiting: ${busy.map((c) => c.describe()).join('; ')}`;
    const leaders = [...this.nodes.values()].filter((n) => n.status()?.role === 'leader');
    if (leaders.length !== 1)
      return `${name}${leaders.length} leaders (${leaders.map((n) => n.id).join(',') || 'none'})`;
    const leader = leaders[0]!;
    const st = leader.status()!;
    if (st.commit !== st.lastIndex)
      return `${name}leader ${leader.id} has uncommitted entries (commit ${st.commit}, last ${st.lastIndex})`;
    for (const id of members(st.config)) {
      const n = this.nodes.get(id);
      const s = n?.status() ?? null;
      if (n === undefined || s === null) return `${name}member ${id} is down`;
      if (s.leader !== leader.id || s.term !== st.term)
        return `${name}${id} follows ${s.leader} in term ${s.term}, not ${leader.id} in ${st.term}`;
      if (n.applied !== st.commit) return `${name}${id} applied ${n.applied} of ${st.commit}`;
    }
    return null;
  }

  /** Every member's state, and the leaders' view of their followers: what a liveness failure needs. */
  describe(): string {
    const lines: string[] = [];
    if (this.sim.groups.length > 1) lines.push(`group ${this.index}:`);
    for (const n of this.nodes.values()) {
      const st = n.status();
      if (st === null) {
        lines.push(`${n.id}: down${n.process.retired ? ' (retired)' : ''}`);
        continue;
      }
      lines.push(
        `${n.id}: ${st.role} term ${st.term} leader ${st.leader ?? '-'} commit ${st.commit} applied ${n.applied} ` +
          `log ${st.firstIndex}..${st.lastIndex} voters ${st.config.voters.join(',')} learners ${st.config.learners.join(',') || '-'}` +
          (st.quiesced ? ' quiesced' : ''),
      );
      if (st.role === 'leader') {
        for (const p of st.peers) {
          lines.push(
            `    ${p.id}: ${p.state} match ${p.match} next ${p.next} inflight ${p.inflight}${p.learner ? ' learner' : ''}${p.recentActive ? '' : ' inactive'}`,
          );
        }
      }
    }
    return lines.join('\n');
  }
}

class Simulation implements ProcessHost {
  readonly queue = new EventQueue();
  readonly rng: Random;
  readonly network: SimNetwork;
  /** The processes, by id; each holds one member of every group. */
  readonly nodes = new Map<NodeId, SimProcess>();
  readonly groups: SimGroup[] = [];
  draining = false;
  private fp = HASH_SEED;
  private readonly traceBuffer: string[] = [];
  private readonly traceLimit: number;
  private readonly onTrace: ((line: string) => void) | undefined;
  private readonly baseline: LinkParams;
  private readonly initialConfig: Configuration;
  private goals: Array<() => Goal | null> = [];
  private goal: Goal | null = null;
  private nextNodeNumber: number;
  private stormToken = 0;
  /** While a churn fault lasts: how long a new leader lives, and how long it stays down. */
  private churn: { until: number; maxLife: number; downtime: number } | null = null;
  /** "id@term" of a leader to crash as soon as its commit index advances (churn). */
  private churnAfterCommit: string | null = null;
  private events = 0;
  private finished = false;
  /** Quiescence seeds end with a quiet leader loss (see quietLeaderLoss); whether it has begun. */
  private quietLossStarted = false;
  private healedAt = Infinity;

  constructor(
    readonly config: SimConfig,
    private readonly options: RunOptions = {},
  ) {
    this.rng = new Random(config.seed);
    this.traceLimit = options.traceLines ?? 0;
    this.onTrace = options.onTrace;
    this.baseline = {
      drop: config.drop,
      duplicate: config.duplicate,
      minDelay: config.minDelay,
      maxDelay: config.maxDelay,
    };
    this.network = new SimNetwork(this.queue, this.rng.fork(), this.baseline, config.snapshotChunk, (m, group) =>
      this.deliver(m, group),
    );
    const ids = Array.from({ length: config.clusterSize }, (_, i) => `n${i + 1}`);
    this.initialConfig = { voters: ids, learners: [] };
    this.nextNodeNumber = config.clusterSize + 1;
    for (let g = 0; g < Math.max(1, config.groups ?? 1); g++) {
      const group = new SimGroup(g, this, this.initialConfig);
      group.checker.onNewLeader = (id, term) => this.leaderElected(g, id, term);
      group.checker.onLeaderCommit = (id, term) => {
        if (this.churnAfterCommit === `${g}:${id}@${term}`) {
          this.churnAfterCommit = null;
          this.churnCrash(id, this.rng.float(0, 3));
        }
      };
      this.groups.push(group);
    }
  }

  /** The membership of group 0 (membership changes happen only with one group). */
  private get committedConfig(): Configuration {
    return this.groups[0]!.committedConfig;
  }

  process(id: NodeId): SimProcess | undefined {
    return this.nodes.get(id);
  }

  /** Until `until`, every `every` ms: a random member loses power in the middle of its next disk sync. */
  private powerLosses(until: number, every: number, downtime: number): void {
    if (this.draining || this.queue.now >= until) return;
    const up = [...this.nodes.values()].filter((n) => n.up);
    if (up.length > 0) {
      const node = this.rng.pick(up);
      const life = node.incarnation;
      node.device.onNextSync = (latency) => {
        this.queue.after(this.rng.float(0, latency), () => {
          if (node.incarnation !== life || !node.up || this.draining) return;
          this.trace(() => `${node.id} loses power mid-sync`);
          node.crash();
          this.queue.after(this.rng.float(downtime / 2, downtime), () => {
            if (!node.up && !node.retired && !this.draining) node.start();
          });
        });
      };
    }
    this.queue.after(this.rng.float(every / 2, every * 1.5), () => this.powerLosses(until, every, downtime));
  }

  /**
   * Leader churn: each new leader crashes soon after its election, or right after it first commits something:
   * partially replicated logs of many terms, the habitat of the Figure 8 bug.
   */
  private leaderElected(group: number, id: NodeId, term: number): void {
    const churn = this.churn;
    if (churn === null || this.draining || this.queue.now > churn.until) return;
    if (this.rng.chance(0.5)) this.churnCrash(id, this.rng.float(0, churn.maxLife));
    else this.churnAfterCommit = `${group}:${id}@${term}`;
  }

  private churnCrash(id: NodeId, after: number): void {
    const churn = this.churn!;
    const node = this.nodes.get(id)!;
    const life = node.incarnation;
    this.queue.after(after, () => {
      if (node.incarnation !== life || !node.up || this.draining) return;
      node.crash();
      this.queue.after(this.rng.float(churn.downtime / 2, churn.downtime), () => {
        if (!node.up && !node.retired && !this.draining) node.start();
      });
    });
  }

  // -------------------------------------------------------------------------------------------------------
  // Hosting nodes and clients

  get tracing(): boolean {
    return this.traceLimit > 0 || this.onTrace !== undefined;
  }

  trace(line: () => string): void {
    if (!this.tracing) return;
    const text = `[${this.queue.now.toFixed(3).padStart(9)}] ${line()}`;
    this.onTrace?.(text);
    if (this.traceLimit > 0) {
      this.traceBuffer.push(text);
      if (this.traceBuffer.length > this.traceLimit * 2)
        this.traceBuffer.splice(0, this.traceBuffer.length - this.traceLimit);
    }
  }

  fingerprint(x: number): void {
    this.fp = mixNumber(this.fp, x);
  }

  private deliver(m: Message, group: number): void {
    const node = this.nodes.get(m.to);
    if (node !== undefined && node.up) node.receive(group, m);
  }

  members(): NodeId[] {
    const out: NodeId[] = [];
    for (const n of this.nodes.values()) if (!n.retired) out.push(n.id);
    return out;
  }

  onConfigApplied(group: SimGroup, _node: SimNode, e: Entry & { kind: 'config' }): void {
    if (e.index <= group.committedConfigIndex) return;
    const before = new Set(members(group.committedConfig));
    const after = new Set(members(e.config));
    group.committedConfig = e.config;
    group.committedConfigIndex = e.index;
    group.membershipChanges++;
    // Processes retire and come back with the membership of group 0: membership changes happen with one group.
    if (group.index !== 0) return;
    this.trace(
      () =>
        `committed config ${e.index}: voters ${e.config.voters.join(',')} learners ${e.config.learners.join(',') || '-'}`,
    );
    // Retire members the committed config removed; revive retired members it brought back. (Deferred: we are
    // inside some member's apply loop.)
    this.queue.after(0, () => {
      for (const id of before) {
        if (!after.has(id) && !members(this.committedConfig).includes(id)) this.retire(id);
      }
      for (const id of after) {
        const n = this.nodes.get(id);
        if (n !== undefined && n.retired) {
          n.retired = false;
          if (!n.up) n.start();
        }
      }
    });
  }

  private retire(id: NodeId): void {
    const n = this.nodes.get(id);
    if (n === undefined || n.retired) return;
    this.trace(() => `${id} retired (removed from the cluster)`);
    n.retired = true;
    n.crash();
  }

  /** The leader of group 0 (or of group `group`). */
  private leader(group = 0): SimNode<SimProcess> | null {
    return this.groups[group]!.leader();
  }

  /** A new process, with a member of every group. */
  private addNode(id: NodeId, initialConfig: Configuration | undefined): SimProcess {
    const process = new SimProcess(id, this);
    for (const group of this.groups) group.nodes.set(id, new SimNode(id, group.index, group, process, initialConfig));
    this.nodes.set(id, process);
    return process;
  }

  /** Group 0 with one group; otherwise a group drawn with `rng` (the one whose leader a fault aims at). */
  private aimedGroup(rng: Random): number {
    return this.groups.length > 1 ? rng.below(this.groups.length) : 0;
  }

  // -------------------------------------------------------------------------------------------------------
  // Faults

  private applyFault(f: Fault): void {
    if (this.draining) return;
    const pickRng = new Random(Math.floor(('pick' in f ? f.pick : 0) * 4294967296) ^ 0x9e3779b9);
    this.trace(() => `FAULT ${JSON.stringify(f)}`);
    switch (f.kind) {
      case 'partition': {
        const links = this.partitionLinks(f.shape, pickRng);
        if (links.length === 0) return;
        this.network.cut(links);
        this.queue.after(f.duration, () => {
          this.network.restore(links);
          this.trace(() => `partition (${f.shape}) healed`);
        });
        return;
      }
      case 'crash': {
        const up = [...this.nodes.values()].filter((n) => n.up);
        if (up.length === 0) return;
        const victim =
          (f.target === 'leader' ? (this.leader(this.aimedGroup(pickRng))?.process ?? null) : null) ?? pickRng.pick(up);
        victim.crash();
        this.queue.after(f.downtime, () => {
          if (!victim.up && !victim.retired && !this.draining) victim.start();
        });
        return;
      }
      case 'slowDisk': {
        const nodes = [...this.nodes.values()];
        const n = pickRng.pick(nodes);
        n.device.slowUntil = this.queue.now + f.duration;
        n.device.slowLatency = f.latency;
        return;
      }
      case 'netStorm': {
        const token = ++this.stormToken;
        this.network.params = {
          drop: f.drop,
          duplicate: f.duplicate,
          minDelay: this.baseline.minDelay,
          maxDelay: f.maxDelay,
        };
        this.queue.after(f.duration, () => {
          if (token === this.stormToken && !this.draining) this.network.params = { ...this.baseline };
        });
        return;
      }
      case 'churn':
        this.churn = { until: this.queue.now + f.duration, maxLife: f.maxLife, downtime: f.downtime };
        return;
      case 'powerLoss':
        this.powerLosses(this.queue.now + f.duration, f.every, f.downtime);
        return;
      case 'transfer': {
        const leader = this.leader(this.aimedGroup(pickRng));
        if (leader === null) return;
        const voters = leader.status()!.config.voters.filter((v) => v !== leader.id);
        if (voters.length > 0) leader.transferLeadership(pickRng.pick(voters));
        return;
      }
      case 'addMember':
        this.goals.push(() => ({ kind: 'add', node: `n${this.nextNodeNumber++}`, deadline: this.queue.now + 1500 }));
        return;
      case 'removeMember':
        this.goals.push(() => {
          const voters = this.committedConfig.voters;
          const candidates = voters.length > 3 ? voters : this.committedConfig.learners;
          if (candidates.length === 0) return null;
          return { kind: 'remove', node: pickRng.pick(candidates), deadline: this.queue.now + 1500 };
        });
        return;
      case 'readdMember':
        this.goals.push(() => {
          const retired = [...this.nodes.values()].filter((n) => n.retired).map((n) => n.id);
          if (retired.length === 0) return null;
          return { kind: 'add', node: pickRng.pick(retired), deadline: this.queue.now + 1500 };
        });
        return;
    }
  }

  private partitionLinks(shape: PartitionShape, rng: Random): Array<[NodeId, NodeId]> {
    const ids = rng.shuffle(this.members());
    const links: Array<[NodeId, NodeId]> = [];
    const between = (a: NodeId[], b: NodeId[], both: boolean): void => {
      for (const x of a) {
        for (const y of b) {
          links.push([x, y]);
          if (both) links.push([y, x]);
        }
      }
    };
    if (ids.length < 2) return links;
    switch (shape) {
      case 'halves': {
        const k = rng.int(1, ids.length - 1);
        between(ids.slice(0, k), ids.slice(k), true);
        break;
      }
      case 'oneway': {
        const k = rng.int(1, ids.length - 1);
        between(ids.slice(0, k), ids.slice(k), false);
        break;
      }
      case 'bridge': {
        if (ids.length < 3) return links;
        const rest = ids.slice(1); // ids[0] is the bridge, connected to both halves
        const k = rng.int(1, rest.length - 1);
        between(rest.slice(0, k), rest.slice(k), true);
        break;
      }
      case 'isolateLeader': {
        const leader = this.leader(this.aimedGroup(rng))?.id ?? ids[0]!;
        between(
          [leader],
          ids.filter((id) => id !== leader),
          true,
        );
        break;
      }
    }
    return links;
  }

  /** Drive the current membership goal one step: add-as-learner, promote when caught up, or remove. */
  private controlMembership(): void {
    if (this.draining) return;
    this.queue.after(CONTROL_PERIOD, () => this.controlMembership());
    if (this.goal === null) {
      const next = this.goals.shift();
      if (next === undefined) return;
      this.goal = next();
      if (this.goal === null) return;
      const g = this.goal;
      this.trace(() => `membership goal: ${g.kind} ${g.node}`);
    }
    const goal = this.goal;
    if (this.queue.now > goal.deadline) {
      this.trace(() => `membership goal abandoned: ${goal.kind} ${goal.node}`);
      this.goal = null;
      return;
    }
    const committed = this.committedConfig;
    if (goal.kind === 'add') {
      let node = this.nodes.get(goal.node);
      if (node === undefined) node = this.addNode(goal.node, undefined);
      if (node.retired) node.retired = false;
      if (!node.up) node.start();
      if (committed.voters.includes(goal.node)) {
        this.goal = null;
        return;
      }
    } else if (!members(committed).includes(goal.node)) {
      this.goal = null;
      return;
    }
    const leader = this.leader(0);
    if (leader === null) return;
    const st = leader.status()!;
    const cfg = st.config;
    if (goal.kind === 'remove') {
      if (members(cfg).includes(goal.node)) leader.proposeConfigChange({ type: 'remove', node: goal.node });
      return;
    }
    if (!members(cfg).includes(goal.node)) {
      leader.proposeConfigChange({ type: 'addLearner', node: goal.node });
    } else if (cfg.learners.includes(goal.node)) {
      const peer = st.peers.find((p) => p.id === goal.node);
      if (peer !== undefined && peer.match >= st.commit)
        leader.proposeConfigChange({ type: 'promote', node: goal.node });
    }
  }

  // -------------------------------------------------------------------------------------------------------
  // Heal and liveness

  private heal(): void {
    this.trace(() => 'HEAL: partitions healed, network clean, disks fast, everyone restarted; clients drain');
    this.draining = true;
    this.healedAt = this.queue.now;
    this.goal = null;
    this.goals = [];
    this.network.healAll();
    this.network.params = {
      drop: 0,
      duplicate: 0,
      minDelay: this.baseline.minDelay,
      maxDelay: Math.min(this.baseline.maxDelay, 5),
    };
    for (const n of this.nodes.values()) {
      n.device.slowUntil = 0;
      if (!n.up && !n.retired) n.start();
    }
    for (const group of this.groups) for (const c of group.clients) if (!c.busy) c.done = true;
    this.queue.after(LIVENESS_PERIOD, () => this.checkLiveness());
  }

  /** Why the cluster has not settled yet (the first group that has not), or null when every group has. */
  private unsettled(): string | null {
    for (const group of this.groups) {
      const why = group.unsettled();
      if (why !== null) return why;
    }
    return null;
  }

  /** Every group's members and the leaders' view of their followers: what a liveness failure needs. */
  describeCluster(): string {
    return this.groups.map((g) => g.describe()).join('\n');
  }

  private checkLiveness(): void {
    const why = this.unsettled();
    if (why === null) {
      this.trace(() => 'settled: one leader, everything committed and applied everywhere, all clients done');
      if ((this.config.quiesceTicks ?? 0) > 0 && !this.quietLossStarted) {
        this.quietLossStarted = true;
        this.quietLeaderLoss(this.queue.now);
        return;
      }
      this.finished = true;
      return;
    }
    if (this.queue.now - this.healedAt > this.config.livenessMs) {
      fail('liveness', `not settled ${this.config.livenessMs}ms after healing: ${why}\n${this.describeCluster()}`);
    }
    this.queue.after(LIVENESS_PERIOD, () => this.checkLiveness());
  }

  /**
   * The epilogue of quiescence seeds: with no client traffic left, wait until the whole group is quiesced, then
   * crash its leader for good. The followers hear nothing from anyone (a quiesced group is silent), so only their
   * liveness pings can tell them: a new leader must follow within the liveness budget. Skipped when the group
   * does not quiesce within 3 s or could not elect without the leader anyway.
   */
  private quietLeaderLoss(since: number): void {
    const leader = this.leader(0);
    const st = leader?.status() ?? null;
    if (leader === null || st === null || st.config.voters.length < 3) {
      this.finished = true;
      return;
    }
    const everyone = this.groups.flatMap((g) => members(st.config).map((id) => g.nodes.get(id)?.status() ?? null));
    if (!everyone.every((s) => s !== null && s.quiesced)) {
      if (this.queue.now - since > 3000) this.finished = true;
      else this.queue.after(LIVENESS_PERIOD, () => this.quietLeaderLoss(since));
      return;
    }
    const dead = leader.process;
    const led = this.groups.filter((g) => g.leader()?.process === dead).map((g) => g.index);
    this.trace(
      () =>
        `quiet leader loss: ${dead.id} (leader of group(s) ${led.join(',')}) crashes for good while every group is quiesced`,
    );
    dead.crash();
    dead.retired = true;
    const crashedAt = this.queue.now;
    const check = (): void => {
      const waiting = this.groups.filter(
        (g) => ![...g.nodes.values()].some((n) => n.process !== dead && n.status()?.role === 'leader'),
      );
      if (waiting.length === 0) {
        this.trace(() => 'quiet leader loss: every group has a leader');
        this.finished = true;
        return;
      }
      if (this.queue.now - crashedAt > this.config.livenessMs) {
        fail(
          'liveness',
          `the leader ${dead.id} died while its groups were quiesced and group(s) ${waiting.map((g) => g.index).join(',')} never replaced it in ${this.config.livenessMs}ms\n${this.describeCluster()}`,
        );
      }
      this.queue.after(LIVENESS_PERIOD, check);
    };
    this.queue.after(LIVENESS_PERIOD, check);
  }

  // -------------------------------------------------------------------------------------------------------

  run(): SimResult {
    const config = this.config;
    let failure: SimResult['failure'];
    let linearizability: HistoryVerdict | null = null;
    const maxEvents = this.options.maxEvents ?? 2_000_000;
    try {
      for (const id of this.initialConfig.voters) this.addNode(id, this.initialConfig).start();
      // Each group gets its own clients: the run's clients shared out, at least one per group.
      const perGroup = Math.max(1, Math.ceil(config.clients / this.groups.length));
      for (const group of this.groups) {
        for (let i = 0; i < perGroup; i++) {
          const c = new SimClient(i, group);
          group.clients.push(c);
          this.queue.after(this.rng.float(0, 50), () => c.start());
        }
      }
      for (const f of config.faults) {
        // Membership changes are simulated with one group only (a config may set `groups` by hand: skip them).
        if (this.groups.length > 1 && (f.kind === 'addMember' || f.kind === 'removeMember' || f.kind === 'readdMember'))
          continue;
        if (f.at < config.faultMs) this.queue.at(f.at, () => this.applyFault(f));
      }
      this.queue.after(CONTROL_PERIOD, () => this.controlMembership());
      this.queue.at(config.faultMs, () => this.heal());
      while (!this.finished) {
        const event = this.queue.pop();
        if (event === undefined) fail('liveness', 'nothing left to happen');
        this.events++;
        event.run();
        if (this.events > maxEvents) fail('event-budget', `more than ${maxEvents} events`);
      }
      if (this.options.checkHistory) {
        // Per group: each group is its own linearizable object. The verdict kept is the weakest one.
        for (const group of this.groups) {
          const verdict = this.options.checkHistory(group.resolvedHistory());
          const name = this.groups.length > 1 ? ` of group ${group.index}` : '';
          if (verdict.result === 'illegal')
            fail('linearizability', `client history${name} is not linearizable:\n${verdict.detail}`);
          if (linearizability === null || verdict.result === 'unknown') linearizability = verdict;
        }
      }
    } catch (e) {
      const err = e as Error;
      failure =
        e instanceof SimFailure
          ? { invariant: e.invariant, message: e.message, time: this.queue.now, event: this.events }
          : {
              invariant: 'exception',
              message: `${err.name}: ${err.message}`,
              time: this.queue.now,
              event: this.events,
              ...(err.stack !== undefined ? { stack: err.stack } : {}),
            };
      this.trace(() => `FAILED ${failure!.invariant}: ${failure!.message}`);
    }
    const nodes = [...this.nodes.values()];
    const members = this.groups.flatMap((g) => [...g.nodes.values()]);
    const history = this.groups.flatMap((g) => g.history);
    const net = this.network.stats;
    const result: SimResult = {
      ok: failure === undefined,
      config,
      stats: {
        events: this.events,
        virtualMs: Math.round(this.queue.now),
        ops: history.length,
        infoOps: history.filter((op) => op.return === Infinity).length,
        retries: this.groups.reduce((n, g) => n + g.clients.reduce((m, c) => m + c.retries, 0), 0),
        elections: this.groups.reduce((n, g) => n + g.checker.leaderElections, 0),
        crashes: nodes.reduce((n, x) => n + x.crashes, 0),
        snapshotsTaken: members.reduce((n, x) => n + x.snapshotsTaken, 0),
        snapshotsInstalled: members.reduce((n, x) => n + x.snapshotsInstalled, 0),
        messages: net.sent,
        dropped: net.dropped,
        snapshotsSent: net.snapshotsSent,
        membershipChanges: this.groups[0]!.membershipChanges,
        members: nodes.length,
        groups: this.groups.length,
        heartbeatBatches: nodes.reduce((n, x) => n + x.batchesSent, 0),
        batchedBeats: nodes.reduce((n, x) => n + x.beatsSent, 0),
        syncRequests: nodes.reduce((n, x) => n + x.device.requests, 0),
        syncRounds: nodes.reduce((n, x) => n + x.device.rounds, 0),
      },
      fingerprint: this.fp,
      linearizability,
      history,
      trace: this.traceBuffer.slice(-this.traceLimit),
    };
    if (failure !== undefined) result.failure = failure;
    return result;
  }
}

export function runSimulation(config: SimConfig, options: RunOptions = {}): SimResult {
  return new Simulation(config, options).run();
}
