/** Rule validation (spec check rule 7) and endpoint patterns. */
import t from 'tap';
import { HttpError, take } from '@raftkit/http';
import { parseRule, patternMatches, ruleBody, validEndpointPattern } from '../src/rules.js';

const ID = '0b3c4a52-8f27-4e0a-9d55-4b7e2f0d1a10';
const base = { service_id: 'shop', dimension: 'ip', endpoint_pattern: '/v1/orders', limit: 100, window_sec: 60 };

function fieldOf(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (e) {
    if (e instanceof HttpError && e.status === 400) return (e.details as { field?: string }).field;
    throw e;
  }
  return undefined;
}

t.test('limit and window_sec map to capacity = limit and refill_rate = limit / window_sec', async (t) => {
  const rule = parseRule(ID, base);
  t.match(rule, {
    capacity: 100,
    refillRate: 100 / 60,
    limit: 100,
    windowSec: 60,
    failClosed: false,
    regionMode: 'sync',
    hotKey: null,
    expectedInstances: null,
  });
  t.match(ruleBody(rule), {
    rule_id: ID,
    service_id: 'shop',
    dimension: 'ip',
    endpoint_pattern: '/v1/orders',
    limit: 100,
    window_sec: 60,
    capacity: 100,
  });
});

t.test('capacity and refill_rate may be given directly; window_sec then defaults to the time to fill', async (t) => {
  const rule = parseRule(ID, {
    service_id: 'shop',
    dimension: 'user_id',
    endpoint: '*',
    capacity: 10,
    refill_rate: 0.5,
  });
  t.match(rule, { capacity: 10, refillRate: 0.5, limit: 10, windowSec: 20, endpointPattern: '*' });
});

t.test('optional fields: fail_closed, hot_key, region_mode, expected_instances', async (t) => {
  const rule = parseRule(ID, {
    ...base,
    fail_closed: true,
    hot_key: { qps_threshold: 50 },
    region_mode: 'strict',
    expected_instances: 4,
  });
  t.match(rule, {
    failClosed: true,
    hotKey: { qpsThreshold: 50, syncMs: 100, syncEveryN: 0 },
    regionMode: 'strict',
    expectedInstances: 4,
  });
});

t.test('every validation failure is a 400 naming the field', async (t) => {
  const cases: Array<[Record<string, unknown>, string]> = [
    [{ ...base, service_id: 'bad id!' }, 'service_id'],
    [{ ...base, service_id: undefined }, 'service_id'],
    [{ ...base, dimension: 'country' }, 'dimension'],
    [{ ...base, endpoint_pattern: 'orders' }, 'endpoint_pattern'],
    [{ ...base, endpoint_pattern: '/v1/*/x' }, 'endpoint_pattern'],
    [{ ...base, endpoint_pattern: '/a:b' }, 'endpoint_pattern'],
    [{ ...base, limit: 0 }, 'limit'],
    [{ ...base, limit: -5 }, 'limit'],
    [{ ...base, limit: 1.5 }, 'limit'],
    [{ ...base, window_sec: 0 }, 'window_sec'],
    [{ ...base, window_sec: undefined }, 'window_sec'],
    [{ ...base, capacity: 10 }, 'capacity'],
    [{ service_id: 'shop', dimension: 'ip', endpoint_pattern: '*', capacity: 0, refill_rate: 1 }, 'capacity'],
    [{ service_id: 'shop', dimension: 'ip', endpoint_pattern: '*', capacity: 5, refill_rate: 0 }, 'refill_rate'],
    [{ service_id: 'shop', dimension: 'ip', endpoint_pattern: '*', capacity: 5, refill_rate: -1 }, 'refill_rate'],
    // Denormal and tiny rates once made every wait Infinity, answered as reset_ms and retry_after_ms null.
    [{ service_id: 'shop', dimension: 'ip', endpoint_pattern: '*', capacity: 5, refill_rate: 5e-324 }, 'refill_rate'],
    [{ service_id: 'shop', dimension: 'ip', endpoint_pattern: '*', capacity: 5, refill_rate: 1e-7 }, 'refill_rate'],
    [
      { service_id: 'shop', dimension: 'ip', endpoint_pattern: '*', capacity: 1_000_000, refill_rate: 0.001 },
      'refill_rate',
    ],
    [{ service_id: 'shop', dimension: 'ip', endpoint_pattern: '*', capacity: 5, refill_rate: Infinity }, 'refill_rate'],
    [{ service_id: 'shop', dimension: 'ip', endpoint_pattern: '*' }, 'limit'],
    [{ ...base, fail_closed: 'yes' }, 'fail_closed'],
    [{ ...base, region_mode: 'nearest' }, 'region_mode'],
    [{ ...base, hot_key: { qps_threshold: 0 } }, 'qps_threshold'],
    [{ ...base, hot_key: { qps_threshold: 10, sync_ms: 0 } }, 'sync_ms'],
    [{ ...base, expected_instances: 0 }, 'expected_instances'],
  ];
  for (const [body, field] of cases)
    t.equal(
      fieldOf(() => parseRule(ID, body)),
      field,
      `${JSON.stringify(body)} -> ${field}`,
    );
  t.equal(
    fieldOf(() => parseRule('not-a-uuid', base)),
    'rule_id',
  );
  t.equal(
    fieldOf(() => parseRule(ID, [1, 2])),
    'body',
  );
});

t.test('the slowest and largest accepted buckets still answer finite integer waits', async (t) => {
  for (const [capacity, refillRate] of [
    [5, 1e-6],
    [31, 1e-6],
    [1_000_000_000, 1_000_000_000],
    [1_000_000_000, 1_000_000_000 / (366 * 86_400)],
  ] as const) {
    const rule = parseRule(ID, {
      service_id: 'shop',
      dimension: 'ip',
      endpoint_pattern: '*',
      capacity,
      refill_rate: refillRate,
    });
    const limits = { capacity: rule.capacity, refillRate: rule.refillRate };
    const empty = { tokens: 0, lastRefill: 0 };
    const denied = take(empty, limits, 0);
    t.notOk(denied.allowed, `capacity ${capacity}, rate ${refillRate}: an empty bucket denies`);
    t.ok(
      Number.isSafeInteger(denied.retryAfterMs) && denied.retryAfterMs! > 0,
      `retry_after_ms is a finite integer (${denied.retryAfterMs})`,
    );
    t.ok(
      Number.isSafeInteger(denied.resetMs) && denied.resetMs > 0,
      `reset_ms is a finite integer (${denied.resetMs})`,
    );
    t.ok(Number.isSafeInteger(rule.windowSec), `window_sec is an integer (${rule.windowSec})`);
  }
});

t.test('endpoint patterns: *, exact, trailing /* prefix', async (t) => {
  for (const p of ['*', '/', '/v1/orders', '/v1/orders/*', '/*']) t.ok(validEndpointPattern(p), p);
  for (const p of ['', 'v1', '/v1/*/x', '/v1*', '**', '/a b', '/a:b']) t.notOk(validEndpointPattern(p), p);
  t.ok(patternMatches('*', '/anything'));
  t.ok(patternMatches('/v1/orders', '/v1/orders'));
  t.notOk(patternMatches('/v1/orders', '/v1/orders/1'));
  t.ok(patternMatches('/v1/orders/*', '/v1/orders/1'));
  t.ok(patternMatches('/v1/orders/*', '/v1/orders'));
  t.notOk(patternMatches('/v1/orders/*', '/v1/ordersX'));
  t.ok(patternMatches('/*', '/x/y'));
});
