/** SlotGroups: a prefix's groups split the hash slots evenly and every key lands in exactly one of them. */
import t from 'tap';
import { HASH_SLOTS, hashSlot } from '../src/group-router.js';
import { SlotGroups, slotRange } from '../src/slot-groups.js';

t.test('ranges cover every slot once, for any group count', async (t) => {
  for (const n of [1, 3, 4, 7, 64]) {
    const ranges = Array.from({ length: n }, (_, i) => slotRange(i, n));
    t.equal(ranges[0]![0], 0, `n=${n} starts at slot 0`);
    t.equal(ranges[n - 1]![1], HASH_SLOTS - 1, `n=${n} ends at the last slot`);
    for (let i = 1; i < n; i++) t.equal(ranges[i]![0], ranges[i - 1]![1] + 1, `n=${n} range ${i} follows ${i - 1}`);
  }
});

t.test('names, membership, plan and locate', async (t) => {
  const set = new SlotGroups('auction.');
  t.equal(set.name(3), 'auction.3');
  t.ok(set.includes('auction.12'));
  t.notOk(set.includes('auction.x'), 'not a number');
  t.notOk(set.includes('auctions.1'), 'another prefix');
  t.notOk(set.includes('auction.12345'), 'more than 4 digits');
  const plan = set.plan(4, 3);
  t.same(
    plan.map((g) => g.name),
    ['auction.0', 'auction.1', 'auction.2', 'auction.3'],
  );
  t.ok(plan.every((g) => g.replicas === 3));
  const catalogue = [
    ...plan.map((g) => ({ name: g.name, members: [], data: g.data })),
    { name: 'log.t.0', members: [], data: { slots: [0, HASH_SLOTS - 1] } },
  ];
  for (let i = 0; i < 200; i++) {
    const key = `key-${i}`;
    const group = set.locate(key, catalogue);
    const index = plan.findIndex((g) => g.data.slots[0] <= hashSlot(key) && hashSlot(key) <= g.data.slots[1]);
    t.equal(group, `auction.${index}`, `${key} goes to the group whose range holds its slot`);
  }
  t.equal(
    set.locate('x', [{ name: 'log.t.0', members: [], data: { slots: [0, HASH_SLOTS - 1] } }]),
    null,
    "other services' groups are ignored",
  );
});
