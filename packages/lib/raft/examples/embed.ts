import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LevelStorage, RaftNode, TcpTransport, type StateMachine } from '@raftkit/raft';

// 1. Your state machine: deterministic, no I/O, no clock (time comes from the entry if you need it).
type Command = { add: string } | { remove: string };

class Inventory implements StateMachine<Command, number> {
  items = new Set<string>();
  apply(command: Command): number {
    if ('add' in command) this.items.add(command.add);
    else this.items.delete(command.remove);
    return this.items.size;
  }
  snapshot(): Uint8Array {
    return Buffer.from(JSON.stringify([...this.items]));
  }
  restore(data: Uint8Array): void {
    this.items = new Set(JSON.parse(Buffer.from(data).toString()) as string[]);
  }
}

// 2. Three members on loopback, each with its own LevelDB directory and TCP port.
export async function runExample(ports: number[]): Promise<{ size: number; items: string[] }> {
  const dir = mkdtempSync(join(tmpdir(), 'inventory-'));
  const addresses = Object.fromEntries(ports.map((port, i) => [`m${i + 1}`, `127.0.0.1:${port}`]));
  // Every member must hold the same secret: a connection that cannot prove it has it is refused (see Security).
  // In a deployment, read it from each member's configuration rather than generating it.
  const secret = randomBytes(32);
  const nodes = await Promise.all(
    Object.keys(addresses).map((id) =>
      RaftNode.start({
        id,
        bootstrap: addresses,
        stateMachine: new Inventory(),
        storage: new LevelStorage(join(dir, id)),
        transport: new TcpTransport({ id, listen: addresses[id]!, secret }), // each address written once
      }),
    ),
  );
  // 3. Propose on any member (followers forward to the leader, retries apply once); read linearizably.
  await nodes[0]!.propose({ add: 'apple' });
  const size = await nodes[2]!.propose({ add: 'pear' });
  const items = await nodes[1]!.read((machine) => [...machine.items]); // machine: Inventory
  await Promise.all(nodes.map((node) => node.stop()));
  return { size, items };
}
