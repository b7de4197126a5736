/**
 * The closed-loop load generator every benchmark uses, for our system and for the peer alike, so both are
 * measured the same way: `concurrency` workers, each issuing one operation, waiting for its whole answer, and
 * issuing the next, until the time is up. A warm-up runs first and is not counted.
 *
 * Latency is from the start of an operation to the end of its answer. Failed operations are counted apart (by
 * kind) and kept out of the latency figures; a worker pauses briefly after a failure so a dead endpoint cannot
 * turn the loop into a busy spin.
 */
import { monitorEventLoopDelay, PerformanceObserver } from 'node:perf_hooks';
import { Histogram, round, Samples, summarize, type LatencySummary } from './stats.js';

/** A failed operation; `kind` groups failures in the report (e.g. "HTTP 503 unavailable", "ECONNREFUSED"). */
export class OpError extends Error {
  override name = 'OpError';
  constructor(readonly kind: string, message = kind) {
    super(message);
  }
}

export interface LoadOptions {
  /** Shown on the progress lines, e.g. "ours" or "etcd". */
  label: string;
  concurrency: number;
  durationS: number;
  warmupS: number;
  /**
   * One operation by worker `worker`: resolves once its answer is complete, throws on failure. It may resolve to
   * the time (performance.now()) it actually sent its request when it waited first (an open-loop pacer): the
   * latency is then taken from that moment, not from the call.
   */
  op: (worker: number) => Promise<void | number>;
  /** Where the progress line goes every second; null for none. Default: stderr. */
  progress?: NodeJS.WritableStream | null;
  /** Pause after a failed operation. Default 5 ms. */
  errorBackoffMs?: number;
  /** Stops the workers early (Ctrl-C). */
  signal?: AbortSignal;
  /** Called as the measured window opens and closes (e.g. to read the servers' CPU time). */
  onMeasureStart?: () => void;
  onMeasureEnd?: () => void;
}

export interface LoadResult extends Omit<LatencySummary, 'count'> {
  ops_per_sec: number;
  /** Operations that completed without error inside the measured window. */
  ops: number;
  errors: number;
  error_kinds: Record<string, number>;
  /** Length of the measured window, from its start until the last worker finished. */
  duration_s: number;
  warmup_s: number;
  concurrency: number;
  /** True when the run was cut short (Ctrl-C). */
  interrupted: boolean;
}

export function errorKind(e: unknown): string {
  if (e instanceof OpError) return e.kind;
  const err = e as { code?: unknown; name?: unknown; message?: unknown } | null;
  if (err && typeof err.code === 'string') return err.code;
  if (err && typeof err.message === 'string') return err.message.slice(0, 80);
  return String(e).slice(0, 80);
}

export async function runLoad(o: LoadOptions): Promise<LoadResult> {
  const out = o.progress === undefined ? process.stderr : o.progress;
  const backoff = o.errorBackoffMs ?? 5;
  const samples = new Samples();
  const histogram = new Histogram();
  const errorKinds: Record<string, number> = {};
  let errors = 0;
  let warmupOps = 0;
  let completed = 0; // all successful operations, warm-up included, for the rate on the progress line

  const t0 = performance.now();
  const measureStart = t0 + o.warmupS * 1000;
  const end = measureStart + o.durationS * 1000;
  let measuring = false;
  const openWindow = (): void => {
    if (measuring) return;
    measuring = true;
    o.onMeasureStart?.();
  };
  const opener = setTimeout(openWindow, Math.max(0, measureStart - t0));

  let lastCount = 0;
  let lastTime = t0;
  const tick = (): void => {
    const now = performance.now();
    if (out === null) return;
    const phase = measuring ? 'measure' : 'warm-up';
    const count = measuring ? samples.length : warmupOps;
    const rate = (completed - lastCount) / ((now - lastTime) / 1000);
    const p99 = histogram.quantile(0.99);
    const elapsed = Math.round((now - t0) / 1000);
    const total = Math.round(o.warmupS + o.durationS);
    out.write(
      `  ${o.label.padEnd(6)} ${String(elapsed).padStart(3)}/${total}s ${phase.padEnd(7)} ` +
        `ops ${String(count).padStart(8)}  ${String(Math.round(rate)).padStart(6)} ops/s  ` +
        `p99 so far ${p99 === 0 ? '-' : p99.toFixed(1) + ' ms'}  errors ${errors}\n`,
    );
    lastCount = completed;
    lastTime = now;
  };
  const timer = setInterval(tick, 1000);

  const worker = async (w: number): Promise<void> => {
    while (!o.signal?.aborted) {
      const start = performance.now();
      if (start >= end) return;
      try {
        const sentAt = await o.op(w);
        const done = performance.now();
        completed++;
        if (start >= measureStart) {
          const ms = done - (typeof sentAt === 'number' ? sentAt : start);
          samples.push(ms);
          histogram.record(ms);
        } else {
          warmupOps++;
        }
      } catch (e) {
        if (start >= measureStart) {
          errors++;
          const kind = errorKind(e);
          errorKinds[kind] = (errorKinds[kind] ?? 0) + 1;
        }
        if (backoff > 0) await new Promise((r) => setTimeout(r, backoff));
      }
    }
  };
  try {
    await Promise.all(Array.from({ length: o.concurrency }, (_, w) => worker(w)));
  } finally {
    clearInterval(timer);
    clearTimeout(opener);
  }
  const finished = performance.now();
  openWindow();
  o.onMeasureEnd?.();
  const elapsedS = Math.max(0.001, (finished - measureStart) / 1000);
  const { count: _count, ...latency } = summarize(samples.view());
  return {
    ops_per_sec: round(samples.length / elapsedS, 0),
    ops: samples.length,
    errors,
    error_kinds: errorKinds,
    ...latency,
    duration_s: round(elapsedS, 2),
    warmup_s: o.warmupS,
    concurrency: o.concurrency,
    interrupted: o.signal?.aborted ?? false,
  };
}

/**
 * Open loop: releases each waiting operation at its scheduled time, with ONE timer for all of them (armed for
 * the earliest due time) rather than a timer per operation. Everything due when the timer fires is released in
 * the same turn, so a client that batches per turn (RateLimitClient, ioredis) sends it as one write: at 40,000
 * operations a second that is one timer run per millisecond instead of 40 timer callbacks, each followed by its
 * own microtask checkpoint.
 */
export class Pacer {
  private waiting: { at: number; go: (now: number) => void }[] = [];
  private timer: NodeJS.Timeout | null = null;
  private timerAt = Infinity;

  /** Resolves at (or just after) `at` (performance.now() time) with the moment it was released. */
  until(at: number): Promise<number> {
    const now = performance.now();
    if (at <= now) return Promise.resolve(now);
    return new Promise<number>((go) => {
      this.waiting.push({ at, go });
      if (at < this.timerAt) this.arm(at, now);
    });
  }

  private arm(at: number, now: number): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timerAt = at;
    // setTimeout counts whole milliseconds and never fires early by more than that rounding: what is due within
    // the next half millisecond goes with this run.
    this.timer = setTimeout(this.release, Math.max(0, Math.round(at - now)));
  }

  private readonly release = (): void => {
    this.timer = null;
    this.timerAt = Infinity;
    const now = performance.now();
    const due = now + 0.5;
    const still: { at: number; go: (now: number) => void }[] = [];
    let next = Infinity;
    for (const w of this.waiting) {
      if (w.at <= due) w.go(now);
      else {
        still.push(w);
        if (w.at < next) next = w.at;
      }
    }
    this.waiting = still;
    if (next !== Infinity) this.arm(next, now);
  };
}

/** The load generator's own pauses over a window: what it adds to every latency it measures, on any side. */
export interface GeneratorPauses {
  /** Event-loop delay (libuv's sampling timer, beyond its period), ms. */
  generator_loop_delay_p50_ms: number;
  generator_loop_delay_p99_ms: number;
  generator_loop_delay_max_ms: number;
  /** Garbage-collection pauses of the generator in the window. */
  generator_gc_pauses: number;
  generator_gc_pause_ms: number;
  generator_gc_pause_max_ms: number;
}

const LOOP_SAMPLE_MS = 1;

/** Watches this process's event-loop delay and GC pauses between start() and stop(). */
export class GeneratorWatch {
  private readonly delay = monitorEventLoopDelay({ resolution: LOOP_SAMPLE_MS });
  private observer: PerformanceObserver | null = null;
  private gcCount = 0;
  private gcMs = 0;
  private gcMax = 0;

  start(): void {
    this.stopWatching();
    this.gcCount = 0;
    this.gcMs = 0;
    this.gcMax = 0;
    this.observer = new PerformanceObserver((list) => {
      for (const e of list.getEntries()) {
        this.gcCount++;
        this.gcMs += e.duration;
        if (e.duration > this.gcMax) this.gcMax = e.duration;
      }
    });
    this.observer.observe({ entryTypes: ['gc'] });
    this.delay.reset();
    this.delay.enable();
  }

  stop(): GeneratorPauses {
    this.stopWatching();
    // A sample is the whole interval between two runs of the sampling timer: its period is not a delay.
    const ms = (ns: number): number => (this.delay.count === 0 ? 0 : round(Math.max(0, ns / 1e6 - LOOP_SAMPLE_MS), 2));
    return {
      generator_loop_delay_p50_ms: ms(this.delay.percentile(50)),
      generator_loop_delay_p99_ms: ms(this.delay.percentile(99)),
      generator_loop_delay_max_ms: ms(this.delay.max),
      generator_gc_pauses: this.gcCount,
      generator_gc_pause_ms: round(this.gcMs, 1),
      generator_gc_pause_max_ms: round(this.gcMax, 2),
    };
  }

  private stopWatching(): void {
    this.delay.disable();
    this.observer?.disconnect();
    this.observer = null;
  }
}
