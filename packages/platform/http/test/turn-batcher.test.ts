/** TurnBatcher on its own: what one turn submits leaves in batches cut by count and bytes, each item its own answer. */
import t from 'tap';
import { TurnBatcher } from '../src/turn-batcher.js';

const turn = (): Promise<void> => new Promise((r) => setImmediate(r));

t.test('one turn is one batch per key; answers keep their items; later turns make later batches', async (t) => {
  const sent: Array<{ context: string; items: number[] }> = [];
  const b = new TurnBatcher<string, number, number>({
    maxItems: 100,
    send: async (context, items) => (sent.push({ context, items }), items.map((x) => x * 10)),
  });
  const first = [b.submit('g1', 'ctx-a', 1), b.submit('g1', 'ctx-b', 2), b.submit('g2', 'ctx-c', 3)];
  t.equal(b.pending('g1'), 2, 'two waiting on g1 before the turn ends');
  t.same(await Promise.all(first), [10, 20, 30]);
  t.same(
    sent,
    [
      { context: 'ctx-a', items: [1, 2] },
      { context: 'ctx-c', items: [3] },
    ],
    "the turn's first context is used; keys never mix",
  );
  await turn();
  t.same(await b.submit('g1', 'ctx-d', 4), 40);
  t.same(sent.length, 3, 'a later turn is a later batch');
  t.same({ batches: b.batches, items: b.items }, { batches: 3, items: 4 });
});

t.test('batches are cut at maxItems and maxBytes; an item larger than maxBytes goes alone', async (t) => {
  const sizes: number[][] = [];
  const b = new TurnBatcher<null, number, number>({
    maxItems: 3,
    maxBytes: 10,
    send: async (_c, items) => (sizes.push(items), items),
  });
  const bytes = [4, 4, 4, 1, 1, 1, 1, 50, 2];
  await Promise.all(bytes.map((n, i) => b.submit('k', null, i, n)));
  t.same(sizes, [[0, 1], [2, 3, 4], [5, 6], [7], [8]]);
});

t.test('a failed or malformed batch fails each of its items, and only them', async (t) => {
  let calls = 0;
  const b = new TurnBatcher<null, string, string>({
    maxItems: 2,
    send: async (_c, items) => {
      calls++;
      if (items.includes('boom')) throw new Error('refused');
      if (items.includes('short')) return [];
      return items;
    },
  });
  const answers = await Promise.allSettled([
    b.submit('k', null, 'boom'),
    b.submit('k', null, 'x'),
    b.submit('k', null, 'short'),
    b.submit('k', null, 'y'),
    b.submit('k', null, 'ok'),
  ]);
  t.same(
    answers.map((a) => a.status),
    ['rejected', 'rejected', 'rejected', 'rejected', 'fulfilled'],
  );
  t.match(String((answers[2] as PromiseRejectedResult).reason), /answered 0 results/);
  t.equal(calls, 3);
  const throwing = new TurnBatcher<null, number, number>({
    maxItems: 5,
    send: () => {
      throw new Error('synchronous');
    },
  });
  await t.rejects(throwing.submit('k', null, 1), /synchronous/, 'a send that throws at once rejects too');
});
