/**
 * The leader-side reorder buffer by itself: entries of one owner session that arrive out of order are proposed in
 * order; one whose predecessor never comes is proposed anyway (the log's sequence check then refuses it).
 */
import t from 'tap';
import { AppendOrder } from '../src/members/append-order.js';

t.test('entries that overtook their predecessor wait for it', async (t) => {
  const order = new AppendOrder();
  const proposed: number[] = [];
  const go = (seq: number) =>
    order.run('g/d/s', seq, async () => {
      proposed.push(seq);
      return seq;
    });
  await go(1);
  const late = [go(4), go(3)];
  await new Promise((r) => setTimeout(r, 10));
  t.same(proposed, [1], 'entries 3 and 4 wait for 2');
  t.same(await Promise.all([go(2), ...late]), [2, 4, 3]);
  t.same(proposed, [1, 2, 3, 4], 'proposed in sequence order');
  await go(6);
  t.same(proposed, [1, 2, 3, 4, 6], 'a lost predecessor: proposed after the hold anyway');
  await order.run('g/d/other', 7, async () => proposed.push(7));
  t.equal(proposed.at(-1), 7, 'an unknown session is not held');
});
