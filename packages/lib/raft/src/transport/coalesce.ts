/**
 * Coalesced heartbeats (as CockroachDB's multi-raft does): between two processes that share many groups, every
 * heartbeat and heartbeat response of a tick travels in ONE message per destination process instead of one per
 * group. Pure: no sockets, no clocks. The GroupHost's transport and the simulator both use this module, so the
 * simulator checks the very code that runs in production.
 *
 * Only `heartbeat` and `heartbeatResp` are coalesced. Both are small, carry nothing a follower stores (a
 * heartbeat's commit is already min(match, commit), see RaftCore.broadcastHeartbeat), and Raft tolerates their
 * loss, duplication and reordering against the group's other messages, so gathering them for a moment and
 * sending them together changes nothing a group can observe except timing.
 */
import type { HeartbeatRequest, HeartbeatResponse, Message, NodeId } from '../types.js';

/** The messages this module coalesces. */
export type Beat = HeartbeatRequest | HeartbeatResponse;

/** True for a message that travels in a heartbeat batch. */
export function isBeat(m: Message): m is Beat {
  return m.type === 'heartbeat' || m.type === 'heartbeatResp';
}

/** One group's heartbeat or response inside a batch: the batch carries `from` and `to` once for all. */
export type BatchedBeat =
  | { group: string; type: 'heartbeat'; term: number; commit: number; round: number; quiesce?: boolean }
  | { group: string; type: 'heartbeatResp'; term: number; round: number };

/** Every heartbeat and response one process sends another in one flush, of every group they share. */
export interface HeartbeatBatch {
  from: NodeId;
  to: NodeId;
  beats: BatchedBeat[];
}

/** Collects beats per destination until `drain()`; one batch per destination, beats in the order added. */
export class HeartbeatCoalescer {
  private readonly pending = new Map<NodeId, HeartbeatBatch>();
  private count = 0;

  /** Beats waiting. */
  get size(): number {
    return this.count;
  }

  /** Adds `message` of `group` to its destination's batch. */
  add(group: string, message: Beat): void {
    let batch = this.pending.get(message.to);
    if (batch === undefined) {
      batch = { from: message.from, to: message.to, beats: [] };
      this.pending.set(message.to, batch);
    }
    batch.beats.push(toBatched(group, message));
    this.count++;
  }

  /** The batches gathered since the last drain (one per destination, in first-added order), and forgets them. */
  drain(): HeartbeatBatch[] {
    const out = [...this.pending.values()];
    this.pending.clear();
    this.count = 0;
    return out;
  }

  /** Drops what is waiting for `to` (it became unreachable). */
  forget(to: NodeId): void {
    const batch = this.pending.get(to);
    if (batch === undefined) return;
    this.count -= batch.beats.length;
    this.pending.delete(to);
  }
}

function toBatched(group: string, m: Beat): BatchedBeat {
  if (m.type === 'heartbeatResp') return { group, type: 'heartbeatResp', term: m.term, round: m.round };
  return m.quiesce === true
    ? { group, type: 'heartbeat', term: m.term, commit: m.commit, round: m.round, quiesce: true }
    : { group, type: 'heartbeat', term: m.term, commit: m.commit, round: m.round };
}

/** Options of `expandBatch`. */
interface ExpandOptions {
  /**
   * A deliberate bug for the simulator's mutation check (brokenCoalescing): each heartbeat is handed to the
   * group of the next beat in the batch, i.e. applied to the wrong group. Never set it outside the simulator.
   */
  misroute?: boolean;
}

/** A received batch back as per-group messages, in batch order. */
export function expandBatch(
  batch: HeartbeatBatch,
  options: ExpandOptions = {},
): Array<{ group: string; message: Beat }> {
  const { from, to, beats } = batch;
  const out: Array<{ group: string; message: Beat }> = [];
  for (let i = 0; i < beats.length; i++) {
    const b = beats[i]!;
    const group =
      options.misroute === true && b.type === 'heartbeat' && beats.length > 1
        ? beats[(i + 1) % beats.length]!.group
        : b.group;
    if (b.type === 'heartbeatResp') {
      out.push({ group, message: { type: 'heartbeatResp', from, to, term: b.term, round: b.round } });
    } else {
      const message: HeartbeatRequest = { type: 'heartbeat', from, to, term: b.term, commit: b.commit, round: b.round };
      if (b.quiesce === true) message.quiesce = true;
      out.push({ group, message });
    }
  }
  return out;
}
