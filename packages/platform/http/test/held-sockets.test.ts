/** HeldSockets alone: the per-address bound, the reserve below the listener's cap, releases (no sockets needed). */
import t from 'tap';
import { addressKey, HeldSockets, heldReserve } from '../src/held-sockets.js';

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

t.test('addresses are counted by IPv4 address and by IPv6 /64', async (t) => {
  t.equal(addressKey('10.0.0.7'), '10.0.0.7');
  t.equal(addressKey('::ffff:10.0.0.7'), '10.0.0.7', 'IPv4-mapped');
  t.equal(addressKey('2001:db8:0:1:aaaa::1'), '2001:db8:0:1::/64');
  t.equal(addressKey('2001:0db8:0000:0001:bbbb:cccc:dddd:eeee'), '2001:db8:0:1::/64', 'same /64, written in full');
  t.equal(addressKey('2001:db8::1'), '2001:db8:0:0::/64');
  t.equal(addressKey('::1'), '0:0:0:0::/64');
  t.equal(addressKey('fe80::1%eth0'), 'fe80:0:0:0::/64');
  const held = new HeldSockets({ max: 1_000 }, { perAddress: 2 });
  t.type(held.take('2001:db8:0:1::1'), 'function');
  t.type(held.take('2001:db8:0:1::2'), 'function');
  t.equal(held.take('2001:db8:0:1:ffff::3'), 'per_address', 'a third address of the same /64');
  t.type(held.take('2001:db8:0:2::1'), 'function', 'another /64');
});
