/**
 * One simulated member: a RaftCore, its disk, a KV state machine behind SessionStateMachine, and the client
 * requests waiting on it. It drives the core the way the real driver must:
 *
 *   ready() -> install snapshot, write entries + hard state -> send the messages that may precede the write
 *   (src/ready-order.ts: a leader's appends and heartbeats, forwarded proposals and reads) -> apply committed
 *   entries -> serve reads -> wait for the disk sync -> send the rest (acknowledgements, votes) -> advance()
 *
 * so a slow disk delays this member's messages, and a crash loses exactly what was not yet durable. Every K
 * applied entries it saves a snapshot and, once that is durable, lets the core compact its log.
 */
import { ConfigChangeError, RaftCore, type CoreOptions } from '../src/core.js';
import { decodeRequest, encodeRequest, SessionStateMachine, type SessionResult } from '../src/sessions.js';
import { readyAllowsEarlySends, readyMustSync, splitMessages } from '../src/ready-order.js';
import type {
  ApplyContext,
  Configuration,
  Entry,
  ForwardedResult,
  HardState,
  Message,
  NodeId,
  Ready,
  Snapshot,
  SnapshotMeta,
} from '../src/types.js';
import type { SimConfig } from './config.js';
import { SimDisk, type SharedSync } from './disk.js';
import { mixNumber, mixString } from './hash.js';
import { fail, type Checker } from './invariants.js';
import { KvMachine, type KvCommand, type KvResult } from './kv.js';
import type { EventQueue } from './queue.js';
import type { Random } from './random.js';

export type ClientRequest =
  | { kind: 'register'; client: number }
  | { kind: 'write'; client: number; seq: number; bytes: Uint8Array }
  | { kind: 'read'; client: number; op: number; key: string };

export type ClientReply =
  | { kind: 'registered'; session: string }
  | { kind: 'written'; seq: number; result: SessionResult<KvResult> }
  | { kind: 'read'; op: number; value: string | null }
  | { kind: 'retry'; seq?: number; op?: number; why: string };

/**
 * What a member needs from the process it runs in (SimProcess is one): declared here, so the process module
 * imports the member and never the other way round.
 */
interface NodeProcess {
  /** The storage device every group of the process syncs through. */
  readonly device: SharedSync;
  /** The process's members by group index; a member enters itself here. */
  readonly members: SimNode[];
  /** Retired from the cluster for good (no restart). */
  readonly retired: boolean;
  localNow(): number;
  send(group: number, m: Message): void;
}

/** What a member needs from the simulation around it. */
export interface NodeHost {
  readonly queue: EventQueue;
  readonly rng: Random;
  readonly checker: Checker;
  readonly config: SimConfig;
  trace(line: () => string): void;
  fingerprint(x: number): void;
  /** Deliver a reply to a client (after the client link's latency). */
  reply(client: number, reply: ClientReply, from: NodeId): void;
  /** A client command (by tag) was applied by some member. */
  commandApplied(tag: string): void;
  /** A committed configuration entry was applied by this member. */
  onConfigApplied(node: SimNode, entry: Entry & { kind: 'config' }): void;
  /** How many of the group's members hold entry (index, term) on disk durably (in their log or a snapshot). */
  durableHolders(index: number, term: number): number;
}

const EMPTY_CONFIG: Configuration = { voters: [], learners: [] };
const REGISTER = encodeRequest({ t: 'register' });

function bytesKey(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('latin1');
}

/** The sim-side mutation noSessionDedup: commands bypass the session table and apply every time. */
class UndedupedSessions extends SessionStateMachine<KvCommand, KvResult> {
  override apply(data: Uint8Array, context: ApplyContext): SessionResult<KvResult> {
    const request = decodeRequest<KvCommand>(data);
    if (request.t === 'command')
      return { ok: true, result: this.inner.apply(request.command, context), duplicate: false };
    return super.apply(data, context);
  }
}

export class SimNode<P extends NodeProcess = NodeProcess> {
  readonly disk: SimDisk;
  core: RaftCore | null = null;
  up = false;
  /** Bumped at every crash and start: events of an earlier life are ignored. */
  incarnation = 0;
  /** Removed from the cluster and stopped; only a re-add starts it again. */
  retired = false;
  /** How traces name it: its process, and its group when there are several. */
  readonly label: string;

  private kv!: KvMachine;
  private sm!: SessionStateMachine<KvCommand, KvResult>;
  applied = 0;
  private appliedTerm = 0;
  private appliedTime = 0;
  private appliedConfig: Configuration = EMPTY_CONFIG;
  private knownCommit = 0;
  /** The hard state this driver knows durable (its last completed sync): decides which messages go early. */
  private syncedHardState: HardState = { term: 0, vote: null, commit: 0 };
  private lastSnapshot: Snapshot | null = null;
  private busy = false;
  /** A Ready's own write is syncing (not a snapshot's): newly committed entries apply at once. */
  private writing = false;
  /** Whether the Ready being written leaves the synced term and vote as they are (src/ready-order.ts). */
  private writeAllowsEarlySends = false;

  private writes = new Map<string, number[]>();
  /** As RaftNode with forwardedResults: who forwarded each command this member (as leader) accepted. */
  private forwardedBy = new WeakMap<Uint8Array, NodeId>();
  private resultsToSend = new Map<NodeId, ForwardedResult[]>();
  private registers = new Map<number, { term: number; client: number }>();
  private reads = new Map<string, { client: number; op: number; key: string }>();
  private readyReads: Array<{ index: number; context: string }> = [];
  private readCounter = 0;

  snapshotsTaken = 0;
  /** A detached snapshot was taken and is not saved yet (config.detachedSnapshotMs). */
  private detachedPending = false;
  snapshotsInstalled = 0;

  constructor(
    readonly id: NodeId,
    /** Which of its process's groups this member belongs to. */
    readonly group: number,
    private readonly host: NodeHost,
    readonly process: P,
    private readonly initialConfig: Configuration | undefined,
  ) {
    this.label = (host.config.groups ?? 1) > 1 ? `${id}/g${group}` : id;
    this.disk = new SimDisk(process.device, host.rng, (before, after) =>
      host.checker.onDurableHardState(id, before, after),
    );
    process.members[group] = this;
  }

  localNow(): number {
    return this.process.localNow();
  }

  // -------------------------------------------------------------------------------------------------------
  // Life cycle

  /** Start (or restart) from what is durable on disk (its process starts every member). */
  start(): void {
    const host = this.host;
    const config = host.config;
    this.incarnation++;
    this.up = true;
    this.busy = false;
    this.writing = false;
    this.detachedPending = false;
    const d = this.disk.durable;
    this.kv = new KvMachine({
      applied: (tag) => host.commandApplied(tag),
      duplicate: (tag, count, ctx) =>
        fail('exactly-once', `${this.label} applied command ${tag} for the ${count}th time (entry ${ctx.index})`),
    });
    this.sm = config.simMutations?.noSessionDedup ? new UndedupedSessions(this.kv) : new SessionStateMachine(this.kv);
    if (d.snapshot !== null) {
      this.sm.restore(d.snapshot.data);
      this.setApplied(d.snapshot.meta);
    } else {
      this.applied = 0;
      this.appliedTerm = 0;
      this.appliedTime = 0;
      this.appliedConfig = this.initialConfig ?? EMPTY_CONFIG;
    }
    this.lastSnapshot = d.snapshot;
    this.knownCommit = d.hardState.commit;
    this.syncedHardState = { ...d.hardState };
    const options: CoreOptions = {
      id: this.id,
      electionTicks: config.electionTicks,
      heartbeatTicks: config.heartbeatTicks,
      preVote: config.preVote,
      checkQuorum: config.checkQuorum,
      leaseReads: config.leaseReads,
      maxMessageBytes: config.maxMessageBytes,
      maxInflightMessages: config.maxInflightMessages,
      seed: host.rng.nextUint32(),
    };
    if ((config.quiesceTicks ?? 0) > 0) options.quiesceTicks = config.quiesceTicks!;
    if (config.coreMutations !== undefined) options.mutations = config.coreMutations;
    const state = {
      hardState: { ...d.hardState },
      snapshot: d.snapshot?.meta ?? null,
      entries: d.entries.slice(),
      ...(this.initialConfig !== undefined ? { initialConfig: this.initialConfig } : {}),
    };
    host.checker.onStart(this.id, d);
    this.core = new RaftCore(options, state);
    host.trace(
      () =>
        `${this.label} start #${this.incarnation} term ${d.hardState.term} commit ${d.hardState.commit} snapshot ${d.snapshot?.meta.index ?? 0} entries ${d.entries.length}`,
    );
    this.afterInput();
  }

  /** Power loss of its process: the core and everything in memory are gone; unsynced writes are lost. */
  crash(): void {
    if (!this.up) return;
    this.up = false;
    this.incarnation++;
    this.core = null;
    this.busy = false;
    this.writing = false;
    this.disk.crash();
    this.writes.clear();
    this.forwardedBy = new WeakMap();
    this.resultsToSend.clear();
    this.registers.clear();
    this.reads.clear();
    this.readyReads = [];
  }

  /** One tick of the process's shared ticker. */
  tick(): void {
    if (!this.up) return;
    this.core!.tick(this.localNow());
    this.afterInput();
  }

  /** The process's liveness check found this quiesced follower's leader silent for `silentTicks`. */
  wake(silentTicks: number): void {
    if (!this.up) return;
    this.core!.wake(silentTicks);
    this.afterInput();
  }

  // -------------------------------------------------------------------------------------------------------
  // Inputs

  receive(m: Message): void {
    if (!this.up) return;
    this.host.fingerprint(mixString(mixNumber(m.term, this.host.queue.now), `${m.type}${m.from}${m.to}`));
    this.host.trace(() => describeMessage(m));
    if (m.type === 'results') {
      this.takeResults(m.results);
      return;
    }
    if (m.type === 'propose' && this.forwardedResults()) for (const c of m.commands) this.forwardedBy.set(c, m.from);
    this.core!.step(m);
    if (this.writing) {
      this.applyCommittedNow();
      // As RaftNode: a leader whose write is in flight sends its commit news at once (core.takeCommitNews).
      if (this.writeAllowsEarlySends) this.sendAll(this.core!.takeCommitNews());
    }
    this.afterInput();
  }

  request(req: ClientRequest): void {
    if (!this.up) return; // lost with the connection
    const core = this.core!;
    const host = this.host;
    switch (req.kind) {
      case 'register': {
        const st = core.status();
        if (st.role !== 'leader' || core.propose(REGISTER) !== 'accepted') {
          host.reply(req.client, { kind: 'retry', why: `register at ${this.id}: not the leader` }, this.id);
          break;
        }
        this.registers.set(core.status().lastIndex, { term: st.term, client: req.client });
        break;
      }
      case 'write': {
        const outcome = core.propose(req.bytes);
        // As RaftNode: a command forwarded while this member's write is in flight leaves at once.
        if (outcome === 'forwarded' && this.busy) this.sendAll(core.takeForwards());
        if (outcome === 'dropped') {
          host.reply(req.client, { kind: 'retry', seq: req.seq, why: `proposal dropped at ${this.id}` }, this.id);
          break;
        }
        const k = bytesKey(req.bytes);
        const waiting = this.writes.get(k);
        if (waiting === undefined) this.writes.set(k, [req.client]);
        else if (!waiting.includes(req.client)) waiting.push(req.client);
        break;
      }
      case 'read': {
        if (host.config.simMutations?.staleLocalReads) {
          host.reply(req.client, { kind: 'read', op: req.op, value: this.kv.get(req.key) }, this.id);
          break;
        }
        const context = `${this.id}.${this.incarnation}.${++this.readCounter}`;
        this.reads.set(context, { client: req.client, op: req.op, key: req.key });
        core.readIndex(context);
        break;
      }
    }
    this.afterInput();
  }

  /** Leadership transfer (a fault). */
  transferLeadership(to: NodeId): void {
    if (!this.up) return;
    this.core!.transferLeadership(to);
    this.afterInput();
  }

  /** Propose a membership change; false when refused. */
  proposeConfigChange(change: Parameters<RaftCore['proposeConfigChange']>[0]): boolean {
    if (!this.up) return false;
    try {
      this.core!.proposeConfigChange(change);
    } catch (e) {
      if (e instanceof ConfigChangeError) return false;
      throw e;
    }
    this.host.trace(() => `${this.label} proposes ${change.type} ${change.node}`);
    this.afterInput();
    return true;
  }

  private afterInput(): void {
    this.host.checker.observe(this.id, this.core!.status());
    this.pump();
  }

  // -------------------------------------------------------------------------------------------------------
  // The Ready cycle

  private pump(): void {
    while (this.up && !this.busy && this.core!.hasReady()) this.handleReady(this.core!.ready());
  }

  private handleReady(rd: Ready): void {
    const host = this.host;
    host.checker.onReady(this.id, rd);
    if (rd.softState !== null) {
      const ss = rd.softState;
      host.trace(() => `${this.label} is ${ss.role} of term ${ss.term} (leader ${ss.leader ?? '-'})`);
    }
    let wrote = false;
    if (rd.snapshot !== null) {
      this.installSnapshot(rd.snapshot);
      wrote = true;
    }
    if (rd.entries.length > 0 || rd.hardState !== null) {
      this.disk.append(rd.entries, rd.hardState);
      // As RaftNode: a Ready that only moves the commit index is not synced (src/ready-order.ts; RaftNode writes it
      // with its next write): it becomes durable with the next sync, or is lost in a crash. The mutation syncs
      // nothing but entries and snapshots.
      const mustSync =
        host.config.simMutations?.syncOnlyEntries === true
          ? rd.entries.length > 0 || rd.snapshot !== null
          : readyMustSync(rd, this.syncedHardState);
      if (mustSync) wrote = true;
    }
    if (rd.hardState !== null) this.knownCommit = Math.max(this.knownCommit, rd.hardState.commit);
    if (!wrote) {
      this.sendAll(rd.messages);
      this.applyAndRead(rd);
      this.finishReady(rd);
      return;
    }
    // The library's order (src/ready-order.ts): a leader's appends and heartbeats, and forwarded client work, go
    // out while the write is in flight; committed entries (known durable on a majority) apply meanwhile;
    // acknowledgements wait for the sync. The mutation sends everything early.
    const { early, late } =
      host.config.simMutations?.sendBeforePersist === true
        ? { early: rd.messages, late: [] }
        : splitMessages(rd, this.syncedHardState);
    this.sendAll(early);
    this.applyAndRead(rd);
    this.busy = true;
    this.writing = true;
    this.writeAllowsEarlySends =
      host.config.simMutations?.sendBeforePersist === true || readyAllowsEarlySends(rd, this.syncedHardState);
    const life = this.incarnation;
    const startedAt = host.queue.now;
    this.disk.sync(() => {
      if (life !== this.incarnation) return;
      if (rd.hardState !== null) this.syncedHardState = rd.hardState;
      this.sendAll(late);
      // As RaftNode's follower/leaderWriteIntervalMs: a member holds its next write back, the Ready still
      // outstanding and counted as in flight (committed entries apply meanwhile, a leader sends its commit news).
      const interval =
        this.core!.status().role === 'leader' ? host.config.leaderWriteIntervalMs : host.config.followerWriteIntervalMs;
      const hold = (interval ?? 0) - (host.queue.now - startedAt);
      const finish = (): void => {
        if (life !== this.incarnation) return;
        this.busy = false;
        this.writing = false;
        this.finishReady(rd);
        if (this.up && life === this.incarnation) this.afterInput();
      };
      if (hold > 0) host.queue.after(hold, finish);
      else finish();
    });
  }

  /** As RaftNode: while a Ready's write is in flight, apply what became committed since (core.takeCommitted). */
  private applyCommittedNow(): void {
    const entries = this.core!.takeCommitted();
    if (entries.length === 0) return;
    // The core's commit index now (the checker checks each apply against it); no hard state says it yet.
    this.knownCommit = Math.max(this.knownCommit, this.core!.status().commit);
    for (const e of entries) this.applyEntry(e);
    if (entries.length > 0) this.serveReads();
    this.sendResults();
  }

  private forwardedResults(): boolean {
    return this.host.config.forwardedResults === true || this.host.config.simMutations?.resultsAnswerAll === true;
  }

  /** As RaftNode: a leader tells the members that forwarded the writes just applied what they gave. */
  private sendResults(): void {
    if (this.resultsToSend.size === 0) return;
    for (const [to, results] of this.resultsToSend)
      this.process.send(this.group, { type: 'results', from: this.id, to, term: 0, results });
    this.resultsToSend.clear();
  }

  /** As RaftNode: answer the writes these results are for (each from an applied, committed entry). */
  private takeResults(results: ForwardedResult[]): void {
    if (!this.forwardedResults()) return;
    for (const r of results) {
      const keys = this.host.config.simMutations?.resultsAnswerAll === true ? [...this.writes.keys()] : [r.key];
      for (const k of keys) {
        const waiting = this.writes.get(k);
        if (waiting === undefined) continue;
        this.writes.delete(k);
        const request = decodeRequest<KvCommand>(Buffer.from(k, 'latin1'));
        if (request.t !== 'command') continue;
        const result = (keys.length > 1 ? results[0]!.result : r.result) as SessionResult<KvResult>;
        for (const client of waiting) this.host.reply(client, { kind: 'written', seq: request.seq, result }, this.id);
      }
    }
  }

  /** Apply the Ready's committed entries and take its read states (neither waits for this Ready's write). */
  private applyAndRead(rd: Ready): void {
    for (const e of rd.committed) this.applyEntry(e);
    for (const rs of rd.readStates) {
      if (rs.index < 0) this.answerRead(rs.context, null);
      else this.readyReads.push(rs);
    }
    this.serveReads();
    this.sendResults();
  }

  /** The Ready's writes are durable (and its messages sent): advance; maybe save a snapshot. */
  private finishReady(rd: Ready): void {
    this.core!.advance(rd);
    if (this.applied - (this.lastSnapshot?.meta.index ?? 0) >= this.host.config.snapshotEvery) this.saveSnapshot();
  }

  private sendAll(messages: Message[]): void {
    for (const m of messages) this.process.send(this.group, m.type === 'snapshot' ? this.withSnapshotData(m) : m);
  }

  /** The core sends snapshots without data: fill in our newest saved snapshot (it is at least as new). */
  private withSnapshotData(m: Message & { type: 'snapshot' }): Message {
    const s = this.lastSnapshot;
    if (s === null || s.meta.index < m.snapshot.meta.index) {
      fail(
        'driver-contract',
        `${this.label} asked to send snapshot ${m.snapshot.meta.index} but has saved only ${s?.meta.index ?? 0}`,
      );
    }
    return { ...m, snapshot: s };
  }

  private installSnapshot(snapshot: Snapshot): void {
    const meta = snapshot.meta;
    this.host.trace(() => `${this.label} installs snapshot (${meta.index}, ${meta.term})`);
    this.sm.restore(snapshot.data);
    this.setApplied(meta);
    this.knownCommit = Math.max(this.knownCommit, meta.index);
    this.lastSnapshot = snapshot;
    this.disk.saveSnapshot(snapshot);
    this.snapshotsInstalled++;
    // Registrations covered by the snapshot will never be seen applied here: tell their clients to retry.
    for (const [index, r] of this.registers) {
      if (index > meta.index) continue;
      this.registers.delete(index);
      this.host.reply(r.client, { kind: 'retry', why: 'register overtaken by a snapshot' }, this.id);
    }
  }

  private setApplied(meta: SnapshotMeta): void {
    this.applied = meta.index;
    this.appliedTerm = meta.term;
    this.appliedTime = meta.time;
    this.appliedConfig = meta.config;
  }

  private applyEntry(e: Entry): void {
    const host = this.host;
    host.checker.onApply(this.id, e, this.applied, this.knownCommit, this.appliedTime);
    this.checkCommitDurable(e);
    host.fingerprint(mixNumber(e.index, e.term));
    if (e.kind === 'command') {
      const result = this.sm.apply(e.data, { index: e.index, term: e.term, time: e.time });
      this.answerWrites(e, result);
      const origin = this.forwardedResults() ? this.forwardedBy.get(e.data) : undefined;
      if (origin !== undefined) {
        const item: ForwardedResult = { key: bytesKey(e.data), index: e.index, result };
        const results = this.resultsToSend.get(origin);
        if (results === undefined) this.resultsToSend.set(origin, [item]);
        else results.push(item);
      }
    } else if (e.kind === 'config') {
      this.appliedConfig = e.config;
      host.onConfigApplied(this, e);
    }
    this.applied = e.index;
    this.appliedTerm = e.term;
    this.appliedTime = e.time;
  }

  /**
   * Invariant commit-durable: when a member applies an entry, a majority holds it durably (a leader commits only
   * then, and a follower learns of a commit only after it). Checked at once, not only when a crash happens to
   * expose it: a leader that counted itself (or a follower that acknowledged) before its write was synced, or a
   * follower that took another group's commit index, breaks it. Majority of the voters in force, rounded down for an even count
   * (with single-server changes an entry committed under the previous, one smaller, configuration has that many).
   */
  private checkCommitDurable(e: Entry): void {
    const voters = this.core!.configuration().voters.length;
    const needed = Math.ceil(voters / 2);
    const holders = this.host.durableHolders(e.index, e.term);
    if (holders < needed) {
      fail(
        'commit-durable',
        `${this.label} applies (${e.index}, ${e.term}), durable on ${holders} members of ${voters} voters`,
      );
    }
  }

  /** Whether entry (index, term) is durable here: in the durable log, or covered by the durable snapshot. */
  holdsDurably(index: number, term: number): boolean {
    const d = this.disk.durable;
    const snap = d.snapshot?.meta.index ?? 0;
    if (index <= snap) return true;
    return d.entries[index - snap - 1]?.term === term;
  }

  private answerWrites(e: Entry & { kind: 'command' }, result: SessionResult<KvResult>): void {
    const reg = this.registers.get(e.index);
    if (reg !== undefined) {
      this.registers.delete(e.index);
      if (reg.term === e.term && result.ok && 'client' in result) {
        this.host.reply(reg.client, { kind: 'registered', session: result.client }, this.id);
      } else {
        this.host.reply(reg.client, { kind: 'retry', why: 'register entry was overwritten' }, this.id);
      }
    }
    if (this.writes.size === 0) return;
    const k = bytesKey(e.data);
    const waiting = this.writes.get(k);
    if (waiting === undefined) return;
    this.writes.delete(k);
    const request = decodeRequest<KvCommand>(e.data);
    if (request.t !== 'command') return;
    for (const client of waiting) this.host.reply(client, { kind: 'written', seq: request.seq, result }, this.id);
  }

  private serveReads(): void {
    if (this.readyReads.length === 0) return;
    const waiting: Array<{ index: number; context: string }> = [];
    for (const rs of this.readyReads) {
      if (rs.index <= this.applied) this.answerRead(rs.context, rs.index);
      else waiting.push(rs);
    }
    this.readyReads = waiting;
  }

  private answerRead(context: string, index: number | null): void {
    const read = this.reads.get(context);
    if (read === undefined) return;
    this.reads.delete(context);
    if (index === null) {
      this.host.reply(read.client, { kind: 'retry', op: read.op, why: `read refused at ${this.id}` }, this.id);
    } else {
      this.host.reply(read.client, { kind: 'read', op: read.op, value: this.kv.get(read.key) }, this.id);
    }
  }

  /** Save a snapshot of the applied state; once durable, the core may drop the entries it covers. */
  private saveSnapshot(): void {
    if (this.detachedPending) return;
    const meta: SnapshotMeta = {
      index: this.applied,
      term: this.appliedTerm,
      time: this.appliedTime,
      config: this.appliedConfig,
    };
    const snapshot: Snapshot = { meta, data: this.sm.snapshot() };
    const mutated = this.host.config.simMutations?.detachedIndexAtSave === true;
    const later = this.host.config.detachedSnapshotMs ?? (mutated ? 20 : 0);
    if (later > 0) {
      this.saveDetached(snapshot, this.host.rng.int(0, later));
      return;
    }
    this.lastSnapshot = snapshot;
    this.snapshotsTaken++;
    this.disk.saveSnapshot(snapshot);
    this.busy = true;
    const life = this.incarnation;
    this.disk.sync(() => {
      if (life !== this.incarnation) return;
      this.busy = false;
      this.core!.compact(meta);
      this.host.trace(() => `${this.label} compacted to ${meta.index}`);
      this.afterInput();
    });
  }

  /**
   * RaftNode's detached snapshot: taken now (the state as of `meta.index`), saved `delayMs` later while the member
   * goes on, behind the log writes made meanwhile; compacted once durable. A snapshot installed from the leader
   * meanwhile is newer: this one is then dropped (as LevelStorage drops it), and compacting to it does nothing.
   */
  private saveDetached(taken: Snapshot, delayMs: number): void {
    let snapshot = taken;
    this.detachedPending = true;
    this.snapshotsTaken++;
    const life = this.incarnation;
    const meta = snapshot.meta;
    this.host.queue.after(delayMs, () => {
      if (life !== this.incarnation) return;
      this.detachedPending = false;
      if (meta.index <= (this.lastSnapshot?.meta.index ?? 0)) {
        this.host.trace(() => `${this.label} drops its detached snapshot ${meta.index}: a newer one is saved`);
        return;
      }
      if (this.host.config.simMutations?.detachedIndexAtSave === true) {
        snapshot = {
          meta: { index: this.applied, term: this.appliedTerm, time: this.appliedTime, config: this.appliedConfig },
          data: snapshot.data,
        };
      }
      this.lastSnapshot = snapshot;
      this.disk.saveSnapshot(snapshot);
      this.host.trace(() => `${this.label} saves its detached snapshot ${snapshot.meta.index}`);
      this.disk.sync(() => {
        if (life !== this.incarnation) return;
        this.core!.compact(snapshot.meta);
        this.host.trace(() => `${this.label} compacted to ${snapshot.meta.index}`);
        this.afterInput();
      });
    });
  }

  // -------------------------------------------------------------------------------------------------------

  status(): ReturnType<RaftCore['status']> | null {
    return this.up ? this.core!.status() : null;
  }
}

function describeMessage(m: Message): string {
  const head = `${m.from}->${m.to} ${m.type} t${m.term}`;
  switch (m.type) {
    case 'append':
      return `${head} prev (${m.prevIndex},${m.prevTerm}) ${m.entries.length ? `entries ${m.entries[0]!.index}..${m.entries[m.entries.length - 1]!.index}` : 'no entries'} commit ${m.commit}`;
    case 'appendResp':
      return `${head} index ${m.index}${m.reject ? ` REJECT hint (${m.hintIndex},${m.hintTerm})` : ''}`;
    case 'vote':
    case 'prevote':
      return `${head} last (${m.lastIndex},${m.lastTerm})${m.transfer ? ' transfer' : ''}`;
    case 'voteResp':
    case 'prevoteResp':
      return `${head}${m.reject ? ' REJECT' : ' granted'}`;
    case 'heartbeat':
      return `${head} commit ${m.commit}${m.quiesce === true ? ' QUIESCE' : ''}`;
    case 'snapshot':
      return `${head} (${m.snapshot.meta.index},${m.snapshot.meta.term}) ${m.snapshot.data.length}B`;
    case 'propose':
      return `${head} ${m.commands.length} commands`;
    case 'readIndexResp':
      return `${head} index ${m.index}`;
    default:
      return head;
  }
}
