/**
 * A member's disk: what survives a crash. Writes land in a write-back buffer and become durable only when a sync
 * completes, after a latency that a "slow disk" fault stretches. A crash throws the buffer away (or, half the
 * time, keeps a random prefix of it: writes reach the platter in order and each write is atomic), and the member
 * restarts from whatever was durable. Log semantics are those of the real storages (src/storage/log-rules.ts).
 */
import { entriesToStore, initialHardState } from '../src/storage/log-rules.js';
import type { Entry, HardState, Snapshot } from '../src/types.js';
import type { EventQueue } from './queue.js';
import type { Random } from './random.js';

export interface DurableState {
  hardState: HardState;
  snapshot: Snapshot | null;
  /** Entries after the snapshot, contiguous. */
  entries: Entry[];
}

type WriteOp = { kind: 'append'; entries: Entry[]; hardState: HardState | null } | { kind: 'snapshot'; snapshot: Snapshot };

export class SimDisk {
  readonly durable: DurableState = { hardState: initialHardState(), snapshot: null, entries: [] };
  private buffer: WriteOp[] = [];
  /** Bumped by a crash so that syncs scheduled before it never land. */
  private epoch = 0;
  syncMin: number;
  syncMax: number;
  /** While a slow-disk fault lasts, syncs take this long instead. */
  slowUntil = 0;
  slowLatency = 0;
  /** Armed by a power-loss fault: called with the latency when the next sync starts (then disarmed). */
  onNextSync: ((latency: number) => void) | null = null;

  constructor(
    private readonly queue: EventQueue,
    private readonly rng: Random,
    syncMin: number,
    syncMax: number,
    /** Told of every durable hard-state change, for the durable-state invariants. */
    private readonly onDurableHardState: (before: HardState, after: HardState) => void,
  ) {
    this.syncMin = syncMin;
    this.syncMax = syncMax;
  }

  append(entries: Entry[], hardState: HardState | null): void {
    if (entries.length === 0 && hardState === null) return;
    this.buffer.push({ kind: 'append', entries, hardState: hardState === null ? null : { ...hardState } });
  }

  saveSnapshot(snapshot: Snapshot): void {
    this.buffer.push({ kind: 'snapshot', snapshot });
  }

  /** Make every write so far durable after the disk's latency, then call `done` (never after a crash). */
  sync(done: () => void): void {
    const upTo = this.buffer.length;
    const epoch = this.epoch;
    const latency =
      this.queue.now < this.slowUntil
        ? this.rng.float(this.slowLatency / 2, this.slowLatency)
        : this.rng.float(this.syncMin, this.syncMax);
    this.queue.after(latency, () => {
      if (epoch !== this.epoch) return;
      this.flush(upTo);
      done();
    });
    const armed = this.onNextSync;
    if (armed !== null) {
      this.onNextSync = null;
      armed(latency);
    }
  }

  /** Power loss: unsynced writes are lost (sometimes a prefix of them made it). */
  crash(): void {
    this.epoch++;
    this.onNextSync = null;
    if (this.buffer.length > 0 && this.rng.chance(0.5)) this.flush(this.rng.int(0, this.buffer.length));
    this.buffer = [];
  }

  private get snapshotIndex(): number {
    return this.durable.snapshot?.meta.index ?? 0;
  }

  private flush(count: number): void {
    const ops = this.buffer.splice(0, count);
    const d = this.durable;
    for (const op of ops) {
      if (op.kind === 'append') {
        const fresh = entriesToStore(op.entries, this.snapshotIndex, this.snapshotIndex + d.entries.length);
        if (fresh.length > 0) {
          d.entries.length = fresh[0]!.index - this.snapshotIndex - 1;
          for (const e of fresh) d.entries.push(e);
        }
        if (op.hardState !== null) {
          const before = d.hardState;
          d.hardState = op.hardState;
          this.onDurableHardState(before, op.hardState);
        }
      } else {
        const { index, term } = op.snapshot.meta;
        if (index <= this.snapshotIndex) continue;
        const at = index - this.snapshotIndex - 1;
        const matches = at < d.entries.length && d.entries[at]!.term === term;
        d.entries = matches ? d.entries.slice(at + 1) : [];
        d.snapshot = op.snapshot;
      }
    }
  }
}
