import t from 'tap';
import { RaftNode } from '../src/node.js';
import { MemoryStorage } from '../src/storage/memory.js';
import { LocalNetwork } from '../src/transport/local.js';
import type { NodeId, StateMachine } from '../src/types.js';
import { leaderOf } from './helpers/leader.js';

type Cmd = { op: 'add'; key: string; by: number };

/** A counter per key that also counts how many times each command was applied. */
class Counters implements StateMachine<Cmd, number> {
  values = new Map<string, number>();
  applications = 0;
  apply(cmd: Cmd): number {
    this.applications++;
    const v = (this.values.get(cmd.key) ?? 0) + cmd.by;
    this.values.set(cmd.key, v);
    return v;
  }
  snapshot(): Uint8Array {
    return new TextEncoder().encode(JSON.stringify([...this.values]));
  }
  restore(data: Uint8Array): void {
    this.values = new Map(JSON.parse(new TextDecoder().decode(data)) as Array<[string, number]>);
  }
}

const ids = ['n1', 'n2', 'n3'];
const bootstrap = Object.fromEntries(ids.map((id) => [id, `local:${id}`]));

async function startCluster(net: LocalNetwork, storages: Map<NodeId, MemoryStorage>, snapshotEvery = 10_000) {
  const nodes = new Map<NodeId, RaftNode<Cmd, number>>();
  const machines = new Map<NodeId, Counters>();
  for (const id of ids) {
    const machine = new Counters();
    machines.set(id, machine);
    if (!storages.has(id)) storages.set(id, new MemoryStorage());
    nodes.set(
      id,
      await RaftNode.start({
        id,
        storage: storages.get(id)!,
        transport: net.transport(id),
        stateMachine: machine,
        bootstrap,
        tickMs: 10,
        snapshotEvery,
        requestTimeoutMs: 5_000,
      }),
    );
  }
  return { nodes, machines };
}

t.test('propose on leader and follower, read linearizably everywhere', async (t) => {
  const net = new LocalNetwork();
  const { nodes } = await startCluster(net, new Map());
  t.teardown(async () => {
    for (const n of nodes.values()) await n.stop();
  });
  const leader = await leaderOf(nodes);
  t.equal(await leader.propose({ op: 'add', key: 'x', by: 1 }), 1);
  const follower = [...nodes.values()].find((n) => n !== leader)!;
  t.equal(await follower.propose({ op: 'add', key: 'x', by: 2 }), 3, 'a follower forwards to the leader');
  for (const n of nodes.values()) {
    t.equal(await n.read((m) => (m as Counters).values.get('x')), 3, `linearizable read on ${n.id}`);
  }
});

t.test('a retried (client, seq) applies once', async (t) => {
  const net = new LocalNetwork();
  const { nodes, machines } = await startCluster(net, new Map());
  t.teardown(async () => {
    for (const n of nodes.values()) await n.stop();
  });
  const leader = await leaderOf(nodes);
  const reg = await leader.submit({ t: 'register', nonce: 'test' });
  t.ok(reg.ok && 'client' in reg);
  const client = (reg as { client: string }).client;
  const request = { t: 'command' as const, client, seq: 1, ack: 0, command: { op: 'add' as const, key: 'y', by: 5 } };
  const first = await leader.submit(request);
  const follower = [...nodes.values()].find((n) => n !== leader)!;
  await follower.readBarrier(); // the follower has applied the original, so only the retry's entry answers it
  const retry = await follower.submit(request);
  t.same(first, { ok: true, result: 5, duplicate: false });
  t.same(retry, { ok: true, result: 5, duplicate: true });
  await leader.readBarrier();
  t.equal(machines.get(leader.id)!.applications, 1, 'applied exactly once');
  const stale = await leader.submit({ ...request, seq: 1, ack: 1 });
  t.same(stale, { ok: false, error: 'stale_sequence' });
  const unknown = await leader.submit({ ...request, client: 'c999999' });
  t.same(unknown, { ok: false, error: 'unknown_session' });
});

t.test('a stopped leader is replaced and a restarted member catches up from storage', async (t) => {
  const net = new LocalNetwork();
  const storages = new Map<NodeId, MemoryStorage>();
  const { nodes } = await startCluster(net, storages, 20);
  t.teardown(async () => {
    for (const n of nodes.values()) await n.stop();
  });
  const leader = await leaderOf(nodes);
  for (let i = 0; i < 50; i++) await leader.propose({ op: 'add', key: 'z', by: 1 });
  await leader.stop();
  nodes.delete(leader.id);
  const next = await leaderOf(nodes);
  t.not(next.id, leader.id);
  t.equal(await next.propose({ op: 'add', key: 'z', by: 1 }), 51, 'no acknowledged write was lost');
  const machine = new Counters();
  const revived = await RaftNode.start({
    id: leader.id,
    storage: storages.get(leader.id)!,
    transport: net.transport(leader.id),
    stateMachine: machine,
    bootstrap,
    tickMs: 10,
  });
  nodes.set(leader.id, revived);
  t.equal(await revived.read(() => machine.values.get('z')), 51, 'the restarted member caught up');
  t.ok(revived.status().snapshotIndex > 0, 'it restarted from a snapshot');
});

t.test('membership: add a voter through a learner, transfer leadership to it, remove an old one', async (t) => {
  const net = new LocalNetwork();
  const { nodes } = await startCluster(net, new Map());
  t.teardown(async () => {
    for (const n of nodes.values()) await n.stop();
  });
  const leader = await leaderOf(nodes);
  await leader.propose({ op: 'add', key: 'm', by: 1 });
  const machine = new Counters();
  const n4 = await RaftNode.start({
    id: 'n4',
    storage: new MemoryStorage(),
    transport: net.transport('n4'),
    stateMachine: machine,
    tickMs: 10,
    peers: bootstrap,
  });
  nodes.set('n4', n4);
  await leader.addVoter('n4', 'local:n4');
  t.ok(leader.status().config.voters.includes('n4'));
  t.ok(await leader.transferLeadership('n4'), 'leadership moved to the new member');
  const removed = ids.find((id) => id !== leader.id)!;
  await n4.removeMember(removed);
  t.notOk(n4.status().config.voters.includes(removed));
  t.equal(await n4.propose({ op: 'add', key: 'm', by: 1 }), 2);
});

t.test('admin calls on a follower are forwarded to the leader; a non-member cannot forward one', async (t) => {
  const net = new LocalNetwork();
  const { nodes } = await startCluster(net, new Map());
  t.teardown(async () => {
    for (const n of nodes.values()) await n.stop();
  });
  const leader = await leaderOf(nodes);
  const [follower, other] = [...nodes.values()].filter((n) => n !== leader);
  const seen: string[][] = [];
  const n4 = await RaftNode.start({
    id: 'n4',
    storage: new MemoryStorage(),
    transport: net.transport('n4'),
    stateMachine: new Counters(),
    tickMs: 10,
    peers: bootstrap,
  });
  nodes.set('n4', n4);
  const observed = await RaftNode.start({
    id: 'n5',
    storage: new MemoryStorage(),
    transport: net.transport('n5'),
    stateMachine: new Counters(),
    tickMs: 10,
    peers: bootstrap,
    observer: { membershipChanged: (c) => seen.push([...c.voters].sort()) },
  });
  nodes.set('n5', observed);
  await follower!.addVoter('n5', 'local:n5');
  t.ok(
    seen.some((v) => v.includes('n5')),
    `the observer of n5 saw itself become a voter (${JSON.stringify(seen)})`,
  );
  await follower!.addVoter('n4', 'local:n4');
  t.ok(follower!.status().config.voters.includes('n4'), 'addVoter on a follower: n4 is a voter');
  t.ok(leader.status().config.voters.includes('n4'), 'and the leader agrees');

  // A forged forward from outside the group is ignored, even one naming a real member as its target.
  net.deliver({
    type: 'admin',
    from: 'intruder',
    to: leader.id,
    term: 0,
    request: { op: 'change', change: { type: 'remove', node: other!.id } },
  });
  net.deliver({ type: 'admin', from: 'intruder', to: leader.id, term: 0, request: { op: 'transfer', to: other!.id } });
  await leader.propose({ op: 'add', key: 'x', by: 1 });
  await new Promise((r) => setTimeout(r, 300));
  t.ok(leader.status().config.voters.includes(other!.id), 'no member removed by a non-member');
  t.ok(leader.isLeader, 'no leadership moved by a non-member');

  t.ok(await follower!.transferLeadership(other!.id), 'transferLeadership on a follower moves leadership');
  t.equal(other!.leaderId, other!.id);
  await follower!.removeMember('n4');
  t.notOk(follower!.status().config.voters.includes('n4'), 'removeMember on a follower');
  t.notOk(other!.status().config.voters.includes('n4'), 'and the new leader agrees');
});

t.test('a command over maxCommandBytes is refused before it reaches the log', async (t) => {
  const net = new LocalNetwork();
  const machine = new Counters();
  const node = await RaftNode.start({
    id: 'solo',
    storage: new MemoryStorage(),
    transport: net.transport('solo'),
    stateMachine: machine,
    bootstrap: { solo: 'local:solo' },
    tickMs: 10,
    maxCommandBytes: 1024,
  });
  t.teardown(() => node.stop());
  await t.rejects(node.propose({ op: 'add', key: 'k'.repeat(4096), by: 1 }), { name: 'CommandTooLargeError' });
  t.equal(await node.propose({ op: 'add', key: 'small', by: 1 }), 1, 'normal commands still go through');
  t.equal(
    node.status().lastIndex,
    3,
    'only the leader no-op, the session registration and the small command are in the log',
  );
});

t.test('removing the current leader: it leads until the change commits, then a new leader takes over', async (t) => {
  const net = new LocalNetwork();
  const { nodes } = await startCluster(net, new Map());
  t.teardown(async () => {
    for (const n of nodes.values()) await n.stop();
  });
  const leader = await leaderOf(nodes);
  await leader.propose({ op: 'add', key: 'r', by: 1 });
  await leader.removeMember(leader.id);
  t.notOk(leader.status().config.voters.includes(leader.id), 'the removal committed');
  await leader.stop();
  nodes.delete(leader.id);
  const next = await leaderOf(nodes);
  t.equal(await next.propose({ op: 'add', key: 'r', by: 1 }), 2, 'the remaining members go on');
});

t.test(
  'a command that is not plain data is refused at propose, naming where, instead of arriving changed',
  async (t) => {
    const { plainDataProblem } = await import('../src/plain-data.js');
    t.equal(
      plainDataProblem({ a: [1, 'x', null, true, new Uint8Array(2), Buffer.from('b')], b: { c: undefined } }),
      null,
      'plain data passes',
    );
    t.match(plainDataProblem({ items: new Map([['k', 1]]) }), /command\.items is a Map/);
    t.match(plainDataProblem([1, new Set([2])]), /command\[1\] is a Set/);
    t.match(plainDataProblem({ when: new Date(0) }), /command\.when is a Date/);
    t.match(plainDataProblem({ n: 10n }), /command\.n is a bigint/);
    t.match(plainDataProblem({ f: new Float64Array(1) }), /Float64Array/);
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    t.match(plainDataProblem(cyclic), /nested over 512 levels/);

    const network = new LocalNetwork();
    const node = await RaftNode.start<unknown, unknown>({
      id: 'solo',
      bootstrap: { solo: 'solo' },
      tickMs: 10,
      stateMachine: { apply: (c: unknown) => c, snapshot: () => new Uint8Array(), restore: () => {} },
      storage: new MemoryStorage(),
      transport: network.transport('solo'),
    });
    t.teardown(() => node.stop());
    await t.rejects(node.propose({ tags: new Map([['a', 1]]) }), {
      name: 'TypeError',
      message: /command\.tags is a Map/,
    });
    t.same(
      await node.propose({ tags: { a: 1 } }),
      { tags: { a: 1 } },
      'the same as a plain object is accepted, and the member goes on',
    );
  },
);
