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
  constructor(
    readonly kind: string,
    message = kind,
  ) {
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
  /**
   * Waiting callbacks and their due times, in arrays kept from run to run (the first `waiting` slots in use): no
   * object per wait, and no new arrays per timer run for the generator's young generation.
   */
  private dueAt = new Float64Array(64);
  private due: (((now: number) => void) | undefined)[] = [];
  private waiting = 0;
  /** The callbacks being released by this run (reused likewise). */
  private readonly releasing: (((now: number) => void) | undefined)[] = [];
  private timer: NodeJS.Timeout | null = null;
  private timerAt = Infinity;

  /** Resolves at (or just after) `at` (performance.now() time) with the moment it was released. */
  until(at: number): Promise<number> {
    const now = performance.now();
    if (at <= now) return Promise.resolve(now);
    return new Promise<number>((go) => this.at(at, go, now));
  }

  /**
   * Calls `go(now)` at (or just after) `at`, from the timer's run (never synchronously): the open loop's generator
   * threads wait this way, without a promise per wait.
   */
  at(at: number, go: (now: number) => void, now = performance.now()): void {
    if (this.waiting === this.dueAt.length) {
      const more = new Float64Array(this.dueAt.length * 2);
      more.set(this.dueAt);
      this.dueAt = more;
    }
    this.dueAt[this.waiting] = at;
    this.due[this.waiting] = go;
    this.waiting++;
    if (at < this.timerAt) this.arm(at, now);
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
    const limit = now + 0.5;
    // What is due moves to `releasing`; the rest closes up, in order. Then the callbacks run: they may wait again,
    // appending after the ones still waiting.
    let kept = 0;
    let released = 0;
    for (let i = 0; i < this.waiting; i++) {
      if (this.dueAt[i]! <= limit) this.releasing[released++] = this.due[i];
      else {
        this.dueAt[kept] = this.dueAt[i]!;
        this.due[kept++] = this.due[i];
      }
    }
    for (let i = kept; i < this.waiting; i++) this.due[i] = undefined;
    this.waiting = kept;
    for (let i = 0; i < released; i++) {
      const go = this.releasing[i]!;
      this.releasing[i] = undefined;
      go(now);
    }
    let next = Infinity;
    for (let i = 0; i < this.waiting; i++) if (this.dueAt[i]! < next) next = this.dueAt[i]!;
    if (next !== Infinity && next < this.timerAt) this.arm(next, performance.now());
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
interface OpenLoopThreadResult {
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
 * `answer` looks at each operation's result as it arrives (throwing makes it a failure), so an op can return its
 * client's own promise rather than chaining a `.then` of its own per operation.
 */
export function runOpenLoopShare<T>(
  share: OpenLoopShare,
  op: (worker: number) => Promise<T>,
  extra: () => Record<string, number> = () => ({}),
  answer: (value: T) => void = () => undefined,
): Promise<OpenLoopThreadResult> {
  return new Promise((resolve) => new OpenLoopShareRun(share, op, extra, answer, resolve).start());
}

/**
 * One thread's open loop, driven by callbacks rather than an async function per worker: each check then costs the
 * generator its operation's own promise and one reaction, not the awaits' promises and resumptions (which were a
 * third of the bytes the generator allocated per check, and so of its scavenges: every one of them a pause in
 * the latencies it measures). A worker's state lives in typed arrays indexed by worker; the handlers are created
 * once per worker.
 */
class OpenLoopShareRun<T> {
  private readonly toLocal = (t: number): number => t - performance.timeOrigin;
  private readonly startAt: number;
  private readonly measureFrom: number;
  private readonly end: number;
  private readonly gapMs: number;
  private readonly pacer = new Pacer();
  private readonly watch = new GeneratorWatch();
  private readonly latencies = new Samples();
  private readonly fromSchedule = new Samples();
  private readonly errorKinds: Record<string, number> = {};
  private errors = 0;
  private extra0: Record<string, number> = {};
  /** Per worker: when its current operation was due, and when it was sent. */
  private readonly scheduled: Float64Array;
  private readonly sentAt: Float64Array;
  private running: number;
  private opener: NodeJS.Timeout | null = null;

  constructor(
    share: OpenLoopShare,
    private readonly op: (worker: number) => Promise<T>,
    private readonly extra: () => Record<string, number>,
    /** Looks at an operation's answer; throwing makes it a failed operation (e.g. an answer that failed open). */
    private readonly answer: (value: T) => void,
    private readonly resolve: (r: OpenLoopThreadResult) => void,
  ) {
    this.startAt = this.toLocal(share.startAt);
    this.measureFrom = this.startAt + share.warmupS * 1000;
    this.end = this.measureFrom + share.durationS * 1000;
    this.gapMs = (share.concurrency * 1000) / share.rate;
    this.scheduled = new Float64Array(share.concurrency);
    this.sentAt = new Float64Array(share.concurrency);
    this.running = share.concurrency;
  }

  start(): void {
    this.opener = setTimeout(
      () => {
        this.watch.start();
        this.extra0 = this.extra();
      },
      Math.max(0, this.measureFrom - performance.now()),
    );
    if (this.running === 0) this.finish();
    for (let w = 0; w < this.scheduled.length; w++) {
      // Latency runs from this operation's own send, not from the pacer's release of the batch it is in: the
      // checks released together go one after another, and the generator's time on the ones before is its own
      // lateness (in the figures from the schedule), not the measured side's latency.
      const send = (): void => {
        this.sentAt[w] = performance.now();
        let pending: Promise<T>;
        try {
          pending = this.op(w);
        } catch (e) {
          // Settled in a later microtask like a rejection, so a worker far behind cannot recurse here.
          pending = Promise.reject(e);
        }
        pending.then(done, failed);
      };
      const done = (value: T): void => {
        try {
          this.answer(value);
        } catch (e) {
          failed(e);
          return;
        }
        const scheduled = this.scheduled[w]!;
        if (scheduled >= this.measureFrom) {
          const now = performance.now();
          this.latencies.push(now - this.sentAt[w]!);
          this.fromSchedule.push(now - scheduled);
        }
        this.next(w, send);
      };
      const failed = (e: unknown): void => {
        if (this.scheduled[w]! >= this.measureFrom) {
          this.errors++;
          const kind = errorKind(e);
          this.errorKinds[kind] = (this.errorKinds[kind] ?? 0) + 1;
        }
        this.next(w, send);
      };
      this.scheduled[w] = this.startAt + Math.random() * this.gapMs;
      this.wait(w, send);
    }
  }

  /** The worker's next operation, due one gap after the last one was due (late or not), or the worker is done. */
  private next(w: number, send: (now: number) => void): void {
    this.scheduled[w] = this.scheduled[w]! + this.gapMs;
    this.wait(w, send);
  }

  private wait(w: number, send: (now: number) => void): void {
    const at = this.scheduled[w]!;
    if (at >= this.end) {
      if (--this.running === 0) this.finish();
      return;
    }
    // Already due (the last answer came late): sent now, as the awaited pacer did, not a timer run later.
    const now = performance.now();
    if (at <= now) send(now);
    else this.pacer.at(at, send, now);
  }

  private finish(): void {
    if (this.opener !== null) clearTimeout(this.opener);
    const pauses = this.watch.stop();
    const extra1 = this.extra();
    const delta: Record<string, number> = {};
    for (const [k, v] of Object.entries(extra1)) delta[k] = v - (this.extra0[k] ?? 0);
    this.resolve({
      latencies: Float64Array.from(this.latencies.view()),
      fromSchedule: Float64Array.from(this.fromSchedule.view()),
      errors: this.errors,
      error_kinds: this.errorKinds,
      pauses,
      extra: delta,
    });
  }
}

interface OpenLoopThreadsOptions {
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
  /**
   * Scavenge without V8's parallel helper threads (--no-parallel-scavenge; --single-threaded-gc cannot be set
   * once the process runs: V8 aborts). V8 flags are process-wide: this applies to the bench process's own thread
   * too (idle while the threads run). On 2 cores the helpers are more threads waiting for a core.
   */
  singleThreadedGc?: boolean;
  /** Called as the measured window opens and once every thread has finished. */
  onMeasureStart?: () => void;
  onMeasureEnd?: () => void;
}

interface OpenLoopThreadsResult extends Omit<LatencySummary, 'count'> {
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
  if (o.singleThreadedGc === true) setFlagsFromString('--no-parallel-scavenge');
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
    const opener = setTimeout(
      () => o.onMeasureStart?.(),
      Math.max(0, startAt - performance.timeOrigin - performance.now() + o.warmupS * 1000),
    );
    for (let i = 0; i < threads; i++) {
      const concurrency = Math.floor(o.concurrency / threads) + (i < o.concurrency % threads ? 1 : 0);
      const share: OpenLoopShare = {
        rate: (o.rate * concurrency) / o.concurrency,
        concurrency,
        startAt,
        warmupS: o.warmupS,
        durationS: o.durationS,
      };
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
    const worst = generators.reduce<GeneratorPauses | null>(
      (w, p) => (w === null || p.generator_loop_delay_p99_ms > w.generator_loop_delay_p99_ms ? p : w),
      null,
    );
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
