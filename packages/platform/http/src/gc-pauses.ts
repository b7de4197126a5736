/**
 * This process's garbage-collection pauses on its /metrics (from V8's GC performance entries): whether a latency
 * tail is this process's own pauses or someone else's (the caller's, the scheduler's, the disk's). Counters only,
 * so a reader takes the change over any window (the benchmarks read /metrics as their window opens and closes).
 * Event-driven: an idle process pays nothing (no sampling timer).
 */
import { PerformanceObserver, type EntryType } from 'node:perf_hooks';
import type { MetricsRegistry } from './metrics.js';

/** Pauses longer than these many milliseconds are counted apart. */
export const GC_PAUSE_THRESHOLDS_MS = [1, 5] as const;

/** NODE_PERFORMANCE_GC_MINOR: a young-generation collection (scavenge). */
const GC_MINOR = 1;

export interface GcPauseWatch {
  stop(): void;
}

export function watchGcPauses(registry: MetricsRegistry): GcPauseWatch {
  const seconds = registry.counter(
    'process_gc_pause_seconds_total',
    'Time this process spent in garbage-collection pauses',
  );
  const pauses = registry.counter('process_gc_pauses_total', 'Garbage-collection pauses of this process');
  const scavenges = registry.counter(
    'process_gc_scavenges_total',
    'Young-generation collections (scavenges) of this process',
  );
  const over = GC_PAUSE_THRESHOLDS_MS.map((ms) =>
    registry.counter(`process_gc_pauses_over_${ms}ms_total`, `Garbage-collection pauses longer than ${ms} ms`),
  );
  const observer = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      const ms = entry.duration;
      seconds.inc(ms / 1000);
      pauses.inc(1);
      if ((entry as { detail?: { kind?: number } }).detail?.kind === GC_MINOR) scavenges.inc(1);
      for (let i = 0; i < GC_PAUSE_THRESHOLDS_MS.length; i++) if (ms > GC_PAUSE_THRESHOLDS_MS[i]!) over[i]!.inc(1);
    }
  });
  observer.observe({ entryTypes: ['gc' as EntryType] });
  return { stop: () => observer.disconnect() };
}
