/** DistinctNameBatcher: a turn's items on distinct names share a batch; the n-th item on one name goes to batch n. */
import t from 'tap';
import { DistinctNameBatcher } from '../src/distinct-batcher.js';

t.test('one name never appears twice in a batch; batches go in order; the count restarts with each turn', async (t) => {
  const sent: string[][] = [];
  const b = new DistinctNameBatcher<null, string, string>({
    maxItems: 100,
    send: async (_c, items) => (sent.push(items), items.map((x) => x.toUpperCase())),
  });
  const answers = await Promise.all(['a1', 'b1', 'a2', 'c1', 'a3', 'b2'].map((item) => b.submit(item[0]!, null, item)));
  t.same(answers, ['A1', 'B1', 'A2', 'C1', 'A3', 'B2'], 'each item its own answer');
  t.same(sent, [['a1', 'b1', 'c1'], ['a2', 'b2'], ['a3']]);
  t.same([b.batches, b.items], [3, 6]);
  await b.submit('a', null, 'a4');
  t.same(sent[3], ['a4'], 'a later turn starts at the first batch again');
});
