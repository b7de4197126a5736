/**
 * The check instance's own event-loop delay on its /metrics (libuv's sampling timer, monitorEventLoopDelay),
 * beside the garbage-collection pauses every process counts (process_gc_*, @raftkit/http's processHttp). A check's
 * latency under 1 ms can only be as good as the longest pause it may land in, so these say whether a tail is this
 * process's or someone else's (the caller's, the scheduler's). Only here: a 2 ms sampler would wake every idle
 * process of a cluster 500 times a second.
 *
 * Everything is a counter so that a reader can take the change over any window (the benchmark reads /metrics as
 * its measured window opens and closes): the loop-delay histogram is folded into counters once a second.
 *
 * The sampler runs only while the instance serves checks: `served()` (a count that grows with every check) is
 * read at each fold, and a second without checks turns the sampler off until the next fold that sees some. An
 * idle instance then wakes once a second instead of 500 times: on a machine whose cores it shares with the busy
 * instance and the load, each of those wake-ups is a moment the busy one could wait for a core (bench/RESULTS.md,
 * ratelimit, findings).
 */
import { monitorEventLoopDelay } from 'node:perf_hooks';
import type { MetricsRegistry } from '@raftkit/http';

/** The loop-delay sampler's period: fine enough to see 1 ms stalls, coarse enough to cost nothing measurable. */
const SAMPLE_MS = 2;
/** Delays over these many milliseconds are counted apart. */
const THRESHOLDS_MS = [1, 5] as const;

interface PauseWatch {
  stop(): void;
}

export function watchPauses(registry: MetricsRegistry, served: () => number): PauseWatch {
  const loopSamples = registry.counter(
    'ratelimit_loop_delay_samples_total',
    `Event-loop delay samples (one per ${SAMPLE_MS} ms of loop time)`,
  );
  const loopOver = THRESHOLDS_MS.map((ms) =>
    registry.counter(
      `ratelimit_loop_delay_over_${ms}ms_samples_total`,
      `Event-loop delay samples later than ${ms} ms (the loop was held up that long)`,
    ),
  );

  const delay = monitorEventLoopDelay({ resolution: SAMPLE_MS });
  let sampling = false;
  let servedBefore = served();
  const fold = setInterval(() => {
    const servedNow = served();
    const busy = servedNow !== servedBefore;
    servedBefore = servedNow;
    if (busy !== sampling) {
      sampling = busy;
      if (busy) delay.enable();
      else delay.disable();
    }
    const count = delay.count;
    if (count === 0) return;
    loopSamples.inc(count);
    // The histogram gives percentiles, not counts: the share above a threshold is 100 minus the highest
    // percentile whose delay is still under it. A sample is the whole interval between two timer runs, so the
    // period itself is added to the threshold.
    const percentiles = [...delay.percentiles.entries()].sort((a, b) => a[0] - b[0]);
    for (let i = 0; i < THRESHOLDS_MS.length; i++) {
      const limitNs = (SAMPLE_MS + THRESHOLDS_MS[i]!) * 1e6;
      let below = 0;
      for (const [p, ns] of percentiles) if (ns <= limitNs) below = p;
      loopOver[i]!.inc(Math.round((count * (100 - below)) / 100));
    }
    delay.reset();
  }, 1_000);
  fold.unref();

  return {
    stop: () => {
      clearInterval(fold);
      delay.disable();
    },
  };
}
