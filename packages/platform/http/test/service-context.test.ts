/**
 * ServiceContext over a one-group kind: a real one-member RaftNode (memory storage, local transport) behind a real
 * router on loopback. The one group is a ServiceGroup whose writes take the request's client-session headers
 * (a retried Client-Seq applies once), whose reads check the consistency asked for, and whose command route is
 * the one `commandRoute`.
 */
import { createServer } from 'node:http';
import t from 'tap';
import { LocalNetwork, type ManagedHost, MemoryStorage, RaftNode, type StateMachine } from '@raftkit/raft';
import { MetricsRegistry } from '../src/metrics.js';
import { Router } from '../src/router.js';
import { ServiceContext } from '../src/service.js';

const TOKEN = 'cluster-secret';

/** Adds the command to a running total and answers the total. */
class Sum implements StateMachine<number, number> {
  total = 0;
  apply(command: number): number {
    this.total += command;
    return this.total;
  }
  snapshot(): Uint8Array {
    return new TextEncoder().encode(String(this.total));
  }
  restore(data: Uint8Array): void {
    this.total = Number(new TextDecoder().decode(data));
  }
}

const net = new LocalNetwork();
const node = await RaftNode.start<number, number>({
  id: 'a',
  bootstrap: { a: 'local:a' },
  storage: new MemoryStorage(),
  transport: net.transport('a'),
  stateMachine: new Sum(),
  tickMs: 10,
});
t.teardown(() => node.stop());
const deadline = Date.now() + 10_000;
while (!node.isLeader && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));

const kind = {
  name: 'sum',
  provisioning: 'one group',
  createMachine: () => new Sum(),
  replicas: 'every member',
} as const;
const router = new Router({ tokens: [TOKEN] });
const service = new ServiceContext<number, number>(
  { one: node, kind },
  router,
  new MetricsRegistry(),
  { log: () => {} },
  'sum',
);
const group = service.group<number, number, Sum>();
service.commandRoute('/commands', { admits: 'cluster', check: (body) => Number(body) });
router.get('/total', { admits: 'cluster' }, async (ctx) => {
  await group.readBarrier(ctx);
  return { total: group.machine.total };
});
const server = createServer(router.listener);
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
const url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;

async function call(
  path: string,
  init: { body?: string; headers?: Record<string, string> } = {},
): Promise<{ status: number; body: unknown }> {
  const res = await fetch(url + path, {
    method: init.body === undefined ? 'GET' : 'POST',
    headers: { authorization: `Bearer ${TOKEN}`, ...(init.headers ?? {}) },
    ...(init.body !== undefined ? { body: init.body } : {}),
  });
  return { status: res.status, body: await res.json() };
}

t.test('the one group: one handle, found by its kind name, no other group and no meta group', async (t) => {
  t.equal(service.group(), group, 'group() is the same handle each time');
  t.equal(service.group('sum'), group, "the kind's name names it");
  t.equal(service.group(node), group, 'so does its node');
  t.throws(() => service.group('other'), { status: 404, code: 'group_not_found' });
  t.throws(() => service.managed, TypeError);
  t.equal(await group.write(2), 2, 'a write without a request is proposed as it is');
});

t.test('the command route writes once per client sequence, and reads see it', async (t) => {
  const registered = await node.submit({ t: 'register', nonce: 'test' });
  if (!registered.ok || !('client' in registered)) throw new Error('registration failed');
  const session = registered.client;
  const headers = { 'client-id': session, 'client-seq': '1' };
  t.same(await call('/commands', { body: '5', headers }), { status: 200, body: 7 });
  t.same(
    await call('/commands', { body: '5', headers }),
    { status: 200, body: 7 },
    'the retry is answered, not applied',
  );
  t.same(await call('/total'), { status: 200, body: { total: 7 } });
  t.same(await call('/total?consistency=serializable'), { status: 200, body: { total: 7 } });
  const bad = await call('/total?consistency=eventual');
  t.equal(bad.status, 400);
  const badSeq = await call('/commands', { body: '1', headers: { 'client-id': session, 'client-seq': 'x' } });
  t.equal(badSeq.status, 400, 'a malformed Client-Seq is refused before anything is proposed');
  t.same(await call('/total'), { status: 200, body: { total: 7 } });
});

t.test(
  'a group placed on this member whose copy is still starting is a 503 to retry, not a 421 pointing back here',
  async (t) => {
    // The placement view the member process reads (ManagedHost's id, running groups and catalogue), as the meta
    // group would have it a moment after creating `fresh` on m1 and m2 and `elsewhere` on m2 and m3.
    const records: Record<string, { members: string[] }> = {
      fresh: { members: ['m1', 'm2'] },
      elsewhere: { members: ['m2', 'm3'] },
    };
    const placement = {
      id: 'm1',
      group: () => undefined,
      catalog: () => ({
        group: (name: string) => records[name],
        host: (id: string) => ({ http: `http://${id}` }),
      }),
    };
    const grouped = new ServiceContext(
      { managed: placement as unknown as ManagedHost },
      new Router({ tokens: [TOKEN] }),
      new MetricsRegistry(),
      { log: () => {} },
      'grouped',
    );
    const ctx = { res: { writeHead: () => {} } } as unknown as Parameters<typeof grouped.requireGroup>[0];
    t.throws(() => grouped.requireGroup(ctx, 'fresh'), { status: 503, code: 'unavailable' }, 'placed here: retry');
    t.throws(
      () => grouped.requireGroup(ctx, 'elsewhere'),
      { status: 421, code: 'misdirected' },
      'placed elsewhere: the members that hold it',
    );
    t.throws(() => grouped.requireGroup(ctx, 'unknown'), { status: 404, code: 'group_not_found' });
  },
);
