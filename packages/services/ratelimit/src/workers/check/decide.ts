/**
 * The pure core of a check: which counters a request touches, what an unreachable store means per rule, and how
 * the outcomes of several rules combine (any deny denies; the largest retry_after_ms; the smallest remaining).
 */
import type { Rule } from '../../rules.js';
import { remainingOf, WIRE_RESULT_FIELDS } from '../store/counters.js';

export interface Identifiers {
  ip?: string;
  user_id?: string;
  api_key?: string;
}

export interface CheckRequest {
  serviceId: string;
  endpoint: string;
  identifiers: Identifiers;
}

/** One rule's verdict on one counter. */
export interface Outcome {
  allowed: boolean;
  /** -1: not known (the store was unreachable and the rule fails open). */
  remaining: number;
  retryAfterMs?: number;
  resetMs: number;
}

export interface CheckAnswer extends Outcome {
  /** How many rules matched and were evaluated. */
  rules: number;
  /** Set when this instance's queue to the store was full and the check was decided from its fallback buckets. */
  overloaded?: boolean;
}

/** A rule that applies to a request, and the counter it counts on. */
export interface Matched {
  rule: Rule;
  key: string;
}

/** Each rule's key prefix, built once: a key per counter per check is then one concatenation, not four. */
const keyPrefixes = new WeakMap<Rule, string>();

/** The spec's counter key `{service_id}:{endpoint}:{dimension}:{value}`, with the rule's endpoint pattern. */
export function counterKey(rule: Rule, value: string): string {
  return counterKeyPrefix(rule) + value;
}

/** A rule's counter keys up to the value: `{service_id}:{endpoint}:{dimension}:` (the store's key prefix). */
export function counterKeyPrefix(rule: Rule): string {
  let prefix = keyPrefixes.get(rule);
  if (prefix === undefined) {
    prefix = `${rule.serviceId}:${rule.endpointPattern}:${rule.dimension}:`;
    keyPrefixes.set(rule, prefix);
  }
  return prefix;
}

/** The value a rule counts by for this request, or null when the request does not carry it. */
export function dimensionValue(rule: Rule, request: CheckRequest): string | null {
  switch (rule.dimension) {
    case 'endpoint':
      return request.endpoint;
    case 'tenant':
      return request.serviceId;
    default: {
      const v = request.identifiers[rule.dimension];
      return v === undefined || v === '' ? null : v;
    }
  }
}

export function matchRules(rules: readonly Rule[], request: CheckRequest): Matched[] {
  // Sized for every rule and cut to the matches: a pushed-to empty array would get room for 16 on its first push.
  const out: Matched[] = new Array<Matched>(rules.length);
  let n = 0;
  for (const rule of rules) {
    const value = dimensionValue(rule, request);
    if (value !== null) out[n++] = { rule, key: counterKey(rule, value) };
  }
  out.length = n;
  return out;
}

/**
 * The store could not be asked in time (spec rule 8): fail-open answers allowed with remaining -1; fail-closed
 * answers denied with remaining 0, and asks the caller to come back after one health-check period, by which time
 * the instance has either reached the store again or is on its way to degraded mode.
 */
const FAIL_CLOSED_RETRY_MS = 1_000;

export function unreachable(rule: Rule): Outcome {
  return rule.failClosed
    ? { allowed: false, remaining: 0, retryAfterMs: FAIL_CLOSED_RETRY_MS, resetMs: 0 }
    : { allowed: true, remaining: -1, resetMs: 0 };
}

/** The most restrictive outcome wins (spec rule 5). No rules: allowed, remaining unknown (-1). */
export function combine(outcomes: readonly Outcome[]): CheckAnswer {
  let allowed = true;
  let remaining = Infinity;
  let retryAfterMs = 0;
  let resetMs = 0;
  for (const o of outcomes) {
    if (!o.allowed) {
      allowed = false;
      retryAfterMs = Math.max(retryAfterMs, o.retryAfterMs ?? 0);
    }
    remaining = Math.min(remaining, o.remaining);
    resetMs = Math.max(resetMs, o.resetMs);
  }
  const answer: CheckAnswer = {
    allowed,
    remaining: remaining === Infinity ? -1 : remaining,
    resetMs,
    rules: outcomes.length,
  };
  if (!allowed) answer.retryAfterMs = retryAfterMs;
  return answer;
}

/**
 * `combine` over the first `n` results as the counter store writes them (CounterTable.takeInto: allowed 1/0,
 * tokens, retry_after_ms, reset_ms per rule): the same answer, without an Outcome object per rule.
 */
export function combineWire(results: Float64Array, n: number): CheckAnswer {
  let allowed = true;
  let remaining = Infinity;
  let retryAfterMs = 0;
  let resetMs = 0;
  for (let i = 0; i < n; i++) {
    const at = i * WIRE_RESULT_FIELDS;
    const ok = results[at] === 1;
    if (!ok) {
      allowed = false;
      retryAfterMs = Math.max(retryAfterMs, results[at + 2]!);
    }
    remaining = Math.min(remaining, remainingOf(ok, results[at + 1]!));
    resetMs = Math.max(resetMs, results[at + 3]!);
  }
  const answer: CheckAnswer = { allowed, remaining: remaining === Infinity ? -1 : remaining, resetMs, rules: n };
  if (!allowed) answer.retryAfterMs = retryAfterMs;
  return answer;
}

/** The remaining count of result `i` of takeInto's layout (see combineWire). */
export function wireRemaining(results: Float64Array, i: number): number {
  const at = i * WIRE_RESULT_FIELDS;
  return remainingOf(results[at] === 1, results[at + 1]!);
}

/** Near the limit: under 10% of the bucket left (denials included). Counted per rule in the metrics. */
export function nearLimit(rule: Rule, remaining: number): boolean {
  return remaining >= 0 && remaining < rule.capacity * 0.1;
}
