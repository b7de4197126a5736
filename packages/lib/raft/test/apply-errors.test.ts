/**
 * A state machine that throws, and entries that are not requests at all, never halt a group: the proposer gets an
 * ApplyError, every member records the same failure for that entry, later proposals apply, a retry of the failed
 * request gets the same failure (never a second application), and members restarted from the same storage replay
 * the entry the same way and elect a leader. A member whose storage fails stops taking part and says why.
 */
import t from 'tap';
import { ApplyError, RaftNode } from '../src/node.js';
import { SessionStateMachine, type SessionRequest } from '../src/sessions.js';
import { MemoryStorage } from '../src/storage/memory.js';
import { LocalNetwork } from '../src/transport/local.js';
import type { Entry, HardState, NodeId, StateMachine } from '../src/types.js';
import { leaderOf } from './helpers/leader.js';

type Cmd = { op: 'add'; by: number } | { op: 'boom' };

/** A sum that throws on `boom`, as a user's machine with a bug would. */
class Summer implements StateMachine<Cmd, number> {
  sum = 0;
  apply(cmd: Cmd): number {
    if (cmd.op === 'boom') throw new RangeError('boom is not a number');
    this.sum += cmd.by;
    return this.sum;
  }
  snapshot(): Uint8Array {
    return new TextEncoder().encode(String(this.sum));
  }
  restore(data: Uint8Array): void {
    this.sum = Number(new TextDecoder().decode(data));
  }
}

const ids = ['n1', 'n2', 'n3'];
const bootstrap = Object.fromEntries(ids.map((id) => [id, `local:${id}`]));

async function start(net: LocalNetwork, storages: Map<NodeId, MemoryStorage>, failures: string[] = []) {
  const nodes = new Map<NodeId, RaftNode<Cmd, number>>();
  const machines = new Map<NodeId, Summer>();
  for (const id of ids) {
    const machine = new Summer();
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
        requestTimeoutMs: 5_000,
        observer: { failed: (e) => failures.push(`${id}: ${e.message}`) },
      }),
    );
  }
  return { nodes, machines };
}

async function until(what: string, check: () => boolean): Promise<void> {
  const deadline = Date.now() + 5_000;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

t.test(
  'a throwing apply is an ApplyError for its proposer; the group goes on, the same on every member, after restarts too',
  async (t) => {
    const net = new LocalNetwork();
    const storages = new Map<NodeId, MemoryStorage>();
    let { nodes, machines } = await start(net, storages);
    t.teardown(async () => {
      for (const n of nodes.values()) await n.stop();
    });
    const leader = await leaderOf(nodes);
    t.equal(await leader.propose({ op: 'add', by: 2 }), 2);

    const error = await leader.propose({ op: 'boom' }).catch((e: unknown) => e);
    t.ok(error instanceof ApplyError, 'the proposer gets an ApplyError');
    t.equal((error as ApplyError).code, 'apply_failed');
    t.match((error as ApplyError).message, /RangeError: boom is not a number/, 'naming what the machine threw');

    const follower = [...nodes.values()].find((n) => n !== leader)!;
    t.equal(await follower.propose({ op: 'add', by: 3 }), 5, 'later proposals apply, also through a follower');

    // A client retrying the failed request (same client and seq) gets the failure again; nothing applies twice.
    const registered = await leader.submit({ t: 'register', nonce: 'retry-test' });
    const client = (registered as { client: string }).client;
    const first = await leader.submit({ t: 'command', client, seq: 1, ack: 0, command: { op: 'boom' } });
    const retry = await follower.submit({ t: 'command', client, seq: 1, ack: 0, command: { op: 'boom' } });
    t.same(first, { ok: false, error: 'apply_failed', message: 'RangeError: boom is not a number' });
    t.same(retry, first, 'the retry gets the recorded failure');

    // The attack that stopped every kv member for good: a null command (the machine reads null.op).
    const poisoned = await leader.propose(null as unknown as Cmd).catch((e: unknown) => e);
    t.ok(poisoned instanceof ApplyError, 'a null command is an ApplyError');
    t.match((poisoned as ApplyError).detail, /^TypeError/, 'naming the TypeError');
    t.equal(await leader.propose({ op: 'add', by: 1 }), 6);
    await until('every member applied everything', () =>
      [...nodes.values()].every((n) => n.status().applied === leader.status().applied),
    );
    t.same(
      [...machines.values()].map((m) => m.sum),
      [6, 6, 6],
      'every member holds the same state',
    );
    for (const n of nodes.values())
      t.ok(n.status().applyErrors >= 2, `${n.id} counted the failed entries (${n.status().applyErrors})`);

    // Every member stops and starts again from the same storage: the failed entries replay as failures.
    for (const n of nodes.values()) await n.stop();
    ({ nodes, machines } = await start(new LocalNetwork(), storages));
    const again = await leaderOf(nodes);
    t.ok(again.isLeader, 'a leader is elected after a restart of every member');
    t.equal(await again.propose({ op: 'add', by: 10 }), 16, 'and writes proceed');
  },
);

/** Memory storage whose appends fail once `broken` is set, as a disk that is full or gone. */
class BreakableStorage extends MemoryStorage {
  broken = false;
  override async append(entries: Entry[], hardState: HardState | null): Promise<void> {
    if (this.broken) throw new Error('EMFILE: too many open files');
    return super.append(entries, hardState);
  }
}

t.test('a member whose storage fails stops taking part, says why, and the others go on', async (t) => {
  const net = new LocalNetwork();
  const storages = new Map<NodeId, MemoryStorage>(ids.map((id) => [id, new BreakableStorage()]));
  const failures: string[] = [];
  const { nodes } = await start(net, storages, failures);
  t.teardown(async () => {
    for (const n of nodes.values()) await n.stop();
  });
  const leader = await leaderOf(nodes);
  await leader.propose({ op: 'add', by: 1 });
  // Break the leader's disk: the worst case, a leader that could otherwise keep heartbeating.
  (storages.get(leader.id) as BreakableStorage).broken = true;
  const lost = await leader.propose({ op: 'add', by: 1 }).catch((e: unknown) => e);
  t.ok(lost instanceof Error, 'the write in flight fails');
  await until('the member reports its failure', () => leader.status().failed !== null);
  t.match(leader.status().failed, /EMFILE/, 'status says why');
  t.notOk(leader.isLeader, 'a failed member never claims to lead');
  t.same(failures, [`${leader.id}: ${leader.status().failed}`], 'the observer was told once');
  const others = new Map([...nodes].filter(([id]) => id !== leader.id));
  const next = await leaderOf(others);
  t.not(next.id, leader.id, 'the others elect a leader among themselves');
  const sum = await next.propose({ op: 'add', by: 5 });
  t.ok(sum === 6 || sum === 7, `and take writes (${sum}: the write in flight may or may not have committed)`);
  await t.rejects(leader.propose({ op: 'add', by: 1 }), 'the failed member refuses new work');
});

t.test('entries that are no session request at all are refused the same way by every member', async (t) => {
  const machine = new SessionStateMachine<Cmd, number>(new Summer());
  const ctx = { index: 1, term: 1, time: 1_000 };
  for (const junk of [
    null,
    42,
    'text',
    [1, 2],
    { t: 'command', client: 5, seq: 1, ack: 0 },
    { t: 'command', client: 'c1', seq: 'x', ack: 0 },
    { t: 'nope' },
    { t: 123n },
  ]) {
    const result = machine.applyRequest(junk as unknown as SessionRequest<Cmd>, ctx);
    t.equal((result as { error?: string }).error, 'malformed_request', `${String(junk)} is a malformed request`);
  }
  t.equal((machine.inner as Summer).sum, 0, 'nothing reached the machine');
});
