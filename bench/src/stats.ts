/**
 * Latency bookkeeping for benchmark reports: an exact summary at the end (every sample kept, sorted once), and a
 * log-bucketed histogram cheap enough to answer "p99 so far" every second while the load runs.
 */
export interface LatencySummary {
  count: number;
  mean_ms: number;
  p50_ms: number;
  p90_ms: number;
  p99_ms: number;
  p999_ms: number;
  max_ms: number;
}

/** Exact quantiles (nearest rank) of a set of latencies in milliseconds. */
export function summarize(latenciesMs: ArrayLike<number>): LatencySummary {
  const sorted = Float64Array.from(latenciesMs).sort();
  const n = sorted.length;
  const at = (q: number): number => (n === 0 ? 0 : sorted[Math.min(n - 1, Math.max(0, Math.ceil(q * n) - 1))]!);
  let sum = 0;
  for (let i = 0; i < n; i++) sum += sorted[i]!;
  return {
    count: n,
    mean_ms: round(n === 0 ? 0 : sum / n),
    p50_ms: round(at(0.5)),
    p90_ms: round(at(0.9)),
    p99_ms: round(at(0.99)),
    p999_ms: round(at(0.999)),
    max_ms: round(n === 0 ? 0 : sorted[n - 1]!),
  };
}

export function round(x: number, digits = 3): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}

/** A growable list of float samples without the overhead of a JS array of boxed numbers. */
export class Samples {
  private data = new Float64Array(1 << 14);
  length = 0;

  push(x: number): void {
    if (this.length === this.data.length) {
      const next = new Float64Array(this.data.length * 2);
      next.set(this.data);
      this.data = next;
    }
    this.data[this.length++] = x;
  }

  view(): Float64Array {
    return this.data.subarray(0, this.length);
  }
}

/**
 * Latencies in buckets growing by 2% from 1 microsecond: quantiles within 2% of the truth, in constant memory
 * and constant time per sample. Used for the progress line, never for the final figures.
 */
export class Histogram {
  private static readonly GROWTH = Math.log(1.02);
  private static readonly MIN_MS = 0.001;
  private readonly counts = new Float64Array(1200); // 1.02^1200 * 1 us is far beyond any timeout
  count = 0;

  record(ms: number): void {
    const i =
      ms <= Histogram.MIN_MS
        ? 0
        : Math.min(this.counts.length - 1, Math.ceil(Math.log(ms / Histogram.MIN_MS) / Histogram.GROWTH));
    this.counts[i]!++;
    this.count++;
  }

  /** The upper edge of the bucket holding the q-quantile; 0 when empty. */
  quantile(q: number): number {
    if (this.count === 0) return 0;
    const rank = Math.max(1, Math.ceil(q * this.count));
    let seen = 0;
    for (let i = 0; i < this.counts.length; i++) {
      seen += this.counts[i]!;
      if (seen >= rank) return Histogram.MIN_MS * Math.exp(i * Histogram.GROWTH);
    }
    return Histogram.MIN_MS * Math.exp((this.counts.length - 1) * Histogram.GROWTH);
  }
}
