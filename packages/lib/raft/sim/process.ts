/**
 * One simulated process, as a GroupHost is one real one: it holds one member of each of the run's G groups (G = 1
 * in most seeds), one storage device whose syncs every group shares (group commit, see SharedSync), one ticker
 * for all its groups, coalesced heartbeats (the same src/transport/coalesce.ts the GroupHost's transport uses: every
 * heartbeat and response this process sends a peer in one event leaves as one frame), and, when groups quiesce,
 * the host's liveness logic (src/groups/liveness.ts: one ping per peer process every `pingTicks`, or, with one
 * group and `leaderPings`, pings from a quiesced leader to its followers only, as a RaftNode on its own transport
 * sends; a quiesced follower whose leader's process has been silent for an election timeout is woken). Crashes, restarts, slow disks and power losses hit the process,
 * so every group on it at once.
 */
import { HeartbeatCoalescer, expandBatch, isBeat, type HeartbeatBatch } from '../src/transport/coalesce.js';
import { MessageBatcher, expandMessages, type MessageBatch } from '../src/transport/batch.js';
import { fail } from './invariants.js';
import { Liveness } from '../src/groups/liveness.js';
import type { Message, NodeId } from '../src/types.js';
import type { SimConfig } from './config.js';
import { SharedSync } from './disk.js';
import type { SimNetwork } from './network.js';
import type { SimNode } from './node.js';
import type { EventQueue } from './queue.js';
import type { Random } from './random.js';

/** What a process needs from the simulation around it. */
export interface ProcessHost {
  readonly queue: EventQueue;
  readonly rng: Random;
  readonly network: SimNetwork;
  readonly config: SimConfig;
  trace(line: () => string): void;
  /** The process of that id, if any. */
  process(id: NodeId): SimProcess | undefined;
}

export class SimProcess {
  /** Its member of each group, by group index. */
  readonly members: SimNode[] = [];
  readonly device: SharedSync;
  up = false;
  /** Bumped at every crash and start: events of an earlier life are ignored. */
  incarnation = 0;
  /** Removed from the cluster and stopped; only a re-add starts it again. */
  retired = false;
  crashes = 0;
  /** Tick period and local clock (offset + rate * virtual time): skewed per process. */
  readonly tickPeriod: number;
  private readonly clockOffset: number;
  private readonly clockRate: number;
  /** Ticks, and the tick each peer process was last heard from in this incarnation (any frame or ping). */
  private readonly liveness: Liveness;
  private readonly coalescer = new HeartbeatCoalescer();
  /** The other messages of this event, one batch per peer process (src/transport/batch.ts, as PeerLink writes). */
  private readonly batcher = new MessageBatcher();
  /** What each batched message was sent as: its group and its place in its group's order (the batch invariant). */
  private readonly sentAs = new WeakMap<Message, { group: number; seq: number }>();
  private batchSeq = 0;
  private flushScheduled = false;
  /** Peers sent a heartbeat batch since their last ping: as in TcpTransport.ping, that batch stands in for it. */
  private readonly aliveSaid = new Set<NodeId>();
  /** Heartbeat batches sent, and the beats in them. */
  batchesSent = 0;
  beatsSent = 0;
  /** Message batches sent, and the messages in them. */
  messageBatchesSent = 0;
  batchedMessagesSent = 0;

  constructor(
    readonly id: NodeId,
    private readonly host: ProcessHost,
  ) {
    const { config, rng } = host;
    const skew = rng.float(-config.tickSkew, config.tickSkew);
    this.tickPeriod = config.tickMs * (1 + skew);
    this.clockRate = 1 / (1 + skew);
    this.clockOffset = rng.int(0, 2000);
    this.device = new SharedSync(host.queue, rng, config.syncMin, config.syncMax);
    this.liveness = new Liveness(config.pingTicks ?? 1);
  }

  localNow(): number {
    return Math.floor(this.clockOffset + this.host.queue.now * this.clockRate);
  }

  /** Start (or restart) every group's member from what is durable. */
  start(): void {
    this.incarnation++;
    this.up = true;
    this.liveness.restart();
    this.flushScheduled = false;
    this.coalescer.drain();
    this.batcher.drain();
    this.aliveSaid.clear();
    for (const member of this.members) member.start();
    this.scheduleTick(this.host.rng.float(0, this.tickPeriod));
  }

  /** Power loss: every group's member and everything in memory are gone; unsynced writes are lost. */
  crash(): void {
    if (!this.up) return;
    this.host.trace(() => `${this.id} CRASH`);
    this.up = false;
    this.incarnation++;
    this.crashes++;
    this.device.crash();
    this.coalescer.drain();
    this.batcher.drain();
    for (const member of this.members) member.crash();
  }

  private scheduleTick(delay: number): void {
    const life = this.incarnation;
    this.host.queue.after(delay, () => {
      if (life !== this.incarnation) return;
      if ((this.host.config.quiesceTicks ?? 0) > 0) this.livenessTick();
      else this.liveness.tick();
      for (const member of this.members) member.tick();
      this.scheduleTick(this.tickPeriod * this.host.rng.float(0.97, 1.03));
    });
  }

  /**
   * What GroupHost.livenessTick does: every `pingTicks`, ping every peer process of any group (unless a heartbeat
   * batch went there since the last ping); or, as a RaftNode of its own does (one group, `leaderPings`), ping the
   * followers of a quiesced group this process leads. Then wake each quiesced follower whose leader's process has
   * been silent for an election timeout.
   */
  private livenessTick(): void {
    const pingNow = this.liveness.tick();
    const statuses = this.members.map((member) => member.status());
    if (pingNow) {
      const leaderOnly = this.host.config.leaderPings === true && this.members.length === 1;
      const peers = new Set<NodeId>();
      for (const st of statuses) {
        if (st === null || (leaderOnly && !(st.quiesced && st.role === 'leader'))) continue;
        for (const peer of st.config.voters) peers.add(peer);
        for (const peer of st.config.learners) peers.add(peer);
      }
      peers.delete(this.id);
      for (const peer of peers) if (!this.aliveSaid.delete(peer)) this.ping(peer);
    }
    if (this.host.config.simMutations?.quiesceNeverWakes === true) return;
    statuses.forEach((st, group) => {
      if (st === null) return;
      const silent = this.liveness.wakeAfter(st, this.host.config.electionTicks);
      if (silent === null) return;
      const member = this.members[group]!;
      this.host.trace(() => `${member.label} wakes: leader ${st.leader} silent for ${silent} ticks`);
      member.wake(silent);
    });
  }

  private ping(to: NodeId): void {
    const from = this.id;
    this.host.network.sendPing(from, to, () => this.host.process(to)?.heardFrom(from));
  }

  /** Anything from `peer` arrived (a message, a batch, a ping). */
  heardFrom(peer: NodeId): void {
    if (this.up) this.liveness.heard(peer);
  }

  /**
   * A member's outgoing message: with several groups, heartbeats wait for this event's batch; the rest (and every
   * message of a single group, which has nothing to coalesce with) leave at once.
   */
  send(group: number, m: Message): void {
    if (this.members.length === 1 || m.type === 'snapshot') {
      // A snapshot streams as chunks of its own on the real wire, never inside a batch.
      this.host.network.send(m, group);
      return;
    }
    if (isBeat(m)) {
      this.coalescer.add(String(group), m);
    } else {
      this.sentAs.set(m, { group, seq: this.batchSeq++ });
      this.batcher.add(String(group), m);
    }
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    const life = this.incarnation;
    // After this event (and any other at this instant): all groups' heartbeats of a tick go in one batch per peer.
    this.host.queue.after(0, () => {
      if (life !== this.incarnation) return;
      this.flushScheduled = false;
      for (const batch of this.coalescer.drain()) {
        this.batchesSent++;
        this.beatsSent += batch.beats.length;
        this.aliveSaid.add(batch.to);
        this.host.network.sendFrame(batch.from, batch.to, () => this.host.process(batch.to)?.receiveBatch(batch));
      }
      for (const batch of this.batcher.drain()) {
        this.messageBatchesSent++;
        this.batchedMessagesSent += batch.items.length;
        const sentAs = batch.items.map((item) => this.sentAs.get(item.message)!);
        this.host.network.sendFrame(batch.from, batch.to, () =>
          this.host.process(batch.to)?.receiveMessages(batch, sentAs),
        );
      }
    });
  }

  /**
   * A batch of several groups' messages from a peer process (everything but heartbeats and snapshots, when the
   * processes hold several groups), expanded back to each group's member. Checked first (invariant "batch"): every
   * message goes to the group it was sent in, and each group's messages come out in the order they were sent.
   */
  receiveMessages(batch: MessageBatch, sentAs: ReadonlyArray<{ group: number; seq: number }>): void {
    if (!this.up) return;
    this.heardFrom(batch.from);
    this.host.trace(() => `${batch.from}->${batch.to} message batch of ${batch.items.length}`);
    const misroute = this.host.config.simMutations?.brokenBatching === true;
    const expanded = expandMessages(batch, { misroute });
    const lastSeq = new Map<number, number>();
    for (const { group, message } of expanded) {
      const at = batch.items.findIndex((item) => item.message === message);
      const sent = sentAs[at];
      if (sent === undefined || String(sent.group) !== group)
        fail(
          'batch',
          `${batch.from}->${batch.to}: a ${message.type} of group ${sent?.group} delivered to group ${group}`,
        );
      if ((lastSeq.get(sent.group) ?? -1) > sent.seq)
        fail('batch', `${batch.from}->${batch.to}: group ${sent.group}'s messages out of order in a batch`);
      lastSeq.set(sent.group, sent.seq);
    }
    for (const { group, message } of expanded) {
      const member = this.members[Number(group)];
      if (member !== undefined && this.up) member.receive(message);
    }
  }

  /** A batch of coalesced heartbeats from a peer process, expanded back to each group's member. */
  receiveBatch(batch: HeartbeatBatch): void {
    if (!this.up) return;
    this.heardFrom(batch.from);
    this.host.trace(() => `${batch.from}->${batch.to} heartbeat batch of ${batch.beats.length}`);
    const misroute = this.host.config.simMutations?.brokenCoalescing === true;
    for (const { group, message } of expandBatch(batch, { misroute })) {
      const member = this.members[Number(group)];
      if (member !== undefined && this.up) member.receive(message);
    }
  }

  /** A group's message arrived. */
  receive(group: number, m: Message): void {
    if (!this.up) return;
    this.heardFrom(m.from);
    this.members[group]?.receive(m);
  }
}
