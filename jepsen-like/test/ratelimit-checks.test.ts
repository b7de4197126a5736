import t from 'tap';
import type { HistoryEvent } from '../src/history.js';
import { checkRateLimit } from '../src/workloads/ratelimit-checks.js';

const BOUND = { limit: 10, windowSec: 86_400, instances: 3, failOpenGraceMs: 10_000 };
const MS = 1e6;

/** A history built in time order: checks of one key, and nemesis events. */
function history() {
  const events: HistoryEvent[] = [];
  let clock = 0;
  return {
    events,
    check(key: string, type: 'ok' | 'info' | 'fail', value?: { allowed: boolean; remaining: number }): void {
      events.push({ process: 1, type: 'invoke', f: 'check', key, time: (clock += 10 * MS) });
      events.push({ process: 1, type, f: 'check', key, ...(value ? { value } : {}), time: (clock += 10 * MS) });
    },
    admit(key: string, n: number, remaining = 0): void {
      for (let i = 0; i < n; i++) this.check(key, 'ok', { allowed: true, remaining });
    },
    deny(key: string, n: number): void {
      for (let i = 0; i < n; i++) this.check(key, 'ok', { allowed: false, remaining: 0 });
    },
    nemesis(f: string, id: number, targets: string[]): void {
      events.push({ process: 'nemesis', type: 'info', f, value: { id, targets }, time: (clock += 10 * MS) });
    },
    wait(ms: number): void {
      clock += ms * MS;
    },
  };
}

t.test('exactly the limit, then denials: valid', async (t) => {
  const h = history();
  h.admit('u0', 10);
  h.deny('u0', 30);
  h.admit('u1', 10);
  const r = checkRateLimit(h.events, BOUND);
  t.equal(r.valid, true);
  t.same(r.stats, {
    requests: 50,
    admitted: 20,
    denied: 30,
    fail_open: 0,
    unknown: 0,
    keys: 2,
    store_faults: 0,
    worst_key: 'u0',
    worst_key_counted: 10,
    worst_key_bound: 11,
  });
});

t.test('one admission over limit + refill: over-admitted', async (t) => {
  const h = history();
  h.admit('u0', 12);
  const r = checkRateLimit(h.events, BOUND);
  t.equal(r.valid, false);
  t.equal(r.anomalies[0]?.type, 'over-admitted');
  t.match(r.anomalies[0]?.description, /12 admitted .* bound 11/);
});

t.test('an unknown outcome counts as admitted', async (t) => {
  const h = history();
  h.admit('u0', 11);
  t.equal(checkRateLimit(h.events, BOUND).valid, true);
  h.check('u0', 'info');
  t.equal(checkRateLimit(h.events, BOUND).valid, false);
});

t.test('a store fault allows 2 x limit + instances more, no more', async (t) => {
  const h = history();
  h.admit('u0', 5);
  h.nemesis('start-kill', 1, ['n2', 'store1']);
  h.admit('u0', 5, -1); // fail-open while the store is down: allowed, not counted
  h.admit('u0', 10);
  h.nemesis('stop-kill', 1, ['n2', 'store1']);
  h.admit('u0', 19); // 34 counted: bound 10 + 1 + 23 = 34
  const ok = checkRateLimit(h.events, BOUND);
  t.equal(ok.valid, true, JSON.stringify(ok.anomalies));
  t.equal(ok.stats?.fail_open, 5);
  t.equal(ok.stats?.worst_key_bound, 34);
  h.admit('u0', 1);
  const bad = checkRateLimit(h.events, BOUND);
  t.equal(bad.valid, false);
  t.equal(bad.anomalies[0]?.type, 'over-admitted');
});

t.test('a member fault gives nothing back', async (t) => {
  const h = history();
  h.nemesis('start-kill', 1, ['n2']);
  h.admit('u0', 11);
  h.nemesis('stop-kill', 1, ['n2']);
  h.admit('u0', 1);
  t.equal(checkRateLimit(h.events, BOUND).valid, false);
});

t.test('fail-open with no store fault near it is an anomaly', async (t) => {
  const h = history();
  h.nemesis('start-pause', 1, ['store2']);
  h.admit('u0', 1, -1);
  h.nemesis('stop-pause', 1, ['store2']);
  h.wait(5_000);
  h.admit('u0', 1, -1); // within the grace after the fault: expected
  t.equal(checkRateLimit(h.events, BOUND).valid, true);
  h.wait(20_000);
  h.admit('u1', 1, -1);
  const r = checkRateLimit(h.events, BOUND);
  t.equal(r.valid, false);
  t.same(
    r.anomalies.map((a) => a.type),
    ['fail-open-without-fault'],
  );
});
