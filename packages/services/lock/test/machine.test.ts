import fc from 'fast-check';
import t from 'tap';
import { LockMachine, type LockChange, type LockCommand, type LockResult } from '../src/machine.js';

const OWNER = 'tok';
let index = 0;
function run(m: LockMachine, command: LockCommand, time = 0): LockResult {
  return m.apply(command, { index: ++index, term: 1, time });
}
const open = (m: LockMachine, id: string, time = 0, timeoutMs = 10_000) =>
  run(m, { op: 'openSession', id, timeoutMs, owner: OWNER }, time);
const acquire = (m: LockMachine, name: string, session: string, wait = false, time = 0) =>
  run(m, { op: 'acquire', name, session, owner: OWNER, wait }, time);
const release = (m: LockMachine, name: string, session: string, token: number | null, time = 0) =>
  run(m, { op: 'release', name, session, owner: OWNER, token }, time);

t.test('lock free + acquire with a valid session: held, token incremented and returned', async (t) => {
  const m = new LockMachine();
  open(m, 's1');
  t.same(acquire(m, 'L', 's1'), { ok: true, op: 'acquire', granted: true, token: 1 });
  t.equal(m.getLock('L').holder, 's1');
});

t.test('acquire with an unknown session is refused', async (t) => {
  const m = new LockMachine();
  t.same(acquire(m, 'L', 'nobody'), { ok: false, error: 'unknown_session' });
});

t.test('a session is usable only with the token that opened it', async (t) => {
  const m = new LockMachine();
  open(m, 's1');
  t.same(run(m, { op: 'acquire', name: 'L', session: 's1', owner: 'other', wait: false }), {
    ok: false,
    error: 'session_forbidden',
  });
  t.same(run(m, { op: 'heartbeat', id: 's1', owner: 'other' }), { ok: false, error: 'session_forbidden' });
});

t.test(
  'lock held + acquire: without wait refused, with wait queued with its position; re-acquire by holder is idempotent',
  async (t) => {
    const m = new LockMachine();
    for (const s of ['s1', 's2', 's3']) open(m, s);
    acquire(m, 'L', 's1');
    t.same(acquire(m, 'L', 's2', false), { ok: true, op: 'acquire', granted: false, position: null });
    t.same(acquire(m, 'L', 's2', true), { ok: true, op: 'acquire', granted: false, position: 1 });
    t.same(acquire(m, 'L', 's3', true), { ok: true, op: 'acquire', granted: false, position: 2 });
    t.same(
      acquire(m, 'L', 's2', true),
      { ok: true, op: 'acquire', granted: false, position: 1 },
      'asking again keeps the place',
    );
    t.same(
      acquire(m, 'L', 's1'),
      { ok: true, op: 'acquire', granted: true, token: 1 },
      'the holder gets its grant back',
    );
    t.same(m.getLock('L').queue, ['s2', 's3']);
  },
);

t.test(
  'release with the matching token hands the lock to the head of the queue with the next token; only the head is woken',
  async (t) => {
    const m = new LockMachine();
    const changes: LockChange[] = [];
    m.onChange = (c) => changes.push(c);
    for (const s of ['s1', 's2', 's3']) open(m, s);
    acquire(m, 'L', 's1');
    acquire(m, 'L', 's2', true);
    acquire(m, 'L', 's3', true);
    changes.length = 0;
    t.same(release(m, 'L', 's1', 1), { ok: true, op: 'release', released: true, dequeued: false, next: 's2' });
    t.same(m.getLock('L'), { name: 'L', holder: 's2', token: 2, queue: ['s3'], revision: index });
    t.equal(changes.length, 1);
    t.equal(changes[0]!.granted, 's2', 'the head was granted');
    t.equal(changes[0]!.lost, 's1');
  },
);

t.test('release with an empty queue frees the lock; the token is kept for the next grant', async (t) => {
  const m = new LockMachine();
  open(m, 's1');
  open(m, 's2');
  acquire(m, 'L', 's1');
  release(m, 'L', 's1', 1);
  t.equal(m.getLock('L').holder, null);
  t.same(acquire(m, 'L', 's2'), { ok: true, op: 'acquire', granted: true, token: 2 });
});

t.test('a stale release is rejected and changes nothing', async (t) => {
  const m = new LockMachine();
  open(m, 's1');
  open(m, 's2');
  acquire(m, 'L', 's1');
  release(m, 'L', 's1', 1);
  acquire(m, 'L', 's2');
  const before = m.getLock('L');
  t.same(release(m, 'L', 's1', 1), { ok: false, error: 'stale_token', token: 2 }, 'an old grant of this lock');
  t.same(release(m, 'L', 's2', 7), { ok: false, error: 'stale_token', token: 2 }, 'the holder with a wrong token');
  t.same(release(m, 'L', 's1', 2), { ok: false, error: 'not_holder' }, 'the right token from another session');
  t.same(m.getLock('L'), before);
});

t.test('a waiter may leave the queue (release without a token)', async (t) => {
  const m = new LockMachine();
  open(m, 's1');
  open(m, 's2');
  acquire(m, 'L', 's1');
  acquire(m, 'L', 's2', true);
  t.same(release(m, 'L', 's2', null), { ok: true, op: 'release', released: false, dequeued: true, next: 's1' });
  t.same(m.getLock('L').queue, []);
  t.same(m.getSession('s2')?.waiting, []);
});

t.test(
  'session expiry: heartbeats push the deadline; a missed deadline releases every lock to each queue head and leaves every queue',
  async (t) => {
    const m = new LockMachine();
    open(m, 's1', 0, 10_000);
    open(m, 's2', 0, 10_000);
    open(m, 's3', 0, 10_000);
    acquire(m, 'A', 's1');
    acquire(m, 'B', 's1');
    acquire(m, 'A', 's2', true);
    acquire(m, 'C', 's3');
    acquire(m, 'C', 's1', true);
    run(m, { op: 'heartbeat', id: 's2', owner: OWNER }, 8_000);
    run(m, { op: 'heartbeat', id: 's3', owner: OWNER }, 8_000);
    t.same(m.overdue(9_999), []);
    t.same(m.overdue(10_000), ['s1']);
    t.same(
      run(m, { op: 'expire', ids: ['s1', 's2'] }, 10_000),
      { ok: true, op: 'expire', expired: ['s1'] },
      's2 heartbeated, so only s1 expires',
    );
    t.equal(m.getSession('s1'), null);
    t.same(m.getLock('A'), { name: 'A', holder: 's2', token: 2, queue: [], revision: index });
    t.equal(m.getLock('B').holder, null);
    t.same(m.getLock('C').queue, [], 's1 left the queue of C');
    t.same(acquire(m, 'A', 's1'), { ok: false, error: 'unknown_session' });
  },
);

t.test(
  'expiry is decided by entry time: a proposal from a fast leader clock does not expire a live session',
  async (t) => {
    const m = new LockMachine();
    open(m, 's1', 0, 10_000);
    t.same(run(m, { op: 'expire', ids: ['s1'] }, 9_000), { ok: true, op: 'expire', expired: [] });
    t.ok(m.getSession('s1'));
  },
);

t.test('extendAll gives every session one more timeout from the entry time', async (t) => {
  const m = new LockMachine();
  open(m, 's1', 0, 10_000);
  run(m, { op: 'extendAll' }, 9_000);
  t.equal(m.getSession('s1')?.deadline, 19_000);
  t.same(m.overdue(15_000), []);
});

t.test('closing a session releases its locks and queue places', async (t) => {
  const m = new LockMachine();
  open(m, 's1');
  open(m, 's2');
  acquire(m, 'A', 's1');
  acquire(m, 'A', 's2', true);
  t.same(run(m, { op: 'closeSession', id: 's1', owner: OWNER }), {
    ok: true,
    op: 'closeSession',
    id: 's1',
    released: ['A'],
  });
  t.equal(m.getLock('A').holder, 's2');
});

// ---------------------------------------------------------------------------------------------------------
// Invariants under random command sequences, and determinism through snapshot and restore.

const sessions = ['s1', 's2', 's3', 's4'];
const names = ['A', 'B', 'C'];
const commandArb: fc.Arbitrary<{ cmd: LockCommand; dt: number }> = fc.record({
  dt: fc.integer({ min: 0, max: 4_000 }),
  cmd: fc.oneof(
    fc.record({
      op: fc.constant('openSession' as const),
      id: fc.constantFrom(...sessions),
      timeoutMs: fc.constantFrom(5_000, 10_000),
      owner: fc.constant(OWNER),
    }),
    fc.record({ op: fc.constant('heartbeat' as const), id: fc.constantFrom(...sessions), owner: fc.constant(OWNER) }),
    fc.record({
      op: fc.constant('closeSession' as const),
      id: fc.constantFrom(...sessions),
      owner: fc.constant(OWNER),
    }),
    fc.record({ op: fc.constant('expire' as const), ids: fc.subarray(sessions) }),
    fc.constant({ op: 'extendAll' as const }),
    fc.record({
      op: fc.constant('acquire' as const),
      name: fc.constantFrom(...names),
      session: fc.constantFrom(...sessions),
      owner: fc.constant(OWNER),
      wait: fc.boolean(),
    }),
    fc.record({
      op: fc.constant('release' as const),
      name: fc.constantFrom(...names),
      session: fc.constantFrom(...sessions),
      owner: fc.constant(OWNER),
      token: fc.option(fc.integer({ min: 1, max: 8 }), { nil: null }),
    }),
  ),
});

function checkInvariants(m: LockMachine, lastTokens: Map<string, number>): string | null {
  for (const name of names) {
    const lock = m.getLock(name);
    const last = lastTokens.get(name) ?? 0;
    if (lock.token < last) return `token of ${name} decreased ${last} -> ${lock.token}`;
    lastTokens.set(name, lock.token);
    if (lock.holder !== null) {
      const s = m.getSession(lock.holder);
      if (s === null) return `${name} held by a session that does not exist`;
      if (!s.owned.includes(name)) return `${name} holder does not list it as owned`;
    }
    for (const q of lock.queue) {
      const s = m.getSession(q);
      if (s === null) return `${name} queue has a dead session ${q}`;
      if (!s.waiting.includes(name)) return `${q} waits for ${name} but does not list it`;
      if (q === lock.holder) return `${q} both holds and waits for ${name}`;
    }
    if (new Set(lock.queue).size !== lock.queue.length) return `${name} queue has duplicates`;
  }
  for (const id of sessions) {
    const s = m.getSession(id);
    if (s === null) continue;
    for (const name of s.owned) if (m.getLock(name).holder !== id) return `${id} owns ${name} but is not its holder`;
  }
  return null;
}

t.test('property: invariants hold, every grant increments the token by one, snapshot/restore is exact', async (t) => {
  fc.assert(
    fc.property(fc.array(commandArb, { maxLength: 80 }), fc.nat(80), (steps, cut) => {
      const m = new LockMachine();
      const lastTokens = new Map<string, number>();
      const grants = new Map<string, number[]>();
      m.onChange = (c) => {
        if (c.granted !== null) grants.set(c.lock.name, [...(grants.get(c.lock.name) ?? []), c.lock.token]);
      };
      let time = 0;
      let i = 0;
      let copy: LockMachine | null = null;
      const copyResults: string[] = [];
      const results: string[] = [];
      for (const { cmd, dt } of steps) {
        time += dt;
        const ctx = { index: ++i, term: 1, time };
        const r = m.apply(cmd, ctx);
        if (copy !== null) {
          copyResults.push(JSON.stringify(copy.apply(cmd, ctx)));
          results.push(JSON.stringify(r));
        }
        const broken = checkInvariants(m, lastTokens);
        if (broken !== null) throw new Error(broken);
        if (i === cut) {
          copy = new LockMachine();
          copy.restore(m.snapshot());
        }
      }
      for (const [name, tokens] of grants) {
        tokens.forEach((tok, k) => {
          if (tok !== k + 1) throw new Error(`grants of ${name} were ${tokens.join(',')}: not 1, 2, 3, ...`);
        });
      }
      if (copy !== null && JSON.stringify(copyResults) !== JSON.stringify(results))
        throw new Error('a restored copy diverged');
    }),
    { numRuns: 500 },
  );
  t.pass('500 random sequences kept every invariant');
});

t.test('changes are built only for watched names, and those in full', async (t) => {
  const m = new LockMachine();
  const changes: LockChange[] = [];
  m.onChange = (c) => changes.push(c);
  m.watched = (name) => name === 'W';
  for (const s of ['s1', 's2']) open(m, s);
  acquire(m, 'U', 's1');
  acquire(m, 'U', 's2', true);
  release(m, 'U', 's1', 1);
  t.equal(changes.length, 0, 'no change of an unwatched lock reached the watch hub');
  acquire(m, 'W', 's1');
  acquire(m, 'W', 's2', true);
  release(m, 'W', 's1', 1);
  t.same(
    changes.map((c) => [c.lock.holder, c.lock.token, c.lock.queue, c.granted, c.lost]),
    [
      ['s1', 1, [], 's1', null],
      ['s1', 1, ['s2'], null, null],
      ['s2', 2, [], 's2', 's1'],
    ],
    'every change of the watched lock, in order',
  );
  t.equal(m.getLock('U').token, 2, 'the unwatched lock changed all the same');
});
