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
import { setFlagsFromString } from 'node:v8';
import { Worker } from 'node:worker_threads';
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

/** One generator thread's share of an open loop (runOpenLoopThreads). */
export interface OpenLoopShare {
  /** Checks per second this thread starts, spread over its `concurrency` workers. */
  rate: number;
  concurrency: number;
  /** When the run starts, as performance.timeOrigin + performance.now() (comparable across threads). */
  startAt: number;
  warmupS: number;
  durationS: number;
}

/** What one generator thread measured over the window (latencies from the send and from the schedule). */
export interface OpenLoopThreadResult {
  latencies: Float64Array;
  fromSchedule: Float64Array;
  errors: number;
  error_kinds: Record<string, number>;
  pauses: GeneratorPauses | null;
  extra: Record<string, number>;
}

/**
 * Runs one thread's share of an open loop (called inside a generator thread): each of `concurrency` workers
 * starts an operation every concurrency / rate seconds on the thread's Pacer, whether or not its last one was
 * late; latency is taken from the send and from the scheduled start. Window: [startAt + warm-up, + duration).
 */
export async function runOpenLoopShare(share: OpenLoopShare, op: (worker: number) => Promise<void>, extra: () => Record<string, number> = () => ({})): Promise<OpenLoopThreadResult> {
  const toLocal = (t: number): number => t - performance.timeOrigin;
  const start = toLocal(share.startAt);
  const measureFrom = start + share.warmupS * 1000;
  const end = measureFrom + share.durationS * 1000;
  const gapMs = (share.concurrency * 1000) / share.rate;
  const pacer = new Pacer();
  const watch = new GeneratorWatch();
  const latencies = new Samples();
  const fromSchedule = new Samples();
  const errorKinds: Record<string, number> = {};
  let errors = 0;
  let extra0: Record<string, number> = {};
  let pauses: GeneratorPauses | null = null;
  const opener = setTimeout(() => {
    watch.start();
    extra0 = extra();
  }, Math.max(0, measureFrom - performance.now()));
  const worker = async (w: number): Promise<void> => {
    for (let scheduled = start + Math.random() * gapMs; scheduled < end; scheduled += gapMs) {
      const sentAt = await pacer.until(scheduled);
      try {
        await op(w);
        const done = performance.now();
        if (scheduled >= measureFrom) {
          latencies.push(done - sentAt);
          fromSchedule.push(done - scheduled);
        }
      } catch (e) {
        if (scheduled >= measureFrom) {
          errors++;
          const kind = errorKind(e);
          errorKinds[kind] = (errorKinds[kind] ?? 0) + 1;
        }
      }
    }
  };
  await Promise.all(Array.from({ length: share.concurrency }, (_, w) => worker(w)));
  clearTimeout(opener);
  pauses = watch.stop();
  const extra1 = extra();
  const delta: Record<string, number> = {};
  for (const [k, v] of Object.entries(extra1)) delta[k] = v - (extra0[k] ?? 0);
  return { latencies: Float64Array.from(latencies.view()), fromSchedule: Float64Array.from(fromSchedule.view()), errors, error_kinds: errorKinds, pauses, extra: delta };
}

export interface OpenLoopThreadsOptions {
  /** The generator thread's module: it builds its op from `workerData(i)`, posts {type: 'ready'}, then on
   * {type: 'go', share} runs runOpenLoopShare and posts {type: 'done', result}. */
  script: URL;
  threads: number;
  workerData: (thread: number) => unknown;
  rate: number;
  concurrency: number;
  warmupS: number;
  durationS: number;
  /** Each generator thread's young generation (fixed semi-spaces of this many MB), so its scavenges are rare. */
  semiSpaceMb: number;
  /** Called as the measured window opens and once every thread has finished. */
  onMeasureStart?: () => void;
  onMeasureEnd?: () => void;
}

export interface OpenLoopThreadsResult extends Omit<LatencySummary, 'count'> {
  ops_per_sec: number;
  ops: number;
  errors: number;
  error_kinds: Record<string, number>;
  p50_from_schedule_ms: number;
  p99_from_schedule_ms: number;
  duration_s: number;
  /** Each generator thread's own pauses over the window, and the worst of them. */
  generators: GeneratorPauses[];
  worst: GeneratorPauses | null;
  /** The threads' own counters (`extra`), summed. */
  extra: Record<string, number>;
}

/**
 * An open loop spread over `threads` worker threads, each with its own event loop, heap and connections, and its
 * share of the rate and of the workers: one thread's GC pause or timer burst then delays only its own share of the
 * operations, and no thread runs the whole rate. The main thread only starts them, times the window and merges.
 */
export async function runOpenLoopThreads(o: OpenLoopThreadsOptions): Promise<OpenLoopThreadsResult> {
  // V8 reads these when an isolate is created: they apply to the threads started below, not to this one.
  setFlagsFromString(`--max-semi-space-size=${o.semiSpaceMb}`);
  setFlagsFromString(`--min-semi-space-size=${o.semiSpaceMb}`);
  const threads = Math.max(1, Math.min(o.threads, o.concurrency));
  const workers: Worker[] = [];
  const done: Promise<OpenLoopThreadResult>[] = [];
  try {
    const ready: Promise<void>[] = [];
    for (let i = 0; i < threads; i++) {
      const w = new Worker(o.script, { workerData: o.workerData(i) });
      workers.push(w);
      const failed = new Promise<never>((_, reject) => {
        w.once('error', reject);
        w.once('exit', (code) => reject(new Error(`generator thread ${i} exited (${code}) before it finished`)));
      });
      failed.catch(() => undefined);
      ready.push(Promise.race([new Promise<void>((resolve) => w.once('message', () => resolve())), failed]));
      done.push(
        Promise.race([
          new Promise<OpenLoopThreadResult>((resolve) =>
            w.on('message', (m: { type: string; result?: OpenLoopThreadResult }) => {
              if (m.type === 'done' && m.result !== undefined) resolve(m.result);
            }),
          ),
          failed,
        ]),
      );
    }
    await Promise.all(ready);
    const startAt = performance.timeOrigin + performance.now() + 50;
    const opener = setTimeout(() => o.onMeasureStart?.(), Math.max(0, startAt - performance.timeOrigin - performance.now() + o.warmupS * 1000));
    for (let i = 0; i < threads; i++) {
      const concurrency = Math.floor(o.concurrency / threads) + (i < o.concurrency % threads ? 1 : 0);
      const share: OpenLoopShare = { rate: (o.rate * concurrency) / o.concurrency, concurrency, startAt, warmupS: o.warmupS, durationS: o.durationS };
      workers[i]!.postMessage({ type: 'go', share });
    }
    let results: OpenLoopThreadResult[];
    try {
      results = await Promise.all(done);
    } finally {
      clearTimeout(opener);
    }
    o.onMeasureEnd?.();
    const latencies = new Float64Array(results.reduce((n, r) => n + r.latencies.length, 0));
    const fromSchedule = new Float64Array(results.reduce((n, r) => n + r.fromSchedule.length, 0));
    let at = 0;
    let at2 = 0;
    const errorKinds: Record<string, number> = {};
    const extra: Record<string, number> = {};
    for (const r of results) {
      latencies.set(r.latencies, at);
      at += r.latencies.length;
      fromSchedule.set(r.fromSchedule, at2);
      at2 += r.fromSchedule.length;
      for (const [k, v] of Object.entries(r.error_kinds)) errorKinds[k] = (errorKinds[k] ?? 0) + v;
      for (const [k, v] of Object.entries(r.extra)) extra[k] = (extra[k] ?? 0) + v;
    }
    const { count: _count, ...latency } = summarize(latencies);
    const late = summarize(fromSchedule);
    const generators = results.map((r) => r.pauses).filter((p): p is GeneratorPauses => p !== null);
    const worst = generators.reduce<GeneratorPauses | null>((w, p) => (w === null || p.generator_loop_delay_p99_ms > w.generator_loop_delay_p99_ms ? p : w), null);
    return {
      ops_per_sec: round(latencies.length / o.durationS, 0),
      ops: latencies.length,
      errors: results.reduce((n, r) => n + r.errors, 0),
      error_kinds: errorKinds,
      ...latency,
      p50_from_schedule_ms: late.p50_ms,
      p99_from_schedule_ms: late.p99_ms,
      duration_s: o.durationS,
      generators,
      worst,
      extra,
    };
  } finally {
    await Promise.all(workers.map((w) => w.terminate()));
  }
}
