/** HeldSockets alone: the per-address bound, the reserve below the listener's cap, releases (no sockets needed). */
import t from 'tap';
import { HeldSockets, heldReserve } from '../src/held-sockets.js';

t.test('the reserve: a tenth of the cap, at least 100, at most half', async (t) => {
  t.equal(heldReserve(16_000), 1_600);
  t.equal(heldReserve(300), 100);
  t.equal(heldReserve(120), 60);
  t.equal(heldReserve(1), 0);
});

t.test('per address and in all; a release frees the place once', async (t) => {
  const cap = { max: 300 };
  const held = new HeldSockets(cap, { perAddress: 3 });
  t.equal(held.max, 200);
  const a = [held.take('a'), held.take('a'), held.take('a')];
  t.ok(a.every((r) => typeof r === 'function'));
  t.equal(held.take('a'), 'per_address', 'the fourth from one address');
  const release = a[0] as () => void;
  release();
  release();
  t.equal(held.from('a'), 2, 'released once, however often called');
  t.type(held.take('a'), 'function', 'the freed place is taken again');
  let n = 0;
  for (let i = 0; n < 500; i++) {
    const r = held.take(`h${i}`);
    if (r === 'full') break;
    n++;
  }
  t.equal(held.size, 200, 'stops at the cap minus the reserve');
  t.equal(held.take('fresh'), 'full');
  t.same(held.refused, { per_address: 1, full: 2 });
  cap.max = 1_000;
  t.equal(held.max, 900, 'follows the cap as it changes');
  t.type(held.take('fresh'), 'function');
});
