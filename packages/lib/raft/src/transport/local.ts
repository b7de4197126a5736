/**
 * An in-process transport: members of one LocalNetwork exchange messages through the event loop. For tests,
 * examples and the in-process benchmark; links can be cut to simulate partitions.
 */
import type { Message, NodeId, Transport } from '../types.js';

/** A network of in-process members: make one transport per member with `transport(id)`. */
export class LocalNetwork {
  private readonly handlers = new Map<NodeId, (m: Message) => void>();
  private readonly cut = new Set<string>();
  /** Messages delivered so far (for tests and benchmarks). */
  delivered = 0;

  /** The transport for member `id` on this network. */
  transport(id: NodeId): Transport {
    return new LocalTransport(id, this);
  }

  /** Drop every message between the two groups, both ways. */
  partition(a: NodeId[], b: NodeId[]): void {
    for (const x of a) for (const y of b) this.cut.add(`${x}>${y}`).add(`${y}>${x}`);
  }

  /** Undo every partition. */
  heal(): void {
    this.cut.clear();
  }

  /** @internal Used by the member's transport when it starts. */
  register(id: NodeId, handler: (m: Message) => void): void {
    this.handlers.set(id, handler);
  }

  /** @internal Used by the member's transport when it closes. */
  unregister(id: NodeId): void {
    this.handlers.delete(id);
  }

  /** @internal Used by the members' transports to send. */
  deliver(m: Message): void {
    if (this.cut.has(`${m.from}>${m.to}`)) return;
    // Asynchronous like a real network, so a member never re-enters itself through a send.
    setImmediate(() => {
      if (this.cut.has(`${m.from}>${m.to}`)) return;
      const handler = this.handlers.get(m.to);
      if (handler === undefined) return;
      this.delivered++;
      handler(m);
    });
  }
}

/** Like the TCP transport, it reaches only the peers it was given (addPeer), so membership bugs show here too. */
class LocalTransport implements Transport {
  private readonly peers = new Set<NodeId>();

  constructor(
    private readonly id: NodeId,
    private readonly network: LocalNetwork,
  ) {}

  async start(onMessage: (message: Message) => void): Promise<void> {
    this.network.register(this.id, onMessage);
  }

  send(message: Message): void {
    if (this.peers.has(message.to)) this.network.deliver(message);
  }

  addPeer(id: NodeId): void {
    this.peers.add(id);
  }

  removePeer(id: NodeId): void {
    this.peers.delete(id);
  }

  async close(): Promise<void> {
    this.network.unregister(this.id);
  }
}
