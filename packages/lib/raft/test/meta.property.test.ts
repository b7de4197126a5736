/**
 * The meta group's state machine (MetaMachine) as a pure unit, with fast-check: placement spreads replicas evenly
 * and never puts two replicas of a group on one host; `spread` evens out hosts added later; `retire` moves every
 * replica off a host; snapshot and restore round-trip; and bad commands are refused the same way on every member
 * (a refusal changes nothing).
 */
import fc from 'fast-check';
import t from 'tap';
import {
  checkMetaCommand,
  MetaMachine,
  type GroupRecord,
  type MetaCommand,
  type MetaResult,
} from '../src/groups/meta.js';

let index = 0;
function apply(machine: MetaMachine, command: MetaCommand): MetaResult {
  index++;
  return machine.apply(command, { index, term: 1, time: 0 });
}

function withHosts(n: number): MetaMachine {
  const m = new MetaMachine();
  for (let i = 1; i <= n; i++) apply(m, { t: 'host', id: `h${i}`, raft: `127.0.0.1:${7000 + i}`, http: null });
  return m;
}

/** Replica counts of the hosts that are not retiring. */
function eligibleCounts(m: MetaMachine): number[] {
  const counts = m.replicaCounts();
  return m
    .hosts()
    .filter((h) => !h.retiring)
    .map((h) => counts.get(h.id) ?? 0);
}

function spreadOf(m: MetaMachine): number {
  const c = eligibleCounts(m);
  return Math.max(...c) - Math.min(...c);
}

function noDuplicates(groups: readonly GroupRecord[]): boolean {
  return groups.every((g) => new Set(g.members).size === g.members.length);
}

/** Applies `spread` until it moves nothing (bounded), returning how many commands it took. */
function spreadFully(m: MetaMachine): number {
  for (let round = 1; round <= 1000; round++) {
    const r = apply(m, { t: 'spread' });
    if (!r.ok) throw new Error(r.message);
    if (r.groups.length === 0) return round;
  }
  throw new Error('spread never settled');
}

const groupBatches = fc.array(
  fc.record({ count: fc.integer({ min: 1, max: 40 }), replicas: fc.integer({ min: 1, max: 5 }) }),
  { minLength: 1, maxLength: 8 },
);

t.test('placement: replicas spread evenly, never two of a group on one host', async (t) => {
  fc.assert(
    fc.property(fc.integer({ min: 5, max: 9 }), groupBatches, (hosts, batches) => {
      const m = withHosts(hosts);
      let n = 0;
      for (const b of batches) {
        const groups = Array.from({ length: b.count }, () => ({ name: `g${n++}`, replicas: b.replicas, data: {} }));
        const r = apply(m, { t: 'create', groups });
        if (!r.ok || r.groups.length !== b.count) return false;
        if (
          !r.groups.every((g) => g.members.length === b.replicas && g.settled && g.founders.join() === g.members.join())
        )
          return false;
      }
      // Greedy least-loaded placement keeps every host within one replica of every other.
      return noDuplicates(m.groups()) && spreadOf(m) <= 1 && m.groups().length === n;
    }),
    { numRuns: 200 },
  );
  t.pass('200 random cluster histories');
});

t.test('spread: hosts added later receive replicas until every host is within one of the others', async (t) => {
  fc.assert(
    fc.property(
      fc.integer({ min: 3, max: 5 }),
      fc.integer({ min: 1, max: 4 }),
      groupBatches,
      (first, added, batches) => {
        const m = withHosts(first);
        let n = 0;
        for (const b of batches) {
          const replicas = Math.min(b.replicas, first);
          apply(m, {
            t: 'create',
            groups: Array.from({ length: b.count }, () => ({ name: `g${n++}`, replicas, data: {} })),
          });
        }
        const membersBefore = new Map(m.groups().map((g) => [g.name, g.members.length]));
        for (let i = first + 1; i <= first + added; i++)
          apply(m, { t: 'host', id: `h${i}`, raft: `x:${i}`, http: null });
        const round = apply(m, { t: 'spread' });
        // One command moves at most one replica of a group (the others stay while the move runs).
        if (!round.ok || !round.groups.every((g) => !g.settled && g.version === index)) return false;
        spreadFully(m);
        return (
          noDuplicates(m.groups()) &&
          spreadOf(m) <= 1 &&
          m.groups().every((g) => g.members.length === membersBefore.get(g.name))
        );
      },
    ),
    { numRuns: 200 },
  );
  t.pass('200 random histories');
});

t.test('retire: every replica moves off the retiring host, onto hosts without one of that group', async (t) => {
  fc.assert(
    fc.property(fc.integer({ min: 4, max: 8 }), groupBatches, fc.nat(), (hosts, batches, pick) => {
      const m = withHosts(hosts);
      let n = 0;
      for (const b of batches) {
        const replicas = Math.min(b.replicas, hosts - 1);
        apply(m, {
          t: 'create',
          groups: Array.from({ length: b.count }, () => ({ name: `g${n++}`, replicas, data: {} })),
        });
      }
      const victim = `h${(pick % hosts) + 1}`;
      const holding = m
        .groups()
        .filter((g) => g.members.includes(victim))
        .map((g) => g.name);
      const r = apply(m, { t: 'retire', id: victim, retiring: true });
      if (!r.ok || r.groups.length !== holding.length) return false;
      if (m.replicaCounts().get(victim) !== 0) return false;
      if (!holding.every((name) => m.group(name)!.settled === false)) return false;
      // New groups never land on it either, nor does spread move any back; spread evens out what retire left
      // uneven (each moved replica went to the emptiest host the group was not on yet, in group order).
      const after = apply(m, { t: 'create', groups: [{ name: 'late', replicas: hosts - 1, data: {} }] });
      if (!after.ok || after.groups[0]!.members.includes(victim)) return false;
      spreadFully(m);
      return m.replicaCounts().get(victim) === 0 && noDuplicates(m.groups()) && spreadOf(m) <= 1;
    }),
    { numRuns: 200 },
  );
  t.pass('200 random histories');

  // Not enough hosts left to take a replica: the group keeps it (and says nothing moved for it).
  const m = withHosts(3);
  apply(m, { t: 'create', groups: [{ name: 'a', replicas: 3, data: {} }] });
  const r = apply(m, { t: 'retire', id: 'h2', retiring: true });
  t.same(r, { ok: true, groups: [] }, 'three hosts, three replicas: nowhere to move');
  t.same(m.group('a')!.members, ['h1', 'h2', 'h3']);
  t.same(
    apply(m, { t: 'create', groups: [{ name: 'b', replicas: 3, data: {} }] }).ok,
    false,
    'and a group of 3 no longer fits',
  );
});

t.test('settled: only for the version it was reported against', async (t) => {
  const m = withHosts(4);
  apply(m, { t: 'create', groups: [{ name: 'a', replicas: 3, data: { slots: [0, 99] } }] });
  const moved = apply(m, { t: 'members', name: 'a', members: ['h2', 'h3', 'h4'] });
  t.ok(moved.ok);
  const version = m.group('a')!.version;
  t.equal(m.group('a')!.settled, false, 'a move is unsettled');
  apply(m, { t: 'members', name: 'a', members: ['h1', 'h3', 'h4'] });
  t.same(
    apply(m, { t: 'settled', name: 'a', version }),
    { ok: true, groups: [] },
    'a report about an older version is ignored',
  );
  t.equal(m.group('a')!.settled, false);
  const r = apply(m, { t: 'settled', name: 'a', version: m.group('a')!.version });
  t.ok(r.ok && r.groups[0]!.settled, 'the current version settles');
  t.same(m.group('a')!.founders, ['h1', 'h2', 'h3'], 'founders never change');
  t.same(m.group('a')!.data, { slots: [0, 99] }, 'data stays');
});

t.test('a dropped name is taken until every host that may hold a copy reported it gone (or was retired)', async (t) => {
  const m = withHosts(4);
  apply(m, { t: 'create', groups: [{ name: 'a', replicas: 3, data: {} }] });
  apply(m, { t: 'members', name: 'a', members: ['h2', 'h3', 'h4'] }); // a move under way: h1 may still hold a copy
  t.ok(apply(m, { t: 'drop', names: ['a'] }).ok);
  t.same(m.dropping(), [{ name: 'a', hosts: ['h1', 'h2', 'h3', 'h4'] }], 'members and founders may hold copies');
  t.match(
    apply(m, { t: 'create', groups: [{ name: 'a', replicas: 3, data: {} }] }),
    { ok: false, code: 'exists' },
    'refused meanwhile',
  );
  for (const h of ['h1', 'h2', 'h3']) apply(m, { t: 'gone', name: 'a', host: h });
  t.match(
    apply(m, { t: 'create', groups: [{ name: 'a', replicas: 3, data: {} }] }),
    { ok: false, code: 'exists' },
    'still refused: h4 has not reported',
  );
  const copy = new MetaMachine();
  copy.restore(m.snapshot());
  t.same(copy.dropping(), [{ name: 'a', hosts: ['h4'] }], 'the snapshot keeps what is pending');
  apply(m, { t: 'retire', id: 'h4', retiring: true });
  t.same(m.dropping(), [], 'a retired host is not waited for');
  t.match(
    apply(m, { t: 'create', groups: [{ name: 'a', replicas: 3, data: {} }] }),
    { ok: true },
    'the name is free again',
  );
});

const commandArb: fc.Arbitrary<MetaCommand> = fc.oneof(
  fc.record({
    t: fc.constant('host' as const),
    id: fc.constantFrom('h1', 'h2', 'h3', 'h4', 'h5', 'h6'),
    raft: fc.constantFrom('a:1', 'b:2'),
    http: fc.constantFrom(null, 'http://x:1'),
  }),
  fc.record({ t: fc.constant('retire' as const), id: fc.constantFrom('h1', 'h2', 'h6', 'h9'), retiring: fc.boolean() }),
  fc.record({
    t: fc.constant('create' as const),
    groups: fc.array(
      fc.record({
        name: fc.constantFrom('a', 'b', 'c', 'd', 'e'),
        replicas: fc.integer({ min: 1, max: 4 }),
        data: fc.constantFrom({}, { slots: [0, 9] }),
      }),
      { minLength: 1, maxLength: 3 },
    ),
  }),
  fc.record({
    t: fc.constant('drop' as const),
    names: fc.array(fc.constantFrom('a', 'b', 'c', 'zz'), { minLength: 1, maxLength: 2 }),
  }),
  fc.record({
    t: fc.constant('members' as const),
    name: fc.constantFrom('a', 'b', 'zz'),
    members: fc.uniqueArray(fc.constantFrom('h1', 'h2', 'h3', 'h4', 'h9'), { minLength: 1, maxLength: 3 }),
  }),
  fc.record({
    t: fc.constant('settled' as const),
    name: fc.constantFrom('a', 'b'),
    version: fc.integer({ min: 0, max: 60 }),
  }),
  fc.constant({ t: 'spread' as const }),
  fc.record({
    t: fc.constant('gone' as const),
    name: fc.constantFrom('a', 'b', 'c'),
    host: fc.constantFrom('h1', 'h2', 'h3', 'h4'),
  }),
);

/** Garbage a faulty or hostile proposer could put in the log. */
const badArb: fc.Arbitrary<unknown> = fc.oneof(
  fc.constantFrom(
    null,
    7,
    'spread',
    [],
    { t: 'nope' },
    { t: 'host', id: 'bad id!', raft: 'a:1', http: null },
    { t: 'host', id: 'h1', raft: 5, http: null },
  ),
  fc.constantFrom(
    { t: 'create', groups: [] },
    { t: 'create', groups: [{ name: 'meta', replicas: 1, data: {} }] },
    { t: 'create', groups: [{ name: 'x', replicas: 0, data: {} }] },
  ),
  fc.constantFrom(
    { t: 'create', groups: [{ name: 'x', replicas: 1, data: [] }] },
    {
      t: 'create',
      groups: [
        { name: 'x', replicas: 1, data: {} },
        { name: 'x', replicas: 1, data: {} },
      ],
    },
  ),
  fc.constantFrom(
    { t: 'create', groups: [{ name: 'x', replicas: 1, data: { big: 'y'.repeat(20_000) } }] },
    { t: 'drop', names: [] },
    { t: 'drop', names: ['a/b'] },
  ),
  fc.constantFrom(
    { t: 'members', name: 'a', members: [] },
    { t: 'members', name: 'a', members: ['h1', 'h1'] },
    { t: 'settled', name: 'a', version: 1.5 },
    { t: 'retire', id: 'h1' },
  ),
  fc.anything(),
);

t.test(
  'any history: same state on every replica, refusals change nothing, snapshot and restore round-trip',
  async (t) => {
    fc.assert(
      fc.property(
        fc.array(
          fc.oneof(
            commandArb.map((c) => ({ c, bad: false })),
            badArb.map((c) => ({ c: c as MetaCommand, bad: true })),
          ),
          { maxLength: 60 },
        ),
        (history) => {
          const a = new MetaMachine();
          const b = new MetaMachine();
          let i = 0;
          for (const { c, bad } of history) {
            i++;
            const before = a.snapshot();
            const ra = a.apply(c, { index: i, term: 1, time: 0 });
            const rb = b.apply(c, { index: i, term: 1, time: 0 });
            // Deterministic: both replicas answer alike and end alike.
            if (JSON.stringify(ra) !== JSON.stringify(rb)) return false;
            if (bad && checkMetaCommand(c) !== null && (ra.ok || ra.code !== 'invalid')) return false;
            if (!ra.ok && Buffer.compare(Buffer.from(before), Buffer.from(a.snapshot())) !== 0) return false;
            if (!noDuplicates(a.groups())) return false;
            // Members are always known hosts; a name being dropped is not a group at the same time.
            if (!a.groups().every((g) => g.members.every((m) => a.host(m) !== undefined))) return false;
            if (a.dropping().some((d) => a.group(d.name) !== undefined || d.hosts.length === 0)) return false;
            if (JSON.stringify(a.dropping()) !== JSON.stringify(b.dropping())) return false;
            // Snapshot mid-history: a restored copy carries on exactly like the original.
            if (i % 7 === 0) b.restore(a.snapshot());
          }
          const restored = new MetaMachine();
          restored.restore(a.snapshot());
          return (
            JSON.stringify(restored.hosts()) === JSON.stringify(a.hosts()) &&
            JSON.stringify(restored.groups()) === JSON.stringify(a.groups()) &&
            Buffer.compare(Buffer.from(restored.snapshot()), Buffer.from(a.snapshot())) === 0 &&
            JSON.stringify(b.groups()) === JSON.stringify(a.groups())
          );
        },
      ),
      { numRuns: 300 },
    );
    t.pass('300 random histories');
  },
);

t.test('bad commands: refused with invalid, naming what is wrong', async (t) => {
  const m = withHosts(3);
  const cases: Array<[unknown, RegExp]> = [
    [null, /object/],
    [{ t: 'nope' }, /unknown meta command/],
    [{ t: 'create', groups: [{ name: 'meta', replicas: 1, data: {} }] }, /group name/],
    [{ t: 'create', groups: [{ name: 'x', replicas: 16, data: {} }] }, /replicas/],
    [{ t: 'create', groups: [{ name: 'x', replicas: 1, data: null }] }, /data/],
    [{ t: 'drop', names: ['ok', ''] }, /drop/],
    [{ t: 'members', name: 'x', members: ['h1', 'h1'] }, /twice/],
    [{ t: 'host', id: 'h'.repeat(65), raft: 'a:1', http: null }, /host: id/],
  ];
  for (const [command, message] of cases) {
    const r = apply(m, command as MetaCommand);
    t.equal(r.ok, false, JSON.stringify(command)?.slice(0, 60) ?? 'undefined');
    if (!r.ok) {
      t.equal(r.code, 'invalid');
      t.match(r.message, message);
    }
  }
  // Refusals that depend on the state.
  t.match(apply(m, { t: 'create', groups: [{ name: 'a', replicas: 4, data: {} }] }), { ok: false, code: 'no_hosts' });
  t.match(apply(m, { t: 'create', groups: [{ name: 'a', replicas: 3, data: {} }] }), { ok: true });
  t.match(
    apply(m, {
      t: 'create',
      groups: [
        { name: 'b', replicas: 1, data: {} },
        { name: 'a', replicas: 1, data: {} },
      ],
    }),
    { ok: false, code: 'exists' },
  );
  t.equal(m.group('b'), undefined, 'a create is all or nothing');
  t.match(apply(m, { t: 'drop', names: ['a', 'zz'] }), { ok: false, code: 'not_found' });
  t.ok(m.group('a'), 'a drop is all or nothing');
  t.match(apply(m, { t: 'members', name: 'a', members: ['h1', 'h7'] }), { ok: false, code: 'not_found' });
  t.match(apply(m, { t: 'retire', id: 'h7', retiring: true }), { ok: false, code: 'not_found' });
});
