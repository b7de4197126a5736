/**
 * Embedded stores and overload, on real processes through the `cluster` CLI: 3 members and 2 check instances with
 * no store workers (`--workers store=0,check=2`), so each check instance holds one counter shard in its own
 * process and serves it to the other over its binary listener. `store_queue=4`: an instance lets at most 4 store
 * calls wait on another instance's shard; checks beyond that are decided from its local fallback buckets and
 * answered `overloaded`, counted on both sides.
 */
import t from 'tap';
import { v4 as uuid } from 'uuid';
import type { PeerAddress } from '@raftkit/http';
import { RpcClient } from '@raftkit/rpc';
import { RateLimitClient, type CheckResult } from '../src/client.js';
import { shardFor } from '../src/workers/store/client.js';
import { call, startRateLimitCluster, until, type RateLimitCluster } from './helpers/cluster.js';

let c: RateLimitCluster;
const QUEUE = 4;

t.before(async () => {
  // 3 members: the rule store is not what this file tests, and a smaller cluster starts sooner.
  c = await startRateLimitCluster({
    nodes: 3,
    workers: 'store=0,check=2',
    set: [`store_queue=${QUEUE}`, 'store_timeout_ms=2000'],
  });
});
t.teardown(async () => {
  await c?.down();
});

async function tenant(serviceId: string): Promise<{ admin: string; check: string }> {
  const a = await call(c.checks[0]!.http, 'PUT', `/v1/tenants/${serviceId}`, c.token);
  if (a.status !== 200) throw new Error(`tenant: ${a.status} ${JSON.stringify(a.body)}`);
  return { admin: a.body.admin_key as string, check: a.body.check_key as string };
}

async function putRule(serviceId: string, token: string, fields: Record<string, unknown>): Promise<void> {
  const a = await call(c.members[0]!, 'PUT', `/v1/rules/${uuid()}`, token, {
    service_id: serviceId,
    dimension: 'ip',
    endpoint_pattern: '*',
    ...fields,
  });
  if (a.status !== 200) throw new Error(`put rule: ${a.status} ${JSON.stringify(a.body)}`);
  for (const check of c.checks) {
    await until(
      `${check.id} at revision ${a.body.revision}`,
      async () =>
        ((await call(check.http, 'GET', '/healthz', null)).body.rules_revision as number) >=
        (a.body.revision as number),
      10_000,
      50,
    );
  }
}

async function metric(instance: number, line: RegExp): Promise<number> {
  const text = (await call(c.checks[instance]!.http, 'GET', '/metrics', null)).body.text as string;
  const m = line.exec(text);
  return m === null ? 0 : Number(m[1]);
}

/** The check instance holding `serviceId`'s counters, and the other one. */
function owner(serviceId: string): { home: number; away: number } {
  const peers: PeerAddress[] = c.checks.map((w) => ({
    id: w.id,
    role: w.role,
    httpAddress: w.url.replace('http://', ''),
    tcpAddress: w.tcp,
  }));
  const home = peers.indexOf(shardFor(peers, serviceId));
  return { home, away: 1 - home };
}

function client(instance: number, token: string): RateLimitClient {
  return new RateLimitClient({ addresses: [c.checks[instance]!.tcp], token, timeoutMs: 10_000 });
}

t.test('rule 1 across the two instances: one counter, held by one of them, served to both', async (t) => {
  const k = await tenant('emb-one');
  await putRule('emb-one', k.admin, { limit: 10, window_sec: 3600 });
  const { home, away } = owner('emb-one');
  const clients = [client(home, k.check), client(away, k.check)];
  try {
    const answers: CheckResult[] = [];
    // Both instances at once, a few in flight on each (under the queue of 4): exactly the capacity is admitted.
    for (let round = 0; round < 10; round++) {
      answers.push(
        ...(await Promise.all(
          Array.from({ length: 6 }, (_, i) =>
            clients[i % 2]!.check({ serviceId: 'emb-one', endpoint: '/x', identifiers: { ip: '1.1.1.1' } }),
          ),
        )),
      );
    }
    t.equal(answers.filter((a) => a.allowed).length, 10, 'exactly 10 of 60 checks admitted, from both instances');
    t.notOk(
      answers.some((a) => a.overloaded === true),
      'no overload at 3 in flight per instance',
    );
  } finally {
    for (const cl of clients) cl.close();
  }
  t.ok((await metric(home, /^ratelimit_store_take_ops_total (\d+)/m)) >= 60, "the home instance's shard took every op");
  t.equal(
    await metric(away, /^ratelimit_store_take_ops_total (\d+)/m),
    0,
    "the other instance's shard holds none of this tenant's counters",
  );
});

t.test('the store protocol on a check listener takes the cluster token only', async (t) => {
  const k = await tenant('emb-auth');
  const asTenant = new RpcClient({ address: c.checks[0]!.tcp, token: k.check, timeoutMs: 5_000 });
  const asCluster = new RpcClient({ address: c.checks[0]!.tcp, token: c.token, timeoutMs: 5_000 });
  try {
    await t.rejects(
      asTenant.call({ t: 'take', ops: [['emb-auth:*:ip:x', 5, 1, 1, 0]] }),
      { code: 'forbidden' },
      'a tenant cannot reach counters directly',
    );
    t.match(await asCluster.call({ t: 'ping' }), { now: Number }, 'another check instance (cluster token) can');
    await t.rejects(asCluster.call({ t: 'take', ops: [] }), { code: 'bad_request' }, 'and its requests are validated');
  } finally {
    asTenant.close();
    asCluster.close();
  }
});

t.test(
  'overload: past store_queue calls waiting on a remote shard, checks are answered overloaded from the fallback buckets, every one counted',
  async (t) => {
    const k = await tenant('emb-load');
    // Fallback share: capacity 40 / 2 instances = 20 per instance.
    await putRule('emb-load', k.admin, { limit: 40, window_sec: 3600 });
    const { home, away } = owner('emb-load');
    const before = {
      away: await metric(away, /^ratelimit_overloaded_total (\d+)/m),
      home: await metric(home, /^ratelimit_overloaded_total (\d+)/m),
    };
    const total = 1_000;
    const remote = client(away, k.check);
    const local = client(home, k.check);
    try {
      // 1,000 checks leave in one turn (one frame): the away instance sends QUEUE of them to the home shard and
      // must decide the rest without waiting.
      const answers = await Promise.all(
        Array.from({ length: total }, (_, i) =>
          remote.check({ serviceId: 'emb-load', endpoint: '/x', identifiers: { ip: `k${i % 2}` } }),
        ),
      );
      const overloaded = answers.filter((a) => a.overloaded === true);
      t.comment(
        `away instance: ${total} checks, ${overloaded.length} overloaded (${overloaded.filter((a) => a.allowed).length} of them admitted), ${answers.length - overloaded.length} through the store`,
      );
      t.ok(overloaded.length >= total - 10 * QUEUE, `most checks answered overloaded (${overloaded.length})`);
      t.ok(answers.length - overloaded.length >= QUEUE, `the queue's ${QUEUE} went to the store`);
      t.equal(
        (await metric(away, /^ratelimit_overloaded_total (\d+)/m)) - before.away,
        overloaded.length,
        'ratelimit_overloaded_total counts every overloaded answer',
      );
      const admittedOverloaded = overloaded.filter((a) => a.allowed).length;
      t.ok(
        admittedOverloaded <= 2 * 20,
        `overloaded admissions stay within the fallback share of both keys: ${admittedOverloaded} <= 40`,
      );
      t.ok(admittedOverloaded >= 1, 'and the fallback buckets do admit');
      t.ok(
        answers.every((a) => a.remaining >= 0),
        'no answer failed open (remaining -1)',
      );
      t.equal(await metric(away, /^ratelimit_fail_open_total (\d+)/m), 0, 'no fail-open');

      // The home instance holds the shard: its checks never wait on a queue.
      const homeAnswers = await Promise.all(
        Array.from({ length: total }, (_, i) =>
          local.check({ serviceId: 'emb-load', endpoint: '/x', identifiers: { ip: `h${i % 2}` } }),
        ),
      );
      t.notOk(
        homeAnswers.some((a) => a.overloaded === true),
        'the home instance decides every check from its own shard',
      );
      t.equal(homeAnswers.filter((a) => a.allowed).length, 80, 'exactly the two keys of capacity 40 admitted');
      t.equal((await metric(home, /^ratelimit_overloaded_total (\d+)/m)) - before.home, 0);
    } finally {
      remote.close();
      local.close();
    }
    const http = await call(c.checks[away]!.http, 'POST', '/v1/check', k.check, {
      service_id: 'emb-load',
      endpoint: '/x',
      identifiers: { ip: 'http' },
    });
    t.match(
      http.body,
      { allowed: true, rules: 1 },
      'HTTP checks on the away instance go through the store when the queue is free',
    );
    t.notOk('overloaded' in http.body, 'and carry no overloaded flag');
  },
);
