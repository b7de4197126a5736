/**
 * Quiescence of a group whose members each run on a TCP transport of their own (no GroupHost): the group goes
 * silent when idle except for its leader's pings, wakes on a proposal, and elects a new leader when the quiesced
 * leader dies (its followers notice from the pings stopping). The pure part (src/groups/liveness.ts) is checked
 * directly too.
 */
import t from 'tap';
import { Liveness, checkPingTicks } from '../src/groups/liveness.js';
import { RaftNode } from '../src/node.js';
import { MemoryStorage } from '../src/storage/memory.js';
import { LocalNetwork } from '../src/transport/local.js';
import { TcpTransport } from '../src/transport/tcp.js';
import type { StateMachine } from '../src/types.js';
import { freePorts } from '@raftkit/testkit';

class Register implements StateMachine<string, string> {
  value = '';
  apply(command: string): string {
    return (this.value = command);
  }
  snapshot(): Uint8Array {
    return Buffer.from(this.value);
  }
  restore(data: Uint8Array): void {
    this.value = Buffer.from(data).toString();
  }
}

const SECRET = 'quiescence test secret';
const TICK_MS = 20;

async function waitFor(what: string, check: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

t.test('Liveness: pings every pingTicks, wakes a quiesced follower after an election timeout of silence', async (t) => {
  const liveness = new Liveness(3);
  t.same(
    [1, 2, 3, 4, 5, 6].map(() => liveness.tick()),
    [false, false, true, false, false, true],
  );
  liveness.heard('a');
  const follower = { quiesced: true, role: 'follower', leader: 'a' };
  for (let i = 0; i < 9; i++) liveness.tick();
  t.equal(liveness.wakeAfter(follower, 10), null, '9 silent ticks: not yet');
  liveness.tick();
  t.equal(liveness.wakeAfter(follower, 10), 10, '10 silent ticks: wake');
  t.equal(
    liveness.wakeAfter({ ...follower, quiesced: false }, 10),
    null,
    'a member that is not quiesced ticks by itself',
  );
  t.equal(liveness.wakeAfter({ ...follower, role: 'leader' }, 10), null);
  t.equal(liveness.wakeAfter({ ...follower, leader: 'b' }, 10), 16, 'never heard: silent since the start');
  liveness.restart();
  t.equal(liveness.silentTicks('a'), 0, 'a restart forgets who was heard');
  t.throws(() => new Liveness(0), RangeError);
  t.throws(() => checkPingTicks(5, 10), RangeError, 'pings must come at least twice per election timeout');
  t.doesNotThrow(() => checkPingTicks(4, 10));
});

t.test(
  'a RaftNode of its own quiesces, pings from its leader only, wakes, and replaces a dead quiesced leader',
  async (t) => {
    const ports = await freePorts(3);
    const ids = ['a', 'b', 'c'];
    const bootstrap = Object.fromEntries(ids.map((id, i) => [id, `127.0.0.1:${ports[i]}`]));
    const transports = new Map(ids.map((id) => [id, new TcpTransport({ id, listen: bootstrap[id]!, secret: SECRET })]));
    const machines = new Map(ids.map((id) => [id, new Register()]));
    const nodes = new Map<string, RaftNode<string, string>>();
    for (const id of ids) {
      nodes.set(
        id,
        await RaftNode.start({
          id,
          bootstrap,
          tickMs: TICK_MS,
          core: { quiesceTicks: 5 },
          pingTicks: 3,
          stateMachine: machines.get(id)!,
          storage: new MemoryStorage(),
          transport: transports.get(id)!,
        }),
      );
    }
    t.teardown(() => Promise.all([...nodes.values()].map((n) => n.stop())));
    await waitFor('a leader', () => [...nodes.values()].some((n) => n.isLeader));
    const leader = [...nodes.values()].find((n) => n.isLeader)!;
    t.equal(await leader.propose('one'), 'one');
    await waitFor('every member quiesced', () => [...nodes.values()].every((n) => n.quiesced));

    // Quiesced for 60 ticks: the followers send nothing; the leader sends each follower a ping every 3 ticks.
    const frames = (id: string): Record<string, number> =>
      Object.fromEntries(Object.entries(transports.get(id)!.stats().sent).map(([peer, s]) => [peer, s.frames]));
    const before = new Map(ids.map((id) => [id, frames(id)]));
    await new Promise((r) => setTimeout(r, 60 * TICK_MS));
    t.ok(
      [...nodes.values()].every((n) => n.quiesced),
      'still quiesced',
    );
    for (const id of ids) {
      const sent = Object.entries(frames(id)).map(([peer, n]) => n - (before.get(id)![peer] ?? 0));
      if (id === leader.id)
        t.ok(
          sent.every((n) => n >= 5 && n <= 30),
          `the leader pinged each follower about 20 times (${sent.join(', ')})`,
        );
      else
        t.same(
          sent,
          sent.map(() => 0),
          `follower ${id} sent nothing`,
        );
    }
    t.equal(
      leader.status().term,
      [...nodes.values()].find((n) => n !== leader)!.status().term,
      'no election meanwhile',
    );

    // A proposal on a follower wakes the group.
    const follower = [...nodes.values()].find((n) => n !== leader)!;
    t.equal(await follower.propose('two'), 'two');
    await waitFor('quiesced again', () => [...nodes.values()].every((n) => n.quiesced));

    // The quiesced leader dies: the others hear no more pings, wake after an election timeout and elect.
    const term = leader.status().term;
    await leader.stop();
    nodes.delete(leader.id);
    await waitFor('a new leader', () => [...nodes.values()].some((n) => n.isLeader && n.status().term > term));
    const next = [...nodes.values()].find((n) => n.isLeader)!;
    t.equal(await next.propose('three'), 'three');
    t.equal(await follower.read((m) => (m as Register).value), 'three');
  },
);

t.test('quiescence without a pinging transport or a shared ticker is refused', async (t) => {
  const net = new LocalNetwork();
  await t.rejects(
    RaftNode.start({
      id: 'a',
      bootstrap: { a: 'a' },
      core: { quiesceTicks: 5 },
      stateMachine: new Register(),
      storage: new MemoryStorage(),
      transport: net.transport('a'),
    }),
    RangeError,
  );
});
