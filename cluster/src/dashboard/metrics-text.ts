/**
 * Requests per second and latency quantiles from a process's /metrics (Prometheus text): the counter
 * http_requests_total (summed over its labels) and the histogram http_request_seconds (packages/platform/http's
 * processHttp), each turned into a rate over the time between two polls.
 */
import type { ProcessMetrics } from './types.js';

export interface MetricsSample {
  at: number;
  requests: number;
  /** Cumulative bucket counts by upper bound (seconds), +Inf included. */
  buckets: Array<[number, number]>;
}

export function parseMetrics(text: string, at: number): MetricsSample {
  let requests = 0;
  const buckets = new Map<number, number>();
  for (const line of text.split('\n')) {
    if (line.startsWith('http_requests_total')) {
      const value = Number(line.slice(line.lastIndexOf(' ') + 1));
      if (Number.isFinite(value)) requests += value;
    } else if (line.startsWith('http_request_seconds_bucket{')) {
      const m = /le="([^"]+)"\}\s+(\S+)/.exec(line);
      if (m === null) continue;
      const le = m[1] === '+Inf' ? Infinity : Number(m[1]);
      const count = Number(m[2]);
      if (!Number.isNaN(le) && Number.isFinite(count)) buckets.set(le, (buckets.get(le) ?? 0) + count);
    }
  }
  return { at, requests, buckets: [...buckets].sort((a, b) => a[0] - b[0]) };
}

/** No rate: the call missed, or there is no earlier sample to take a difference from. A gap, never a zero. */
export const NO_METRICS: ProcessMetrics = { requestsPerSec: null, p50Ms: null, p99Ms: null };

/** The rates between two samples of one process (a restarted process's counters start again: no rate then). */
export function rates(before: MetricsSample | undefined, after: MetricsSample): ProcessMetrics {
  if (before === undefined || after.at <= before.at || after.requests < before.requests) return NO_METRICS;
  const seconds = (after.at - before.at) / 1000;
  const deltas = after.buckets.map(
    ([le, count]) => [le, count - (before.buckets.find((b) => b[0] === le)?.[1] ?? 0)] as [number, number],
  );
  return {
    requestsPerSec: Math.round(((after.requests - before.requests) / seconds) * 10) / 10,
    p50Ms: quantile(deltas, 0.5),
    p99Ms: quantile(deltas, 0.99),
  };
}

/** The q-quantile of cumulative bucket counts, interpolated inside its bucket (as Prometheus does), in ms. */
export function quantile(cumulative: Array<[number, number]>, q: number): number | null {
  const total = cumulative.at(-1)?.[1] ?? 0;
  if (total <= 0) return null;
  const rank = q * total;
  let prevBound = 0;
  let prevCount = 0;
  for (const [le, count] of cumulative) {
    if (count >= rank) {
      // Past the last finite bound all we know is "more than it".
      if (le === Infinity) return Math.round(prevBound * 1000 * 100) / 100;
      const within = count === prevCount ? 0 : (rank - prevCount) / (count - prevCount);
      return Math.round((prevBound + (le - prevBound) * within) * 1000 * 100) / 100;
    }
    prevBound = le;
    prevCount = count;
  }
  return null;
}
