/**
 * The safety invariants, checked incrementally after every simulation step. Each check is O(work done in the
 * step), so they can run on every event of every seed.
 *
 * - election safety: at most one leader per term, over the whole run (crashed members' history included);
 * - log matching: every entry a member persists is fingerprinted together with its whole log prefix (a hash
 *   chain); two members holding the same (index, term) must hold the same prefix;
 * - leader completeness: when a member first acts as leader of term T, its log holds the prefix that any leader
 *   of a term below T committed;
 * - state machine safety: every member applies the same entry (and prefix) at each index, in order, and only
 *   committed entries;
 * - durable state: term and commit never go backwards on disk, and a durable vote never changes within a term;
 * - leader append-only: a member never drops an entry it wrote as leader of the term it is still in;
 * - monotonic commit within a member's life, monotonic entry time along the log;
 * - exactly-once (reported by the KV machine) and session sanity (reported by clients).
 */
import type { CoreStatus } from '../src/core.js';
import type { Entry, HardState, NodeId, Ready, Snapshot } from '../src/types.js';
import type { DurableState } from './disk.js';
import { chain, entryHash } from './hash.js';

/** A broken invariant: ends the run, naming the invariant. */
export class SimFailure extends Error {
  override name = 'SimFailure';
  constructor(
    readonly invariant: string,
    message: string,
  ) {
    super(message);
  }
}

export function fail(invariant: string, message: string): never {
  throw new SimFailure(invariant, message);
}

function key(index: number, term: number): number {
  return index * 1048576 + term;
}

/** The checker's copy of one member's log: the term and prefix hash at each index after `base`. */
class MirrorLog {
  base = 0;
  baseTerm = 0;
  baseChain = 0;
  terms: number[] = [];
  chains: number[] = [];

  last(): number {
    return this.base + this.terms.length;
  }

  termAt(i: number): number | undefined {
    if (i === this.base) return this.baseTerm;
    if (i < this.base || i > this.last()) return undefined;
    return this.terms[i - this.base - 1];
  }

  chainAt(i: number): number | undefined {
    if (i === this.base) return this.baseChain;
    if (i < this.base || i > this.last()) return undefined;
    return this.chains[i - this.base - 1];
  }

  rebase(index: number, term: number, chainHash: number): void {
    if (this.termAt(index) === term && index >= this.base) {
      const keep = index - this.base;
      this.terms = this.terms.slice(keep);
      this.chains = this.chains.slice(keep);
    } else {
      this.terms = [];
      this.chains = [];
    }
    this.base = index;
    this.baseTerm = term;
    this.baseChain = chainHash;
  }
}

export class Checker {
  /** term -> the member that led it. */
  private readonly leaders = new Map<number, NodeId>();
  /** (index, term) -> hash of the log prefix ending there, as first persisted by anyone. */
  private readonly chains = new Map<number, number>();
  /** index -> prefix hash / term of the entry applied there (by whoever applied it first). */
  private readonly appliedChain: number[] = [];
  private readonly appliedTerm: number[] = [];
  maxApplied = 0;
  /** term -> the highest index its leader committed, with the prefix hash there. */
  private readonly committedBy = new Map<number, { index: number; chain: number }>();
  private readonly leaderChecked = new Set<string>();
  private readonly mirrors = new Map<NodeId, MirrorLog>();
  /** Each member's current term, as last observed. */
  private readonly termSeen = new Map<NodeId, number>();
  /** Commit index seen in each member's current life. */
  private readonly commitSeen = new Map<NodeId, number>();
  leaderElections = 0;
  /** Told when a member becomes the first leader of a term. */
  onNewLeader: ((id: NodeId, term: number) => void) | null = null;
  /** Told when a leader's commit index advances. */
  onLeaderCommit: ((id: NodeId, term: number, commit: number) => void) | null = null;

  private mirror(id: NodeId): MirrorLog {
    let m = this.mirrors.get(id);
    if (m === undefined) {
      m = new MirrorLog();
      this.mirrors.set(id, m);
    }
    return m;
  }

  /** A member (re)starts from its durable state. */
  onStart(id: NodeId, durable: DurableState): void {
    const m = new MirrorLog();
    this.mirrors.set(id, m);
    this.commitSeen.set(id, durable.hardState.commit);
    if (durable.snapshot !== null) this.installSnapshot(id, m, durable.snapshot);
    this.appendEntries(id, m, durable.entries);
  }

  /** After every input a member processed: election safety, commit monotonicity, commits by leaders. */
  observe(id: NodeId, st: CoreStatus): void {
    const seen = this.commitSeen.get(id) ?? 0;
    if (st.commit < seen) fail('commit-monotonic', `${id} commit went from ${seen} back to ${st.commit}`);
    this.commitSeen.set(id, st.commit);
    this.termSeen.set(id, st.term);
    if (st.role !== 'leader') return;
    const leader = this.leaders.get(st.term);
    if (leader === undefined) {
      this.leaders.set(st.term, id);
      this.leaderElections++;
      this.onNewLeader?.(id, st.term);
    } else if (leader !== id) {
      fail('election-safety', `two leaders in term ${st.term}: ${leader} and ${id}`);
    }
    const committed = this.committedBy.get(st.term);
    if (committed === undefined || st.commit > committed.index) {
      const c = this.mirror(id).chainAt(st.commit);
      if (c !== undefined) this.committedBy.set(st.term, { index: st.commit, chain: c });
      this.onLeaderCommit?.(id, st.term, st.commit);
    }
  }

  /** A Ready is about to be persisted: track the member's log, then check leader completeness. */
  onReady(id: NodeId, rd: Ready): void {
    const m = this.mirror(id);
    if (rd.snapshot !== null) this.installSnapshot(id, m, rd.snapshot);
    if (rd.entries.length > 0) this.appendEntries(id, m, rd.entries);
    const ss = rd.softState;
    if (ss !== null && ss.role === 'leader') this.checkLeaderCompleteness(id, ss.term, m);
  }

  private installSnapshot(id: NodeId, m: MirrorLog, snapshot: Snapshot): void {
    const { index, term } = snapshot.meta;
    const c = index === 0 ? 0 : this.chains.get(key(index, term));
    if (c === undefined) {
      fail('log-matching', `${id} installs a snapshot at (${index}, ${term}), an entry no member ever persisted`);
    }
    m.rebase(index, term, c);
  }

  private appendEntries(id: NodeId, m: MirrorLog, entries: readonly Entry[]): void {
    let start = 0;
    while (start < entries.length && entries[start]!.index <= m.base) start++; // covered by the snapshot
    if (start === entries.length) return;
    const first = entries[start]!.index;
    if (first > m.last() + 1) fail('log-contiguity', `${id} persists entry ${first} after its last entry ${m.last()}`);
    // Leader append-only: while a member is still in a term it led, only it writes entries of that term, so
    // nothing may replace them (a later term's leader may, legitimately).
    const term = this.termSeen.get(id);
    if (term !== undefined && this.leaders.get(term) === id) {
      for (let i = first; i <= m.last(); i++) {
        if (m.termAt(i) === term && entries[start + (i - first)]?.term !== term) {
          fail(
            'leader-append-only',
            `${id} drops entry (${i}, ${term}) it wrote as leader of term ${term}, still in that term`,
          );
        }
      }
    }
    m.terms.length = first - m.base - 1;
    m.chains.length = first - m.base - 1;
    let prev = m.chainAt(first - 1)!;
    let prevTerm = m.termAt(first - 1)!;
    for (let i = start; i < entries.length; i++) {
      const e = entries[i]!;
      if (e.index !== first + (i - start)) fail('log-contiguity', `${id} persists entries out of order at ${e.index}`);
      if (e.term < prevTerm) fail('log-terms', `${id} log has term ${e.term} at ${e.index} after term ${prevTerm}`);
      const c = chain(prev, entryHash(e));
      const k = key(e.index, e.term);
      const known = this.chains.get(k);
      if (known === undefined) this.chains.set(k, c);
      else if (known !== c) {
        fail(
          'log-matching',
          `${id} holds entry (${e.index}, ${e.term}) with a log prefix different from another member's`,
        );
      }
      m.terms.push(e.term);
      m.chains.push(c);
      prev = c;
      prevTerm = e.term;
    }
  }

  private checkLeaderCompleteness(id: NodeId, term: number, m: MirrorLog): void {
    const mark = `${id}@${term}`;
    if (this.leaderChecked.has(mark)) return;
    this.leaderChecked.add(mark);
    let best: { index: number; chain: number; term: number } | null = null;
    for (const [t, c] of this.committedBy) {
      if (t < term && (best === null || c.index > best.index)) best = { ...c, term: t };
    }
    if (best === null || best.index < m.base) return; // nothing to compare against (or compacted away)
    const mine = m.chainAt(best.index);
    if (mine === undefined) {
      fail(
        'leader-completeness',
        `${id} leads term ${term} without entry ${best.index}, committed in term ${best.term} (its last index is ${m.last()})`,
      );
    }
    if (mine !== best.chain) {
      fail(
        'leader-completeness',
        `${id} leads term ${term} with a log that differs at or before ${best.index} from what term ${best.term} committed`,
      );
    }
  }

  /** A member applies a committed entry (called before it reaches the state machine). */
  onApply(id: NodeId, e: Entry, applied: number, commit: number, appliedTime: number): void {
    if (e.index !== applied + 1) fail('apply-order', `${id} applies ${e.index} after ${applied}`);
    if (e.index > commit) fail('apply-uncommitted', `${id} applies ${e.index} beyond its commit index ${commit}`);
    if (e.time < appliedTime)
      fail('entry-time', `${id}: entry ${e.index} has time ${e.time} < ${appliedTime} of the entry before`);
    const m = this.mirror(id);
    const c = m.chainAt(e.index);
    if (c === undefined || m.termAt(e.index) !== e.term) {
      fail('apply-not-in-log', `${id} applies (${e.index}, ${e.term}) which is not in its persisted log`);
    }
    const known = this.appliedChain[e.index];
    if (known === undefined) {
      this.appliedChain[e.index] = c;
      this.appliedTerm[e.index] = e.term;
      if (e.index > this.maxApplied) this.maxApplied = e.index;
    } else if (known !== c) {
      fail(
        'state-machine-safety',
        `${id} applies (${e.index}, ${e.term}) but (${e.index}, ${this.appliedTerm[e.index]}) with another prefix was applied elsewhere`,
      );
    }
  }

  /** A hard state became durable on `id`'s disk. */
  onDurableHardState(id: NodeId, before: HardState, after: HardState): void {
    if (after.term < before.term) fail('durable-term', `${id} durable term went from ${before.term} to ${after.term}`);
    if (after.term === before.term && before.vote !== null && after.vote !== before.vote) {
      fail('durable-vote', `${id} changed its durable vote in term ${after.term} from ${before.vote} to ${after.vote}`);
    }
    if (after.commit < before.commit)
      fail('durable-commit', `${id} durable commit went from ${before.commit} to ${after.commit}`);
  }
}
