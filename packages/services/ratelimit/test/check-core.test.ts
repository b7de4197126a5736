/** The pure parts of a check instance: matching, combining, fail-open/closed, the state table, local buckets, hot keys. */
import fc from 'fast-check';
import t from 'tap';
import { combine, counterKey, matchRules, unreachable } from '../src/workers/check/decide.js';
import { StoreHealth } from '../src/workers/check/health.js';
import { HotKeys } from '../src/workers/check/hot-keys.js';
import { LocalBuckets } from '../src/workers/check/local-buckets.js';
import {
  answerBody,
  answerFromTuple,
  answerTuple,
  parseCheckBody,
  parseCheckTuple,
} from '../src/workers/check/request.js';
import { RuleIndex } from '../src/workers/check/rule-index.js';
import { parseRule } from '../src/rules.js';
import { accessOf, requireTenantAccess, tenantKeys } from '../src/tenants.js';
import { authenticate, HttpError } from '@raftkit/http';
import type { IncomingMessage } from 'node:http';
import { isDeepStrictEqual } from 'node:util';

const id = (n: number) => `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`;
const rule = (n: number, fields: Record<string, unknown>) =>
  parseRule(id(n), {
    service_id: 'shop',
    dimension: 'ip',
    endpoint_pattern: '*',
    limit: 10,
    window_sec: 10,
    ...fields,
  });

t.test('matching: the rule index finds rules by endpoint; identifiers pick the dimensions that apply', async (t) => {
  const rules = [
    rule(1, { dimension: 'ip' }),
    rule(2, { dimension: 'user_id', endpoint_pattern: '/v1/orders' }),
    rule(3, { dimension: 'api_key', endpoint_pattern: '/v1/*' }),
    rule(4, { dimension: 'endpoint', endpoint_pattern: '/v1/*' }),
    rule(5, { dimension: 'tenant', endpoint_pattern: '/admin' }),
    rule(6, { service_id: 'other' }),
  ];
  const index = new RuleIndex(7, ['shop', 'other'], rules);
  t.same(
    index.rulesFor('shop', '/v1/orders').map((r) => r.ruleId),
    [id(1), id(2), id(3), id(4)],
  );
  t.equal(index.rulesFor('shop', '/v1/orders'), index.rulesFor('shop', '/v1/orders'), 'memoised: one map get');
  t.same(
    index.rulesFor('shop', '/admin').map((r) => r.ruleId),
    [id(1), id(5)],
  );
  t.ok(index.hasTenant('other'));
  t.notOk(index.hasTenant('nobody'));
  const m = matchRules(index.rulesFor('shop', '/v1/orders'), {
    serviceId: 'shop',
    endpoint: '/v1/orders',
    identifiers: { ip: '1.2.3.4', user_id: '' },
  });
  t.same(
    m.map((x) => x.key),
    ['shop:*:ip:1.2.3.4', 'shop:/v1/*:endpoint:/v1/orders'],
    'no user_id or api_key given: those rules do not apply',
  );
  t.equal(counterKey(rules[4]!, 'shop'), 'shop:/admin:tenant:shop');
});

t.test(
  'combine: any deny denies with the largest retry_after_ms; remaining is the smallest; reset the largest',
  async (t) => {
    t.same(combine([]), { allowed: true, remaining: -1, resetMs: 0, rules: 0 });
    t.same(
      combine([
        { allowed: true, remaining: 5, resetMs: 100 },
        { allowed: true, remaining: 2, resetMs: 50 },
      ]),
      { allowed: true, remaining: 2, resetMs: 100, rules: 2 },
    );
    t.same(
      combine([
        { allowed: false, remaining: 0, retryAfterMs: 300, resetMs: 1000 },
        { allowed: true, remaining: 9, resetMs: 10 },
        { allowed: false, remaining: 0, retryAfterMs: 700, resetMs: 500 },
      ]),
      { allowed: false, remaining: 0, retryAfterMs: 700, resetMs: 1000, rules: 3 },
    );
  },
);

t.test(
  'store unreachable (rule 8): fail-open allows with remaining -1, fail-closed denies with remaining 0',
  async (t) => {
    t.same(unreachable(rule(1, {})), { allowed: true, remaining: -1, resetMs: 0 });
    t.match(unreachable(rule(1, { fail_closed: true })), { allowed: false, remaining: 0 });
    t.match(combine([unreachable(rule(1, {})), unreachable(rule(2, { fail_closed: true }))]), {
      allowed: false,
      remaining: -1,
    });
  },
);

t.test('state table: three failures -> degraded, three successes -> normal; streaks must be consecutive', async (t) => {
  const h = new StoreHealth();
  t.equal(h.record(false), false);
  t.equal(h.record(false), false);
  t.equal(h.record(true), false, 'a success breaks the failure streak');
  t.equal(h.record(false), false);
  t.equal(h.record(false), false);
  t.equal(h.mode, 'normal');
  t.equal(h.record(false), true, 'third consecutive failure flips');
  t.equal(h.mode, 'degraded');
  t.equal(h.record(true), false);
  t.equal(h.record(true), false);
  t.equal(h.record(false), false, 'a failure breaks the success streak');
  t.equal(h.record(true), false);
  t.equal(h.record(true), false);
  t.equal(h.record(true), true);
  t.equal(h.mode, 'normal');
});

t.test('local buckets: start full, refill lazily, expire when idle', async (t) => {
  const b = new LocalBuckets();
  const limits = { capacity: 2, refillRate: 1 };
  t.equal(b.take('k', limits, 0).allowed, true);
  t.equal(b.take('k', limits, 0).allowed, true);
  t.match(b.take('k', limits, 0), { allowed: false, retryAfterMs: 1000 });
  t.equal(b.take('k', limits, 1000).allowed, true, 'one token back after a second');
  b.sweep(1000 + 3000);
  t.equal(b.size, 0, 'idle past capacity/rate*1000+1000 ms: gone');
});

t.test('hot keys: promoted above the threshold, served locally with a 1/N share, synced, cooled', async (t) => {
  const hot = new HotKeys();
  t.equal(hot.watching, false, 'nothing observed: nothing for the tick to watch');
  const r = rule(1, { limit: 100, window_sec: 1, hot_key: { qps_threshold: 5, sync_ms: 100 } });
  let verdict: ReturnType<HotKeys['observe']> = null;
  for (let i = 0; i < 5; i++) verdict = hot.observe('k', r, i);
  t.equal(verdict, null, 'at the threshold: still the store');
  t.equal(hot.observe('k', r, 5), 'promote');
  const c = hot.promote('k', r, 4, 80, 5);
  t.equal(c.bucket.tokens, 20, "a quarter of the store's 80 tokens");
  t.equal(hot.observe('k', r, 6), c);
  let admitted = 0;
  for (let i = 0; i < 30; i++) if (hot.take(c, 6).allowed) admitted++;
  t.equal(admitted, 20, 'the local share bounds what this instance admits between syncs');
  t.equal(hot.syncDue(c, 50), false);
  t.equal(hot.syncDue(c, 106), true);
  t.same(hot.due(106), [c]);
  const sent = hot.beginSync(c);
  t.equal(sent, 20);
  hot.take(c, 110);
  hot.endSync(c, sent, 40, 110);
  t.equal(c.bucket.tokens, 40 / 4 - c.unsynced, 'reset from the store, minus what was admitted in flight');
  hot.endSync(c, 5, null, 120);
  t.equal(c.unsynced >= 5, true, 'a failed debit keeps the admissions to debit later');
  t.same(hot.cool(2_500), [c], 'no traffic for two seconds: cooled');
  t.equal(hot.size, 0);
  t.equal(hot.watching, false, 'cooled and its rate forgotten: the tick may stop');
  hot.observe('other', r, 3_000);
  t.equal(hot.watching, true, 'a new observed key: the tick has a rate to forget later');
});

t.test('tenant keys: admin keys manage and check their own tenant only; check keys only check', async (t) => {
  const cluster = 'cluster-secret';
  const keys = tenantKeys(cluster, 'shop');
  const who = (token: string) =>
    authenticate({ headers: { authorization: `Bearer ${token}` } } as unknown as IncomingMessage, [cluster]);
  t.same(accessOf(who(keys.adminKey)), { kind: 'admin', serviceId: 'shop' });
  t.same(accessOf(who(keys.checkKey)), { kind: 'check', serviceId: 'shop' });
  t.same(accessOf(who(cluster)), { kind: 'cluster' });
  const forbidden = (fn: () => void): void => {
    try {
      fn();
      t.fail('not refused');
    } catch (e) {
      t.equal(e instanceof HttpError && e.status, 403);
    }
  };
  requireTenantAccess(who(keys.adminKey), 'shop', 'admin');
  requireTenantAccess(who(keys.adminKey), 'shop', 'check');
  requireTenantAccess(who(keys.checkKey), 'shop', 'check');
  requireTenantAccess(who(cluster), 'anyone', 'admin');
  forbidden(() => requireTenantAccess(who(keys.checkKey), 'shop', 'admin'));
  forbidden(() => requireTenantAccess(who(keys.adminKey), 'other', 'admin'));
  forbidden(() => requireTenantAccess(who(keys.checkKey), 'other', 'check'));
  t.throws(
    () => who(tenantKeys('another-cluster', 'shop').adminKey),
    /wrong bearer token/,
    'a key derived from another cluster token is refused',
  );
});

t.test('a binary check tuple is accepted or refused exactly as the general (JSON-shaped) parser does', async (t) => {
  const general = (tuple: unknown[]): unknown => {
    const [serviceId, endpoint, ip, userId, apiKey] = tuple;
    return parseCheckBody({ service_id: serviceId, endpoint, identifiers: { ip, user_id: userId, api_key: apiKey } });
  };
  const outcome = (parse: () => unknown): unknown => {
    try {
      return { ok: parse() };
    } catch (error) {
      const e = error as HttpError;
      return { status: e.status, code: e.code, message: e.message };
    }
  };
  // Strings around every limit (58-character ids, 1024-byte endpoints, 256-byte identifiers), multi-byte text
  // that crosses a byte limit with fewer characters, and values of the wrong type.
  const text = (max: number): fc.Arbitrary<string> =>
    fc.oneof(
      fc.string({ maxLength: max }),
      fc.string({ unit: 'grapheme', maxLength: max }),
      fc.constantFrom('', 'a'.repeat(max), 'é'.repeat(max), 'é'.repeat(Math.floor(max * 0.7))),
    );
  const field = (max: number): fc.Arbitrary<unknown> =>
    fc.oneof(text(max), fc.constantFrom(null, undefined, 7, {}, ['x']));
  const id = fc.oneof(fc.stringMatching(/^[A-Za-z0-9_-]{0,60}$/), field(60));
  fc.assert(
    fc.property(id, field(1_100), field(300), field(300), field(300), (serviceId, endpoint, ip, userId, apiKey) => {
      const tuple = [serviceId, endpoint, ip, userId, apiKey];
      return isDeepStrictEqual(
        outcome(() => parseCheckTuple(tuple)),
        outcome(() => general(tuple)),
      );
    }),
    { numRuns: 2_000 },
  );
  t.pass('2,000 random tuples: the same answer or the same error');
  t.same(parseCheckTuple(['shop', '/v1/orders', '10.0.0.1', null, '']), {
    serviceId: 'shop',
    endpoint: '/v1/orders',
    identifiers: { ip: '10.0.0.1', api_key: '' },
  });
});

t.test(
  'answers on the wire: four numbers, a fifth (1) only when decided under overload; HTTP says overloaded only then',
  async (t) => {
    const plain = { allowed: true, remaining: 3, resetMs: 100, rules: 2 };
    t.same(answerTuple(plain), [1, 3, -1, 100]);
    t.same(answerFromTuple(answerTuple(plain)), { allowed: true, remaining: 3, resetMs: 100 });
    t.notOk('overloaded' in answerBody(plain));
    const denied = { allowed: false, remaining: 0, retryAfterMs: 250, resetMs: 900, rules: 1, overloaded: true };
    t.same(answerTuple(denied), [0, 0, 250, 900, 1]);
    t.same(answerFromTuple(answerTuple(denied)), {
      allowed: false,
      remaining: 0,
      retryAfterMs: 250,
      resetMs: 900,
      overloaded: true,
    });
    t.match(answerBody(denied), { allowed: false, retry_after_ms: 250, overloaded: true });
  },
);
