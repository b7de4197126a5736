/** NextRoundCoalescer: one run per key in flight; callers arriving meanwhile share the next run, which starts after they asked. */
import t from 'tap';
import { NextRoundCoalescer } from '../src/next-round.js';

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

t.test('callers during a run share the next run, which starts after the first ends', async (t) => {
  const c = new NextRoundCoalescer<number>();
  let version = 0;
  const gates: Array<() => void> = [];
  const work = async (): Promise<number> => {
    const seen = version;
    const d = deferred();
    gates.push(d.resolve);
    await d.promise;
    return seen;
  };
  const first = c.run('k', work);
  await Promise.resolve();
  version = 1; // a write acknowledged after the first run started
  const later = Array.from({ length: 50 }, () => c.run('k', work));
  const other = c.run('other', work);
  t.equal(c.runs, 2, 'one run for k and one for another key, however many callers');
  gates.shift()!();
  t.equal(await first, 0);
  await new Promise((r) => setImmediate(r));
  t.equal(c.runs, 3, 'the waiting callers started exactly one more run');
  while (gates.length > 0) gates.shift()!();
  const answers = await Promise.all(later);
  t.ok(
    answers.every((v) => v === 1),
    'every later caller sees the write made before it asked',
  );
  t.equal(await other, 1);
  t.equal(c.runs, 3);
  await c.run('k', async () => 7).then((v) => t.equal(v, 7, 'idle again: a new caller starts its own run'));
});

t.test('a failed run fails its callers only; the next round still runs', async (t) => {
  const c = new NextRoundCoalescer<string>();
  const d = deferred();
  const failing = c.run('k', async () => {
    await d.promise;
    throw new Error('members down');
  });
  const next = c.run('k', async () => 'ok');
  d.resolve();
  await t.rejects(failing, /members down/);
  t.equal(await next, 'ok');
});
