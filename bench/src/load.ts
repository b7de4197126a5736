/**
 * The closed-loop load generator every benchmark uses, for our system and for the peer alike, so both are
 * measured the same way: `concurrency` workers, each issuing one operation, waiting for its whole answer, and
 * issuing the next, until the time is up. A warm-up runs first and is not counted.
 *
 * Latency is from the start of an operation to the end of its answer. Failed operations are counted apart (by
 * kind) and kept out of the latency figures; a worker pauses briefly after a failure so a dead endpoint cannot
 * turn the loop into a busy spin.
 */
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
