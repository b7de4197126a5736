/**
 * The rate limiter's check, as a pure function of the history: per counter key, the admitted checks never exceed
 * the bound packages/services/ratelimit/README.md documents ("The bound under faults").
 *
 * A key's admissions are split by what the answer says: counted (`remaining` >= 0: taken from a bucket, the store's
 * or, overloaded or degraded, an instance's fallback share) and fail-open (`remaining` -1: the store did not answer
 * in time, spec rule 8, nothing counted). The bound on counted admissions of a key, over the span from its first
 * check's invocation to its last check's completion:
 *
 *   limit + ceil(refill rate x span) + (2 x limit + instances) x (counter-store faults overlapping the span)
 *
 * A store fault (kill, pause or wipe of a counter store, seen as a nemesis event naming a `store` target) may give a
 * key its limit again twice: once from the instances' fallback buckets while the store is unreachable (each at
 * least 1 token: at most limit + instances together) and once from the restarted store's empty counters. Fail-open
 * admissions are the documented allowance: they are reported, and admitted only while a store fault is active or
 * within `failOpenGraceMs` of its end (the health checks' three periods); one outside is an anomaly.
 * Without store faults the bound is exact: limit + refill, and no fail-open at all.
 */
import type { HistoryEvent } from '../history.js';
import type { Anomaly, CheckResult } from './workload.js';

interface RateLimitBound {
  /** The rule's limit (capacity). */
  limit: number;
  /** The rule's window: the bucket refills limit tokens per window. */
  windowSec: number;
  /** Check instances sharing the counters (each holds a fallback share of at least 1). */
  instances: number;
  /** How long after a store fault ends fail-open answers are still expected (health checks, connection retries). */
  failOpenGraceMs: number;
}

interface StoreFault {
  id: number;
  start: number;
  stop: number;
}

/** Store faults from the nemesis events: [start, stop] in ns; an unstopped one lasts to the end of the history. */
function storeFaults(events: readonly HistoryEvent[]): StoreFault[] {
  const open = new Map<number, number>();
  const out: StoreFault[] = [];
  let end = 0;
  for (const e of events) {
    end = Math.max(end, e.time);
    if (e.process !== 'nemesis') continue;
    const v = (e.value ?? {}) as { id?: number; targets?: unknown };
    if (typeof v.id !== 'number') continue;
    if (e.f.startsWith('start-')) {
      const targets = Array.isArray(v.targets) ? (v.targets as unknown[]) : [];
      if (targets.some((t) => typeof t === 'string' && t.startsWith('store'))) open.set(v.id, e.time);
    } else if (e.f.startsWith('stop-') && open.has(v.id)) {
      out.push({ id: v.id, start: open.get(v.id)!, stop: e.time });
      open.delete(v.id);
    }
  }
  for (const [id, start] of open) out.push({ id, start, stop: end });
  return out;
}

export function checkRateLimit(events: readonly HistoryEvent[], bound: RateLimitBound): CheckResult {
  const anomalies: Anomaly[] = [];
  const faults = storeFaults(events);
  const graceNs = bound.failOpenGraceMs * 1e6;
  const invokes = new Map<number, HistoryEvent>();
  interface KeyStats {
    first: number;
    last: number;
    checks: number;
    counted: number[];
    failOpen: number;
  }
  const keys = new Map<string, KeyStats>();
  let requests = 0;
  let admitted = 0;
  let denied = 0;
  let failOpen = 0;
  let unknown = 0;
  for (const e of events) {
    if (e.process === 'nemesis' || e.f !== 'check') continue;
    if (e.type === 'invoke') {
      invokes.set(e.process, e);
      continue;
    }
    const inv = invokes.get(e.process);
    invokes.delete(e.process);
    if (inv === undefined || inv.key === undefined) continue;
    requests++;
    const k = keys.get(inv.key) ?? { first: inv.time, last: e.time, checks: 0, counted: [], failOpen: 0 };
    keys.set(inv.key, k);
    k.first = Math.min(k.first, inv.time);
    k.last = Math.max(k.last, e.time);
    k.checks++;
    if (e.type === 'info') {
      // Its outcome is unknown: it may have taken a token. Counted as admitted, the safe side for the bound.
      unknown++;
      k.counted.push(e.time);
      continue;
    }
    if (e.type !== 'ok') continue;
    const v = e.value as { allowed?: boolean; remaining?: number };
    if (v.allowed !== true) {
      denied++;
      continue;
    }
    admitted++;
    if (v.remaining === -1) {
      failOpen++;
      k.failOpen++;
      const explained = faults.some((f) => inv.time <= f.stop + graceNs && e.time >= f.start);
      if (!explained)
        anomalies.push({
          check: 'ratelimit-bound',
          type: 'fail-open-without-fault',
          description: `key ${inv.key}: admitted fail-open (remaining -1) with no counter-store fault under way`,
          times: [inv.time, e.time],
        });
    } else k.counted.push(e.time);
  }
  const rate = bound.limit / bound.windowSec;
  let worst: { key: string; counted: number; bound: number } | null = null;
  for (const [key, k] of keys) {
    const spanSec = (k.last - k.first) / 1e9;
    const overlapping = faults.filter((f) => f.start <= k.last && f.stop + graceNs >= k.first).length;
    const allowed = bound.limit + Math.ceil(rate * spanSec) + (2 * bound.limit + bound.instances) * overlapping;
    const counted = k.counted.length;
    if (worst === null || counted - allowed > worst.counted - worst.bound) worst = { key, counted, bound: allowed };
    if (counted > allowed)
      anomalies.push({
        check: 'ratelimit-bound',
        type: 'over-admitted',
        description: `key ${key}: ${counted} admitted and counted (unknown outcomes included) over ${spanSec.toFixed(1)} s, bound ${allowed} (limit ${bound.limit}, ${overlapping} store fault(s))`,
        times: k.counted.slice(allowed, allowed + 5),
      });
  }
  return {
    name: 'ratelimit-bound',
    valid: anomalies.length === 0,
    anomalies,
    stats: {
      requests,
      admitted,
      denied,
      fail_open: failOpen,
      unknown,
      keys: keys.size,
      store_faults: faults.length,
      worst_key: worst?.key ?? null,
      worst_key_counted: worst?.counted ?? 0,
      worst_key_bound: worst?.bound ?? 0,
    },
  };
}
