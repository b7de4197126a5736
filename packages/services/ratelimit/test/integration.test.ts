/**
 * The rate-limiting service on real processes through the `cluster` CLI: 5 Raft members (the rule store), 2
 * counter stores and 3 check instances. The spec's check rules 1 to 10, the counter-store state table (stores
 * paused and killed), tenant isolation, rule propagation, the middleware on a real node:http server, the binary
 * protocol client, metrics, and over-admission of hot keys measured.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import t from 'tap';
import { v4 as uuid } from 'uuid';
import { request } from 'undici';
import { HttpRateLimitClient, RateLimitClient, rateLimitMiddleware, type RateLimiter } from '../src/client.js';
import { call, startRateLimitCluster, until, type Answer, type RateLimitCluster } from './helpers/cluster.js';

let c: RateLimitCluster;
const STORE_TIMEOUT_MS = 200;

t.before(async () => {
  c = await startRateLimitCluster({ workers: 'store=2,check=3', set: [`store_timeout_ms=${STORE_TIMEOUT_MS}`] });
});
t.teardown(async () => {
  await c?.down();
});

interface Keys {
  admin: string;
  check: string;
}

async function tenant(serviceId: string): Promise<Keys> {
  const a = await call(c.checks[0]!.http, 'PUT', `/v1/tenants/${serviceId}`, c.token);
  if (a.status !== 200) throw new Error(`tenant: ${a.status} ${JSON.stringify(a.body)}`);
  return { admin: a.body.admin_key as string, check: a.body.check_key as string };
}

/** PUT a rule on a member and wait until every check instance caches its revision. */
async function putRule(
  serviceId: string,
  token: string,
  fields: Record<string, unknown>,
  id = uuid(),
): Promise<string> {
  const a = await call(c.members[0]!, 'PUT', `/v1/rules/${id}`, token, {
    service_id: serviceId,
    dimension: 'ip',
    endpoint_pattern: '*',
    ...fields,
  });
  if (a.status !== 200) throw new Error(`put rule: ${a.status} ${JSON.stringify(a.body)}`);
  await propagated(a.body.revision as number);
  return id;
}

async function propagated(revision: number): Promise<number> {
  const started = Date.now();
  for (const check of c.checks) {
    await until(
      `${check.id} at revision ${revision}`,
      async () => ((await call(check.http, 'GET', '/healthz', null)).body.rules_revision as number) >= revision,
      10_000,
      50,
    );
  }
  return Date.now() - started;
}

const check = (
  instance: number,
  token: string | null,
  serviceId: string,
  endpoint: string,
  identifiers: Record<string, string>,
): Promise<Answer> =>
  call(c.checks[instance]!.http, 'POST', '/v1/check', token, { service_id: serviceId, endpoint, identifiers });

async function metric(instance: number, line: RegExp): Promise<number> {
  const text = (await call(c.checks[instance]!.http, 'GET', '/metrics', null)).body.text as string;
  const m = line.exec(text);
  return m === null ? NaN : Number(m[1]);
}

t.test(
  'tenants and the rule API (rule 7): keys, validation 400 naming the field, unknown service_id refused, list, delete',
  async (t) => {
    const created = await call(c.checks[1]!.http, 'PUT', '/v1/tenants/api-shop', c.token);
    t.equal(created.status, 200);
    t.match(created.body, {
      service_id: 'api-shop',
      created: true,
      admin_key: /^client\.admin\.api-shop\./,
      check_key: /^client\.check\.api-shop\./,
    });
    const again = await call(c.members[2]!, 'PUT', '/v1/tenants/api-shop', c.token);
    t.same(again.body, { ...created.body, created: false }, 'registering again: the same keys, on any process');
    const keys = { admin: created.body.admin_key as string };
    t.equal(
      (await call(c.checks[0]!.http, 'PUT', '/v1/tenants/other', keys.admin)).status,
      403,
      'tenants are registered with the cluster token only',
    );

    const id = uuid();
    const bad = await call(c.checks[0]!.http, 'PUT', `/v1/rules/${id}`, keys.admin, {
      service_id: 'api-shop',
      dimension: 'ip',
      endpoint_pattern: '*',
      limit: 0,
      window_sec: 60,
    });
    t.equal(bad.status, 400);
    t.match(
      bad.body,
      { error: { code: 'invalid_field', field: 'limit' } },
      'forwarded by a check instance with the field named',
    );
    const badPattern = await call(c.members[1]!, 'PUT', `/v1/rules/${id}`, keys.admin, {
      service_id: 'api-shop',
      dimension: 'ip',
      endpoint_pattern: 'no-slash',
      capacity: 5,
      refill_rate: 1,
    });
    t.match(badPattern.body, { error: { field: 'endpoint_pattern' } });
    const badRefill = await call(c.members[1]!, 'PUT', `/v1/rules/${id}`, keys.admin, {
      service_id: 'api-shop',
      dimension: 'ip',
      endpoint_pattern: '*',
      capacity: 5,
      refill_rate: -1,
    });
    t.match(badRefill.body, { error: { field: 'refill_rate' } });
    const unknown = await call(c.members[0]!, 'PUT', `/v1/rules/${id}`, c.token, {
      service_id: 'never-registered',
      dimension: 'ip',
      endpoint_pattern: '*',
      limit: 5,
      window_sec: 1,
    });
    t.equal(unknown.status, 400);
    t.match(unknown.body, { error: { code: 'unknown_service', field: 'service_id' } });

    const put = await call(c.checks[2]!.http, 'PUT', `/v1/rules/${id}`, keys.admin, {
      service_id: 'api-shop',
      dimension: 'user_id',
      endpoint_pattern: '/v1/orders/*',
      limit: 120,
      window_sec: 60,
    });
    t.equal(put.status, 200);
    t.match(put.body, {
      rule_id: id,
      service_id: 'api-shop',
      dimension: 'user_id',
      endpoint_pattern: '/v1/orders/*',
      limit: 120,
      window_sec: 60,
      capacity: 120,
      refill_rate: 2,
      fail_closed: false,
      created: true,
    });
    const list = await call(c.checks[0]!.http, 'GET', '/v1/rules?service_id=api-shop', keys.admin);
    t.equal(list.status, 200);
    t.match(list.body, [
      { rule_id: id, dimension: 'user_id', endpoint_pattern: '/v1/orders/*', limit: 120, window_sec: 60 },
    ]);
    t.same(
      (await call(c.members[3]!, 'GET', '/v1/rules', keys.admin)).body,
      list.body,
      'a tenant key lists its own tenant without naming it',
    );
    t.match(
      (await call(c.members[3]!, 'GET', '/v1/rules', c.token)).body,
      { error: { field: 'service_id' } },
      'the cluster token must name the tenant',
    );
    t.equal((await call(c.members[3]!, 'GET', '/v1/rules?service_id=never-registered', c.token)).status, 404);
    const del = await call(c.checks[1]!.http, 'DELETE', `/v1/rules/${id}`, keys.admin);
    t.equal(del.status, 204);
    t.same((await call(c.members[0]!, 'GET', '/v1/rules?service_id=api-shop', keys.admin)).body, []);
    t.equal((await call(c.checks[1]!.http, 'DELETE', `/v1/rules/${id}`, keys.admin)).status, 404);
  },
);

t.test("tenant isolation: A's keys never see or change B's rules, and never check against B", async (t) => {
  const a = await tenant('iso-a');
  const b = await tenant('iso-b');
  const ruleB = await putRule('iso-b', b.admin, { limit: 7, window_sec: 60 });
  const ruleA = await putRule('iso-a', a.admin, { limit: 3, window_sec: 60 });
  for (const base of [c.members[0]!, c.checks[0]!.http]) {
    t.equal((await call(base, 'GET', '/v1/rules?service_id=iso-b', a.admin)).status, 403, "list B with A's key");
    t.equal((await call(base, 'GET', `/v1/rules/${ruleB}`, a.admin)).status, 404, "B's rule looks missing to A");
    t.equal((await call(base, 'DELETE', `/v1/rules/${ruleB}`, a.admin)).status, 404, "A cannot delete B's rule");
    const takeOver = await call(base, 'PUT', `/v1/rules/${ruleB}`, a.admin, {
      service_id: 'iso-a',
      dimension: 'ip',
      endpoint_pattern: '*',
      limit: 1000,
      window_sec: 1,
    });
    t.equal(takeOver.status, 409, "A cannot take over B's rule id");
    t.equal(
      (
        await call(base, 'PUT', `/v1/rules/${uuid()}`, a.admin, {
          service_id: 'iso-b',
          dimension: 'ip',
          endpoint_pattern: '*',
          limit: 1,
          window_sec: 1,
        })
      ).status,
      403,
      'A cannot create rules in B',
    );
    t.match((await call(base, 'GET', '/v1/rules', a.admin)).body, [{ rule_id: ruleA }], 'A sees only its own rules');
    t.equal(
      (await call(base, 'GET', '/v1/rules?service_id=iso-a', a.check)).status,
      403,
      'a check key does not manage rules',
    );
    t.equal((await call(base, 'GET', '/v1/rules?service_id=iso-a', null)).status, 401, 'no token');
    t.equal((await call(base, 'GET', '/v1/rules?service_id=iso-a', 'wrong')).status, 401, 'wrong token');
  }
  t.match(
    (await call(c.members[1]!, 'GET', `/v1/rules/${ruleB}`, b.admin)).body,
    { rule_id: ruleB, limit: 7, service_id: 'iso-b' },
    "B's rule is unchanged",
  );
  const cross = await check(0, a.check, 'iso-b', '/x', { ip: '9.9.9.9' });
  t.equal(cross.status, 403, "A's check key cannot check against B");
  t.match(cross.body, { error: { code: 'forbidden' } });
  t.equal((await check(0, a.admin, 'iso-b', '/x', { ip: '9.9.9.9' })).status, 403, "nor can A's admin key");
  t.equal((await check(1, a.check, 'iso-a', '/x', { ip: '9.9.9.9' })).status, 200);
  t.equal((await check(1, b.check, 'iso-b', '/x', { ip: '9.9.9.9' })).status, 200);
  t.equal((await check(2, null, 'iso-a', '/x', { ip: '9.9.9.9' })).status, 401, 'checks need a token');
});

t.test(
  'check rules 2-4: lazy refill on the store clock, remaining = floor(tokens), retry_after_ms = ceil((1 - tokens) / rate * 1000)',
  async (t) => {
    const k = await tenant('refill');
    const ruleId = await putRule('refill', k.admin, { capacity: 3, refill_rate: 2 });
    const answers: Answer[] = [];
    for (let i = 0; i < 4; i++) answers.push(await check(i % 3, k.check, 'refill', '/any', { ip: '1.1.1.1' }));
    t.same(
      answers.slice(0, 3).map((a) => [a.body.allowed, a.body.remaining]),
      [
        [true, 2],
        [true, 1],
        [true, 0],
      ],
      'a new counter starts full; each take subtracts one',
    );
    const denied = answers[3]!.body;
    t.match(denied, { allowed: false, remaining: 0, rules: 1 });
    t.ok(
      (denied.retry_after_ms as number) > 0 && (denied.retry_after_ms as number) <= 500,
      `retry_after_ms ${denied.retry_after_ms} <= (1 - 0) / 2 * 1000`,
    );
    await new Promise((r) => setTimeout(r, (denied.retry_after_ms as number) + 50));
    t.match(
      (await check(1, k.check, 'refill', '/any', { ip: '1.1.1.1' })).body,
      { allowed: true, remaining: 0 },
      'a token came back after retry_after_ms',
    );
    t.match(
      (await check(1, k.check, 'refill', '/any', { ip: '1.1.1.2' })).body,
      { allowed: true, remaining: 2 },
      'another identifier has its own counter',
    );
    t.match(
      (await check(0, k.check, 'refill', '/any', {})).body,
      { allowed: true, remaining: -1, rules: 0 },
      'no identifier a rule counts by: no rule applies',
    );
    const unknown = await check(0, c.token, 'nobody-here', '/any', { ip: '1.1.1.1' });
    t.equal(unknown.status, 404);
    t.match(unknown.body, { error: { code: 'unknown_service' } });
    t.match((await check(0, c.token, 'refill', '', { ip: '1' })).body, { error: { field: 'endpoint' } });
    t.match((await call(c.checks[0]!.http, 'POST', '/v1/check', c.token, '{nope')).body, {
      error: { code: 'invalid_json' },
    });
    const sum = async (line: RegExp) =>
      (await Promise.all([0, 1, 2].map((i) => metric(i, line)))).reduce((x, y) => x + (Number.isNaN(y) ? 0 : y), 0);
    t.ok((await sum(/^ratelimit_checks_allowed_total (\d+)/m)) >= 5, 'allowed checks counted');
    t.ok((await sum(/^ratelimit_checks_denied_total (\d+)/m)) >= 1, 'denied checks counted');
    t.ok(
      (await sum(new RegExp(`^ratelimit_near_limit_total\\{rule_id="${ruleId}"\\} (\\d+)`, 'm'))) >= 2,
      'near-limit evaluations counted per rule',
    );
  },
);

t.test(
  'check rule 1: two concurrent checks on a counter holding one token admit exactly one, through two instances',
  async (t) => {
    const k = await tenant('atomic');
    await putRule('atomic', k.admin, { limit: 1, window_sec: 3600 });
    for (let round = 0; round < 10; round++) {
      const [x, y] = await Promise.all([
        check(0, k.check, 'atomic', '/pay', { ip: `10.0.0.${round}` }),
        check(1, k.check, 'atomic', '/pay', { ip: `10.0.0.${round}` }),
      ]);
      t.equal([x.body.allowed, y.body.allowed].filter(Boolean).length, 1, `round ${round}: exactly one admitted`);
    }
  },
);

t.test('check rule 5: every matching rule in one call; any deny denies, with the largest retry_after_ms', async (t) => {
  const k = await tenant('multi');
  await putRule('multi', k.admin, { dimension: 'ip', limit: 1, window_sec: 10 });
  await putRule('multi', k.admin, { dimension: 'user_id', limit: 1, window_sec: 100 });
  await putRule('multi', k.admin, { dimension: 'api_key', endpoint_pattern: '/v1/pay/*', limit: 100, window_sec: 1 });
  await putRule('multi', k.admin, { dimension: 'endpoint', endpoint_pattern: '/v1/pay/*', limit: 50, window_sec: 1 });
  await putRule('multi', k.admin, { dimension: 'tenant', endpoint_pattern: '*', limit: 1000, window_sec: 1 });
  const ids = { ip: '2.2.2.2', user_id: 'u1', api_key: 'k1' };
  const first = (await check(0, k.check, 'multi', '/v1/pay/card', ids)).body;
  t.match(first, { allowed: true, remaining: 0, rules: 5 }, 'five rules matched; remaining is the most restrictive');
  const second = (await check(2, k.check, 'multi', '/v1/pay/card', ids)).body;
  t.match(second, { allowed: false, remaining: 0, rules: 5 });
  t.ok(
    (second.retry_after_ms as number) > 99_000 && (second.retry_after_ms as number) <= 100_000,
    `the user rule's retry (${second.retry_after_ms} ms) wins over the ip rule's (~10 s)`,
  );
  t.match(
    (await check(1, k.check, 'multi', '/v1/other', { user_id: 'u2' })).body,
    { allowed: true, rules: 2 },
    'the endpoint pattern scopes the /v1/pay/* rules',
  );
});

t.test(
  'check rule 6: rule changes reach every instance within a few seconds; existing counters are untouched',
  async (t) => {
    const k = await tenant('change');
    const id = await putRule('change', k.admin, { limit: 5, window_sec: 3600 });
    for (let i = 0; i < 3; i++) await check(0, k.check, 'change', '/', { ip: '3.3.3.3' });
    const put = await call(c.members[4]!, 'PUT', `/v1/rules/${id}`, k.admin, {
      service_id: 'change',
      dimension: 'ip',
      endpoint_pattern: '*',
      limit: 10,
      window_sec: 3600,
    });
    t.match(put.body, { created: false, capacity: 10 });
    const took = await propagated(put.body.revision as number);
    t.ok(took < 5_000, `every instance had the change after ${took} ms`);
    t.match(
      (await check(2, k.check, 'change', '/', { ip: '3.3.3.3' })).body,
      { allowed: true, remaining: 1 },
      'the counter kept its 2 tokens (a reset counter would say 9)',
    );
    t.match(
      (await check(1, k.check, 'change', '/', { ip: '3.3.3.4' })).body,
      { allowed: true, remaining: 9 },
      'a new counter uses the new capacity',
    );
    const del = await call(c.members[0]!, 'DELETE', `/v1/rules/${id}`, k.admin);
    t.equal(del.status, 204);
    const rev = ((await call(c.members[0]!, 'GET', '/v1/rule-set?since=-1', c.token)).body.revision as number) ?? 0;
    await propagated(rev);
    t.match(
      (await check(1, k.check, 'change', '/', { ip: '3.3.3.3' })).body,
      { allowed: true, rules: 0 },
      'a deleted rule no longer applies',
    );
  },
);

async function serve(limiter: RateLimiter, onError: (e: unknown) => void): Promise<{ server: Server; url: string }> {
  const middleware = rateLimitMiddleware(limiter, {
    serviceId: 'mw',
    identify: (req) => ({ ip: String(req.headers['x-client-ip'] ?? 'none') }),
    onError,
  });
  const server = createServer((req, res) =>
    middleware(req, res, () => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end('hello');
    }),
  );
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

t.test(
  'check rule 10: the middleware on a real node:http server forwards when allowed, answers 429 with Retry-After when denied, fails open',
  async (t) => {
    const k = await tenant('mw');
    await putRule('mw', k.admin, { limit: 2, window_sec: 60 });
    const errors: unknown[] = [];
    const clients: RateLimiter[] = [
      new HttpRateLimitClient({ endpoints: [c.checks[1]!.http], token: k.check }),
      new RateLimitClient({ addresses: [c.checks[2]!.tcp], token: k.check }),
      new RateLimitClient({ addresses: ['127.0.0.1:1'], token: k.check, timeoutMs: 200 }),
    ];
    const servers = await Promise.all(clients.map((l) => serve(l, (e) => errors.push(e))));
    t.teardown(() => {
      for (const s of servers) s.server.close();
      for (const l of clients) l.close();
    });
    for (const [n, { url }] of servers.slice(0, 2).entries()) {
      const get = async () => {
        const res = await request(url + '/orders', { headers: { 'x-client-ip': `ip-${n}` } });
        return { status: res.statusCode, headers: res.headers, body: await res.body.text() };
      };
      const one = await get();
      t.equal(one.status, 200);
      t.equal(one.body, 'hello');
      t.equal(one.headers['x-ratelimit-remaining'], '1');
      t.equal(one.headers['x-ratelimit-reset'], '30', 'seconds until the bucket is full again');
      t.equal((await get()).headers['x-ratelimit-remaining'], '0');
      const denied = await get();
      t.equal(denied.status, 429);
      const retry = Number(denied.headers['retry-after']);
      t.ok(retry >= 29 && retry <= 30, `Retry-After ${retry} s`);
      t.match(JSON.parse(denied.body), { error: { code: 'rate_limited', retry_after_ms: Number } });
    }
    const open = await request(servers[2]!.url + '/orders');
    t.equal(open.statusCode, 200, 'the limiter is unreachable: the request goes through');
    await open.body.text();
    t.equal(errors.length, 1, 'and the failure is reported');
  },
);

t.test('binary protocol: pipelined, batched checks over TCP, with auth and failover', async (t) => {
  const k = await tenant('bin');
  const other = await tenant('bin-other');
  await putRule('bin', k.admin, { limit: 50, window_sec: 3600 });
  const client = new RateLimitClient({
    addresses: ['127.0.0.1:1', c.checks[0]!.tcp, c.checks[1]!.tcp],
    token: k.check,
  });
  t.teardown(() => client.close());
  const answers = await Promise.all(
    Array.from({ length: 120 }, () =>
      client.check({ serviceId: 'bin', endpoint: '/x', identifiers: { ip: '4.4.4.4' } }),
    ),
  );
  t.equal(answers.filter((a) => a.allowed).length, 50, '120 concurrent checks on a 50-token counter admit exactly 50');
  t.ok(answers.filter((a) => !a.allowed).every((a) => a.remaining === 0 && (a.retryAfterMs ?? 0) > 0));
  await t.rejects(
    client.check({ serviceId: 'bin-other', endpoint: '/x', identifiers: { ip: '4' } }),
    { name: 'RateLimitError', code: 'forbidden' },
    'a tenant key checks its own tenant only',
  );
  await t.rejects(client.check({ serviceId: 'bin', endpoint: '', identifiers: {} }), { code: 'invalid_field' });
  const wrong = new RateLimitClient({ addresses: [c.checks[0]!.tcp], token: other.check + 'x', timeoutMs: 500 });
  t.teardown(() => wrong.close());
  await t.rejects(
    wrong.check({ serviceId: 'bin-other', endpoint: '/x', identifiers: {} }),
    { code: 'unauthorized' },
    'a wrong token is refused',
  );
});

t.test(
  'check rule 9: hot keys served from local buckets; over-admission measured against sync_interval * rate * instances',
  async (t) => {
    const k = await tenant('hot');
    const capacity = 20;
    const rate = 200;
    const syncMs = 100;
    await putRule('hot', k.admin, {
      dimension: 'tenant',
      capacity,
      refill_rate: rate,
      hot_key: { qps_threshold: 50, sync_ms: syncMs },
    });
    const clients = c.checks.map((w) => new RateLimitClient({ addresses: [w.tcp], token: k.check }));
    t.teardown(() => {
      for (const cl of clients) cl.close();
    });
    const durationMs = 6_000;
    let admitted = 0;
    let total = 0;
    const started = Date.now();
    await Promise.all(
      clients.flatMap((client) =>
        Array.from({ length: 8 }, async () => {
          while (Date.now() - started < durationMs) {
            const a = await client.check({ serviceId: 'hot', endpoint: '/buy', identifiers: {} }).catch(() => null);
            total++;
            if (a?.allowed) admitted++;
          }
        }),
      ),
    );
    const seconds = (Date.now() - started) / 1000;
    const exact = capacity + rate * seconds;
    const bound = (syncMs / 1000) * rate * c.checks.length;
    const promotions = (
      await Promise.all([0, 1, 2].map((i) => metric(i, /^ratelimit_hot_key_promotions_total (\d+)/m)))
    ).reduce((x, y) => x + y, 0);
    t.comment(
      `hot key: ${total} checks in ${seconds.toFixed(2)} s over ${c.checks.length} instances; admitted ${admitted}, exact limit ${exact.toFixed(0)}; over-admission ${(admitted - exact).toFixed(0)} (bound ${bound})`,
    );
    t.ok(promotions >= 1, `the counter was served from local buckets (${promotions} promotions)`);
    t.ok(total > admitted * 1.5, 'the key was driven well past its limit');
    t.ok(
      admitted <= exact + bound,
      `admitted ${admitted} <= capacity + rate * T + sync_interval * rate * instances = ${(exact + bound).toFixed(0)}`,
    );
    t.ok(admitted >= rate * seconds * 0.5, `and the local buckets do not starve the key (${admitted} admitted)`);
  },
);

t.test(
  'state table and rule 8: stores paused, then killed: fail-open/closed per rule within the budget, degraded after three failed health checks, normal after three good ones',
  async (t) => {
    const k = await tenant('faults');
    await putRule('faults', k.admin, { endpoint_pattern: '/open', limit: 100_000, window_sec: 10 });
    await putRule('faults', k.admin, {
      endpoint_pattern: '/closed',
      limit: 100_000,
      window_sec: 10,
      fail_closed: true,
    });
    await putRule('faults', k.admin, { endpoint_pattern: '/drained', limit: 2, window_sec: 3600 });
    await putRule('faults', k.admin, { endpoint_pattern: '/fallback', limit: 3, window_sec: 3600 });
    const ids = { ip: '5.5.5.5' };
    for (let i = 0; i < 3; i++) await check(0, k.check, 'faults', '/drained', ids);
    t.match((await check(1, k.check, 'faults', '/drained', ids)).body, { allowed: false }, 'drained before the outage');
    const stores = c.workers.filter((w) => w.role === 'store').map((w) => w.id);
    const modes = async (instance: number) =>
      Object.values(
        (await call(c.checks[instance]!.http, 'GET', '/healthz', null)).body.stores as Record<string, string>,
      );

    for (const fault of ['pause', 'kill'] as const) {
      // Probe both rules without pause while the stores go away: between the fault and degraded mode (three health
      // checks later), checks are decided per rule without the store.
      const seen: Array<{ path: string; body: Record<string, unknown>; ms: number; at: number }> = [];
      let probing = true;
      const probe = (async () => {
        while (probing) {
          for (const path of ['/open', '/closed']) {
            const sent = Date.now();
            const a = await check(0, k.check, 'faults', path, ids);
            seen.push({ path, body: a.body, ms: Date.now() - sent, at: Date.now() });
          }
          await new Promise((r) => setTimeout(r, 30));
        }
      })();
      const results = await Promise.all(stores.map((s) => c.run(fault, s)));
      t.same(
        results.map((r) => r.code),
        stores.map(() => 0),
        `${fault} ${stores.join(', ')}`,
      );
      await until('degraded mode', async () => (await modes(0)).every((m) => m === 'degraded'), 15_000);
      const degradedAt = Date.now();
      probing = false;
      await probe;
      const failOpen = seen.find((s) => s.path === '/open' && s.body.remaining === -1);
      const failClosed = seen.find((s) => s.path === '/closed' && s.body.allowed === false);
      t.match(failOpen?.body, { allowed: true, remaining: -1 }, `${fault}: a fail-open rule allows with remaining -1`);
      t.match(
        failClosed?.body,
        { allowed: false, remaining: 0 },
        `${fault}: a fail-closed rule denies with remaining 0`,
      );
      const slowest = Math.max(...seen.map((s) => s.ms));
      t.ok(
        slowest < 1_000,
        `${fault}: every check answered within ${slowest} ms (store budget ${STORE_TIMEOUT_MS} ms)`,
      );
      const firstFail = Math.min(failOpen?.at ?? Infinity, failClosed?.at ?? Infinity);
      t.ok(
        degradedAt - firstFail >= 1_000,
        `${fault}: degraded ${degradedAt - firstFail} ms after the first check without the store (three health checks a second apart)`,
      );
      t.ok((await metric(0, /^ratelimit_fail_open_total (\d+)/m)) >= 1, 'fail-open counted');
      t.ok((await metric(0, /^ratelimit_fail_closed_total (\d+)/m)) >= 1, 'fail-closed counted');
      t.equal(await metric(0, /^ratelimit_degraded\{store="store1"\} (\d+)/m), 1, 'the degraded gauge shows it');
      // Fallback bucket: capacity 3 / 3 expected instances = 1 per instance.
      const fb = [];
      for (let i = 0; i < 2; i++) fb.push((await check(0, k.check, 'faults', '/fallback', { ip: `fb-${fault}` })).body);
      t.match(
        fb,
        [{ allowed: true }, { allowed: false }],
        `${fault}: degraded: a local bucket per key, sized limit / instances`,
      );
      t.match(
        (await check(0, k.check, 'faults', '/closed', ids)).body,
        { allowed: true, remaining: Number },
        `${fault}: degraded: the fail-closed rule is limited locally, not failed closed`,
      );
      const back = await Promise.all(stores.map((s) => c.run(fault === 'pause' ? 'resume' : 'restart', s)));
      t.same(
        back.map((r) => r.code),
        stores.map(() => 0),
        `${fault === 'pause' ? 'resume' : 'restart'} ${stores.join(', ')}`,
      );
      for (let i = 0; i < 3; i++)
        await until(`check${i + 1} back to normal`, async () => (await modes(i)).every((m) => m === 'normal'), 15_000);
      t.equal(await metric(0, /^ratelimit_degraded\{store="store1"\} (\d+)/m), 0, 'normal again');
      const drained = (await check(2, k.check, 'faults', '/drained', ids)).body;
      if (fault === 'pause')
        t.match(drained, { allowed: false }, 'after the pause the counters resume as they were (still drained)');
      else
        t.match(
          drained,
          { allowed: true },
          'a killed store lost its counters (they hold no durable data): the counter starts full again',
        );
    }
  },
);
