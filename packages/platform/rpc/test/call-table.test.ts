import t from 'tap';
import { CallTable } from '../src/call-table.js';

t.test('calls are found by id, taken once, and the table grows when an id meets a slot still held', (t) => {
  const table = new CallTable<string>(4);
  for (let id = 1; id <= 4; id++) table.set(id, `c${id}`);
  t.equal(table.size, 4);
  // 5 and 9 share slot 1 with the still-pending call 1 at sizes 4 and 8: the table grows past them.
  table.set(5, 'c5');
  table.set(9, 'c9');
  t.equal(table.size, 6);
  for (const id of [1, 2, 3, 4, 5, 9]) t.equal(table.get(id), `c${id}`, `call ${id} kept through the growth`);
  t.equal(table.get(13), undefined, 'an id never set is not found, even where its slot is taken');
  t.equal(table.take(5), 'c5');
  t.equal(table.take(5), undefined, 'taken once');
  t.notOk(table.has(5));
  t.ok(table.has(9));
  t.same(
    table
      .entries()
      .map(([id]) => id)
      .sort((a, b) => a - b),
    [1, 2, 3, 4, 9],
  );
  t.same(table.clear().sort(), ['c1', 'c2', 'c3', 'c4', 'c9']);
  t.equal(table.size, 0);
  t.equal(table.get(1), undefined);
  t.end();
});

t.test('ids from the wire that were never handed out find nothing', (t) => {
  const table = new CallTable<string>();
  table.set(7, 'c7');
  for (const id of [0, -7, 7.5, 7 + 2 ** 32, Number.NaN, 2 ** 31 + 7]) t.equal(table.get(id), undefined, `id ${id}`);
  t.equal(table.take(7 + 2 ** 32), undefined);
  t.equal(table.size, 1);
  t.end();
});

t.test('a long run of calls settled in turn reuses the same slots', (t) => {
  const table = new CallTable<number>(8);
  let lost = 0;
  for (let id = 1; id < 100_000; id++) {
    table.set(id, id);
    if (id > 5 && table.take(id - 5) !== id - 5) lost++;
  }
  t.equal(lost, 0, 'every call found when taken');
  t.equal(table.size, 5);
  t.equal(table.entries().length, 5);
  t.end();
});
