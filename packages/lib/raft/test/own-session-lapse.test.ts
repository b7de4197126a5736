/**
 * A member's own client session (the one propose() uses) never lapses under its caller: after a quiet spell longer
 * than the session timeout, the first propose() applies like any other, exactly once. Two ways in: the member
 * notices the quiet on its own clock and registers afresh before proposing, or (when its clock and the entries'
 * disagree) the log refuses the command as unknown_session and the member proposes it once more in a new session.
 */
import t from 'tap';
import { RaftNode } from '../src/node.js';
import { MemoryStorage } from '../src/storage/memory.js';
import { LocalNetwork } from '../src/transport/local.js';
import type { StateMachine } from '../src/types.js';
import { leaderOf } from './helpers/leader.js';

/** Counts applications, so a command applied twice shows. */
class Appends implements StateMachine<string, number> {
  readonly items: string[] = [];
  apply(item: string): number {
    this.items.push(item);
    return this.items.length;
  }
  snapshot(): Uint8Array {
    return new TextEncoder().encode(JSON.stringify(this.items));
  }
  restore(data: Uint8Array): void {
    this.items.splice(0, this.items.length, ...(JSON.parse(new TextDecoder().decode(data)) as string[]));
  }
}

const SESSION_TIMEOUT_MS = 300;
const net = new LocalNetwork();
const ids = ['a', 'b', 'c'];
const bootstrap = Object.fromEntries(ids.map((id) => [id, `local:${id}`]));
/** Member c's clock, held still while the others' runs on: c believes its session is fresh when it is not. */
let stillClock: number | null = null;
const nodes = await Promise.all(
  ids.map((id) =>
    RaftNode.start({
      id,
      bootstrap,
      storage: new MemoryStorage(),
      transport: net.transport(id),
      stateMachine: new Appends(),
      tickMs: 10,
      sessions: { sessionTimeoutMs: SESSION_TIMEOUT_MS },
      ...(id === 'c' ? { clock: () => stillClock ?? Date.now() } : {}),
    }),
  ),
);
t.teardown(() => Promise.all(nodes.map((n) => n.stop())));
await leaderOf(new Map(nodes.map((n) => [n.id, n])));
// c must be a follower for the refusal path: its proposals are stamped by a leader whose clock moves on.
const c = nodes.find((n) => n.id === 'c')!;
if (c.isLeader) {
  await c.transferLeadership('a');
  while (c.isLeader || !nodes.some((n) => n.isLeader)) await sleep(10);
}

t.test('the first propose after a quiet spell longer than the session timeout applies, once', async (t) => {
  for (const node of nodes) t.equal(typeof (await node.propose(`${node.id}-1`)), 'number', `${node.id}: first write`);
  await sleep(SESSION_TIMEOUT_MS * 3);
  for (const node of nodes)
    t.equal(typeof (await node.propose(`${node.id}-2`)), 'number', `${node.id}: write after quiet`);
  const items = await nodes[0]!.read((m) => [...m.items]);
  t.same([...items].sort(), ['a-1', 'a-2', 'b-1', 'b-2', 'c-1', 'c-2'], 'each write applied exactly once');
});

t.test(
  'a session the log has expired while the member thought it fresh: proposed once more, applied once',
  async (t) => {
    await c.propose('c-3'); // c's session in use, on its own clock
    stillClock = Date.now(); // from here c's clock stands still: it will not renew on its own
    await sleep(SESSION_TIMEOUT_MS * 3);
    // Another member's entry moves entry time past c's session's expiry, as traffic from others would.
    await nodes.find((n) => n.isLeader)!.propose('leader-after-quiet');
    const result = await c.propose('c-4');
    t.equal(typeof result, 'number', 'c-4 applied after the refusal');
    stillClock = null;
    const items = await nodes[0]!.read((m) => [...m.items]);
    t.equal(items.filter((i) => i === 'c-4').length, 1, 'c-4 applied exactly once');
    t.equal(items.filter((i) => i === 'c-3').length, 1, 'c-3 applied exactly once');
  },
);

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
