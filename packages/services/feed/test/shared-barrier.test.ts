import t from 'tap';
import { sharedBarrier } from '../src/members/shared-barrier.js';

/** A barrier whose rounds the test completes by hand, recording when each started. */
function rounds(): { start: () => Promise<void>; started: number; finish: (error?: Error) => void } {
  const pending: Array<{ resolve: () => void; reject: (e: Error) => void }> = [];
  const state = {
    started: 0,
    start: (): Promise<void> =>
      new Promise<void>((resolve, reject) => {
        state.started++;
        pending.push({ resolve, reject });
      }),
    finish: (error?: Error): void => {
      const round = pending.shift()!;
      if (error === undefined) round.resolve();
      else round.reject(error);
    },
  };
  return state;
}
const tick = (): Promise<void> => new Promise((r) => setImmediate(r));

t.test('a read arriving while a barrier runs waits for the next one, which later arrivals share', async (t) => {
  const r = rounds();
  const barrier = sharedBarrier(r.start);
  const done: string[] = [];
  const first = barrier().then(() => done.push('first'));
  t.equal(r.started, 1);
  const second = barrier().then(() => done.push('second'));
  const third = barrier().then(() => done.push('third'));
  await tick();
  t.equal(r.started, 1, 'no second barrier while the first runs');
  r.finish();
  await first;
  await tick();
  t.same(done, ['first'], 'the later reads do not take the first barrier');
  t.equal(r.started, 2, 'one barrier for both of them, started after the first ended');
  const fourth = barrier().then(() => done.push('fourth'));
  r.finish();
  await Promise.all([second, third]);
  await tick();
  t.same(done, ['first', 'second', 'third']);
  t.equal(r.started, 3, 'a read that arrived while the shared one ran gets a barrier of its own');
  r.finish();
  await fourth;
  t.same(done, ['first', 'second', 'third', 'fourth']);
});

t.test('a failed barrier fails its reads; the next read starts afresh', async (t) => {
  const r = rounds();
  const barrier = sharedBarrier(r.start);
  const a = barrier();
  const b = barrier();
  r.finish(new Error('no quorum'));
  await t.rejects(a, /no quorum/);
  await tick();
  r.finish(new Error('still none'));
  await t.rejects(b, /still none/);
  const c = barrier();
  t.equal(r.started, 3);
  r.finish();
  await c;
});
