/**
 * The CLI's view of a grouped service, on one real `cluster up --service log --set replicas=5` (5 member processes,
 * a topic of 10 partitions that asked for 3 replicas: 10 Raft groups plus the meta group): `status` counts each
 * member's groups and leaders, `groups` lists every group with leader, term, commit, lag, replicas and members
 * (`--json` too), `balance` spreads leaders that were piled on one member and prints the moves. The endpoints behind
 * them admit the cluster token only. And the client-side GroupRouter against the same servers: key to group, leader
 * cached, 421 followed, a leader change and a killed leader followed. Last, the cluster's count: a topic that asks
 * for none is placed on all five and takes appends with two members killed.
 */
import { GroupRouter, hashSlot, HASH_SLOTS, locateBySlot, ServiceError, type RouterGroup } from '@raftkit/http';
import { partitionGroup, partitionOf } from '@raftkit/log';
import { call, startCluster, until } from '@raftkit/testkit';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';

t.setTimeout(280_000);

const PARTITIONS = 10;
// Members hand groups back to their preferred leaders only after 2 minutes here, so leaders piled by hand stay piled
// until `balance` moves them (packages/lib/raft/test/preferred-leaders.test.ts tests the automatic hand-back).
const cluster = await startCluster('log', {
  nodes: 5,
  tickMs: 50,
  env: { RAFTKIT_PREFERRED_LEADER_DELAY_MS: '120000' },
  settings: { replicas: '5' },
});
t.teardown(() => cluster.down());
const admin = cluster.token;
const ids = ['n1', 'n2', 'n3', 'n4', 'n5'];
const url = (id: string): string => cluster.members[ids.indexOf(id)]!;

interface GroupJson {
  group: string;
  leader: string | null;
  term: number;
  commit: number;
  lag: number | null;
  replicas: number;
  members: string[];
}
interface StatusJson {
  id: string;
  role: string;
  groups: number | null;
  leaders: number | null;
  replicas: number | null;
}

async function groups(): Promise<GroupJson[]> {
  const r = await cluster.run('groups', '--json');
  if (r.code !== 0) throw new Error(`groups failed: ${r.stderr}`);
  return JSON.parse(r.stdout) as GroupJson[];
}
async function statuses(): Promise<StatusJson[]> {
  const r = await cluster.run('status', '--json');
  if (r.code !== 0) throw new Error(`status failed: ${r.stderr}`);
  return JSON.parse(r.stdout) as StatusJson[];
}
const partitions = (rows: GroupJson[]): GroupJson[] => rows.filter((g) => g.group.startsWith('log.orders.'));

const created = await call(cluster.members[0]!, 'POST', '/v1/topics', {
  token: admin,
  body: { name: 'orders', partitions: PARTITIONS, replicas: 3 },
});
if (created.status !== 201) throw new Error(`topic: ${created.status} ${JSON.stringify(created.body)}`);
await until(
  'every partition to have a leader seen by the CLI',
  async () => {
    const rows = partitions(await groups());
    return rows.length === PARTITIONS && rows.every((g) => g.leader !== null && g.members.length === 3);
  },
  90_000,
);
const clientToken = (
  (await call(cluster.members[0]!, 'POST', '/v1/tokens', { token: admin, body: { client: 'router-test' } })).body as {
    token: string;
  }
).token;

async function append(group: string, value: string): Promise<void> {
  const partition = Number(group.split('.').at(-1));
  const router = new GroupRouter({ endpoints: cluster.members, token: clientToken });
  try {
    await router.call(group, 'POST', `/v1/topics/orders/partitions/${partition}/records`, { records: [{ value }] });
  } finally {
    await router.close();
  }
}

t.test('status: groups and leaders per member', async (t) => {
  const rows = await statuses();
  t.same(
    rows.map((r) => r.id),
    ids,
  );
  t.ok(
    rows.every((r) => typeof r.groups === 'number' && typeof r.leaders === 'number'),
    'every member reports numbers',
  );
  t.equal(
    rows.reduce((n, r) => n + r.groups!, 0),
    PARTITIONS * 3,
    '30 replicas in all (the meta group is not counted)',
  );
  t.equal(
    rows.reduce((n, r) => n + r.leaders!, 0),
    PARTITIONS,
    'one leader per partition',
  );
  t.ok(
    rows.every((r) => r.groups! >= 5 && r.groups! <= 7),
    `replicas spread: ${rows.map((r) => r.groups).join(' ')}`,
  );
  const table = await cluster.run('status');
  t.match(
    table.stdout.split('\n')[0],
    /^member\s+pid\s+role\s+term\s+leader\s+commit\s+applied\s+lag\s+groups\s+leaders\s+replicas\s+url$/,
    'table header',
  );
  const n1 = table.stdout.split('\n').find((l) => l.startsWith('n1 '))!;
  t.match(n1, new RegExp(`\\s${rows[0]!.groups}\\s+\\d+\\s+5\\s+http://`), 'n1 row shows its counts');
  t.same(
    rows.map((r) => r.replicas),
    [5, 5, 5, 5, 5],
    "every member gives a new group the cluster's 5",
  );
});

t.test('groups: leader, term, commit, lag and members of each group', async (t) => {
  const before = await groups();
  t.same(
    before.map((g) => g.group),
    [
      'log.orders.0',
      'log.orders.1',
      'log.orders.2',
      'log.orders.3',
      'log.orders.4',
      'log.orders.5',
      'log.orders.6',
      'log.orders.7',
      'log.orders.8',
      'log.orders.9',
      'meta',
    ].sort(),
  );
  for (const g of before) {
    t.ok(
      g.leader !== null && g.members.includes(g.leader),
      `${g.group}: leader ${g.leader} is one of ${g.members.join(',')}`,
    );
    t.ok(
      Number.isInteger(g.term) &&
        g.term > 0 &&
        Number.isInteger(g.commit) &&
        g.commit > 0 &&
        g.lag !== null &&
        g.lag >= 0,
      `${g.group}: term ${g.term} commit ${g.commit} lag ${g.lag}`,
    );
  }
  t.equal(before.find((g) => g.group === 'meta')!.members.length, 5, 'the meta group has the five founders');
  // Three appends to partition 3 raise its commit index by three, and no other's.
  for (let i = 0; i < 3; i++) await append('log.orders.3', `v${i}`);
  const after = await groups();
  const commit = (rows: GroupJson[], name: string): number => rows.find((g) => g.group === name)!.commit;
  t.ok(commit(after, 'log.orders.3') >= commit(before, 'log.orders.3') + 3, 'partition 3 committed three more');
  t.equal(commit(after, 'log.orders.4'), commit(before, 'log.orders.4'), 'partition 4 did not move');
  const table = await cluster.run('groups');
  t.equal(table.code, 0);
  const lines = table.stdout.trim().split('\n');
  t.match(lines[0], /^group\s+leader\s+term\s+commit\s+lag\s+replicas\s+members$/, 'table header');
  t.equal(lines.length, 1 + 11, 'one line per group');
  t.match(
    lines.find((l) => l.startsWith('log.orders.3 ')),
    new RegExp(`^log\\.orders\\.3\\s+n\\d\\s+\\d+\\s+${commit(after, 'log.orders.3')}\\s+\\d+\\s+3\\s+n\\d,n\\d,n\\d$`),
  );
  t.ok(
    partitions(after).every((g) => g.replicas === 3),
    'a topic that asked for 3 replicas has 3 (the cluster count is for those that ask for none)',
  );
});

t.test('the endpoints behind groups and balance admit the cluster token only', async (t) => {
  for (const [method, path] of [
    ['GET', '/v1/cluster/groups'],
    ['POST', '/v1/cluster/balance'],
  ] as const) {
    t.equal(
      (await call(cluster.members[1]!, method, path, { token: clientToken })).status,
      403,
      `${method} ${path} with a client token`,
    );
    t.equal(
      (await call(cluster.members[1]!, method, path, { token: null })).status,
      401,
      `${method} ${path} without a token`,
    );
  }
  const bad = await call(cluster.members[1]!, 'POST', '/v1/cluster/balance', {
    token: admin,
    body: { leaders: { n1: -1 } },
  });
  t.equal(bad.status, 400, 'a negative count is refused');
  t.match(bad.body, { error: { code: 'invalid_field' } });
  const garbage = await call(cluster.members[1]!, 'POST', '/v1/cluster/balance', { token: admin, raw: '{nope' });
  t.equal(garbage.status, 400, 'a body that is not JSON is refused');
});

t.test('balance: leaders piled on one member are spread, and the moves printed', async (t) => {
  // Pile every partition n1 holds onto n1.
  const held = partitions(await groups()).filter((g) => g.members.includes('n1'));
  for (const g of held) {
    const r = await call(url('n1'), 'POST', '/v1/cluster/transfer-leader', {
      token: admin,
      body: { group: g.group, to: 'n1' },
    });
    t.equal(r.status, 200, `${g.group} led by n1 (${JSON.stringify(r.body).slice(0, 80)})`);
  }
  await until(
    'n1 to count them',
    async () => (await statuses()).find((s) => s.id === 'n1')!.leaders === held.length,
    30_000,
  );
  t.ok(held.length >= 5, `n1 leads ${held.length} of ${PARTITIONS}`);
  const r = await cluster.run('balance');
  t.equal(r.code, 0, `balance (stderr: ${r.stderr.trim()})`);
  const moves = r.stdout.split('\n').filter((l) => l.startsWith('moved log.'));
  t.ok(moves.length >= held.length - 3, `it printed ${moves.length} moves:\n${r.stdout}`);
  t.ok(moves.every((l) => /^moved log\.orders\.\d: n\d -> n\d$/.test(l)));
  t.match(r.stdout, /moved \d+ leaders; leaders now n1=\d n2=\d n3=\d n4=\d n5=\d/);
  await until(
    'the moves to show',
    async () => (await statuses()).reduce((n, s) => n + s.leaders!, 0) === PARTITIONS,
    30_000,
  );
  const leaders = (await statuses()).map((s) => s.leaders!);
  t.ok(Math.max(...leaders) <= 3, `leaders now ${leaders.join(' ')} (10 over 5 members)`);
  // What the algorithm promises: no group's leader leads two more than one of its other voters.
  const rows = partitions(await groups());
  const count = (id: string): number => rows.filter((g) => g.leader === id).length;
  for (const g of rows)
    for (const v of g.members)
      t.ok(count(g.leader!) - count(v) <= 1, `${g.group}: ${g.leader} (${count(g.leader!)}) vs ${v} (${count(v)})`);
  const again = await cluster.run('balance', '--json');
  const body = JSON.parse(again.stdout) as { moved: unknown[]; leaders: Record<string, number> };
  t.same(body.moved, [], 'balancing a balanced cluster moves nothing');
  t.same(Object.keys(body.leaders).sort(), ids);
});

/** Finds the topic's partition for a key the way the log's clients do. */
const locateOrders = (key: string, list: readonly RouterGroup[]): string | null => {
  const any = list.find((g) => g.data.name === 'orders');
  return any === undefined ? null : partitionGroup('orders', partitionOf(key, any.data.partitions as number));
};

t.test('GroupRouter: a key to its group and leader, cached; 421 followed', async (t) => {
  const rows = partitions(await groups());
  // A member that does not hold partition 0 is the only endpoint: the first call is misdirected.
  const outsider = ids.find((id) => !rows.find((g) => g.group === 'log.orders.0')!.members.includes(id))!;
  const router = new GroupRouter({ endpoints: [url(outsider)], token: clientToken, locate: locateOrders });
  t.teardown(() => router.close());
  const keys = Array.from({ length: 40 }, (_, i) => `customer-${i}`);
  for (const key of keys)
    t.equal(await router.groupOf(key), partitionGroup('orders', partitionOf(key, PARTITIONS)), `${key}`);
  t.equal(router.stats.catalogFetches, 1, 'the catalogue was fetched once for 40 keys');
  await t.rejects(
    new GroupRouter({ endpoints: [url(outsider)], token: clientToken, locate: () => null }).groupOf('x'),
    { status: 404, code: 'group_not_found' },
  );

  await router.call('log.orders.0', 'POST', '/v1/topics/orders/partitions/0/records', {
    records: [{ value: 'first' }],
  });
  t.ok(router.stats.misdirected >= 1, `a 421 was followed (${router.stats.misdirected})`);
  const leader = rows.find((g) => g.group === 'log.orders.0')!.leader!;
  t.equal(router.leaderOf('log.orders.0'), url(leader), 'the leader is cached');
  const sent = router.stats.requests;
  const misdirected = router.stats.misdirected;
  for (let i = 0; i < 5; i++)
    await router.call('log.orders.0', 'POST', '/v1/topics/orders/partitions/0/records', {
      records: [{ value: `v${i}` }],
    });
  t.equal(router.stats.requests - sent, 5, 'later calls go straight to the leader: one request each');
  t.equal(router.stats.misdirected, misdirected, 'and none is misdirected');

  // By key, end to end: every record lands in the key's partition.
  for (const key of keys.slice(0, 10)) {
    const group = await router.groupOf(key);
    const p = Number(group.split('.').at(-1));
    const answer = (await router.callKey(key, 'POST', `/v1/topics/orders/partitions/${p}/records`, {
      records: [{ key, value: key }],
    })) as { partition: number };
    t.equal(answer.partition, partitionOf(key, PARTITIONS));
  }
});

t.test('GroupRouter: follows a leadership transfer and a killed leader', async (t) => {
  const router = new GroupRouter({ endpoints: cluster.members, token: clientToken, timeoutMs: 60_000 });
  t.teardown(() => router.close());
  const path = '/v1/topics/orders/partitions/5/records';
  await router.call('log.orders.5', 'POST', path, { records: [{ value: 'a' }] });
  const row = partitions(await groups()).find((g) => g.group === 'log.orders.5')!;
  t.equal(router.leaderOf('log.orders.5'), url(row.leader!));
  const to = row.members.find((m) => m !== row.leader)!;
  const moved = await call(url(row.leader!), 'POST', '/v1/cluster/transfer-leader', {
    token: admin,
    body: { group: 'log.orders.5', to },
  });
  t.equal(moved.status, 200, `leadership of partition 5 moved ${row.leader} -> ${to}`);
  await until(
    'the transfer to be visible',
    async () => partitions(await groups()).find((g) => g.group === 'log.orders.5')!.leader === to,
    30_000,
  );
  // The cached leader is stale: the answer names the new one, and the router follows.
  await until(
    'the router to follow',
    async () => {
      await router.call('log.orders.5', 'POST', path, { records: [{ value: 'b' }] });
      return router.leaderOf('log.orders.5') === url(to);
    },
    30_000,
  );
  t.ok(router.stats.leaderChanges >= 1, 'it saw the leader change');

  // The leader's process dies: the router tries the others until one leads.
  const held = (await statuses()).find((s) => s.id === to)!.groups;
  t.equal((await cluster.run('kill', to)).code, 0, `kill ${to}`);
  try {
    await router.call('log.orders.5', 'POST', path, { records: [{ value: 'c' }] });
    const now = router.leaderOf('log.orders.5');
    t.ok(now !== null && now !== url(to), `a new leader serves it: ${now}`);
    const fetched = (await router.call(
      'log.orders.5',
      'GET',
      `/v1/topics/orders/partitions/5/records?offset=0&consistency=linearizable`,
    )) as { records: Array<{ value: string }> };
    t.same(
      fetched.records.map((r) => r.value).slice(-3),
      ['a', 'b', 'c'],
      'every acknowledged append is there, in order',
    );
  } finally {
    t.equal((await cluster.run('restart', to)).code, 0, `restart ${to}`);
  }
  await until(
    `${to} back with its groups`,
    async () => (await statuses()).find((s) => s.id === to)?.groups === held,
    60_000,
  );
  t.pass(`${to} runs its ${held} groups again from disk`);
});

t.test('add-node: a new process receives replicas; remove-node: it gives them all up; no append is lost', async (t) => {
  // One record per partition before anything moves, read back at the end.
  const router = new GroupRouter({ endpoints: cluster.members, token: clientToken, timeoutMs: 60_000 });
  t.teardown(() => router.close());
  const ends = async (): Promise<number[]> =>
    Promise.all(
      Array.from({ length: PARTITIONS }, async (_, p) => {
        const r = (await router.call(
          partitionGroup('orders', p),
          'GET',
          `/v1/topics/orders/partitions/${p}/records?offset=0&max_records=1000&consistency=linearizable`,
        )) as { records: Array<{ value: string }> };
        return r.records.length;
      }),
    );
  for (let p = 0; p < PARTITIONS; p++)
    await router.call(partitionGroup('orders', p), 'POST', `/v1/topics/orders/partitions/${p}/records`, {
      records: [{ value: `before-move-${p}` }],
    });
  const before = await ends();

  const added = await cluster.run('add-node');
  t.equal(added.code, 0, `add-node (${added.stderr.trim()})`);
  t.match(added.stdout, /^added n6: http:\/\//);
  await until(
    'n6 to be a learner of the meta group',
    async () =>
      ((await groups()).find((g) => g.group === 'meta') as GroupJson & { learners: string[] }).learners.includes('n6'),
    30_000,
  );
  // Nobody asks for a spread: the meta group's leader moves replicas onto n6 by itself (learner, then voter).
  await until(
    'n6 to hold its share, every move done',
    async () => {
      const rows = await statuses();
      const n6 = rows.find((r) => r.id === 'n6');
      const g = partitions(await groups());
      return (
        n6 !== undefined &&
        (n6.groups ?? 0) >= 4 &&
        g.every((x) => x.members.length === 3 && x.leader !== null) &&
        rows.reduce((n, r) => n + (r.groups ?? 0), 0) === PARTITIONS * 3
      );
    },
    150_000,
  );
  const spread = (await statuses()).map((r) => r.groups!);
  t.ok(Math.max(...spread) - Math.min(...spread) <= 1, `30 replicas over 6 members: ${spread.join(' ')}`);
  t.same(await ends(), before, 'every partition kept its records through the moves');

  const removed = await cluster.run('remove-node', 'n6');
  t.equal(removed.code, 0, `remove-node n6 (${removed.stderr.trim()})`);
  await until(
    "n6's replicas to move back to the five",
    async () => {
      const g = partitions(await groups());
      return g.every((x) => !x.members.includes('n6') && x.members.length === 3 && x.leader !== null);
    },
    150_000,
  );
  const rows = await statuses();
  t.notOk(
    rows.some((r) => r.id === 'n6'),
    'status no longer lists n6',
  );
  const metaRow = (await groups()).find((g) => g.group === 'meta') as GroupJson & { learners: string[] };
  t.ok(
    !metaRow.members.includes('n6') && !metaRow.learners.includes('n6'),
    `n6 left the meta group too (${metaRow.members.join(',')} / ${metaRow.learners.join(',')})`,
  );
  t.equal(
    rows.reduce((n, r) => n + (r.groups ?? 0), 0),
    PARTITIONS * 3,
    'the five hold all 30 replicas again',
  );
  t.same(await ends(), before, 'and every record is still there');
});

t.test('replicas=5: a topic that asks for none is on all five members and takes appends with two killed', async (t) => {
  const state = JSON.parse(readFileSync(join(cluster.dataDir, 'cluster.json'), 'utf8')) as {
    replicas?: number;
    settings?: Record<string, string>;
  };
  t.equal(state.replicas, 5, 'cluster.json records the count');
  t.notOk('replicas' in (state.settings ?? {}), 'as a member setting, not a worker one');
  const FIVE = 2;
  const made = await call(cluster.members[0]!, 'POST', '/v1/topics', {
    token: admin,
    body: { name: 'five', partitions: FIVE },
  });
  t.equal(made.status, 201, `topic five created (${JSON.stringify(made.body)})`);
  t.equal((made.body as { replicas: number }).replicas, 5, "it takes the cluster's count");
  // A creator that names no count finds a topic of another count as it is (one made before a change of the count).
  const again = await call(cluster.members[0]!, 'POST', '/v1/topics', {
    token: admin,
    body: { name: 'orders', partitions: PARTITIONS },
  });
  t.match(again, { status: 200, body: { replicas: 3, created: false } }, 'orders, created with 3, is found as it is');
  const five = (rows: GroupJson[]): GroupJson[] => rows.filter((g) => g.group.startsWith('log.five.'));
  await until(
    'every partition of five to have a leader on five members',
    async () => {
      const rows = five(await groups());
      return rows.length === FIVE && rows.every((g) => g.leader !== null && g.replicas === 5);
    },
    60_000,
  );
  t.pass('every group of the topic is on n1..n5');
  const router = new GroupRouter({ endpoints: cluster.members, token: clientToken, timeoutMs: 60_000 });
  t.teardown(() => router.close());
  const appendAll = async (value: string): Promise<void> => {
    for (let p = 0; p < FIVE; p++)
      await router.call(partitionGroup('five', p), 'POST', `/v1/topics/five/partitions/${p}/records`, {
        records: [{ value }],
      });
  };
  await appendAll('before');
  // Two of five down: every group still has a quorum of three (a group of three could lose its quorum here).
  for (const id of ['n4', 'n5']) t.equal((await cluster.run('kill', id)).code, 0, `kill ${id}`);
  try {
    await appendAll('two-down');
    for (let p = 0; p < FIVE; p++) {
      const r = (await router.call(
        partitionGroup('five', p),
        'GET',
        `/v1/topics/five/partitions/${p}/records?offset=0&consistency=linearizable`,
      )) as { records: Array<{ value: string }> };
      // A plain append retried by the router after an unknown outcome may be stored twice (at least once).
      t.same(
        [...new Set(r.records.map((x) => x.value))],
        ['before', 'two-down'],
        `partition ${p}: both appends, in order`,
      );
    }
  } finally {
    t.equal((await cluster.run('restart', 'n4')).code, 0, 'restart n4');
  }
  // A restart starts the member with the recorded count.
  await until(
    'n4 back with the count',
    async () => (await statuses()).find((s) => s.id === 'n4')?.replicas === 5,
    30_000,
  );
  t.pass('n4 restarted from cluster.json gives new groups 5 replicas');
});

t.test('hash slots: the default locator', async (t) => {
  const list: RouterGroup[] = [
    { name: 'low', members: [], data: { slots: [0, HASH_SLOTS / 2 - 1] } },
    { name: 'high', members: [], data: { slots: [HASH_SLOTS / 2, HASH_SLOTS - 1] } },
  ];
  for (const key of ['a', 'b', 'user:1', 'user:2', '']) {
    const slot = hashSlot(key);
    t.ok(slot >= 0 && slot < HASH_SLOTS);
    t.equal(locateBySlot(key, list), slot < HASH_SLOTS / 2 ? 'low' : 'high', `${JSON.stringify(key)} -> slot ${slot}`);
  }
  t.equal(locateBySlot('a', [{ name: 'x', members: [], data: {} }]), null, 'no slots, no group');
  t.ok(new ServiceError(404, 'group_not_found', 'm', null) instanceof Error);
});

t.test('a single-group service (kv): one group named after it, 1 group per member, nothing to balance', async (t) => {
  const kv = await startCluster('kv', { nodes: 3, tickMs: 50 });
  t.teardown(() => kv.down());
  const rows = JSON.parse((await kv.run('status', '--json')).stdout) as StatusJson[];
  t.same(
    rows.map((r) => r.groups),
    [1, 1, 1],
  );
  t.same(
    rows.map((r) => r.replicas),
    [3, 3, 3],
    'its one group is on every member',
  );
  t.equal(
    rows.reduce((n, r) => n + r.leaders!, 0),
    1,
    'one member leads it',
  );
  const list = JSON.parse((await kv.run('groups', '--json')).stdout) as GroupJson[];
  t.equal(list.length, 1);
  t.match(list[0], { group: 'kv', term: Number, commit: Number, lag: Number, members: ['n1', 'n2', 'n3'] });
  t.ok(
    list[0]!.leader !== null && rows.find((r) => r.id === list[0]!.leader)!.leaders === 1,
    'its leader is the one status shows leading',
  );
  const balance = await kv.run('balance');
  t.equal(balance.code, 0);
  t.match(balance.stdout, /kv runs one Raft group: nothing to balance/);
});
