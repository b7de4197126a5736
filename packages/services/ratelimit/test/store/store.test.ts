/** The counter store as a real process, reached over real sockets. */
import t from 'tap';
import { deriveClientToken } from '@raftkit/http';
import { StoreClient, StoreUnavailableError, type CounterResult } from '../../src/workers/store/client.js';
import { RpcClient, type RpcError } from '@raftkit/rpc';
import { startStores, type StoreGroup } from './helpers/stores.js';

let group: StoreGroup;
let address: string;
const clients: StoreClient[] = [];

function storeClient(timeoutMs = 2_000, token = group.token): StoreClient {
  const c = new StoreClient({ address, token, timeoutMs });
  clients.push(c);
  return c;
}

async function metrics(): Promise<string> {
  return (await fetch(`http://${group.stores[0]!.httpAddress}/metrics`)).text();
}

function metric(text: string, name: string): number {
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return line === undefined ? NaN : Number(line.split(' ')[1]);
}

t.before(async () => {
  group = await startStores(1);
  address = group.stores[0]!.tcpAddress!;
});

t.teardown(async () => {
  for (const c of clients) c.close();
  await group.stop();
});

t.test('counters start full; remaining = floor(tokens); a denial carries retry_after_ms', async (t) => {
  const c = storeClient();
  const created = Date.now();
  const first = await c.take([{ key: 'acme:/a:ip:1', capacity: 3, refillRate: 0.5 }]);
  t.same(first, [{ allowed: true, tokens: 2, remaining: 2, resetMs: 2000 }]);
  await c.take([{ key: 'acme:/a:ip:1', capacity: 3, refillRate: 0.5, cost: 2 }]);
  const denied = (await c.take([{ key: 'acme:/a:ip:1', capacity: 3, refillRate: 0.5 }]))[0]!;
  // The bucket refills (0.5 tokens/s) from the first take on: the wait shrinks by the time since, no more.
  const elapsed = Date.now() - created;
  t.equal(denied.allowed, false);
  t.equal(denied.remaining, 0);
  t.ok(
    denied.retryAfterMs! >= 2000 - elapsed - 1 && denied.retryAfterMs! <= 2000,
    `retry after ${denied.retryAfterMs} ms (${elapsed} ms after the first take): ceil((1 - tokens) / 0.5 * 1000)`,
  );
});

t.test('two concurrent takes from two clients on a counter holding one token: exactly one is admitted', async (t) => {
  const a = storeClient();
  const b = storeClient();
  await Promise.all([a.ping(), b.ping()]); // both connections open, so the two takes race on the wire
  for (let round = 0; round < 50; round++) {
    const op = { key: `race:/x:user:${round}`, capacity: 1, refillRate: 0.001 };
    const [ra, rb] = await Promise.all([a.take([op]), b.take([op])]);
    const admitted = [ra[0]!, rb[0]!].filter((r) => r.allowed).length;
    if (admitted !== 1) t.fail(`round ${round}: ${admitted} admitted`);
  }
  t.pass('50 rounds, one admission each');
});

t.test('many concurrent takes from two clients admit exactly the capacity', async (t) => {
  const a = storeClient();
  const b = storeClient();
  const op = { key: 'race:/y:ip:1', capacity: 60, refillRate: 0.001 };
  const results: CounterResult[][] = await Promise.all(
    Array.from({ length: 200 }, (_, i) => (i % 2 === 0 ? a : b).take([op])),
  );
  t.equal(results.filter((r) => r[0]!.allowed).length, 60);
});

t.test('one take with several ops: all taken, or none when one is short', async (t) => {
  const c = storeClient();
  const ip = { key: 'multi:/:ip:9', capacity: 5, refillRate: 0.001 };
  const user = { key: 'multi:/:user_id:u', capacity: 1, refillRate: 0.001 };
  t.same(
    (await c.take([ip, user])).map((r) => r.allowed),
    [true, true],
  );
  const second = await c.take([ip, user]);
  t.same(
    second.map((r) => r.allowed),
    [true, false],
  );
  t.equal(second[0]!.remaining, 4, 'the ip counter lost nothing to the denied request');
});

t.test('debit subtracts tokens admitted elsewhere', async (t) => {
  const c = storeClient();
  t.same(await c.debit('hot:/:ip:1', { capacity: 10, refillRate: 0.001 }, 7), { tokens: 3 });
  const r = await c.take([{ key: 'hot:/:ip:1', capacity: 10, refillRate: 0.001 }]);
  t.equal(r[0]!.remaining, 2);
});

t.test('ping answers the store clock', async (t) => {
  const { now } = await storeClient().ping();
  t.ok(Math.abs(now - Date.now()) < 1_000);
});

t.test('auth: the store takes the cluster token only', async (t) => {
  const wrong = await storeClient(2_000, 'wrong')
    .ping()
    .catch((e: unknown) => e);
  t.ok(wrong instanceof StoreUnavailableError);
  t.equal((wrong as StoreUnavailableError).code, 'unauthorized');
  const tenant = await storeClient(2_000, deriveClientToken(group.token, 'check.acme'))
    .take([{ key: 'k', capacity: 1, refillRate: 1 }])
    .catch((e: unknown) => e);
  t.equal((tenant as StoreUnavailableError).code, 'forbidden', 'a valid client token is still refused');
});

t.test('bad requests are answered with bad_request and leave the store serving', async (t) => {
  const wire = new RpcClient({ address, token: group.token });
  t.teardown(() => wire.close());
  const cases: unknown[] = [
    { t: 'take', ops: [['k', -1, 1, 1, 0]] },
    { t: 'take', ops: [['k', 1, 0, 1, 0]] },
    { t: 'take', ops: [] },
    { t: 'take', ops: [['', 1, 1, 1, 0]] },
    { t: 'debit', key: 'k', capacity: 1, refillRate: 1, count: Number.NaN },
    { t: 'sync', region: 1, counters: [] },
    { t: 'nope' },
    'just a string',
  ];
  for (const request of cases) {
    const error = await wire.call(request).catch((e: unknown) => e);
    t.equal((error as RpcError).code, 'bad_request', JSON.stringify(request));
  }
  t.same(await wire.call({ t: 'ping' }).then((r) => typeof (r as { now: number }).now), 'number');
});

t.test('/healthz and /metrics on the HTTP side', async (t) => {
  const health = (await (await fetch(`http://${group.stores[0]!.httpAddress}/healthz`)).json()) as Record<
    string,
    unknown
  >;
  t.match(health, { status: 'ok', role: 'store', region: 1, shard: 0 });
  const text = await metrics();
  t.ok(metric(text, 'ratelimit_store_take_ops_total') > 0);
  t.ok(metric(text, 'ratelimit_store_counters') > 0);
});

t.test('idle counters expire: capacity / refill_rate * 1000 + 1000 ms after their last update', async (t) => {
  const c = storeClient();
  const before = metric(await metrics(), 'ratelimit_store_expired_total');
  await c.take([{ key: 'idle:/:ip:1', capacity: 2, refillRate: 10 }]); // expiry 200 + 1000 ms
  await new Promise((resolve) => setTimeout(resolve, 1_700));
  t.ok(
    metric(await metrics(), 'ratelimit_store_expired_total') >= before + 1,
    'swept within a sweep tick of its expiry',
  );
});

t.test('a paused store: calls reject within their timeout', async (t) => {
  const c = storeClient(150);
  await c.ping();
  group.signal(1, 'SIGSTOP');
  try {
    const started = Date.now();
    const error = await c.take([{ key: 'k', capacity: 1, refillRate: 1 }]).catch((e: unknown) => e);
    const elapsed = Date.now() - started;
    t.ok(error instanceof StoreUnavailableError);
    t.equal((error as StoreUnavailableError).code, 'timeout');
    t.ok(elapsed < 600, `rejected after ${elapsed} ms (timeout 150 ms)`);
  } finally {
    group.signal(1, 'SIGCONT');
  }
  t.ok((await c.ping(2_000)).now > 0, 'answers again once resumed');
});

t.test('a killed store: calls reject quickly, never past their timeout', async (t) => {
  const c = storeClient(1_000);
  await c.ping();
  await group.kill(1);
  for (let i = 0; i < 3; i++) {
    const started = Date.now();
    const error = await c.take([{ key: 'k', capacity: 1, refillRate: 1 }]).catch((e: unknown) => e);
    const elapsed = Date.now() - started;
    t.ok(error instanceof StoreUnavailableError, (error as Error).message);
    t.ok(elapsed < 1_000, `attempt ${i + 1} rejected after ${elapsed} ms`);
    await new Promise((resolve) => setTimeout(resolve, 120));
  }
});
