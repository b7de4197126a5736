/**
 * The simulated network between members: loss, delay (hence reordering), duplication, partitions of every
 * shape, and snapshots streamed in chunks that are reassembled at the receiver (one lost chunk loses the whole
 * snapshot). Links are directed, so a one-way cut is just one blocked direction.
 */
import type { Message, NodeId, SnapshotRequest } from '../src/types.js';
import type { EventQueue } from './queue.js';
import type { Random } from './random.js';

export interface LinkParams {
  drop: number;
  duplicate: number;
  minDelay: number;
  maxDelay: number;
}

interface NetworkStats {
  sent: number;
  delivered: number;
  dropped: number;
  duplicated: number;
  blocked: number;
  snapshotsSent: number;
  snapshotsDelivered: number;
  chunksSent: number;
}

interface Assembly {
  parts: Array<Uint8Array | undefined>;
  missing: number;
}

export class SimNetwork {
  params: LinkParams;
  readonly stats: NetworkStats = {
    sent: 0,
    delivered: 0,
    dropped: 0,
    duplicated: 0,
    blocked: 0,
    snapshotsSent: 0,
    snapshotsDelivered: 0,
    chunksSent: 0,
  };
  /** Directed links "a>b" that are cut, with how many active partitions cut them. */
  private readonly cuts = new Map<string, number>();
  /** Snapshot streams being reassembled, by stream id. */
  private readonly assemblies = new Map<number, Assembly>();
  private nextStream = 1;

  constructor(
    private readonly queue: EventQueue,
    private readonly rng: Random,
    params: LinkParams,
    private readonly chunkSize: number,
    /** Hands a message of group `group` to its addressee if it is up; called at delivery time. */
    private readonly deliver: (message: Message, group: number) => void,
  ) {
    this.params = { ...params };
  }

  connected(from: NodeId, to: NodeId): boolean {
    return !this.cuts.has(`${from}>${to}`);
  }

  /** Cut the given directed links (counted, so overlapping partitions heal independently). */
  cut(links: Array<[NodeId, NodeId]>): void {
    for (const [a, b] of links) {
      const key = `${a}>${b}`;
      this.cuts.set(key, (this.cuts.get(key) ?? 0) + 1);
    }
  }

  restore(links: Array<[NodeId, NodeId]>): void {
    for (const [a, b] of links) {
      const key = `${a}>${b}`;
      const n = (this.cuts.get(key) ?? 0) - 1;
      if (n <= 0) this.cuts.delete(key);
      else this.cuts.set(key, n);
    }
  }

  healAll(): void {
    this.cuts.clear();
  }

  /** Sends `m` of group `group` (the index of one of the processes' groups; 0 when there is one). */
  send(m: Message, group = 0): void {
    this.stats.sent++;
    if (!this.connected(m.from, m.to)) {
      this.stats.blocked++;
      return;
    }
    if (m.type === 'snapshot') {
      this.sendSnapshot(m, group);
      return;
    }
    this.scheduleCopies(() => this.arrive(m, group));
  }

  /**
   * Duplication, loss and delay, the same for a message and a frame (the draws in this order, so seeds replay):
   * maybe a second copy, then per copy maybe lost, else `arrive` after a random delay.
   */
  private scheduleCopies(arrive: () => void): void {
    const copies = this.rng.chance(this.params.duplicate) ? 2 : 1;
    if (copies === 2) this.stats.duplicated++;
    for (let i = 0; i < copies; i++) {
      if (this.rng.chance(this.params.drop)) {
        this.stats.dropped++;
        continue;
      }
      this.queue.after(this.delay(), arrive);
    }
  }

  /**
   * One frame between two processes that is not a group's message (a batch of coalesced heartbeats): counted,
   * cut, lost, duplicated and delayed like a message; `onArrive` runs at delivery.
   */
  sendFrame(from: NodeId, to: NodeId, onArrive: () => void): void {
    this.stats.sent++;
    if (!this.connected(from, to)) {
      this.stats.blocked++;
      return;
    }
    this.scheduleCopies(() => {
      if (!this.connected(from, to)) {
        this.stats.blocked++;
        return;
      }
      this.stats.delivered++;
      onArrive();
    });
  }

  /**
   * A liveness ping from one node to another (what a process sends its peers every tick when groups may quiesce):
   * cut by partitions, lost and delayed like any message, never duplicated.
   */
  sendPing(from: NodeId, to: NodeId, onArrive: () => void): void {
    if (!this.connected(from, to) || this.rng.chance(this.params.drop)) return;
    this.queue.after(this.delay(), () => {
      if (this.connected(from, to)) onArrive();
    });
  }

  private delay(): number {
    return this.rng.float(this.params.minDelay, this.params.maxDelay);
  }

  private arrive(m: Message, group: number): void {
    // A partition that started while the message was in flight catches it too.
    if (!this.connected(m.from, m.to)) {
      this.stats.blocked++;
      return;
    }
    this.stats.delivered++;
    this.deliver(m, group);
  }

  private sendSnapshot(m: SnapshotRequest, group: number): void {
    this.stats.snapshotsSent++;
    const data = m.snapshot.data;
    const count = Math.max(1, Math.ceil(data.length / this.chunkSize));
    const stream = this.nextStream++;
    this.assemblies.set(stream, { parts: new Array(count), missing: count });
    for (let i = 0; i < count; i++) {
      const part = data.subarray(i * this.chunkSize, Math.min(data.length, (i + 1) * this.chunkSize));
      const copies = this.rng.chance(this.params.duplicate) ? 2 : 1;
      let arriving = 0;
      for (let c = 0; c < copies; c++) {
        this.stats.chunksSent++;
        if (this.rng.chance(this.params.drop)) {
          this.stats.dropped++;
          continue;
        }
        arriving++;
        this.queue.after(this.delay(), () => this.arriveChunk(m, group, stream, i, part));
      }
      // Every copy of this chunk is lost: the stream can never complete (its other chunks still travel).
      if (arriving === 0) this.assemblies.delete(stream);
    }
  }

  private arriveChunk(m: SnapshotRequest, group: number, stream: number, index: number, part: Uint8Array): void {
    const assembly = this.assemblies.get(stream);
    if (assembly === undefined || assembly.parts[index] !== undefined) return; // done already, or a duplicate
    if (!this.connected(m.from, m.to)) {
      this.stats.blocked++;
      this.assemblies.delete(stream); // the stream broke: the whole snapshot is lost
      return;
    }
    assembly.parts[index] = part;
    if (--assembly.missing > 0) return;
    this.assemblies.delete(stream);
    const total = assembly.parts.reduce((n, p) => n + p!.length, 0);
    const data = new Uint8Array(total);
    let offset = 0;
    for (const p of assembly.parts) {
      data.set(p!, offset);
      offset += p!.length;
    }
    this.stats.snapshotsDelivered++;
    this.stats.delivered++;
    this.deliver({ ...m, snapshot: { meta: m.snapshot.meta, data } }, group);
  }
}
