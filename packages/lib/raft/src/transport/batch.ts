/**
 * Batched messages (as multi-raft engines send them): between two processes that share many groups, every message
 * one sends the other in one write travels in ONE frame, whatever its group, instead of one frame each. Pure: no
 * sockets, no clocks. The TCP transport batches the frames queued for one peer process when it writes them
 * (PeerLink: a `batch` frame, src/transport/wire.ts); the simulator batches with this module, so that every seed
 * with several groups runs Raft over frames that carry many groups' messages and are lost, delayed, duplicated and
 * cut by partitions together.
 *
 * What a batch must keep, and what the simulator checks on every batch it delivers: each message reaches the member
 * of its own group, and the messages of one group keep the order they were sent in.
 */
import type { Message, NodeId } from '../types.js';

/** One group's message inside a batch. */
export interface BatchedMessage {
  group: string;
  message: Message;
}

/** Every message one process sends another in one write, of every group they share, in the order sent. */
export interface MessageBatch {
  from: NodeId;
  to: NodeId;
  items: BatchedMessage[];
}

/** Collects messages per destination until `drain()`; one batch per destination, messages in the order added. */
export class MessageBatcher {
  private readonly pending = new Map<NodeId, MessageBatch>();

  /** Adds `message` of `group` to its destination's batch. */
  add(group: string, message: Message): void {
    let batch = this.pending.get(message.to);
    if (batch === undefined) {
      batch = { from: message.from, to: message.to, items: [] };
      this.pending.set(message.to, batch);
    }
    batch.items.push({ group, message });
  }

  /** The batches gathered since the last drain (one per destination, in first-added order), and forgets them. */
  drain(): MessageBatch[] {
    const out = [...this.pending.values()];
    this.pending.clear();
    return out;
  }
}

/** Options of `expandMessages`. */
interface ExpandOptions {
  /**
   * A deliberate bug for the simulator's mutation check (brokenBatching): each message is handed to the group of
   * the next message of the batch, i.e. to the wrong group. Never set it outside the simulator.
   */
  misroute?: boolean;
}

/**
 * A received batch back as per-group messages, in batch order. A message that is not from the batch's sender to
 * its receiver is dropped (as a connection's receiver drops a message that names other ends than its own).
 */
export function expandMessages(batch: MessageBatch, options: ExpandOptions = {}): BatchedMessage[] {
  const { from, to, items } = batch;
  const out: BatchedMessage[] = [];
  for (let i = 0; i < items.length; i++) {
    const { group, message } = items[i]!;
    if (message.from !== from || message.to !== to) continue;
    const routed = options.misroute === true && items.length > 1 ? items[(i + 1) % items.length]!.group : group;
    out.push({ group: routed, message });
  }
  return out;
}
