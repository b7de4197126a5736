/**
 * Prometheus text-format metrics: counters, gauges and histograms, rendered by one registry per process. Small on
 * purpose (no dependency); RaftMetrics (node-metrics.ts) fills one with a member's Raft metrics.
 */

/** Label names and values of one series. */
export type Labels = Record<string, string>;

function labelKey(labels: Labels): string {
  const keys = Object.keys(labels).sort();
  return keys
    .map((k) => `${k}="${String(labels[k]).replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n')}"`)
    .join(',');
}

/** Anything a registry renders. */
export interface Metric {
  /** This metric in the Prometheus text format. */
  render(): string;
}

/** One labelled series of a Counter (Counter.series). */
export interface CounterSeries {
  /** Add `by` (default 1) to this series. */
  inc(by?: number): void;
}

/** A value that only goes up, per label set. */
export class Counter implements Metric {
  private readonly values = new Map<string, number>();
  constructor(
    readonly name: string,
    readonly help: string,
  ) {}
  /** Add `by` (default 1) to the series of `labels`. */
  inc(by = 1, labels?: Labels): void {
    // The unlabelled series is the hot one (a counter per check): no key to build and sort.
    const k = labels === undefined ? '' : labelKey(labels);
    this.values.set(k, (this.values.get(k) ?? 0) + by);
  }
  /**
   * The series of `labels` as a handle whose `inc` adds without formatting the label set again: for a labelled
   * series on a hot path (a frame's worth of answered calls), where `inc(by, labels)` would sort and format the
   * labels on every call.
   */
  series(labels: Labels): CounterSeries {
    const k = labelKey(labels);
    if (!this.values.has(k)) this.values.set(k, 0);
    return { inc: (by = 1) => void this.values.set(k, this.values.get(k)! + by) };
  }
  /** This metric in the Prometheus text format. */
  render(): string {
    const lines = [`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} counter`];
    if (this.values.size === 0) lines.push(`${this.name} 0`);
    for (const [k, v] of this.values) lines.push(`${this.name}${k ? `{${k}}` : ''} ${v}`);
    return lines.join('\n');
  }
}

/** A value that goes up and down, per label set; a function is read at render time. */
export class Gauge implements Metric {
  private readonly values = new Map<string, number | (() => number)>();
  constructor(
    readonly name: string,
    readonly help: string,
  ) {}
  /** Set the series of `labels` to a value, or to a function read at each render. */
  set(value: number | (() => number), labels?: Labels): void {
    this.values.set(labels === undefined ? '' : labelKey(labels), value);
  }
  /** This metric in the Prometheus text format. */
  render(): string {
    const lines = [`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} gauge`];
    for (const [k, v] of this.values)
      lines.push(`${this.name}${k ? `{${k}}` : ''} ${typeof v === 'function' ? v() : v}`);
    return lines.join('\n');
  }
}

/** Observations counted into cumulative buckets, with their sum and count. */
export class Histogram implements Metric {
  private readonly counts: number[];
  private sum = 0;
  private count = 0;
  constructor(
    readonly name: string,
    readonly help: string,
    readonly buckets: number[] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
  ) {
    this.counts = buckets.map(() => 0);
  }
  /** Count one observation. */
  observe(value: number): void {
    this.sum += value;
    this.count++;
    for (let i = 0; i < this.buckets.length; i++) if (value <= this.buckets[i]!) this.counts[i]!++;
  }
  /** This metric in the Prometheus text format. */
  render(): string {
    const lines = [`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} histogram`];
    this.buckets.forEach((b, i) => lines.push(`${this.name}_bucket{le="${b}"} ${this.counts[i]}`));
    lines.push(
      `${this.name}_bucket{le="+Inf"} ${this.count}`,
      `${this.name}_sum ${this.sum}`,
      `${this.name}_count ${this.count}`,
    );
    return lines.join('\n');
  }
}

/** The metrics of one process (or one member), rendered together for GET /metrics. */
export class MetricsRegistry {
  private readonly metrics: Metric[] = [];
  /** A new counter in this registry. */
  counter(name: string, help: string): Counter {
    return this.add(new Counter(name, help));
  }
  /** A new gauge in this registry. */
  gauge(name: string, help: string): Gauge {
    return this.add(new Gauge(name, help));
  }
  /** A new histogram in this registry (buckets: upper bounds, ascending). */
  histogram(name: string, help: string, buckets?: number[]): Histogram {
    return this.add(new Histogram(name, help, buckets));
  }
  private add<M extends Metric>(m: M): M {
    this.metrics.push(m);
    return m;
  }
  /** Every metric in the Prometheus text format. */
  render(): string {
    return this.metrics.map((m) => m.render()).join('\n') + '\n';
  }
}
