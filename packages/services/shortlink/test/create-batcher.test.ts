/** Group commit on the app server: batching under load, no wait when idle, per-link results, failures, bounds. */
import t from 'tap';
import { CreateBatcher } from '../src/workers/app/create-batcher.js';
import type { CreateSpec } from '../src/machine.js';

const spec = (code: string, long_url = 'https://example.com/'): CreateSpec => ({
  code,
  long_url,
  created_at: 1,
  expires_at: 2,
  created_by: 'ann',
  alias: true,
});

/** A store whose batches the test answers by hand. */
function manualStore() {
  const calls: Array<{ links: CreateSpec[]; answer(results: string[]): void; fail(error: Error): void }> = [];
  const send = (links: CreateSpec[]) =>
    new Promise<string[]>((resolve, reject) => {
      calls.push({ links, answer: resolve, fail: reject });
    });
  return { calls, send };
}

const tick = () => new Promise((r) => setImmediate(r));

t.test('an idle batcher sends at once; creates arriving meanwhile go together when the batch returns', async (t) => {
  const store = manualStore();
  const sizes: number[] = [];
  const b = new CreateBatcher<string>(store.send, { maxLinks: 256, maxBytes: 1 << 20 }, (n) => sizes.push(n));
  const first = b.create(spec('first-one'));
  await tick();
  t.equal(store.calls.length, 1, 'no timer: the lone create left after one turn');
  const later = ['second-1', 'second-2', 'second-3'].map((c) => b.create(spec(c)));
  await tick();
  t.equal(store.calls.length, 1, 'nothing more is sent while a batch is in flight');
  t.equal(b.waiting, 3);
  store.calls[0]!.answer(['r-first']);
  t.equal(await first, 'r-first');
  await tick();
  t.equal(store.calls.length, 2, 'the queue left as one batch the moment the previous one returned');
  t.same(
    store.calls[1]!.links.map((l) => l.code),
    ['second-1', 'second-2', 'second-3'],
    'in arrival order',
  );
  store.calls[1]!.answer(['a', 'b', 'c']);
  t.same(await Promise.all(later), ['a', 'b', 'c'], 'each create gets its own result');
  t.same(sizes, [1, 3]);
  await tick();
  t.equal(store.calls.length, 2, 'idle again: nothing sent');
});

t.test('creates read in the same turn leave in one batch', async (t) => {
  const store = manualStore();
  const b = new CreateBatcher<string>(store.send);
  const all = Array.from({ length: 10 }, (_, i) => b.create(spec(`same-turn-${i}`)));
  await tick();
  t.equal(store.calls.length, 1);
  t.equal(store.calls[0]!.links.length, 10);
  store.calls[0]!.answer(Array.from({ length: 10 }, (_, i) => String(i)));
  t.same(
    await Promise.all(all),
    Array.from({ length: 10 }, (_, i) => String(i)),
  );
});

t.test(
  'a failed batch fails its creates and those queued behind it, without sending them; later creates go again',
  async (t) => {
    const store = manualStore();
    const b = new CreateBatcher<string>(store.send);
    const doomed = [b.create(spec('doomed-1')), b.create(spec('doomed-2'))];
    await tick();
    const queued = b.create(spec('queued-1'));
    store.calls[0]!.fail(new Error('store unreachable'));
    for (const d of doomed) await t.rejects(d, /store unreachable/);
    await t.rejects(queued, /store unreachable/);
    await tick();
    t.equal(store.calls.length, 1, 'the queued create was never sent');
    t.equal(b.waiting, 0);
    const next = b.create(spec('survivor'));
    await tick();
    store.calls[1]!.answer(['ok']);
    t.equal(await next, 'ok');
  },
);

t.test('an answer with the wrong number of results fails the whole batch', async (t) => {
  const store = manualStore();
  const b = new CreateBatcher<string>(store.send);
  const both = [b.create(spec('one-of-two')), b.create(spec('two-of-two'))];
  await tick();
  store.calls[0]!.answer(['only one']);
  for (const p of both) await t.rejects(p, /1 results for 2 links/);
});

t.test(
  'batches respect the link count and byte bounds; a link larger than the byte bound still goes alone',
  async (t) => {
    const store = manualStore();
    const b = new CreateBatcher<string>(store.send, { maxLinks: 4, maxBytes: 1000 });
    const blocker = b.create(spec('blocker-x'));
    await tick();
    const small = Array.from({ length: 6 }, (_, i) => b.create(spec(`small-${i}`)));
    const huge = b.create(spec('huge-one', `https://example.com/${'x'.repeat(5000)}`));
    const after = b.create(spec('after-huge'));
    store.calls[0]!.answer(['x']);
    await blocker;
    const sizes: number[] = [];
    for (let i = 1; i <= 4; i++) {
      await tick();
      const call = store.calls[i]!;
      sizes.push(call.links.length);
      call.answer(call.links.map((l) => l.code));
    }
    t.same(sizes, [4, 2, 1, 1], '4 by count; the 2 left; the huge one alone (over the byte bound); then the rest');
    t.same(
      await Promise.all(small),
      Array.from({ length: 6 }, (_, i) => `small-${i}`),
    );
    t.equal(await huge, 'huge-one');
    t.equal(await after, 'after-huge');
  },
);

t.test('byte bound: links are packed until the next would pass it', async (t) => {
  const store = manualStore();
  const b = new CreateBatcher<string>(store.send, { maxLinks: 100, maxBytes: 1000 });
  // Each link weighs 160 + 9 (code) + 3 (user) + its URL: 20 + 108 = 128 chars of URL -> 300 bytes; 3 fit in 1000.
  const url = `https://example.com/${'y'.repeat(108)}`;
  const all = Array.from({ length: 7 }, (_, i) => b.create(spec(`byte-${i}-xx`, url)));
  const sizes: number[] = [];
  for (let i = 0; i < 3; i++) {
    await tick();
    const call = store.calls[i]!;
    sizes.push(call.links.length);
    call.answer(call.links.map(() => 'ok'));
  }
  await Promise.all(all);
  t.same(sizes, [3, 3, 1]);
});
