/**
 * A gateway's watchers: the sockets subscribed to each auction, and the forwarding of the writer's pushes to them.
 * One push arrives per gateway; it is serialised and framed once (frames.ts) and the same bytes are written to the
 * sockets shard by shard (at most SHARD_SIZE sockets per turn of the event loop), so an auction with 50K watchers does not hold the gateway for
 * one long turn and a hot auction's channel is split in shards above 10K watchers. Each socket remembers the
 * last seq it showed: a push or poll result not above it is dropped, so prices never go backwards on screen even
 * when a new writer repeats a push or a poll overtakes one.
 */
import type { Push, ServerMessage, SnapshotMessage } from '../../wire.js';
import { textFrame, type Frame } from './frames.js';

export const SHARD_SIZE = 10_000;

/** What fan-out needs of a socket (the ws WebSocket, or a fake in unit tests). */
export interface Watcher {
  /** Sends one push, framed once for every watcher (`frame.text` is its JSON). */
  send(frame: Frame): void;
  /** The last seq shown to this watcher; -1 before its snapshot. */
  seq: number;
  /** Pushes received before the snapshot was sent (replayed after it when newer). */
  early: Push[] | null;
}

export class Channel {
  /** Shards of at most SHARD_SIZE watchers; a watcher lives in one. */
  readonly shards: Array<Set<Watcher>> = [];
  /** Highest seq forwarded on this channel, and when a push or poll last arrived. */
  seq = -1;
  heardAt = Date.now();
  /**
   * The auction as this channel knows it: the writer's snapshot when the channel opened, kept current by every
   * push and poll result. Later subscribers get it as their snapshot without a call to the writer (50K
   * watchers joining cost one call, not 50K).
   */
  view: SnapshotMessage | null = null;
  /** The writer's snapshot being fetched for the first subscriber(s). */
  loading: Promise<SnapshotMessage> | null = null;

  add(w: Watcher): void {
    let shard = this.shards.find((s) => s.size < SHARD_SIZE);
    if (shard === undefined) {
      shard = new Set();
      this.shards.push(shard);
    }
    shard.add(w);
  }

  remove(w: Watcher): void {
    for (const s of this.shards) if (s.delete(w)) break;
    for (let i = this.shards.length - 1; i >= 0; i--) if (this.shards[i]!.size === 0) this.shards.splice(i, 1);
  }

  get size(): number {
    let n = 0;
    for (const s of this.shards) n += s.size;
    return n;
  }

  /** Forward a push to every watcher that has not shown it; resolves when the last shard is written. */
  forward(push: Push): Promise<void> {
    this.heardAt = Date.now();
    if (push.seq > this.seq) this.seq = push.seq;
    const v = this.view;
    if (v !== null && push.seq > v.seq) {
      v.seq = push.seq;
      if (push.type === 'bid_update') {
        v.current_high_bid = push.high_bid;
        v.current_high_bidder_id = push.bidder;
        v.close_at = push.close_at;
      } else {
        v.state = 'closed';
        v.winner = push.winner;
        v.final_price = push.final_price;
      }
    }
    const frame = textFrame(JSON.stringify(push));
    const shards = [...this.shards];
    return new Promise((resolve) => {
      const step = (i: number): void => {
        if (i >= shards.length) return resolve();
        for (const w of shards[i]!) deliver(w, push, frame);
        setImmediate(() => step(i + 1));
      };
      step(0);
    });
  }
}

function deliver(w: Watcher, push: Push, frame: Frame): void {
  if (w.early !== null) {
    if (w.early.length < 100) w.early.push(push);
    return;
  }
  if (push.seq <= w.seq) return;
  w.seq = push.seq;
  w.send(frame);
}

/** After the snapshot: the watcher shows `seq`, and the pushes that came meanwhile and are newer follow. */
export function snapshotSent(w: Watcher, seq: number): void {
  const early = w.early ?? [];
  w.early = null;
  w.seq = Math.max(w.seq, seq);
  for (const p of early.sort((a, b) => a.seq - b.seq)) deliver(w, p, textFrame(JSON.stringify(p)));
}

export function message(m: ServerMessage): string {
  return JSON.stringify(m);
}
