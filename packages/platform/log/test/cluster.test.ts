/**
 * The event log on real processes: 5 members (`cluster up --service log`), one cluster shared by every case, real
 * sockets and LevelDB. Faults come from the cluster CLI: kill -9, restart, partition (inside the transports),
 * pause (SIGSTOP). Waits are generous and nothing asserts speed: the machine is shared and slow.
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { Readable } from 'node:stream';
import { request } from 'undici';
import { deriveServiceToken } from '@raftkit/http';
import { RpcConnection, RpcError } from '@raftkit/rpc';
import { agent, call, startCluster, topicAccess, until } from '@raftkit/testkit';
import {
  CheckedConsumer,
  DeadLetterQueue,
  GroupConsumer,
  LogClient,
  type ConsumedRecord,
  type DeadLetter,
  type TopicDescription,
} from '../src/index.js';

const cluster = await startCluster('log');
// LOG_TEST_KEEP=1 leaves the cluster up for a look at its logs (`cluster logs n1 --data <dir>`, then `down --wipe`).
t.teardown(() => (process.env.LOG_TEST_KEEP === '1' ? undefined : cluster.down()));
const token = cluster.token;
const ids = cluster.members.map((_, i) => `n${i + 1}`);
const urlOf = (id: string): string => cluster.members[Number(id.slice(1)) - 1]!;
const clients: LogClient[] = [];
const newClient = (): LogClient => {
  const c = new LogClient({ endpoints: cluster.members, token, timeoutMs: 60_000 });
  clients.push(c);
  return c;
};
t.teardown(async () => {
  await Promise.all(clients.map((c) => c.close()));
});
const log = newClient();
// `cluster up` returns once the meta group has a leader; each process then registers itself as a host. Topics are
// placed on the hosts registered when they are created, so wait for all five (else a late one holds nothing).
await until(
  'all five processes registered as hosts',
  async () => {
    const answer = await call(cluster.members[0]!, 'GET', '/v1/cluster/hosts', { token });
    return ((answer.body.hosts as unknown[] | undefined) ?? []).length === ids.length;
  },
  60_000,
);

/** The member leading a partition, as the members holding it say (skipping `not`, e.g. a killed one). */
async function leaderOf(topic: string, partition: number, not: string[] = []): Promise<string> {
  const description = await log.topic(topic);
  const members = description.partition_groups[partition]!.members.map((m) => m.id).filter((id) => !not.includes(id));
  return until(
    `a leader of ${topic}/${partition} among ${members.join(',')}`,
    async () => {
      for (const id of members) {
        const answer = await call(urlOf(id), 'GET', `/v1/topics/${topic}/partitions/${partition}`, {
          token,
          timeoutMs: 3_000,
        }).catch(() => null);
        if (answer?.status === 200 && answer.body.role === 'leader') return id;
      }
      return null;
    },
    60_000,
    200,
  );
}

async function cli(...args: string[]): Promise<void> {
  const result = await cluster.run(...args);
  if (result.code !== 0) throw new Error(`cluster ${args.join(' ')}: ${result.stderr}${result.stdout}`);
}

/**
 * Restarts a killed member and checks that it comes back and stays up (a restart once crashed at start: the meta
 * group's replay started a stored group a second time).
 */
async function restart(id: string): Promise<void> {
  await cli('restart', id);
  await until(
    `${id} answering again`,
    async () => (await call(urlOf(id), 'GET', '/healthz').catch(() => null))?.status === 200,
    60_000,
  );
  await new Promise((r) => setTimeout(r, 500));
  const health = await call(urlOf(id), 'GET', '/healthz').catch((e: unknown) => ({ status: String(e) }));
  if (health.status !== 200) throw new Error(`${id} died after its restart: ${health.status}`);
}

/** Every partition group of a topic has a leader (so later calls do not wait for elections). */
async function settled(topic: string, partitions: number): Promise<void> {
  for (let p = 0; p < partitions; p++) await leaderOf(topic, p);
}

async function fetchAll(
  client: LogClient,
  topic: string,
  partition: number,
): Promise<Array<{ offset: number; value: string }>> {
  const out: Array<{ offset: number; value: string }> = [];
  let offset = 0;
  for (;;) {
    const answer = await client.fetch(topic, partition, offset, { maxRecords: 1_000 });
    for (const r of answer.records) out.push({ offset: r.offset, value: r.value });
    if (answer.next_offset >= answer.end_offset) return out;
    offset = answer.next_offset;
  }
}

t.test("a topic's partitions and their leaders are spread over the processes", async (t) => {
  const topic = await log.createTopic('spread', { partitions: 10 });
  t.equal(topic.created, true);
  t.equal(topic.replicas, 3, 'three replicas by default on five processes');
  const held = new Map(ids.map((id) => [id, 0]));
  for (const g of topic.partition_groups) {
    t.equal(new Set(g.members.map((m) => m.id)).size, 3, `${g.group} on three distinct processes`);
    for (const m of g.members) held.set(m.id, held.get(m.id)! + 1);
  }
  const counts = [...held.values()];
  t.ok(
    Math.max(...counts) - Math.min(...counts) <= 1,
    `replicas per process ${JSON.stringify(Object.fromEntries(held))}`,
  );
  const leaders = new Set<string>();
  for (let p = 0; p < 10; p++) leaders.add(await leaderOf('spread', p));
  t.ok(leaders.size >= 2, `leaders on ${[...leaders].join(',')}`);
  // Creating it again with the same settings answers the same topic; other settings are a conflict.
  t.match(await log.createTopic('spread', { partitions: 10 }), { created: false, partitions: 10 });
  const other = await call(cluster.members[0]!, 'POST', '/v1/topics', {
    token,
    body: { name: 'spread', partitions: 3 },
  });
  t.match(other, { status: 409, body: { error: { code: 'topic_exists' } } });
});

t.test(
  'appends and fetches over the binary route: dense offsets beside HTTP, the same pages, the access rule, a follower sends appends to HTTP',
  async (t) => {
    await log.createTopic('binary', { partitions: 1 });
    const leader = await leaderOf('binary', 0);
    const rpcCalls = async (): Promise<number> => {
      const text = String((await call(urlOf(leader), 'GET', '/metrics', { token })).body.text ?? '');
      return Number(/^rpc_calls_total\{[^}]*outcome="ok"[^}]*\} (\d+)/m.exec(text)?.[1] ?? 0);
    };
    // The first appends go over HTTP (they teach the client the leader); the binary route opens meanwhile.
    const offsets: number[] = [];
    await until(
      'appends over the binary route',
      async () => {
        const answers = await Promise.all(
          Array.from({ length: 20 }, (_, i) => log.append('binary', 0, [{ value: `r${i}` }])),
        );
        offsets.push(...answers.map((a) => a.base_offset));
        return (await rpcCalls()) > 0;
      },
      30_000,
      100,
    );
    offsets.sort((a, b) => a - b);
    t.same(
      offsets,
      Array.from({ length: offsets.length }, (_, i) => i),
      'offsets 0.. dense across both routes',
    );
    const fetched = await log.fetch('binary', 0, 0, { maxRecords: 10_000 });
    t.equal(fetched.records.length, offsets.length, 'every acknowledged append is stored once');

    const info = async (url: string, as: string) => (await call(url, 'GET', '/v1/rpc', { token: as })).body;
    const open = async (url: string, as: string): Promise<RpcConnection> => {
      const { address } = (await info(url, as)) as { address: string };
      const connection = new RpcConnection({ address, token: as, timeoutMs: 10_000 });
      t.teardown(() => connection.close());
      await connection.welcomed;
      return connection;
    };
    const refusal = (p: Promise<unknown>): Promise<{ code: string; status: number } | string> =>
      p.then(
        (v) => `answered ${JSON.stringify(v)}`,
        (e: unknown) => (e instanceof RpcError ? { code: e.code, status: e.status } : String(e)),
      );
    // A follower holds the partition but does not lead it: 421, and LogClient sends such a call over HTTP.
    const follower = (await log.topic('binary')).partition_groups[0]!.members.find((m) => m.id !== leader)!.id;
    const onFollower = await open(urlOf(follower), token);
    t.match(await refusal(onFollower.call({ topic: 'binary', partition: 0, records: [{ value: 'x' }] })), {
      code: 'misdirected',
      status: 421,
    });
    // The binary route checks what the HTTP route checks: bad input, and the topic's access rule for client tokens.
    const onLeader = await open(urlOf(leader), token);
    t.match(await refusal(onLeader.call({ topic: 'binary', partition: 0, records: [] })), { status: 400 });
    t.match(await refusal(onLeader.call({ topic: 'binary', partition: 0, records: [{ value: 'x' }], seq: 1 })), {
      status: 400,
    });
    t.match(await onLeader.call({ topic: 'binary', partition: 0, records: [{ value: 'y' }] }), { count: 1 });
    // A fetch over the binary route answers the HTTP route's page, on the leader and on a follower holding it.
    const page = (await call(urlOf(leader), 'GET', '/v1/topics/binary/partitions/0/records?offset=3&max_records=5', {
      token,
    })) as { status: number; body: Record<string, unknown> };
    t.equal(page.status, 200);
    const fetchCall = { op: 'fetch', topic: 'binary', partition: 0, offset: 3, max_records: 5 };
    t.same(await onLeader.call(fetchCall), page.body, 'the same page as over HTTP');
    await until(
      'the follower applied the page',
      async () => ((await onFollower.call(fetchCall)) as { records: unknown[] }).records.length === 5,
      10_000,
      50,
    );
    t.same(await onFollower.call(fetchCall), page.body, 'a follower answers what it holds');
    const past = { op: 'fetch', topic: 'binary', partition: 0, offset: 1_000_000 };
    t.match(await refusal(onFollower.call(past)), { code: 'misdirected', status: 421 });
    t.match(await onLeader.call({ ...past, wait_ms: 50 }), { records: [] });
    t.match(await refusal(onLeader.call({ ...fetchCall, max_records: 0 })), { status: 400 });
    t.match(await refusal(onLeader.call({ ...fetchCall, op: 'scan' })), { status: 400 });
    t.match(await refusal(onLeader.call({ ...fetchCall, consistency: 'stale' })), { status: 400 });
    const before = await rpcCalls();
    t.equal((await log.fetch('binary', 0, 0, { maxRecords: 10_000 })).records.length, offsets.length + 1);
    t.ok((await rpcCalls()) > before, "LogClient's fetch went over the binary route");
    await log.createTopic('binary-int', { partitions: 1, access: 'internal' });
    const intLeader = await leaderOf('binary-int', 0);
    const issued = await call(cluster.members[0]!, 'POST', '/v1/tokens', { token, body: { client: 'bin-app' } });
    const asClient = await open(urlOf(intLeader), issued.body.token as string);
    t.match(await refusal(asClient.call({ topic: 'binary-int', partition: 0, records: [{ value: 'z' }] })), {
      code: 'forbidden',
      status: 403,
    });
    t.match(await refusal(asClient.call({ op: 'fetch', topic: 'binary-int', partition: 0, offset: 0 })), {
      code: 'forbidden',
      status: 403,
    });
    t.equal((await log.fetch('binary-int', 0, 0)).records.length, 0, 'nothing stored by the refused call');
  },
);

t.test('bad input of every endpoint gets a 4xx JSON error naming the field', async (t) => {
  await log.createTopic('bad', { partitions: 1 });
  await settled('bad', 1);
  const holder = (await log.topic('bad')).partition_groups[0]!.members[0]!.url!;
  const records = '/v1/topics/bad/partitions/0/records';
  const offsets = '/v1/topics/bad/partitions/0/offsets/g';
  type Case = [method: string, path: string, body: unknown, status: number, code: string, field: string | null];
  const cases: Case[] = [
    ['POST', '/v1/topics', 'nope', 400, 'invalid_json', null],
    ['POST', '/v1/topics', [1], 400, 'invalid_body', 'body'],
    ['POST', '/v1/topics', {}, 400, 'invalid_field', 'name'],
    ['POST', '/v1/topics', { name: 'a.b' }, 400, 'invalid_field', 'name'],
    ['POST', '/v1/topics', { name: 'x'.repeat(101) }, 400, 'invalid_field', 'name'],
    ['POST', '/v1/topics', { name: 'n', partitions: 0 }, 400, 'invalid_field', 'partitions'],
    ['POST', '/v1/topics', { name: 'n', partitions: 1025 }, 400, 'invalid_field', 'partitions'],
    ['POST', '/v1/topics', { name: 'n', partitions: '2' }, 400, 'invalid_field', 'partitions'],
    ['POST', '/v1/topics', { name: 'n', replicas: 0 }, 400, 'invalid_field', 'replicas'],
    ['POST', '/v1/topics', { name: 'n', replicas: 9 }, 400, 'invalid_field', 'replicas'],
    ['POST', '/v1/topics', { name: 'n', retention: 5 }, 400, 'invalid_body', 'retention'],
    ['POST', '/v1/topics', { name: 'n', retention: { max_age_ms: 5 } }, 400, 'invalid_field', 'retention.max_age_ms'],
    ['POST', '/v1/topics', { name: 'n', retention: { max_bytes: 1e12 } }, 400, 'invalid_field', 'retention.max_bytes'],
    ['GET', '/v1/topics/a.b', undefined, 400, 'invalid_topic', 'topic'],
    ['GET', '/v1/topics/nope', undefined, 404, 'not_found', null],
    ['DELETE', '/v1/topics/nope', undefined, 404, 'not_found', null],
    ['DELETE', '/v1/topics/a.b', undefined, 400, 'invalid_topic', 'topic'],
    ['GET', '/v1/topics/bad/partitions/abc', undefined, 400, 'invalid_partition', 'partition'],
    ['GET', '/v1/topics/bad/partitions/-1/records', undefined, 400, 'invalid_partition', 'partition'],
    ['GET', '/v1/topics/bad/partitions/1.0/records', undefined, 400, 'invalid_partition', 'partition'],
    ['GET', '/v1/topics/bad/partitions/7/records', undefined, 404, 'not_found', null],
    ['GET', '/v1/topics/nope/partitions/0/records', undefined, 404, 'not_found', null],
    ['POST', records, 'nope', 400, 'invalid_json', null],
    ['POST', records, {}, 400, 'invalid_field', 'records'],
    ['POST', records, { records: [] }, 400, 'invalid_field', 'records'],
    [
      'POST',
      records,
      { records: Array.from({ length: 1001 }, () => ({ value: '' })) },
      400,
      'invalid_field',
      'records',
    ],
    ['POST', records, { records: [1] }, 400, 'invalid_body', 'records[0]'],
    ['POST', records, { records: [{}] }, 400, 'invalid_field', 'records[0].value'],
    ['POST', records, { records: [{ value: 'ok' }, { value: 1 }] }, 400, 'invalid_field', 'records[1].value'],
    ['POST', records, '{"records":[{"value":"\\ud800"}]}', 400, 'invalid_field', 'records[0].value'],
    ['POST', records, { records: [{ value: 'v', key: 5 }] }, 400, 'invalid_field', 'records[0].key'],
    ['POST', records, { records: [{ value: 'v', key: 'k'.repeat(1025) }] }, 400, 'invalid_field', 'records[0].key'],
    ['POST', records, { records: [{ value: 'v' }], producer: 'p q', seq: 0 }, 400, 'invalid_field', 'producer'],
    ['POST', records, { records: [{ value: 'v' }], producer: 5, seq: 0 }, 400, 'invalid_field', 'producer'],
    ['POST', records, { records: [{ value: 'v' }], seq: 0 }, 400, 'invalid_field', 'seq'],
    ['POST', records, { records: [{ value: 'v' }], producer: 'p' }, 400, 'invalid_field', 'seq'],
    ['POST', records, { records: [{ value: 'v' }], producer: 'p', seq: -1 }, 400, 'invalid_field', 'seq'],
    ['POST', records, { records: [{ value: 'v' }], producer: 'p', seq: 0.5 }, 400, 'invalid_field', 'seq'],
    ['POST', records, { records: [{ value: 'v'.repeat(1024 * 1024) }] }, 413, 'body_too_large', null],
    ['POST', records, { records: [{ value: 'v' }], producer: 'fresh', seq: 3 }, 409, 'unknown_producer', null],
    ['GET', `${records}?offset=-1`, undefined, 400, 'invalid_query', 'offset'],
    ['GET', `${records}?offset=x`, undefined, 400, 'invalid_query', 'offset'],
    ['GET', `${records}?max_records=0`, undefined, 400, 'invalid_query', 'max_records'],
    ['GET', `${records}?max_records=10001`, undefined, 400, 'invalid_query', 'max_records'],
    ['GET', `${records}?max_bytes=0`, undefined, 400, 'invalid_query', 'max_bytes'],
    ['GET', `${records}?wait_ms=30001`, undefined, 400, 'invalid_query', 'wait_ms'],
    ['POST', '/v1/topics/bad/partitions/0/offsets/g%20x', { offset: 0 }, 400, 'invalid_group', 'group'],
    ['GET', '/v1/topics/bad/partitions/0/offsets/g%20x', undefined, 400, 'invalid_group', 'group'],
    ['POST', offsets, 'nope', 400, 'invalid_json', null],
    ['POST', offsets, {}, 400, 'invalid_field', 'offset'],
    ['POST', offsets, { offset: '1' }, 400, 'invalid_field', 'offset'],
    ['POST', offsets, { offset: -1 }, 400, 'invalid_field', 'offset'],
    ['POST', offsets, { offset: 0, expect: 'x' }, 400, 'invalid_field', 'expect'],
    ['POST', offsets, { offset: 999 }, 400, 'offset_out_of_range', 'offset'],
    ['POST', offsets, { offset: 0, generation: -1 }, 400, 'invalid_field', 'generation'],
    ['POST', '/v1/topics/bad/groups/g/members/m%20x', { slots: 1 }, 400, 'invalid_member', 'member'],
    ['DELETE', '/v1/topics/bad/groups/g%20x/members/m', undefined, 400, 'invalid_group', 'group'],
    ['POST', '/v1/topics/nope/groups/g/members/m', { slots: 1 }, 404, 'not_found', null],
    ['POST', '/v1/topics/bad/groups/g/members/m', {}, 400, 'invalid_field', 'slots'],
    ['POST', '/v1/topics/bad/groups/g/members/m', { slots: 4097 }, 400, 'invalid_field', 'slots'],
    ['POST', '/v1/topics/bad/groups/g/members/m', { slots: 1, ttl_ms: 999 }, 400, 'invalid_field', 'ttl_ms'],
    ['POST', '/v1/topics/bad/groups/g/members/m', { slots: 1, ttl_ms: 60_001 }, 400, 'invalid_field', 'ttl_ms'],
  ];
  for (const [method, path, body, status, code, field] of cases) {
    const answer = await call(holder, method, path, {
      token,
      ...(typeof body === 'string' ? { raw: body } : body === undefined ? {} : { body }),
    });
    const error = answer.body.error as { code?: string; message?: string; field?: string } | undefined;
    const what = `${method} ${path.slice(0, 60)} ${typeof body === 'string' ? body : JSON.stringify(body)?.slice(0, 60)}`;
    t.equal(answer.status, status, `${what}: ${status}`);
    t.match(String(answer.headers['content-type']), /application\/json/, `${what}: JSON`);
    t.equal(error?.code, code, `${what}: ${code}`);
    t.ok(typeof error?.message === 'string' && error.message.length > 0, `${what}: a message`);
    if (field !== null) t.equal(error?.field, field, `${what}: names ${field}`);
  }
  // A client token may append and read, not create or delete topics.
  const issued = await call(holder, 'POST', '/v1/tokens', { token, body: { client: 'app' } });
  const clientToken = issued.body.token as string;
  t.match(await call(holder, 'POST', '/v1/topics', { token: clientToken, body: { name: 'nope' } }), {
    status: 403,
    body: { error: { code: 'forbidden' } },
  });
  t.match(await call(holder, 'DELETE', '/v1/topics/bad', { token: clientToken }), {
    status: 403,
    body: { error: { code: 'forbidden' } },
  });
  // At the partition's leader: a follower sends a fetch at its end there (421), as the follower-read case checks.
  t.match(await call(urlOf(await leaderOf('bad', 0)), 'GET', `${records}?offset=0`, { token: clientToken }), {
    status: 200,
    body: { end_offset: 0 },
  });
  // No token, a wrong token; a member that does not hold the partition answers 421 naming those that do.
  t.match(await call(holder, 'GET', records), { status: 401, body: { error: { code: 'unauthorized' } } });
  t.match(await call(holder, 'POST', records, { token: 'wrong', body: { records: [{ value: 'v' }] } }), {
    status: 401,
  });
  const description = await log.topic('bad');
  const outsider = ids.find((id) => !description.partition_groups[0]!.members.some((m) => m.id === id))!;
  const misdirected = await call(urlOf(outsider), 'GET', records, { token });
  t.equal(misdirected.status, 421);
  t.same(
    ((misdirected.body.error as { members: Array<{ id: string }> }).members ?? []).map((m) => m.id).sort(),
    description.partition_groups[0]!.members.map((m) => m.id).sort(),
  );
  // A commit whose expectation is stale: 409 naming the current offset. Nothing above changed the partition.
  await log.append('bad', 0, [{ value: 'one' }]);
  await log.commit('bad', 0, 'g', 1);
  t.match(await call(holder, 'POST', offsets, { token, body: { offset: 1, expect: 0 } }), {
    status: 409,
    body: { error: { code: 'offset_conflict', current: 1 } },
  });
  // Membership over HTTP: a join splits the slots, a commit of an older generation is fenced once a newer committed.
  const first = await log.joinGroup('bad', 'workers', 'w-1', 2, 30_000);
  t.same([first.members, first.assigned], [['w-1'], [0, 1]]);
  const second = await log.joinGroup('bad', 'workers', 'w-2', 2, 30_000);
  t.ok(second.generation > first.generation);
  t.same([second.members, second.assigned], [['w-1', 'w-2'], [1]]);
  await log.commit('bad', 0, 'workers', 0, 0, second.generation);
  t.match(
    await call(holder, 'POST', '/v1/topics/bad/partitions/0/offsets/workers', {
      token,
      body: { offset: 1, expect: 0, generation: first.generation },
    }),
    { status: 409, body: { error: { code: 'stale_generation', current: 0 } } },
  );
  t.match(await call(holder, 'DELETE', '/v1/topics/bad/groups/workers/members/w-2', { token }), {
    status: 200,
    body: { left: true },
  });
  t.same((await log.joinGroup('bad', 'workers', 'w-1', 2, 30_000)).assigned, [0, 1], 'w-2 left: w-1 has both');
  // Heartbeats are answered from the coordinator leader's memory: partition 0 commits no entry for them.
  const coordinator = await leaderOf('bad', 0);
  const commitIndex = async () =>
    (await call(urlOf(coordinator), 'GET', '/v1/topics/bad/partitions/0', { token })).body.commit as number;
  const before = await commitIndex();
  for (let i = 0; i < 4; i++) {
    const beat = await log.joinGroup('bad', 'workers', 'w-1', 2, 30_000);
    t.same([beat.members, beat.assigned], [['w-1'], [0, 1]], `heartbeat ${i} answers the group`);
  }
  t.equal(await commitIndex(), before, 'four heartbeats: the commit index of partition 0 stayed put');
  // A follower sends a heartbeat to the leader (421 naming it), as it does a fetch it cannot answer.
  const follower = description.partition_groups[0]!.members.find((m) => m.id !== coordinator)!;
  const redirected = await call(follower.url!, 'POST', '/v1/topics/bad/groups/workers/members/w-1', {
    token,
    body: { slots: 2, ttl_ms: 30_000 },
  });
  t.match(redirected, { status: 421, body: { error: { code: 'misdirected', leader: coordinator } } });
  // A member that stops heartbeating is expired by the leader (an entry) when its lease lapses on the leader's clock.
  t.same((await log.joinGroup('bad', 'workers', 'w-3', 2, 1_000)).members, ['w-1', 'w-3']);
  await until(
    'w-3 expired after its 1 s lease',
    async () => (await log.joinGroup('bad', 'workers', 'w-1', 2, 30_000)).members.join() === 'w-1',
    15_000,
    200,
  );
  t.ok((await commitIndex()) > before, 'the join and the expiry were entries');
  t.match((await log.fetch('bad', 0, 0)).end_offset, 1, 'only the one valid append was stored');
  // Every member is still up.
  for (const url of cluster.members) t.equal((await call(url, 'GET', '/healthz')).status, 200);
});

let restarting: Promise<void> = Promise.resolve();

t.test(
  "topic access: a user's topic stays the clients' by default; client_read and internal keep clients out of what they do not grant",
  async (t) => {
    const issued = await call(cluster.members[0]!, 'POST', '/v1/tokens', { token, body: { client: 'acc-app' } });
    const clientToken = issued.body.token as string;
    t.match(
      await log.createTopic('acc-default', { partitions: 1 }),
      { access: 'client_write' },
      'created without a rule: client_write',
    );
    t.match(await log.createTopic('acc-read', { partitions: 1, access: 'client_read' }), { access: 'client_read' });
    t.match(await log.createTopic('acc-int', { partitions: 1, access: 'internal' }), { access: 'internal' });
    for (const topic of ['acc-default', 'acc-read', 'acc-int']) await settled(topic, 1);
    const bad = await call(cluster.members[0]!, 'POST', '/v1/topics', {
      token,
      body: { name: 'acc-bad', access: 'public' },
    });
    t.match(bad, { status: 400, body: { error: { code: 'invalid_field', field: 'access' } } }, 'an unknown rule: 400');
    const changed = await call(cluster.members[0]!, 'POST', '/v1/topics', {
      token,
      body: { name: 'acc-int', partitions: 1, access: 'client_write' },
    });
    t.match(
      changed,
      { status: 409, body: { error: { code: 'topic_exists' } } },
      'the same topic with another rule: 409',
    );
    // Each call on every member: the holders answer it, the others 421; a refusal is 403 everywhere.
    const granted = (status: number): boolean => status === 200 || status === 421;
    const open = await topicAccess(cluster.members, token, clientToken, 'acc-default');
    for (const a of open.attempts) t.ok(granted(a.status), `client_write: ${a.call} at ${a.member}: ${a.status}`);
    t.ok(open.listed, 'client_write: listed');
    t.ok(open.endAfter > open.endBefore, 'client_write: the client appended');
    const read = await topicAccess(cluster.members, token, clientToken, 'acc-read');
    for (const a of read.attempts) {
      if (a.call === 'append' || a.call === 'commit')
        t.equal(a.status, 403, `client_read: ${a.call} at ${a.member}: 403`);
      else t.ok(granted(a.status), `client_read: ${a.call} at ${a.member}: ${a.status}`);
    }
    t.ok(read.listed, 'client_read: listed');
    t.equal(read.endAfter, read.endBefore, 'client_read: nothing appended');
    const internal = await topicAccess(cluster.members, token, clientToken, 'acc-int');
    for (const a of internal.attempts) t.equal(a.status, 403, `internal: ${a.call} at ${a.member}: 403`);
    t.notOk(internal.listed, 'internal: not listed to a client');
    t.equal(internal.endAfter, internal.endBefore, 'internal: nothing appended');
    // The internal callers of the log's own cluster: the cluster token and service.log (held by no process here).
    const own = await topicAccess(cluster.members, token, deriveServiceToken(token, 'log'), 'acc-int');
    for (const a of own.attempts) t.ok(granted(a.status), `service.log: ${a.call} at ${a.member}: ${a.status}`);
    const foreign = await topicAccess(cluster.members, token, deriveServiceToken(token, 'notify'), 'acc-default');
    for (const a of foreign.attempts)
      t.equal(a.status, 403, `service.notify on the log's cluster: ${a.call} at ${a.member}: 403`);
    for (const topic of ['acc-default', 'acc-read', 'acc-int']) await log.deleteTopic(topic);
  },
);
t.test('idempotent producers: a retry across a leader kill is stored exactly once', async (t) => {
  await log.createTopic('idem', { partitions: 1 });
  const leader = await leaderOf('idem', 0);
  // Stored on the old leader; the answer is "lost"; the producer retries the same sequence on the new leader.
  const first = await call(urlOf(leader), 'POST', '/v1/topics/idem/partitions/0/records', {
    token,
    body: { records: [{ value: 'x0' }, { value: 'x1' }], producer: 'px', seq: 0 },
  });
  t.match(first, { status: 200, body: { base_offset: 0, count: 2, duplicate: false } });
  await cli('kill', leader);
  const next = await leaderOf('idem', 0, [leader]);
  t.not(next, leader, `new leader ${next}`);
  const retry = await log.append('idem', 0, [{ value: 'x0' }, { value: 'x1' }], { producer: 'px', seq: 0 });
  t.same(
    retry,
    { partition: 0, base_offset: 0, count: 2, duplicate: true },
    'the new leader answers with the original offsets',
  );
  // Producers keep sending while their partition's leader is killed: every batch is stored once, in order.
  const producers = [0, 1, 2].map((i) =>
    newClient().producer('idem', { id: `stream-${i}`, deliveryTimeoutMs: 90_000 }),
  );
  const duplicates: number[] = [];
  const sendAll = (i: number) =>
    (async () => {
      for (let n = 0; n < 30; n++) {
        const answer = await producers[i]!.sendBatch(0, [{ value: `p${i}-${n}` }]);
        if (answer.duplicate) duplicates.push(i);
      }
    })();
  await restart(leader);
  const sending = [0, 1, 2].map(sendAll);
  await until('some batches stored', async () => (await log.fetch('idem', 0, 0)).end_offset >= 20, 60_000);
  await cli('kill', next);
  await Promise.all(sending);
  const stored = (await fetchAll(log, 'idem', 0)).map((r) => r.value);
  t.same(stored.slice(0, 2), ['x0', 'x1']);
  for (let i = 0; i < 3; i++) {
    const mine = stored.filter((v) => v.startsWith(`p${i}-`));
    t.same(
      mine,
      Array.from({ length: 30 }, (_, n) => `p${i}-${n}`),
      `producer ${i}: 30 batches, each once, in order`,
    );
  }
  t.equal(stored.length, 92, `no other record (${duplicates.length} retries answered duplicate)`);
  // The next case waits for this restart only when it kills (so the restart overlaps its first steps).
  restarting = restart(next);
});

t.test(
  'a consumer group resumes exactly after its last committed offset: leader killed, then partitioned away',
  async (t) => {
    const began = Date.now();
    const step = (what: string): void => t.comment(`${what} at ${((Date.now() - began) / 1000).toFixed(1)} s`);
    await log.createTopic('shop', { partitions: 1 });
    for (let b = 0; b < 10; b++)
      await log.append(
        'shop',
        0,
        Array.from({ length: 10 }, (_, i) => ({ value: `o${b * 10 + i}` })),
      );
    const a = newClient().consumer('shop', 'billing', { maxRecords: 7, waitMs: 2_000 });
    const seenA: ConsumedRecord[] = [];
    while (seenA.length < 30) seenA.push(...(await a.poll()));
    await a.commit();
    const committed = seenA[seenA.length - 1]!.offset + 1;
    t.equal(await log.committed('shop', 0, 'billing'), committed);
    seenA.push(...(await a.poll())); // delivered, processed, never committed: the at-least-once window
    t.ok(seenA.length > committed, 'consumer A read past its commit, then stopped');
    t.same(
      seenA.map((r) => r.offset),
      Array.from({ length: seenA.length }, (_, i) => i),
    );

    step('consumer A committed');
    await restarting;
    step('the earlier restart done');
    // Two live members of a consumer group coordinated by shop/0 heartbeat through everything below (the leader
    // killed, then cut off): each new leader grants them full leases, so the group never changes generation. The
    // 10 s lease only keeps a slow election on a loaded machine from lapsing them; the property holds for any.
    const rebalances: number[] = [];
    const watchers = ['m-a', 'm-b'].map(
      (member) =>
        new GroupConsumer(newClient(), {
          topics: ['shop'],
          group: 'watchers',
          member,
          ttlMs: 10_000,
          consume: (claim) => new Promise((resolve) => claim.signal.addEventListener('abort', () => resolve())),
          onRebalance: (join) => rebalances.push(join.generation),
        }),
    );
    for (const w of watchers) w.start();
    await until('both watchers in one generation', async () => watchers.every((w) => w.members.length === 2), 30_000);
    const settledGeneration = Math.max(...watchers.map((w) => w.generation));
    await until(
      'both watchers heard it',
      async () => watchers.every((w) => w.generation === settledGeneration),
      30_000,
    );
    const rebalancesBefore = rebalances.length;
    const leader = await leaderOf('shop', 0);
    await cli('kill', leader); // SIGKILL
    step('leader killed');
    const b = newClient().consumer('shop', 'billing', { maxRecords: 13, waitMs: 2_000 });
    const seenB: ConsumedRecord[] = [];
    while (seenB.length === 0 || seenB[seenB.length - 1]!.offset < 99) seenB.push(...(await b.poll()));
    t.equal(
      seenB[0]!.offset,
      committed,
      `after the kill, consumer B starts exactly at the committed offset ${committed}`,
    );
    t.same(
      seenB.map((r) => r.offset),
      Array.from({ length: 100 - committed }, (_, i) => committed + i),
      'then every record once, in order',
    );
    t.same(
      seenB.map((r) => r.value),
      seenB.map((r) => `o${r.offset}`),
    );
    step('consumer B read to the end');
    await b.commit();
    t.equal(await log.committed('shop', 0, 'billing'), 100);
    restarting = restart(leader);

    // Now the partition's leader is cut off from every other process (it still runs).
    await log.append(
      'shop',
      0,
      Array.from({ length: 50 }, (_, i) => ({ value: `o${100 + i}` })),
    );
    await restarting;
    step('restarted');
    const isolated = await leaderOf('shop', 0);
    const rest = ids.filter((id) => id !== isolated);
    await cli('partition', `${isolated.slice(1)}|${rest.map((id) => id.slice(1)).join(',')}`);
    try {
      step('partitioned');
      const fresh = await leaderOf('shop', 0, [isolated]);
      t.not(fresh, isolated, `a new leader ${fresh} on the majority side`);
      // A client that asks the cut-off member first waits out its 5 s request timeout there; this one knows the
      // members in another order (it is told nothing about the cut).
      const reordered = new LogClient({ endpoints: [...rest.map(urlOf), urlOf(isolated)], token, timeoutMs: 60_000 });
      clients.push(reordered);
      const c = reordered.consumer('shop', 'billing', { maxRecords: 50, waitMs: 2_000 });
      const seenC: ConsumedRecord[] = [];
      while (seenC.length === 0 || seenC[seenC.length - 1]!.offset < 149) seenC.push(...(await c.poll()));
      t.same(
        seenC.map((r) => r.offset),
        Array.from({ length: 50 }, (_, i) => 100 + i),
        'consumer C resumes at 100: nothing committed is re-delivered, nothing skipped',
      );
      step('consumer C read to the end');
      await c.commit();
      t.equal(await reordered.committed('shop', 0, 'billing'), 150);
    } finally {
      await cli('heal');
    }
    step('healed');
    // Another group has its own offsets: it reads from 0.
    const other = newClient().consumer('shop', 'audit', { maxRecords: 1_000, waitMs: 2_000 });
    const first = await other.poll();
    t.equal(first[0]?.offset, 0, 'another group starts at 0');
    const coordinator = await leaderOf('shop', 0);
    const beats = async () =>
      (await call(urlOf(coordinator), 'POST', '/v1/topics/shop/groups/watchers/members/m-a', {
        token,
        body: { slots: 1, ttl_ms: 10_000 },
      })) as { status: number; body: { generation?: number; members?: string[] } };
    t.match(await beats(), { status: 200, body: { generation: settledGeneration, members: ['m-a', 'm-b'] } });
    t.same(
      rebalances.slice(rebalancesBefore),
      [],
      `the watchers kept generation ${settledGeneration} through the leader's kill and its isolation`,
    );
    await Promise.all(watchers.map((w) => w.stop()));
  },
);

t.test(
  'a consumer with a decode step: refused records to the dead-letter topic, the rest handled, nothing skipped',
  async (t) => {
    await log.createTopic('checked', { partitions: 1 });
    const decode = (value: string): number => {
      const n = JSON.parse(value) as unknown;
      if (typeof n !== 'number') throw new Error('not a number');
      return n;
    };
    await until(
      'checked/0 takes appends',
      async () =>
        (await log
          .append('checked', 0, [{ value: '1' }, { value: 'oops' }, { value: '"two"' }, { value: '3' }])
          .catch(() => null)) !== null,
      60_000,
      200,
    );
    // The dead-letter topic does not exist yet: the write fails, the poll fails, and the batch is read again later.
    const quick = new LogClient({ endpoints: cluster.members, token, timeoutMs: 3_000 });
    clients.push(quick);
    const consumer = new CheckedConsumer(
      log.consumer('checked', 'checker', { waitMs: 500 }),
      decode,
      new DeadLetterQueue(quick, 'checked-dead'),
    );
    await t.rejects(consumer.poll(), 'a dead-letter write that fails fails the poll');
    await log.createTopic('checked-dead', { partitions: 1 });
    const got = await until(
      'the batch again, the dead letters written',
      async () => {
        const r = await consumer.poll().catch(() => null);
        return r !== null && r.length > 0 ? r : null;
      },
      60_000,
      200,
    );
    t.same(
      got.map((r) => [r.offset, r.decoded]),
      [
        [0, 1],
        [3, 3],
      ],
      'the valid records, from the start of the batch: none skipped',
    );
    await consumer.commit();
    t.equal(
      await log.committed('checked', 0, 'checker'),
      4,
      'committed past the dead-lettered records once they are stored',
    );
    const letters = (await log.fetch('checked-dead', 0, 0)).records.map((r) => JSON.parse(r.value) as DeadLetter);
    t.match(letters, [
      { topic: 'checked', partition: 0, offset: 1, value: 'oops', reason: /JSON/ },
      { topic: 'checked', partition: 0, offset: 2, value: '"two"', reason: 'not a number' },
    ]);
    // rewind: what was polled and not committed is read again.
    await log.append('checked', 0, [{ value: '5' }]);
    t.same(
      (await consumer.poll()).map((r) => r.decoded),
      [5],
    );
    consumer.rewind();
    t.same(
      (await consumer.poll()).map((r) => r.decoded),
      [5],
      'read again after rewind',
    );
  },
);

t.test(
  'a follower serves what it holds and sends a fetch at or past its end to the leader: an acknowledged append is always fetched',
  async (t) => {
    await log.createTopic('ryw', { partitions: 1 });
    const leader = await leaderOf('ryw', 0);
    const followers = (await log.topic('ryw')).partition_groups[0]!.members.map((m) => m.id).filter(
      (id) => id !== leader,
    );
    t.equal(followers.length, 2, 'two followers');
    const appended = await log.append('ryw', 0, [{ value: 'a' }, { value: 'b' }]);
    // At once after the acknowledgement, through a fresh client that knows no leader yet: the records are there.
    const fresh = newClient();
    t.same(
      (await fresh.fetch('ryw', 0, 0)).records.map((r) => r.value),
      ['a', 'b'],
      'a fresh client fetches what was just acknowledged',
    );
    for (const id of followers) {
      const tail = await call(
        urlOf(id),
        'GET',
        `/v1/topics/ryw/partitions/0/records?offset=${appended.base_offset + 2}`,
        { token },
      );
      t.equal(tail.status, 421, `${id} at its end: 421`);
      t.equal(tail.headers['raft-leader'], leader, `${id} names the leader`);
      const held = await until(
        `${id} holds both records`,
        async () => {
          const a = await call(urlOf(id), 'GET', '/v1/topics/ryw/partitions/0/records?offset=0', { token });
          return a.status === 200 && (a.body.records as unknown[]).length === 2 ? a : null;
        },
        10_000,
        50,
      );
      t.equal(held.status, 200, `${id} serves the records it holds`);
    }
    const atLeader = await call(
      urlOf(leader),
      'GET',
      `/v1/topics/ryw/partitions/0/records?offset=${appended.base_offset + 2}`,
      { token },
    );
    t.same([atLeader.status, atLeader.body.records], [200, []], 'the leader answers an empty tail');
    await log.deleteTopic('ryw');
  },
);

t.test('replay from any offset; a long poll wakes on an append', async (t) => {
  await log.createTopic('replay', { partitions: 1 });
  for (let b = 0; b < 10; b++)
    await log.append(
      'replay',
      0,
      Array.from({ length: 20 }, (_, i) => ({ key: `k${i % 3}`, value: `r${b * 20 + i}` })),
    );
  for (const from of [0, 1, 13, 57, 100, 150, 181, 199]) {
    const answer = await log.fetch('replay', 0, from, { maxRecords: 30 });
    const expected = Array.from({ length: Math.min(30, 200 - from) }, (_, i) => from + i);
    t.same(
      answer.records.map((r) => r.offset),
      expected,
      `from ${from}`,
    );
    t.ok(
      answer.records.every((r) => r.value === `r${r.offset}` && r.key === `k${(r.offset % 20) % 3}`),
      `from ${from}: the stored values and keys`,
    );
    t.equal(answer.next_offset, from + expected.length);
  }
  t.match(await log.fetch('replay', 0, 200), { records: [], next_offset: 200, end_offset: 200, start_offset: 0 });
  const waiting = log.fetch('replay', 0, 200, { waitMs: 20_000 });
  await new Promise((r) => setTimeout(r, 300));
  await log.append('replay', 0, [{ value: 'late' }]);
  const woke = await waiting;
  t.same(
    woke.records.map((r) => [r.offset, r.value]),
    [[200, 'late']],
    'the long poll answers with the new record',
  );
});

t.test('scan reads to the end with pages in flight: each record once, in order, whatever cuts the pages', async (t) => {
  // 'replay' holds offsets 0..200 (the case above).
  for (const [from, options] of [
    [0, { pageRecords: 7, pagesInFlight: 3 }],
    [0, { pageRecords: 50, maxBytes: 60, pagesInFlight: 2 }],
    [150, { pageRecords: 1_000 }],
    [199, { pageRecords: 1 }],
  ] as const) {
    const offsets: number[] = [];
    for await (const page of log.scan('replay', 0, from, options)) for (const r of page) offsets.push(r.offset);
    t.same(
      offsets,
      Array.from({ length: 201 - from }, (_, i) => from + i),
      `from ${from}, ${JSON.stringify(options)}`,
    );
  }
  let pages = 0;
  for await (const page of log.scan('replay', 0, 0, { pageRecords: 10, pagesInFlight: 4 })) {
    pages++;
    if (page[0]!.offset >= 30) break;
  }
  t.equal(pages, 4, 'a scan can be left early');
});

t.test(
  'concurrent sends through one producer and concurrent plain appends: every record once, offsets contiguous',
  async (t) => {
    await log.createTopic('many', { partitions: 1 });
    await settled('many', 1);
    const producer = log.producer('many');
    // The producer gathers what is sent while a batch is in flight; the members gather appends of one turn into one
    // Raft entry. Neither may lose, double or reorder anything a caller was told.
    const sent = await Promise.all(Array.from({ length: 600 }, (_, i) => producer.send(`s${i}`, { partition: 0 })));
    const plain = await Promise.all(
      Array.from({ length: 200 }, (_, i) => log.append('many', 0, [{ value: `a${i}` }, { value: `a${i}+` }])),
    );
    const stored = await fetchAll(log, 'many', 0);
    t.equal(stored.length, 600 + 400, 'every record stored once');
    t.ok(
      stored.every((r, i) => r.offset === i),
      'offsets contiguous from 0',
    );
    const byValue = new Map(stored.map((r) => [r.value, r.offset]));
    t.ok(
      sent.every((s, i) => byValue.get(`s${i}`) === s.offset),
      'each send answered with the offset its record holds',
    );
    t.ok(
      sent.every((s, i) => i === 0 || s.offset > sent[i - 1]!.offset),
      "one producer's records keep the order they were sent in",
    );
    t.ok(
      plain.every((a, i) => byValue.get(`a${i}`) === a.base_offset && byValue.get(`a${i}+`) === a.base_offset + 1),
      'each append answered with its own offsets, its records together',
    );
  },
);

t.test(
  "a producer's buffer is bounded: sends past maxBufferedBytes wait for room, none is lost or reordered",
  async (t) => {
    await log.createTopic('bounded', { partitions: 1 });
    await settled('bounded', 1);
    const maxBufferedBytes = 16 * 1024;
    const producer = log.producer('bounded', { maxBufferedBytes });
    const value = 'x'.repeat(1000);
    let highest = 0;
    const sends: Array<Promise<{ offset: number }>> = [];
    for (let i = 0; i < 300; i++) {
      sends.push(producer.send(`${i}:${value}`, { partition: 0 }));
      // Sampled after each call and on every settle: the bytes held never pass the bound.
      highest = Math.max(highest, producer.buffered);
      void sends[i]!.then(() => (highest = Math.max(highest, producer.buffered)));
    }
    const answers = await Promise.all(sends);
    t.ok(highest <= maxBufferedBytes, `at most ${maxBufferedBytes} bytes buffered (highest seen ${highest})`);
    t.equal(producer.buffered, 0, 'nothing held once every send is answered');
    t.ok(
      answers.every((a, i) => i === 0 || a.offset === answers[i - 1]!.offset + 1),
      'records stored in the order sent, contiguous',
    );
    const stored = await fetchAll(log, 'bounded', 0);
    t.equal(stored.length, 300, 'every record stored once');
  },
);

t.test(
  'a send that finds the buffer full past maxBlockMs fails with 503 producer_buffer_full and holds nothing',
  async (t) => {
    await log.createTopic('blocked', { partitions: 1 });
    await settled('blocked', 1);
    const producer = log.producer('blocked', { maxBufferedBytes: 2048, maxBlockMs: 300, deliveryTimeoutMs: 60_000 });
    // Every holder of the partition paused: the first batch cannot be acknowledged, so the buffer stays full.
    const holders = (await log.topic('blocked')).partition_groups[0]!.members.map((m) => m.id);
    for (const id of holders) await cli('pause', id);
    try {
      const first = producer.send('y'.repeat(1500), { partition: 0 });
      first.catch(() => undefined);
      const error = await producer.send('z'.repeat(1500), { partition: 0 }).then(
        () => null,
        (e: unknown) => e as { status?: number; code?: string },
      );
      t.equal(error?.status, 503, 'refused with 503');
      t.equal(error?.code, 'producer_buffer_full', 'named producer_buffer_full');
      t.ok(producer.buffered <= 2048, 'the refused record holds no room');
    } finally {
      for (const id of holders) await cli('resume', id);
    }
  },
);

t.test(
  'a deleted topic created again under its name starts empty (409 topic_being_deleted until the old replicas are gone)',
  async (t) => {
    for (let round = 0; round < 3; round++) {
      const refusals = new Set<string>();
      const created = await until(
        `'again' created (round ${round})`,
        async () => {
          const answer = await call(cluster.members[round % cluster.members.length]!, 'POST', '/v1/topics', {
            token,
            body: { name: 'again', partitions: 3 },
          });
          if (answer.status === 409) refusals.add(String((answer.body.error as { code?: string } | undefined)?.code));
          return answer.status === 201 ? answer : null;
        },
        60_000,
        100,
      );
      t.equal(created.status, 201);
      t.ok(
        [...refusals].every((c) => c === 'topic_being_deleted'),
        `round ${round}: refusals meanwhile: ${[...refusals].join(',') || 'none'}`,
      );
      await settled('again', 3);
      for (let p = 0; p < 3; p++) {
        const answer = await log.fetch('again', p, 0, { maxRecords: 10 });
        t.same(
          [answer.records.length, answer.end_offset],
          [0, 0],
          `round ${round}: partition ${p} holds nothing of the deleted topic`,
        );
        t.match(
          await log.append('again', p, [{ value: `round${round}` }]),
          { base_offset: 0 },
          `round ${round}: partition ${p} takes appends`,
        );
      }
      await log.deleteTopic('again');
    }
  },
);

t.test('retention trims by size at once and by age even when nothing is appended', async (t) => {
  // The first append follows the create at once: the topic's limits hold from its first record (not the default
  // limits until the leader's periodic sync of the topic's retention, as before).
  await log.createTopic('ret-size', { partitions: 1, retention: { max_bytes: 1024 } });
  await log.append(
    'ret-size',
    0,
    Array.from({ length: 20 }, (_, i) => ({ value: `${i}`.padEnd(200, '.') })),
  );
  const first = await log.fetch('ret-size', 0, 0, { maxRecords: 100 });
  t.ok(
    first.start_offset >= 15 && first.records.length <= 5,
    `right after the first append: start ${first.start_offset}, ${first.records.length} records`,
  );
  const leader = await leaderOf('ret-size', 0);
  const status = await call(urlOf(leader), 'GET', '/v1/topics/ret-size/partitions/0', { token });
  t.ok((status.body.bytes as number) <= 1024, `${status.body.bytes} bytes held`);
  t.equal(status.body.end_offset, 20);
  t.ok((status.body.start_offset as number) >= 15, `start ${status.body.start_offset}`);
  const fromZero = await log.fetch('ret-size', 0, 0);
  t.equal(fromZero.records[0]!.offset, status.body.start_offset, 'a fetch from 0 starts at the oldest record held');
  t.equal(fromZero.records[fromZero.records.length - 1]!.offset, 19);

  await log.createTopic('ret-age', { partitions: 1, retention: { max_age_ms: 1000 } });
  await log.append(
    'ret-age',
    0,
    Array.from({ length: 5 }, (_, i) => ({ value: `${i}` })),
  );
  const trimmed = await until(
    'the idle partition trimmed by age',
    async () => {
      const answer = await log.fetch('ret-age', 0, 0);
      return answer.start_offset === 5 ? answer : null;
    },
    30_000,
    250,
  );
  t.same([trimmed.records.length, trimmed.end_offset], [0, 5], 'every record gone, offsets kept');
  t.match(await log.append('ret-age', 0, [{ value: 'after' }]), { base_offset: 5 });
});

t.test('backpressure: appends answer 429 partition_behind while a partition cannot commit', async (t) => {
  await log.createTopic('bp', { partitions: 1 });
  const leader = await leaderOf('bp', 0);
  const followers = (await log.topic('bp')).partition_groups[0]!.members.map((m) => m.id).filter((id) => id !== leader);
  // 1 MiB bodies: the leader holds at most 32 MiB of appends in flight per partition; beyond that it answers 429.
  // The bodies are uploaded but for their last bytes before the followers stop, and finished together after: so
  // the appends reach the leader within moments of each other, well before check-quorum makes it step down
  // (then it would answer 503 at once, holding nothing in flight).
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  const json = JSON.stringify({ records: [{ value: 'v'.repeat(1_000_000) }] });
  const requests = Array.from({ length: 40 }, () =>
    request(`${urlOf(leader)}/v1/topics/bp/partitions/0/records`, {
      method: 'POST',
      dispatcher: agent,
      headers: {
        authorization: `Bearer ${token}`,
        'content-type': 'application/json',
        'content-length': String(json.length),
      },
      body: Readable.from(
        (async function* () {
          yield json.slice(0, -2);
          await gate;
          yield json.slice(-2);
        })(),
      ),
      headersTimeout: 60_000,
      bodyTimeout: 60_000,
    }).then(async (res) => {
      const body = (await res.body.json()) as { error?: { code?: unknown } };
      return { status: res.statusCode, code: body.error?.code, retryAfter: res.headers['retry-after'] };
    }),
  );
  let answers: Array<{ status: number; code: unknown; retryAfter: unknown }>;
  try {
    await Promise.all(followers.map((id) => cli('pause', id)));
    open();
    answers = await Promise.all(requests);
  } finally {
    open();
    await Promise.all(followers.map((id) => cli('resume', id)));
  }
  const behind = answers.filter((a) => a.status === 429);
  t.ok(
    behind.length >= 1,
    `${behind.length} of 40 answered 429; the others ${[...new Set(answers.filter((a) => a.status !== 429).map((a) => a.status))].join(',')}`,
  );
  t.ok(
    behind.every((a) => a.code === 'partition_behind' && a.retryAfter === '1'),
    'partition_behind with Retry-After: 1',
  );
  t.ok(
    answers.every((a) => a.status === 429 || a.status === 503 || a.status === 200),
    'the rest: 503 (outcome unknown) or stored',
  );
  // Once the followers are back, appends go through again.
  const after = await log.append('bp', 0, [{ value: 'after' }]);
  t.equal(after.count, 1);
});

t.test('the README example runs against the cluster, and README shows it as it is', async (t) => {
  const source = readFileSync(fileURLToPath(new URL('../../examples/quickstart.ts', import.meta.url)), 'utf8');
  const readme = readFileSync(fileURLToPath(new URL('../../README.md', import.meta.url)), 'utf8');
  const block = /<!-- examples\/quickstart\.ts -->\n```ts\n([\s\S]*?)```/.exec(readme)?.[1];
  t.equal(block, source.replace("'../src/index.js'", "'@raftkit/log'"), 'README.md shows examples/quickstart.ts');
  const script = fileURLToPath(new URL('../examples/quickstart.js', import.meta.url));
  const out = await new Promise<string>((resolve, reject) =>
    execFile(
      process.execPath,
      [script],
      { env: { ...process.env, LOG_ENDPOINTS: cluster.members.join(','), LOG_TOKEN: token }, timeout: 120_000 },
      (error, stdout, stderr) => (error === null ? resolve(stdout) : reject(new Error(`${error.message}\n${stderr}`))),
    ),
  );
  const lines = out.trim().split('\n');
  t.equal(lines.length, 4, out);
  t.same(lines.map((l) => l.replace(/^.*: /, '')).sort(), ['{"id":"a1"}', '{"id":"a1"}', '{"id":"b2"}', '{"id":"c3"}']);
  const described = (await log.topic('orders')) as TopicDescription;
  let committed = 0;
  for (let p = 0; p < described.partitions; p++) committed += (await log.committed('orders', p, 'billing')) ?? 0;
  t.ok(committed >= 4, `the group committed past what it read (${committed})`);
});
