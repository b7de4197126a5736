/**
 * The one cluster client against real HTTP servers on loopback: failover past a member that answers 503 and a
 * member that is down, writes to the leader that GET /v1/cluster/status names, reads sticking to a member that
 * answers, other answers passed through, and a 503 ServiceError once the deadline passes.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import t from 'tap';
import { ClusterClient, ServiceError } from '../src/index.js';

interface FakeMember {
  url: string;
  hits: string[];
  server: Server;
}

/** A member that answers `status` with a JSON body naming itself, and says who leads. */
async function member(id: string, answer: () => number, leader: () => string | null): Promise<FakeMember> {
  const hits: string[] = [];
  const server = createServer((req, res) => {
    if (req.url === '/v1/cluster/status') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ id, leader_id: leader() }));
      return;
    }
    hits.push(`${req.method} ${req.url} ${req.headers.authorization ?? ''}`);
    const status = answer();
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify(
        status < 400
          ? { served_by: id }
          : { error: { code: status === 503 ? 'unavailable' : 'not_found', message: `from ${id}` } },
      ),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, hits, server };
}

const closeAll = (servers: FakeMember[]): Promise<void[]> =>
  Promise.all(servers.map((m) => new Promise<void>((r) => m.server.close(() => r()))));

t.test('reads fail over past a 503 and a dead member, then stick to the member that answered', async (t) => {
  const busy = await member(
    'a',
    () => 503,
    () => null,
  );
  const ok = await member(
    'c',
    () => 200,
    () => null,
  );
  const dead = 'http://127.0.0.1:1';
  const client = new ClusterClient({ endpoints: [busy.url, dead, ok.url], token: 'tok', timeoutMs: 5_000 });
  t.teardown(async () => {
    await client.close();
    await closeAll([busy, ok]);
  });
  t.same(await client.call('GET', '/x'), { served_by: 'c' }, 'answered by the healthy member');
  t.same(busy.hits, ['GET /x Bearer tok'], 'the 503 member was tried first, with the token');
  t.same(await client.call('GET', '/y'), { served_by: 'c' });
  t.equal(busy.hits.length, 1, 'the next read went straight to the member that answered');
});

t.test('non-503 errors are not failed over; call() throws them, request() returns them', async (t) => {
  const missing = await member(
    'a',
    () => 404,
    () => null,
  );
  const other = await member(
    'b',
    () => 200,
    () => null,
  );
  const client = new ClusterClient({ endpoints: [missing.url, other.url], token: 'tok' });
  t.teardown(async () => {
    await client.close();
    await closeAll([missing, other]);
  });
  const error = await client.call('GET', '/k').catch((e: unknown) => e);
  t.ok(error instanceof ServiceError, 'a ServiceError');
  t.equal((error as ServiceError).status, 404);
  t.equal((error as ServiceError).code, 'not_found');
  t.equal(other.hits.length, 0, 'a 404 is an answer, not a reason to ask another member');
  const answer = await client.request('GET', '/k');
  t.equal(answer.status, 404);
});

t.test('writes go to the leader named by the status endpoint', async (t) => {
  let leader = 'b';
  const members = await Promise.all(
    ['a', 'b', 'c'].map((id) =>
      member(
        id,
        () => 200,
        () => leader,
      ),
    ),
  );
  const client = new ClusterClient({
    endpoints: members.map((m) => m.url),
    ids: ['a', 'b', 'c'],
    token: 'tok',
    leaderRefreshMs: 50,
  });
  t.teardown(async () => {
    await client.close();
    await closeAll(members);
  });
  await new Promise((r) => setTimeout(r, 200));
  t.same(await client.call('POST', '/w', { v: 1 }), { served_by: 'b' }, 'the first write reached the leader b');
  leader = 'c';
  await new Promise((r) => setTimeout(r, 200));
  t.same(await client.call('PUT', '/w', { v: 2 }), { served_by: 'c' }, 'after a leader change, writes follow it');
  t.same(await client.call('GET', '/r'), { served_by: 'a' }, 'reads stay on the preferred member');
});

t.test('when every member answers 503 the call ends at its deadline with a 503 ServiceError', async (t) => {
  const members = await Promise.all(
    ['a', 'b'].map((id) =>
      member(
        id,
        () => 503,
        () => null,
      ),
    ),
  );
  const client = new ClusterClient({ endpoints: members.map((m) => m.url), token: 'tok', timeoutMs: 400 });
  t.teardown(async () => {
    await client.close();
    await closeAll(members);
  });
  const error = await client.call('POST', '/w', {}).catch((e: unknown) => e);
  t.ok(error instanceof ServiceError);
  t.equal((error as ServiceError).status, 503);
  t.match((error as ServiceError).message, /503/, 'names the last failure');
  t.ok(members[0]!.hits.length >= 2 && members[1]!.hits.length >= 1, 'both members were tried, more than once');
});

t.test('ask() asks one given member once and returns its answer, 503 included; a dead member throws', async (t) => {
  const busy = await member(
    'a',
    () => 503,
    () => null,
  );
  const ok = await member(
    'b',
    () => 200,
    () => null,
  );
  const client = new ClusterClient({
    endpoints: [busy.url, ok.url, 'http://127.0.0.1:1'],
    token: 'tok',
    timeoutMs: 2_000,
  });
  t.teardown(async () => {
    await client.close();
    await closeAll([busy, ok]);
  });
  const answer = await client.ask(0, 'PUT', '/v1/cluster/partition', { blocked: ['n2'] });
  t.equal(answer.status, 503, 'the 503 is returned, not failed over');
  t.equal(ok.hits.length, 0, 'no other member was asked');
  t.same(busy.hits, ['PUT /v1/cluster/partition Bearer tok']);
  t.same((await client.ask(1, 'GET', '/z')).body, { served_by: 'b' });
  await t.rejects(client.ask(2, 'GET', '/z'), 'a member that is down is an error, not a failover');
  await t.rejects(client.ask(3, 'GET', '/z'), RangeError, 'no such member');
});
