/**
 * The ticker paces itself down while every subscriber is idle (one wake-up per `idleTicks` periods, delivering that
 * many ticks) and returns to one tick per period when one is busy, never delivering more ticks than periods passed.
 */
import t from 'tap';
import { PacedTicker } from '../src/ticker.js';

const PERIOD_MS = 20;
const IDLE_TICKS = 3;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

interface Recorder {
  ticks: number;
  /** Ticks delivered by each wake-up of the timer. */
  batches: number[];
  idle: boolean;
}

function record(ticker: PacedTicker, recorder: Recorder): () => void {
  // The ticks of one wake-up run in one synchronous turn: a batch closes at the next microtask.
  let inBatch = 0;
  return ticker.subscribe(
    () => {
      recorder.ticks++;
      if (inBatch++ === 0) {
        queueMicrotask(() => {
          recorder.batches.push(inBatch);
          inBatch = 0;
        });
      }
    },
    () => recorder.idle,
  );
}

t.test(
  'while every subscriber is idle, one wake-up delivers several ticks, never more than periods passed',
  async (t) => {
    const ticker = new PacedTicker({ periodMs: PERIOD_MS, idleTicks: IDLE_TICKS });
    const recorder: Recorder = { ticks: 0, batches: [], idle: true };
    const started = Date.now();
    const stop = record(ticker, recorder);
    await sleep(PERIOD_MS * 30);
    stop();
    const elapsed = Date.now() - started;
    t.ok(recorder.ticks <= Math.floor(elapsed / PERIOD_MS) + 1, `${recorder.ticks} ticks in ${elapsed} ms`);
    t.ok(recorder.ticks >= 10, `ticks keep coming while paced (${recorder.ticks})`);
    t.ok(
      recorder.batches.length * 2 <= recorder.ticks,
      `${recorder.batches.length} wake-ups for ${recorder.ticks} ticks`,
    );
    t.ok(
      recorder.batches.every((n) => n <= IDLE_TICKS),
      `no wake-up delivers more than ${IDLE_TICKS} ticks: ${recorder.batches.join(',')}`,
    );
  },
);

t.test('a subscriber that is not idle gets one tick per wake-up; busy() ends the pacing at once', async (t) => {
  const ticker = new PacedTicker({ periodMs: PERIOD_MS, idleTicks: IDLE_TICKS });
  const recorder: Recorder = { ticks: 0, batches: [], idle: false };
  const stop = record(ticker, recorder);
  await sleep(PERIOD_MS * 10);
  t.ok(
    recorder.batches.every((n) => n === 1),
    `one tick per wake-up while busy: ${recorder.batches.join(',')}`,
  );
  recorder.idle = true;
  await sleep(PERIOD_MS * 12);
  t.ok(ticker.isPaced, 'paced once the subscriber idles');
  recorder.idle = false;
  ticker.busy();
  t.notOk(ticker.isPaced, 'busy() returns to one tick per period');
  const before = recorder.ticks;
  await sleep(PERIOD_MS * 2.5);
  t.ok(recorder.ticks > before, 'ticks resume within a period or two');
  stop();
  const after = recorder.ticks;
  await sleep(PERIOD_MS * 3);
  t.equal(recorder.ticks, after, 'no tick after the last subscriber leaves');
});

t.test('a subscriber without an idle check keeps the ticker at its period', async (t) => {
  const ticker = new PacedTicker({ periodMs: PERIOD_MS, idleTicks: IDLE_TICKS });
  const idleOne: Recorder = { ticks: 0, batches: [], idle: true };
  const stopIdle = record(ticker, idleOne);
  let plain = 0;
  const stopPlain = ticker.subscribe(() => plain++);
  await sleep(PERIOD_MS * 6);
  t.notOk(ticker.isPaced, 'not paced');
  t.ok(
    idleOne.batches.every((n) => n === 1),
    `one tick per wake-up: ${idleOne.batches.join(',')}`,
  );
  t.ok(plain >= 2, `the plain subscriber ticked (${plain})`);
  stopIdle();
  stopPlain();
});

t.test('settings are checked', async (t) => {
  t.throws(() => new PacedTicker({ periodMs: 0 }), RangeError);
  t.throws(() => new PacedTicker({ periodMs: 10, idleTicks: 0 }), RangeError);
  t.throws(() => new PacedTicker({ periodMs: 10, idleTicks: 1.5 }), RangeError);
});
