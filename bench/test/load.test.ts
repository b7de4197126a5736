/** The closed-loop generator: counts successes and failures apart, honours the warm-up, stops by itself. */
import t from 'tap';
import { OpError, Pacer, errorKind, runLoad, runOpenLoopThreads } from '../src/load.js';

t.test('a short run against a fake operation', async (t) => {
  let calls = 0;
  const lines: string[] = [];
  const progress = { write: (s: string) => lines.push(s) } as unknown as NodeJS.WritableStream;
  const started = Date.now();
  const r = await runLoad({
    label: 'fake',
    concurrency: 4,
    durationS: 1.2,
    warmupS: 0.3,
    errorBackoffMs: 0,
    progress,
    op: async () => {
      calls++;
      await new Promise((resolve) => setTimeout(resolve, 2));
      if (calls % 10 === 0) throw new OpError('HTTP 503 unavailable');
    },
  });
  const took = (Date.now() - started) / 1000;
  t.ok(took >= 1.4 && took < 3, `stops by itself after warm-up + duration (took ${took} s)`);
  t.ok(r.ops > 100, `ops ${r.ops}`);
  t.ok(r.errors > 0 && r.errors < r.ops, `errors ${r.errors}`);
  t.same(Object.keys(r.error_kinds), ['HTTP 503 unavailable']);
  t.ok(r.ops + r.errors < calls, 'warm-up operations are not counted');
  t.ok(r.p50_ms >= 1.5 && r.p50_ms < 50, `p50 ${r.p50_ms}`);
  t.ok(r.ops_per_sec > 0);
  t.equal(r.concurrency, 4);
  t.equal(r.interrupted, false);
  t.ok(
    lines.length >= 1 && lines.some((l) => /ops\/s/.test(l) && /p99 so far/.test(l)),
    'prints progress every second',
  );
});

t.test('an abort signal ends the run early', async (t) => {
  const controller = new AbortController();
  setTimeout(() => controller.abort(), 200);
  const started = Date.now();
  const r = await runLoad({
    label: 'x',
    concurrency: 2,
    durationS: 30,
    warmupS: 0,
    progress: null,
    signal: controller.signal,
    op: () => new Promise((res) => setTimeout(res, 1)),
  });
  t.ok(Date.now() - started < 2000);
  t.equal(r.interrupted, true);
});

t.test('errorKind names failures', async (t) => {
  t.equal(errorKind(new OpError('HTTP 500')), 'HTTP 500');
  t.equal(errorKind(Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' })), 'ECONNREFUSED');
  t.equal(errorKind(new Error('boom')), 'boom');
  t.equal(errorKind('weird'), 'weird');
});

t.test('an operation that waits before it sends is timed from its send (open-loop pacers)', async (t) => {
  const paced = (reportSend: boolean) =>
    runLoad({
      label: 'paced',
      concurrency: 2,
      durationS: 0.6,
      warmupS: 0,
      progress: null,
      op: async () => {
        await new Promise((resolve) => setTimeout(resolve, 30)); // the pacer's wait
        const sentAt = performance.now();
        await new Promise((resolve) => setTimeout(resolve, 1)); // the request itself
        return reportSend ? sentAt : undefined;
      },
    });
  const fromSend = await paced(true);
  const fromCall = await paced(false);
  t.ok(fromCall.p50_ms >= 29, `without a send time the wait counts (p50 ${fromCall.p50_ms} ms)`);
  t.ok(fromSend.p50_ms < 20, `with it only the request counts (p50 ${fromSend.p50_ms} ms)`);
});

t.test('the open-loop pacer releases every waiter, in one timer run per due time, never early', async (t) => {
  const pacer = new Pacer();
  const t0 = performance.now();
  const due = Array.from({ length: 200 }, (_, i) => t0 + 5 + (i % 20) * 0.7);
  const released = await Promise.all(
    due.map((at) => pacer.until(at).then((sentAt) => ({ at, sentAt, now: performance.now() }))),
  );
  for (const r of released) {
    // Released with what is due within the next half millisecond, and the moment given is the release's own.
    t.ok(r.sentAt >= r.at - 0.5, `released at ${(r.sentAt - r.at).toFixed(2)} ms from its due time`);
    t.ok(r.sentAt <= r.now);
  }
  t.equal(released.length, due.length);
  const past = await pacer.until(performance.now() - 10);
  t.ok(past > 0, 'a due time already past resolves at once');
});

t.test(
  'an open loop on generator threads: shares add up, failures counted apart, each thread reports its pauses',
  async (t) => {
    const r = await runOpenLoopThreads({
      script: new URL('./open-loop-thread.fixture.js', import.meta.url),
      threads: 2,
      workerData: () => null,
      rate: 400,
      concurrency: 8,
      warmupS: 0.3,
      durationS: 1,
      semiSpaceMb: 16,
    });
    // 400/s over 1 s: 400 scheduled in the window; a fifth fail and a fifth are refused by the answer check
    // (rounding at each thread's edges).
    t.ok(r.ops + r.errors >= 360 && r.ops + r.errors <= 440, `ops ${r.ops} + errors ${r.errors}`);
    t.ok(r.errors >= 130 && r.errors <= 190, `errors ${r.errors}`);
    t.same(Object.keys(r.error_kinds).sort(), ['fifth', 'refused answer']);
    t.ok(
      r.error_kinds['refused answer']! >= 60 && r.error_kinds['refused answer']! <= 100,
      `refused answers ${r.error_kinds['refused answer']}`,
    );
    t.ok(r.p50_ms >= 0.9, `p50 ${r.p50_ms} ms: an operation takes at least its 1 ms wait`);
    t.equal(r.generators.length, 2);
    t.ok(r.worst !== null && r.worst.generator_loop_delay_p99_ms >= 0);
    t.ok(
      (r.extra.calls ?? 0) >= 0.9 * (r.ops + r.errors),
      `the threads' own counters over the window, summed: ${r.extra.calls}`,
    );
  },
);
