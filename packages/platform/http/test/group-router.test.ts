/**
 * GroupRouter and a member that does not know a group yet: a member that has just restarted answers 404
 * group_not_found until its meta group has applied the group's creation, so a router whose catalogue names the
 * group asks another member, and answers 404 only when every member it asked says so. Real HTTP servers on
 * loopback stand in for two members. And GroupClient, the typed client of a command route, over the same router.
 */
import t, { type Test } from 'tap';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { GroupClient, GroupRouter, ServiceError } from '../src/index.js';

interface FakeMember {
  url: string;
  hits: number;
  server: Server;
}

/** A member whose catalogue names group g.1 on members a and b; `knows` says whether it answers about g.1 itself. */
async function member(
  id: string,
  knows: () => boolean,
  hosts: () => Array<{ id: string; http: string }>,
): Promise<FakeMember> {
  const m: FakeMember = { url: '', hits: 0, server: createServer() };
  m.server.on('request', (req, res) => {
    const reply = (status: number, body: unknown): void => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    if (req.url === '/v1/cluster/catalog')
      return reply(200, { groups: [{ name: 'g.1', members: ['a', 'b'], data: {} }] });
    if (req.url === '/v1/cluster/hosts') return reply(200, { hosts: hosts() });
    m.hits++;
    if (req.url?.startsWith('/v1/groups/g.1/') === true && knows()) return reply(200, { from: id });
    return reply(404, {
      error: { code: 'group_not_found', message: 'no group (yet: the meta group may still be applying it)' },
    });
  });
  await new Promise<void>((resolve) => m.server.listen(0, '127.0.0.1', resolve));
  m.url = `http://127.0.0.1:${(m.server.address() as AddressInfo).port}`;
  return m;
}

/** A router over the two members, closed with them when the test ends. */
function routerOver(t: Test, a: FakeMember, b: FakeMember): GroupRouter {
  const router = new GroupRouter({ endpoints: [a.url, b.url], token: 't', timeoutMs: 5_000 });
  t.teardown(async () => {
    await router.close();
    a.server.close();
    b.server.close();
  });
  return router;
}

t.test('a group the catalogue names: a member behind on the meta group is passed over', async (t) => {
  let bKnows = true;
  const hosts = (): Array<{ id: string; http: string }> => [
    { id: 'a', http: a.url },
    { id: 'b', http: b.url },
  ];
  const a = await member('a', () => false, hosts);
  const b = await member('b', () => bKnows, hosts);
  const router = routerOver(t, a, b);
  t.same(
    (await router.groups()).map((g) => g.name),
    ['g.1'],
    'the catalogue names g.1',
  );
  for (let i = 0; i < 4; i++)
    t.same(
      await router.call('g.1', 'GET', '/v1/groups/g.1/x'),
      { from: 'b' },
      `call ${i + 1} answered by the member that knows it`,
    );
  t.ok(a.hits >= 1, `the member behind was asked too (${a.hits} times) and passed over`);

  // When every member says so, the 404 stands, at once rather than after the timeout.
  bKnows = false;
  const started = Date.now();
  const error = await router.call('g.1', 'GET', '/v1/groups/g.1/x').then(
    () => null,
    (e: unknown) => e,
  );
  t.ok(
    error instanceof ServiceError && error.status === 404 && error.code === 'group_not_found',
    'every member said not found: 404',
  );
  t.ok(Date.now() - started < 2_000, `answered in ${Date.now() - started} ms, not at the 5 s timeout`);
});

t.test('a group the catalogue does not name: the first 404 stands', async (t) => {
  const hosts = (): Array<{ id: string; http: string }> => [];
  const a = await member('a', () => false, hosts);
  const b = await member('b', () => false, hosts);
  const router = routerOver(t, a, b);
  const answer = await router.request('g.9', 'GET', '/v1/groups/g.9/x');
  t.equal(answer.status, 404);
  t.equal(a.hits + b.hits, 1, 'one member asked');
});

t.test(
  "GroupClient: a command posted to the group's command route, its result typed, a refusal a ServiceError",
  async (t) => {
    const server = createServer((req, res) => {
      const reply = (status: number, body: unknown): void => {
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(body));
      };
      if (req.url === '/v1/cluster/catalog') return reply(200, { groups: [{ name: 'g.1', members: ['a'], data: {} }] });
      if (req.url === '/v1/cluster/hosts') return reply(200, { hosts: [{ id: 'a', http: url }] });
      let text = '';
      req.on('data', (d: Buffer) => (text += d.toString()));
      req.on('end', () => {
        const command = JSON.parse(text) as { n: number };
        if (command.n < 0) return reply(400, { error: { code: 'invalid_command', message: 'n must be >= 0' } });
        reply(200, { method: req.method, path: req.url, type: req.headers['content-type'], doubled: command.n * 2 });
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const router = new GroupRouter({ endpoints: [url], token: 't', timeoutMs: 5_000 });
    t.teardown(async () => {
      await router.close();
      server.close();
    });
    t.throws(() => new GroupClient(router, '/v1/x/commands'), TypeError, 'a route without :group is refused');
    const client = new GroupClient<{ n: number }, { method: string; path: string; type: string; doubled: number }>(
      router,
      '/v1/x/groups/:group/commands',
    );
    t.equal(client.path('g 1'), '/v1/x/groups/g%201/commands', 'the group name is encoded into the path');
    t.same(
      await client.command('g.1', { n: 21 }),
      { method: 'POST', path: '/v1/x/groups/g.1/commands', type: 'application/json', doubled: 42 },
      "POSTed as JSON to the group's route; the member's result comes back",
    );
    const refused = await client.command('g.1', { n: -1 }).then(
      () => null,
      (e: unknown) => e,
    );
    t.ok(refused instanceof ServiceError, 'a refused command is a ServiceError');
    t.match(refused, { status: 400, code: 'invalid_command' });
    t.match(await client.request('g.1', { n: -1 }), { status: 400 }, 'request answers whatever the status');
  },
);
