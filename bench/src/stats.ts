/** Latency summaries for benchmark reports. */
export interface LatencySummary {
  count: number;
  p50_ms: number;
  p99_ms: number;
  max_ms: number;
}

export function summarize(latenciesMs: number[]): LatencySummary {
  const sorted = Float64Array.from(latenciesMs).sort();
  const at = (q: number): number => (sorted.length === 0 ? 0 : sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!);
  return { count: sorted.length, p50_ms: round(at(0.5)), p99_ms: round(at(0.99)), max_ms: round(at(1)) };
}

export function round(x: number, digits = 3): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}
