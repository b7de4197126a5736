/**
 * Consumer-group membership in the partition machine, alone (no sockets, no clocks): joins, expiries named by the
 * leader, the assignment and its generation, commits fenced by generation, the bounds, and a snapshot round trip;
 * and the leader's in-memory leases (CoordinatorLeases) on a clock the test moves.
 */
import fc from 'fast-check';
import t from 'tap';
import { CommandShapeError } from '@raftkit/http';
import { PartitionMachine, type PartitionCommand, type PartitionResult } from '../src/machine.js';
import { CoordinatorLeases } from '../src/lease-keeper.js';
import { assignSlots, MAX_GROUP_MEMBERS, MAX_COORDINATED_GROUPS } from '../src/membership.js';

let index = 0;
function run(m: PartitionMachine, command: PartitionCommand, time: number): PartitionResult {
  return m.apply(command, { index: ++index, term: 1, time });
}
type Joined = Extract<PartitionResult, { op: 'join'; ok: true }>;
function join(m: PartitionMachine, member: string, time: number, slots = 8, ttlMs = 5_000, group = 'g'): Joined {
  const r = run(m, { op: 'join', group, member, slots, ttlMs }, time);
  if (r.op !== 'join' || !r.ok) throw new Error(`join refused: ${JSON.stringify(r)}`);
  return r;
}
const commit = (m: PartitionMachine, offset: number, expect: number | null, generation: number | null, time = 0) =>
  run(m, { op: 'commit', group: 'g', offset, expect, generation }, time);
const append = (m: PartitionMachine, n: number) =>
  run(
    m,
    { op: 'append', records: Array.from({ length: n }, () => ({ key: null, value: 'v' })), producer: null, seq: null },
    0,
  );

t.test('a first member gets every slot; a second splits them evenly, each join a new generation', async (t) => {
  const m = new PartitionMachine();
  const a = join(m, 'fanout-1', 1_000);
  t.same(a.members, ['fanout-1']);
  t.same(a.assigned, [0, 1, 2, 3, 4, 5, 6, 7]);
  const b = join(m, 'fanout-2', 1_100);
  t.ok(b.generation > a.generation);
  t.same(b.members, ['fanout-1', 'fanout-2']);
  t.same(b.assigned, [1, 3, 5, 7]);
  // A heartbeat changes nothing: same generation, and the first member now hears its half.
  const a2 = join(m, 'fanout-1', 1_200);
  t.equal(a2.generation, b.generation);
  t.same(a2.assigned, [0, 2, 4, 6]);
});

t.test('an expiry drops the named members still in the group, and their slots move', async (t) => {
  const m = new PartitionMachine();
  join(m, 'a', 0);
  const both = join(m, 'b', 0);
  // A heartbeat of a member already in the group (same slots) changes nothing, whatever the time.
  for (let time = 1_000; time < 60_000; time += 10_000) t.equal(join(m, 'a', time).generation, both.generation);
  t.equal(m.memberTtl('g', 'b'), 5_000);
  t.same(m.coordinatedGroups(), [
    {
      group: 'g',
      members: [
        ['a', 5_000],
        ['b', 5_000],
      ],
    },
  ]);
  const expired = run(m, { op: 'expire', group: 'g', members: ['b', 'never-joined'] }, 70_000);
  t.match(expired, { op: 'expire', ok: true, expired: ['b'] });
  t.ok(expired.op === 'expire' && expired.generation > both.generation, 'the expiry is a new generation');
  const after = join(m, 'a', 70_100);
  t.same(after.members, ['a']);
  t.same(after.assigned, [0, 1, 2, 3, 4, 5, 6, 7]);
  t.same(m.consumerGroup('g'), { generation: after.generation, slots: 8, members: ['a'] });
  t.equal(m.memberTtl('g', 'b'), null);
  // Expiring nobody (already gone) changes nothing.
  t.match(run(m, { op: 'expire', group: 'g', members: ['b'] }, 70_200), { expired: [], generation: after.generation });
  // b comes back with the same id: it gets the same slots back, in a newer generation.
  const back = join(m, 'b', 80_000);
  t.ok(back.generation > after.generation);
  t.same(back.assigned, [1, 3, 5, 7]);
  t.same(join(m, 'a', 80_100).assigned, [0, 2, 4, 6]);
});

t.test('an expire entry of the wrong shape is refused before anything changes', async (t) => {
  const m = new PartitionMachine();
  join(m, 'a', 0);
  for (const members of [[], ['a b'], [7], 'a', Array.from({ length: MAX_GROUP_MEMBERS + 1 }, (_, i) => `m${i}`)]) {
    t.throws(() => run(m, { op: 'expire', group: 'g', members } as unknown as PartitionCommand, 1), CommandShapeError);
  }
  t.same(m.consumerGroup('g')?.members, ['a']);
});

t.test('the leader keeps leases in memory: renewals write nothing, a lapse is reported once', async (t) => {
  const leases = new CoordinatorLeases();
  const members: Array<[string, number]> = [
    ['a', 4_000],
    ['b', 4_000],
  ];
  leases.sync(3);
  // First look at the group (a new leader): every member is granted a full lease from now.
  t.same(leases.lapsed('g', members, 10_000), []);
  leases.renew('g', 'a', 4_000, 11_000);
  leases.renew('g', 'a', 4_000, 13_000);
  t.same(leases.lapsed('g', members, 13_999), [], 'b still holds its grant');
  t.same(leases.lapsed('g', members, 14_000), ['b'], 'b lapsed at the end of its grant');
  t.ok(leases.isExpiring('g', 'b'));
  t.same(leases.lapsed('g', members, 16_000), [], 'an expiry in flight is not proposed twice');
  leases.settled(3, 'g', ['b']);
  t.notOk(leases.isExpiring('g', 'b'));
  t.same(leases.lapsed('g', members, 17_000), ['a'], 'a lapsed at 13,000 + 4,000');
  leases.settled(3, 'g', ['a']);
  // A leave forgets the lease: the member is granted afresh if the table still names it.
  leases.renew('g', 'a', 4_000, 20_000);
  leases.forget('g', 'a');
  t.same(leases.lapsed('g', [['a', 4_000]], 30_000), []);
  t.same(leases.lapsed('g', [['a', 4_000]], 34_000), ['a']);
});

t.test('a new term forgets the leases: every member gets a full lease from the new leader', async (t) => {
  const leases = new CoordinatorLeases();
  leases.sync(1);
  leases.renew('g', 'a', 4_000, 0);
  t.same(leases.lapsed('g', [['a', 4_000]], 5_000), ['a']);
  // Elected again (another term in between): a's old lease and its expiry in flight belong to the old term.
  leases.sync(5);
  t.notOk(leases.isExpiring('g', 'a'));
  t.same(leases.lapsed('g', [['a', 4_000]], 5_000), [], 'granted from the new term');
  leases.settled(1, 'g', ['a']); // the old term's expiry settling later changes nothing now
  t.same(leases.lapsed('g', [['a', 4_000]], 8_999), []);
  t.same(leases.lapsed('g', [['a', 4_000]], 9_000), ['a']);
  // A member that left the table loses its lease here too.
  leases.sync(6);
  leases.renew('g', 'b', 4_000, 0);
  t.same(leases.lapsed('g', [], 1_000), []);
  t.same(leases.lapsed('g', [['b', 4_000]], 1_000), [], 'b came back: granted, not lapsed');
});

t.test('leaving moves the slots at once; leaving twice changes nothing', async (t) => {
  const m = new PartitionMachine();
  join(m, 'a', 0);
  const both = join(m, 'b', 0);
  const left = run(m, { op: 'leave', group: 'g', member: 'b' }, 10);
  t.match(left, { op: 'leave', ok: true, left: true });
  t.ok(left.op === 'leave' && left.generation > both.generation);
  t.same(run(m, { op: 'leave', group: 'g', member: 'b' }, 20), {
    op: 'leave',
    ok: true,
    left: false,
    generation: left.op === 'leave' ? left.generation : -1,
  });
  t.same(join(m, 'a', 30).assigned, [0, 1, 2, 3, 4, 5, 6, 7]);
});

t.test('a commit from a stale generation is refused once a newer one committed (a zombie is fenced)', async (t) => {
  const m = new PartitionMachine();
  append(m, 10);
  const old = join(m, 'a', 0).generation;
  t.match(commit(m, 3, 0, old), { ok: true, offset: 3 });
  // a pauses (no heartbeats); b takes over in a newer generation and fences the partition at the committed offset.
  join(m, 'b', 1_000);
  run(m, { op: 'expire', group: 'g', members: ['a'] }, 6_000);
  const now = join(m, 'b', 6_000).generation;
  t.ok(now > old);
  t.match(commit(m, 3, 3, now), { ok: true });
  // a wakes up and commits what it read meanwhile: refused, nothing changes.
  t.match(commit(m, 8, 3, old), { ok: false, code: 'stale_generation', current: 3 });
  t.equal(m.committed('g'), 3);
  t.match(commit(m, 6, 3, now), { ok: true, offset: 6 });
  // A commit without a generation (a plain consumer) is not fenced; it only takes part in compare-and-set.
  t.match(commit(m, 7, 6, null), { ok: true });
  // The fence survives a snapshot.
  const copy = new PartitionMachine();
  copy.restore(m.snapshot());
  t.match(run(copy, { op: 'commit', group: 'g', offset: 9, expect: 7, generation: old }, 0), {
    ok: false,
    code: 'stale_generation',
  });
  t.same(copy.consumerGroup('g'), m.consumerGroup('g'));
  t.same(copy.coordinatedGroups(), m.coordinatedGroups());
});

t.test('generations never repeat, even for a group dropped and formed again', async (t) => {
  const m = new PartitionMachine();
  const first = join(m, 'a', 0, 4, 1_000, 'g0').generation;
  // Fill the table with groups that have members, then expire g0's and ask for one more group.
  for (let i = 1; i < MAX_COORDINATED_GROUPS; i++) join(m, 'a', 500, 4, 60_000, `g${i}`);
  t.match(run(m, { op: 'join', group: 'extra', member: 'a', slots: 4, ttlMs: 1_000 }, 900), {
    ok: false,
    code: 'too_many_groups',
  });
  run(m, { op: 'expire', group: 'g0', members: ['a'] }, 1_500);
  join(m, 'a', 2_000, 4, 1_000, 'extra'); // g0 has no member: dropped to make room
  t.equal(m.consumerGroup('g0'), null);
  run(m, { op: 'expire', group: 'extra', members: ['a'] }, 2_500);
  const again = join(m, 'a', 3_000, 4, 60_000, 'g0').generation;
  t.ok(again > first, `${again} > ${first}`);
});

t.test('a group holds at most MAX_GROUP_MEMBERS members', async (t) => {
  const m = new PartitionMachine();
  for (let i = 0; i < MAX_GROUP_MEMBERS; i++) join(m, `m${i}`, 0);
  t.match(run(m, { op: 'join', group: 'g', member: 'one-more', slots: 8, ttlMs: 5_000 }, 1), {
    ok: false,
    code: 'too_many_members',
  });
});

t.test('the assignment spreads slots evenly over the sorted members and depends on nothing else', async (t) => {
  fc.assert(
    fc.property(
      fc.uniqueArray(fc.stringMatching(/^[a-z0-9-]{1,6}$/), { minLength: 1, maxLength: 10 }),
      fc.integer({ min: 0, max: 64 }),
      (members, slots) => {
        const a = assignSlots(members, slots);
        const b = assignSlots([...members].reverse(), slots);
        const all = [...a.values()].flat().sort((x, y) => x - y);
        if (all.length !== slots || all.some((s, i) => s !== i)) return false;
        const sizes = [...a.values()].map((s) => s.length);
        if (Math.max(...sizes) - Math.min(...sizes) > 1) return false;
        return members.every((m) => JSON.stringify(a.get(m)) === JSON.stringify(b.get(m)));
      },
    ),
  );
  t.pass();
});

t.test('every replica that applies the same entries holds the same groups (property)', async (t) => {
  fc.assert(
    fc.property(
      fc.array(
        fc.record({
          member: fc.constantFrom('a', 'b', 'c'),
          op: fc.constantFrom('join', 'leave', 'expire'),
          gap: fc.integer({ min: 0, max: 4_000 }),
        }),
        { maxLength: 40 },
      ),
      (steps) => {
        const one = new PartitionMachine();
        const two = new PartitionMachine();
        let time = 0;
        let last = 0;
        for (const step of steps) {
          time += step.gap;
          const command: PartitionCommand =
            step.op === 'leave'
              ? { op: 'leave', group: 'g', member: step.member }
              : step.op === 'expire'
                ? { op: 'expire', group: 'g', members: [step.member] }
                : { op: 'join', group: 'g', member: step.member, slots: 6, ttlMs: 3_000 };
          const r1 = run(one, command, time);
          const r2 = run(two, command, time);
          if (JSON.stringify(r1) !== JSON.stringify(r2)) return false;
          const generation =
            r1.op === 'join' && r1.ok ? r1.generation : r1.op === 'leave' || r1.op === 'expire' ? r1.generation : last;
          if (generation < last) return false;
          last = generation;
        }
        const copy = new PartitionMachine();
        copy.restore(one.snapshot());
        return JSON.stringify(copy.consumerGroup('g')) === JSON.stringify(one.consumerGroup('g'));
      },
    ),
  );
  t.pass();
});
