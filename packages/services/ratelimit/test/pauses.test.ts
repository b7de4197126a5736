/**
 * The check instance's loop-delay sampler (src/workers/check/pauses.ts) runs only while checks are served: an idle
 * instance takes no samples (it wakes once a second to fold, not 500 times), and a busy one counts its samples.
 */
import t from 'tap';
import { MetricsRegistry } from '@raftkit/http';
import { watchPauses } from '../src/workers/check/pauses.js';

const samples = (registry: MetricsRegistry): number => {
  const line = registry
    .render()
    .split('\n')
    .find((l) => l.startsWith('ratelimit_loop_delay_samples_total '));
  return Number(line?.split(' ')[1] ?? NaN);
};
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

t.test('idle: no samples; serving: samples; idle again: no new samples', async (t) => {
  const registry = new MetricsRegistry();
  let served = 0;
  const watch = watchPauses(registry, () => served);
  try {
    await sleep(2_200);
    t.equal(samples(registry), 0, 'no checks served: the sampler stayed off');
    const serving = setInterval(() => served++, 5);
    await sleep(3_200);
    clearInterval(serving);
    const whileBusy = samples(registry);
    t.ok(whileBusy > 200, `checks served: samples counted (${whileBusy}, one per 2 ms once on)`);
    await sleep(2_300);
    const settled = samples(registry);
    await sleep(2_100);
    t.equal(samples(registry), settled, 'idle again: the sampler turned off');
  } finally {
    watch.stop();
  }
});
