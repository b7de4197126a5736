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

type WriteOp =
  | { kind: 'append'; entries: Entry[]; hardState: HardState | null }
  | { kind: 'snapshot'; snapshot: Snapshot };

/**
 * A process's one storage device, shared by the logs of all its groups (one LevelDB with a key prefix per group
 * in the real GroupHost): group commit across groups. A sync makes every group's writes so far durable; the
 * requests made while a sync is in flight wait for the next one, and all of them share it (one latency, one
 * round). Slow-disk and power-loss faults act on the device, so on every group of the process.
 */
export class SharedSync {
  /** Bumped by a crash so that syncs scheduled before it never land. */
  private epoch = 0;
  /** While a slow-disk fault lasts, syncs take this long instead. */
  slowUntil = 0;
  slowLatency = 0;
  /** Armed by a power-loss fault: called with the latency when the next sync starts (then disarmed). */
  onNextSync: ((latency: number) => void) | null = null;
  /** The round in flight: when it started, and who it will make durable. */
  private inFlight: { startedAt: number; members: Array<{ disk: SimDisk; upTo: number; done: () => void }> } | null =
    null;
  private waiting: Array<{ disk: SimDisk; done: () => void }> = [];
  /** Rounds of sync made, and sync requests they served (rounds < requests: group commit). */
  rounds = 0;
  requests = 0;

  constructor(
    private readonly queue: EventQueue,
    private readonly rng: Random,
    private readonly syncMin: number,
    private readonly syncMax: number,
  ) {}

  request(disk: SimDisk, done: () => void): void {
    this.requests++;
    const round = this.inFlight;
    // Asked at the very instant the round began (the same event, e.g. one tick of every group): it joins it.
    if (round !== null && round.startedAt === this.queue.now) round.members.push({ disk, upTo: disk.buffered, done });
    else if (round !== null) this.waiting.push({ disk, done });
    else this.start([{ disk, done }]);
  }

  private start(requests: Array<{ disk: SimDisk; done: () => void }>): void {
    this.rounds++;
    const epoch = this.epoch;
    const round = {
      startedAt: this.queue.now,
      members: requests.map(({ disk, done }) => ({ disk, upTo: disk.buffered, done })),
    };
    this.inFlight = round;
    const latency =
      this.queue.now < this.slowUntil
        ? this.rng.float(this.slowLatency / 2, this.slowLatency)
        : this.rng.float(this.syncMin, this.syncMax);
    this.queue.after(latency, () => {
      if (epoch !== this.epoch) return;
      this.inFlight = null;
      for (const m of round.members) m.disk.flushTo(m.upTo);
      const next = this.waiting;
      this.waiting = [];
      if (next.length > 0) this.start(next);
      for (const m of round.members) m.done();
    });
    const armed = this.onNextSync;
    if (armed !== null) {
      this.onNextSync = null;
      armed(latency);
    }
  }

  /** Power loss: every sync in flight or waiting is forgotten (each disk loses its unsynced writes itself). */
  crash(): void {
    this.epoch++;
    this.onNextSync = null;
    this.inFlight = null;
    this.waiting = [];
  }
}

export class SimDisk {
  readonly durable: DurableState = { hardState: initialHardState(), snapshot: null, entries: [] };
  private buffer: WriteOp[] = [];

  constructor(
    private readonly device: SharedSync,
    private readonly rng: Random,
    /** Told of every durable hard-state change, for the durable-state invariants. */
    private readonly onDurableHardState: (before: HardState, after: HardState) => void,
  ) {}

  /** Writes ever made, and of those durable (or lost to a crash): marks for the device's rounds. */
  private pushed = 0;
  private settled = 0;

  /** The mark of every write so far: what a sync starting now makes durable. */
  get buffered(): number {
    return this.pushed;
  }

  append(entries: Entry[], hardState: HardState | null): void {
    if (entries.length === 0 && hardState === null) return;
    this.buffer.push({ kind: 'append', entries, hardState: hardState === null ? null : { ...hardState } });
    this.pushed++;
  }

  saveSnapshot(snapshot: Snapshot): void {
    this.buffer.push({ kind: 'snapshot', snapshot });
    this.pushed++;
  }

  /**
   * Make every write so far durable with the device's next sync (shared with the process's other groups), then
   * call `done` (never after a crash).
   */
  sync(done: () => void): void {
    this.device.request(this, done);
  }

  /** @internal The device synced: every write up to mark `upTo` is durable. */
  flushTo(upTo: number): void {
    if (upTo > this.settled) this.flush(upTo - this.settled);
  }

  /** Power loss: unsynced writes are lost (sometimes a prefix of them made it); the process crashes its SharedSync. */
  crash(): void {
    if (this.buffer.length > 0 && this.rng.chance(0.5)) this.flush(this.rng.int(0, this.buffer.length));
    this.buffer = [];
    this.settled = this.pushed;
  }

  private get snapshotIndex(): number {
    return this.durable.snapshot?.meta.index ?? 0;
  }

  private flush(count: number): void {
    const ops = this.buffer.splice(0, count);
    this.settled += ops.length;
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
