/**
 * The check engine's fast path for counters in its own process (CheckEngine.checkLocal: scratch ops, results as
 * numbers, combineWire) must decide exactly as its general path (per-rule objects, takeNow, combine): the same
 * answers and the same counters, over random rule sets and check sequences on a stepped clock.
 */
import fc from 'fast-check';
import t from 'tap';
import { MetricsRegistry } from '@raftkit/http';
import { combine, combineWire } from '../src/workers/check/decide.js';
import { CheckEngine, type CounterStore, type StoreLink } from '../src/workers/check/engine.js';
import { StoreHealth } from '../src/workers/check/health.js';
import { LocalBuckets } from '../src/workers/check/local-buckets.js';
import { checkMetrics } from '../src/workers/check/metrics.js';
import { RuleIndex } from '../src/workers/check/rule-index.js';
import { parseRule, type Rule } from '../src/rules.js';
import { LocalStore, StoreShard } from '../src/workers/store/shard.js';
import { toResult } from '../src/workers/store/results.js';
import type { WireResult } from '../src/workers/store/protocol.js';

const id = (n: number) => `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`;

function engineOver(store: CounterStore, rules: Rule[]): CheckEngine {
  const link: StoreLink = { id: 's', store, health: new StoreHealth(), fallback: new LocalBuckets(), inFlight: 0 };
  const index = new RuleIndex(1, ['shop'], rules);
  return new CheckEngine({
    rules: () => index,
    storeFor: () => link,
    stores: [link],
    instances: () => 1,
    storeTimeoutMs: 100,
    maxQueue: 100,
    metrics: checkMetrics(new MetricsRegistry()),
  });
}

/** The same shard seen without takeInto: the engine then takes its general path (takeNow, one Outcome per rule). */
function withoutTakeInto(local: LocalStore): CounterStore {
  return {
    take: (ops) => local.take(ops),
    takeNow: (ops) => local.takeNow(ops),
    debit: (k, l, c) => local.debit(k, l, c),
    ping: () => local.ping(),
  };
}

t.test("combineWire gives combine's answer for the same results", async (t) => {
  const result = fc.tuple(
    fc.constantFrom<0 | 1>(0, 1),
    fc.double({ min: -5, max: 50, noNaN: true }),
    fc.integer({ min: 1, max: 90_000 }),
    fc.integer({ min: 0, max: 90_000 }),
  );
  fc.assert(
    fc.property(fc.array(result, { maxLength: 6 }), (tuples) => {
      const wire: WireResult[] = tuples.map(([a, tokens, retry, reset]) => [a, tokens, a === 1 ? -1 : retry, reset]);
      const flat = new Float64Array(wire.flat());
      t.same(combineWire(flat, wire.length), combine(wire.map(toResult)));
    }),
    { numRuns: 300 },
  );
});

t.test('the local fast path and the general path decide alike, check by check, on a stepped clock', async (t) => {
  const dimension = fc.constantFrom('ip', 'user_id', 'api_key', 'endpoint', 'tenant');
  const ruleSpec = fc.record({
    dimension,
    pattern: fc.constantFrom('*', '/api/*', '/api/orders'),
    limit: fc.integer({ min: 1, max: 5 }),
    window: fc.integer({ min: 1, max: 20 }),
  });
  const check = fc.record({
    endpoint: fc.constantFrom('/api/orders', '/api/users', '/health'),
    ip: fc.option(fc.constantFrom('10.0.0.1', '10.0.0.2'), { nil: undefined }),
    user_id: fc.option(fc.constantFrom('u1', 'u2', 'u3'), { nil: undefined }),
    api_key: fc.option(fc.constantFrom('k1'), { nil: undefined }),
    stepMs: fc.integer({ min: 0, max: 3_000 }),
  });
  const realNow = Date.now;
  let clock = 1_700_000_000_000;
  Date.now = () => clock;
  try {
    fc.assert(
      fc.property(
        fc.array(ruleSpec, { minLength: 1, maxLength: 4 }),
        fc.array(check, { minLength: 1, maxLength: 60, size: 'max' }),
        (specs, checks) => {
          const rules = specs.map((r, i) =>
            parseRule(id(i + 1), {
              service_id: 'shop',
              dimension: r.dimension,
              endpoint_pattern: r.pattern,
              limit: r.limit,
              window_sec: r.window,
            }),
          );
          const fastShard = new StoreShard({ regions: 1, syncMs: 1_000, region: 1, metrics: new MetricsRegistry() });
          const slowShard = new StoreShard({ regions: 1, syncMs: 1_000, region: 1, metrics: new MetricsRegistry() });
          const fast = engineOver(new LocalStore(fastShard), rules);
          const general = engineOver(withoutTakeInto(new LocalStore(slowShard)), rules);
          for (const c of checks) {
            clock += c.stepMs;
            const identifiers: Record<string, string> = {};
            for (const k of ['ip', 'user_id', 'api_key'] as const) if (c[k] !== undefined) identifiers[k] = c[k]!;
            const request = { serviceId: 'shop', endpoint: c.endpoint, identifiers };
            const a = fast.check(request);
            const b = general.check(request);
            if (a instanceof Promise || b instanceof Promise)
              throw new Error('a check with counters in this process answered with a promise');
            if (!t.same(a, b, `check ${JSON.stringify(request)} at +${c.stepMs} ms`)) return false;
          }
          t.equal(fastShard.table.size, slowShard.table.size, 'the same counters exist');
          return true;
        },
      ),
      { numRuns: 150 },
    );
  } finally {
    Date.now = realNow;
  }
});
