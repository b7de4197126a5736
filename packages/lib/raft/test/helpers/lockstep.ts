/**
 * A minimal lockstep cluster of pure cores for unit tests: messages are delivered instantly (unless a link is
 * cut), every Ready is performed in order, and applied commands are collected per member.
 */
import { RaftCore, type CoreOptions } from '../../src/core.js';
import type { Entry, Message, NodeId, ReadState, Snapshot } from '../../src/types.js';

export interface LockstepMember {
  core: RaftCore;
  applied: Entry[];
  reads: ReadState[];
  /** The newest snapshot this member saved or installed, sent to followers that need it. */
  snapshot: Snapshot | null;
  /** Everything the member made durable, to rebuild it after a crash. */
  durable: { entries: Entry[]; term: number; vote: NodeId | null; commit: number };
}

export class Lockstep {
  readonly members = new Map<NodeId, LockstepMember>();
  private readonly cut = new Set<string>();
  now = 0;

  constructor(
    ids: NodeId[],
    private readonly options: Partial<CoreOptions> = {},
  ) {
    for (const id of ids) this.add(id, { voters: ids, learners: [] });
  }

  add(id: NodeId, initialConfig: { voters: NodeId[]; learners: NodeId[] }): LockstepMember {
    const core = new RaftCore(
      { id, seed: this.members.size + 1, ...this.options },
      { hardState: { term: 0, vote: null, commit: 0 }, snapshot: null, entries: [], initialConfig },
    );
    const m: LockstepMember = {
      core,
      applied: [],
      reads: [],
      snapshot: null,
      durable: { entries: [], term: 0, vote: null, commit: 0 },
    };
    this.members.set(id, m);
    return m;
  }

  get(id: NodeId): LockstepMember {
    const m = this.members.get(id);
    if (m === undefined) throw new Error(`no member ${id}`);
    return m;
  }

  isolate(id: NodeId): void {
    for (const other of this.members.keys()) {
      if (other === id) continue;
      this.cut.add(`${id}>${other}`);
      this.cut.add(`${other}>${id}`);
    }
  }

  heal(): void {
    this.cut.clear();
  }

  /** Perform every pending Ready until the cluster is quiet (bounded, so a livelock fails the test). */
  settle(maxRounds = 1000): void {
    for (let round = 0; round < maxRounds; round++) {
      let busy = false;
      for (const m of this.members.values()) {
        if (!m.core.hasReady()) continue;
        busy = true;
        const rd = m.core.ready();
        if (rd.snapshot !== null) {
          m.snapshot = rd.snapshot;
          m.applied = m.applied.filter((e) => e.index <= rd.snapshot!.meta.index);
          m.durable.entries = [];
        }
        if (rd.entries.length > 0) {
          const first = rd.entries[0]!.index;
          m.durable.entries = m.durable.entries.filter((e) => e.index < first).concat(rd.entries);
        }
        if (rd.hardState !== null) Object.assign(m.durable, rd.hardState);
        for (const msg of rd.messages) this.deliver(msg, m);
        m.applied.push(...rd.committed);
        m.reads.push(...rd.readStates);
        m.core.advance(rd);
      }
      if (!busy) return;
    }
    throw new Error('cluster did not settle');
  }

  private deliver(msg: Message, sender: LockstepMember): void {
    if (this.cut.has(`${msg.from}>${msg.to}`)) return;
    const target = this.members.get(msg.to);
    if (target === undefined) return;
    if (msg.type === 'snapshot') {
      const snap = sender.snapshot;
      if (snap === null) throw new Error('snapshot requested but none saved');
      target.core.step({ ...msg, snapshot: snap });
      return;
    }
    target.core.step(msg);
  }

  tick(times = 1): void {
    for (let i = 0; i < times; i++) {
      this.now += 10;
      for (const m of this.members.values()) m.core.tick(this.now);
      this.settle();
    }
  }

  leaders(): NodeId[] {
    return [...this.members].filter(([, m]) => m.core.status().role === 'leader').map(([id]) => id);
  }

  /** Tick until exactly one leader exists among reachable members; returns it. */
  electLeader(maxTicks = 200): NodeId {
    for (let i = 0; i < maxTicks; i++) {
      this.tick();
      const leaders = this.leaders().filter((id) => this.get(id).core.status().term === this.maxTerm());
      if (leaders.length === 1) return leaders[0]!;
    }
    throw new Error('no leader elected');
  }

  maxTerm(): number {
    return Math.max(...[...this.members.values()].map((m) => m.core.status().term));
  }

  /** Save a snapshot of `id`'s applied state and compact its log. */
  snapshotAndCompact(id: NodeId): void {
    const m = this.get(id);
    const meta = m.core.snapshotMetaForApplied();
    m.snapshot = { meta, data: new TextEncoder().encode(JSON.stringify(m.applied.map((e) => e.index))) };
    m.core.compact(meta);
  }
}

export function command(text: string): Uint8Array {
  return new TextEncoder().encode(text);
}

export function commandsOf(entries: Entry[]): string[] {
  return entries.flatMap((e) => (e.kind === 'command' ? [new TextDecoder().decode(e.data)] : []));
}
