/**
 * The op-log machine by itself: no sockets, no clocks (each entry's time is given), so leases, fencing, dedup,
 * limits, compaction and snapshot/restore are checked exactly.
 */
import t from 'tap';
import { Doc } from '@raftkit/crdt';
import {
  CollabMachine,
  HOT_MS,
  IDLE_SNAPSHOT_MS,
  LEASE_MS,
  MAX_CHARS,
  SNAPSHOT_EVERY,
  checkCommand,
  type CollabCommand,
  type CollabResult,
} from '../src/index.js';

let index = 0;
function run(m: CollabMachine, c: CollabCommand, time: number): CollabResult {
  return m.apply(c, { index: ++index, term: 1, time });
}

function fresh(time = 1_000): CollabMachine {
  const m = new CollabMachine();
  t.match(run(m, { op: 'create', doc_id: 'd1', title: 'T', owner: 'alice', template: null }, time), {
    ok: true,
    op: 'create',
  });
  return m;
}

t.test('ownership: leases, generations, fencing', async (t) => {
  const m = fresh();
  const a = run(m, { op: 'acquire', doc_id: 'd1', worker: 'w1', url: 'http://w1' }, 1_000);
  t.match(a, { ok: true, granted: true, owner: { worker: 'w1', generation: 1 } });
  t.match(
    run(m, { op: 'acquire', doc_id: 'd1', worker: 'w2', url: 'http://w2' }, 1_000 + LEASE_MS - 1),
    { granted: false, owner: { worker: 'w1' } },
    'a live lease keeps others out',
  );
  t.match(run(m, { op: 'renew', worker: 'w1', docs: [['d1', 1]] }, 3_000), { lost: [] });
  t.match(
    run(m, { op: 'acquire', doc_id: 'd1', worker: 'w2', url: 'http://w2' }, 3_000 + LEASE_MS - 1),
    { granted: false },
    'renewed',
  );
  const b = run(m, { op: 'acquire', doc_id: 'd1', worker: 'w2', url: 'http://w2' }, 3_000 + LEASE_MS + 1);
  t.match(
    b,
    { granted: true, owner: { worker: 'w2', generation: 2 } },
    'an expired lease is taken with a new generation',
  );
  const doc = new Doc('alice');
  const ops = doc.localInsert(0, 'hi');
  const stale = run(
    m,
    {
      op: 'append',
      doc_id: 'd1',
      generation: 1,
      changes: [{ op_id: 'alice:0', author: 'alice', ops, parent_revision: 0 }],
    },
    7_000,
  );
  t.match(stale, { ok: false, code: 'stale_generation' }, 'the old owner is fenced off');
  t.match(
    run(m, { op: 'renew', worker: 'w1', docs: [['d1', 1]] }, 7_000),
    { lost: ['d1'] },
    'and learns it lost the document',
  );
  t.match(
    run(
      m,
      {
        op: 'append',
        doc_id: 'd1',
        generation: 2,
        changes: [{ op_id: 'alice:0', author: 'alice', ops, parent_revision: 0 }],
      },
      7_000,
    ),
    { ok: true, base: 0, results: [{ ok: true, revision: 1 }] },
  );
  t.match(run(m, { op: 'release', doc_id: 'd1', worker: 'w1', generation: 1 }, 7_000), {
    ok: false,
    code: 'stale_generation',
  });
  t.match(run(m, { op: 'release', doc_id: 'd1', worker: 'w2', generation: 2 }, 7_000), { ok: true });
  t.equal(m.owner('d1'), null);
  t.equal(m.logInfo('d1')!.implicit_revision, 1, 'a release takes the final snapshot');
  t.match(
    run(m, { op: 'acquire', doc_id: 'd1', worker: 'w1', url: 'http://w1' }, 7_001),
    { granted: true, owner: { generation: 3 } },
    'generations never repeat',
  );
  t.match(run(m, { op: 'acquire', doc_id: 'nope', worker: 'w1', url: 'http://w1' }, 7_001), {
    ok: false,
    code: 'no_such_doc',
  });
});

t.test('changes: dedup, order, authorship, permissions, size', async (t) => {
  const m = fresh();
  run(m, { op: 'acquire', doc_id: 'd1', worker: 'w1', url: 'u' }, 1_000);
  const alice = new Doc('alice~s1');
  const c1 = alice.localInsert(0, 'hello');
  const c2 = alice.localDelete(0, 1);
  const append = (changes: Array<{ op_id: string; author: string; ops: unknown[] }>) =>
    run(
      m,
      {
        op: 'append',
        doc_id: 'd1',
        generation: 1,
        changes: changes.map((c) => ({ ...c, parent_revision: 0 })) as never,
      },
      2_000,
    );
  t.match(
    append([{ op_id: 'alice~s1:5', author: 'alice', ops: c2 }]),
    { results: [{ ok: false, code: 'invalid_op' }] },
    'a change before the one it follows',
  );
  t.match(
    append([
      { op_id: 'alice~s1:0', author: 'alice', ops: c1 },
      { op_id: 'alice~s1:5', author: 'alice', ops: c2 },
    ]),
    {
      results: [
        { ok: true, revision: 1 },
        { ok: true, revision: 2 },
      ],
    },
  );
  t.match(
    append([{ op_id: 'alice~s1:0', author: 'alice', ops: c1 }]),
    { results: [{ ok: true, revision: 1, duplicate: true }] },
    'a duplicate op_id: its first revision',
  );
  t.equal(m.text('d1'), 'ello');
  t.match(
    append([
      {
        op_id: 'x:0',
        author: 'alice',
        ops: [{ type: 'insert', id: ['bob', 0], lamport: 0, left: null, right: null, text: 'x' }],
      },
    ]),
    { results: [{ ok: false, code: 'invalid_op' }] },
    'op_id must name the first op',
  );
  t.match(
    append([
      {
        op_id: 'bob:0',
        author: 'alice',
        ops: [{ type: 'insert', id: ['bob', 0], lamport: 0, left: null, right: null, text: 'x' }],
      },
    ]),
    { results: [{ ok: false, code: 'forbidden' }] },
    'a client id of another user',
  );
  t.match(
    append([
      {
        op_id: 'bob:0',
        author: 'bob',
        ops: [{ type: 'insert', id: ['bob', 0], lamport: 0, left: null, right: null, text: 'x' }],
      },
    ]),
    { results: [{ ok: false, code: 'forbidden' }] },
    'bob may not edit',
  );
  run(m, { op: 'permission', doc_id: 'd1', user: 'bob', role: 'viewer' }, 2_000);
  t.match(
    append([
      {
        op_id: 'bob:0',
        author: 'bob',
        ops: [{ type: 'insert', id: ['bob', 0], lamport: 0, left: null, right: null, text: 'x' }],
      },
    ]),
    { results: [{ ok: false, code: 'forbidden' }] },
    'nor may a viewer',
  );
  run(m, { op: 'permission', doc_id: 'd1', user: 'bob', role: 'editor' }, 2_000);
  t.match(
    append([
      {
        op_id: 'bob:0',
        author: 'bob',
        ops: [{ type: 'insert', id: ['bob', 0], lamport: 9, left: null, right: null, text: 'x' }],
      },
    ]),
    { results: [{ ok: true, revision: 3 }] },
  );
  const big = 'y'.repeat(MAX_CHARS - m.meta('d1')!.length + 1);
  t.match(
    append([
      {
        op_id: 'bob:1',
        author: 'bob',
        ops: [{ type: 'insert', id: ['bob', 1], lamport: 10, left: ['bob', 0], right: null, text: big }],
      },
    ]),
    { results: [{ ok: false, code: 'too_large' }] },
  );
  t.equal(m.meta('d1')!.revision, 3, 'nothing applied');
  t.match(
    append([
      {
        op_id: 'bob:1',
        author: 'bob',
        ops: [{ type: 'insert', id: ['bob', 1], lamport: 10, left: ['ghost', 3], right: null, text: 'z' }],
      },
    ]),
    { results: [{ ok: false, code: 'invalid_op' }] },
    'an unknown anchor',
  );
  t.match(
    append([{ op_id: 'bob:1', author: 'bob', ops: [{ type: 'bogus' }] }]),
    { results: [{ ok: false, code: 'invalid_op' }] },
    'a malformed op',
  );
  t.equal(m.text('d1'), 'ellox', 'a tie at the document start goes by Lamport stamp');
  t.same(m.role('d1', 'alice'), 'editor', 'the owner is an editor');
});

t.test('snapshots, restore as a forward change, compaction of the hot log', async (t) => {
  const m = new CollabMachine();
  run(m, { op: 'create', doc_id: 'd2', title: 'T', owner: 'alice', template: 'first' }, 0);
  t.equal(m.meta('d2')!.revision, 1);
  const s = run(m, { op: 'snapshot', doc_id: 'd2', name: 'v1' }, 10);
  t.match(s, { ok: true, snapshot_id: 'v1', revision: 1 });
  run(m, { op: 'acquire', doc_id: 'd2', worker: 'w', url: 'u' }, 10);
  const a = Doc.decode(m.state('d2', null)!.content, 'alice');
  const changes = [];
  for (let i = 0; i < SNAPSHOT_EVERY + 5; i++) {
    const ops = a.localInsert(a.length, '.');
    changes.push({ op_id: `alice:${ops[0]!.id[1]}`, author: 'alice', ops, parent_revision: 0 });
  }
  const r = run(m, { op: 'append', doc_id: 'd2', generation: 1, changes: changes.slice(0, 400) }, 20);
  t.match(r, { ok: true, base: 1 });
  run(m, { op: 'append', doc_id: 'd2', generation: 1, changes: changes.slice(400) }, 20);
  t.equal(m.meta('d2')!.revision, SNAPSHOT_EVERY + 6);
  t.equal(m.logInfo('d2')!.implicit_revision, SNAPSHOT_EVERY, 'an implicit snapshot every SNAPSHOT_EVERY changes');
  t.equal(m.logInfo('d2')!.held, SNAPSHOT_EVERY + 6, 'everything is still hot (younger than 7 days)');
  const restored = run(m, { op: 'restore', doc_id: 'd2', snapshot_id: 'v1', author: 'alice' }, 30);
  t.match(restored, { ok: true, revision: SNAPSHOT_EVERY + 7 });
  t.equal(m.text('d2'), 'first', 'the version is back, as a new revision');
  t.match(run(m, { op: 'restore', doc_id: 'd2', snapshot_id: 'v9', author: 'alice' }, 30), {
    ok: false,
    code: 'not_found',
  });
  // Idle: a snapshot at the last revision; then a week later the changes behind it leave the hot log.
  t.match(run(m, { op: 'compact' }, 30 + IDLE_SNAPSHOT_MS), { snapshots: 1 });
  t.equal(m.logInfo('d2')!.implicit_revision, SNAPSHOT_EVERY + 7);
  t.match(run(m, { op: 'compact' }, 40 + HOT_MS), { dropped: SNAPSHOT_EVERY + 7 });
  t.equal(m.logInfo('d2')!.log_start, SNAPSHOT_EVERY + 7);
  t.equal(m.state('d2', 3)!.changes, null, 'a reconnect from before the hot log gets the document alone');
  t.same(m.state('d2', SNAPSHOT_EVERY + 7)!.changes, []);
  t.match(
    run(m, { op: 'append', doc_id: 'd2', generation: 1, changes: [changes[0]!] }, 50 + HOT_MS),
    { results: [{ ok: true, duplicate: true }] },
    'a change older than the hot log is still recognised (by the CRDT state)',
  );
  // Snapshot and restore of the whole machine.
  const copy = new CollabMachine();
  copy.restore(m.snapshot());
  t.equal(copy.text('d2'), 'first');
  t.same(copy.meta('d2'), m.meta('d2'));
  t.same(copy.logInfo('d2'), m.logInfo('d2'));
  t.same(copy.snapshots('d2'), m.snapshots('d2'));
});

t.test('comments are anchored on characters', async (t) => {
  const m = new CollabMachine();
  run(m, { op: 'create', doc_id: 'd3', title: '', owner: 'alice', template: 'abcdef' }, 0);
  const c = run(
    m,
    { op: 'comment', doc_id: 'd3', author: 'carol', start: ['~server', 2], end: ['~server', 3], body: 'cd?' },
    1,
  );
  t.match(c, { ok: true, comment: { comment_id: 'c1', author: 'carol' } });
  t.match(m.comments('d3'), [{ range: { index: 2, length: 2 } }]);
  t.match(
    run(m, { op: 'comment', doc_id: 'd3', author: 'carol', start: ['~server', 3], end: ['~server', 2], body: 'x' }, 1),
    { ok: false, code: 'invalid' },
  );
  t.match(run(m, { op: 'uncomment', doc_id: 'd3', comment_id: 'c1', by: 'carol' }, 2), { ok: true });
  t.same(m.comments('d3'), []);
});

t.test('command shapes: a bad command is refused, never a crash', async (t) => {
  const m = fresh();
  for (const bad of [
    null,
    7,
    {},
    { op: 'nope' },
    { op: 'create' },
    { op: 'append', doc_id: 'd1', generation: 1, changes: [] },
    { op: 'permission', doc_id: 'd1', user: 'bob', role: 'admin' },
    { op: 'renew', worker: 'w', docs: [['d1']] },
  ]) {
    t.throws(() => checkCommand(bad), `${JSON.stringify(bad)} refused by the shape check`);
    t.match(
      m.apply(bad as CollabCommand, { index: 1, term: 1, time: 0 }),
      { ok: false, code: 'invalid' },
      'and by the machine',
    );
  }
});

t.test('pipelined appends: an entry is applied only after the previous one of its session', async (t) => {
  const m = fresh();
  run(m, { op: 'acquire', doc_id: 'd1', worker: 'w1', url: 'u' }, 1_000);
  const alice = new Doc('alice~s1');
  const c1 = alice.localInsert(0, 'ab');
  const c2 = alice.localInsert(2, 'cd');
  const c3 = alice.localInsert(4, 'ef');
  const entry = (session: string, seq: number, op_id: string, ops: unknown[]): CollabCommand =>
    ({
      op: 'append',
      doc_id: 'd1',
      generation: 1,
      session,
      seq,
      changes: [{ op_id, author: 'alice', ops, parent_revision: 0 }],
    }) as never;
  t.match(
    run(m, entry('s', 2, 'alice~s1:2', c2), 2_000),
    { ok: false, code: 'out_of_order' },
    'entry 2 overtook entry 1: refused',
  );
  t.equal(m.text('d1'), '', 'nothing applied');
  t.match(run(m, entry('s', 1, 'alice~s1:0', c1), 2_000), {
    ok: true,
    base: 0,
    results: [{ ok: true, revision: 1, duplicate: false }],
  });
  t.match(run(m, entry('s', 3, 'alice~s1:4', c3), 2_000), { ok: false, code: 'out_of_order' }, 'a gap is refused');
  t.match(
    run(m, entry('s', 2, 'alice~s1:2', c2), 2_000),
    { ok: true, results: [{ ok: true, revision: 2, duplicate: false }] },
    'sent again in order',
  );
  t.match(
    run(m, entry('s', 1, 'alice~s1:0', c1), 2_000),
    { ok: true, base: 2, results: [{ ok: true, revision: 1, duplicate: true }] },
    'an entry applied before: its first outcome',
  );
  t.match(run(m, entry('s', 3, 'alice~s1:4', c3), 2_000), { ok: true, results: [{ ok: true, revision: 3 }] });
  t.equal(m.text('d1'), 'abcdef');
  // An entry applied before never applies a change now (that would put it after later ones).
  const bob = new Doc('alice~s2');
  const late = bob.localInsert(0, 'Z');
  t.match(
    run(m, entry('other', 1, 'alice~s2:0', late), 2_000),
    { ok: true, results: [{ ok: true, revision: 4 }] },
    'another session starts at 1',
  );
  const refused = run(
    m,
    {
      op: 'append',
      doc_id: 'd1',
      generation: 1,
      session: 'other',
      seq: 1,
      changes: [
        { op_id: 'alice~s3:0', author: 'alice', ops: new Doc('alice~s3').localInsert(0, 'Q'), parent_revision: 0 },
      ],
    },
    2_000,
  );
  t.match(
    refused,
    { ok: true, results: [{ ok: false, code: 'invalid_op' }] },
    'a change unknown to a replayed entry is not applied',
  );
  t.notOk(m.text('d1')!.includes('Q'));
  t.match(
    run(m, entry('new', 2, 'alice~s2:1', bob.localInsert(1, 'Y')), 2_000),
    { ok: false, code: 'out_of_order' },
    'a new session starts at 1',
  );
  const copy = new CollabMachine();
  copy.restore(m.snapshot());
  t.match(
    copy.apply(entry('s', 4, 'alice~s1:6', alice.localInsert(6, 'g')), { index: ++index, term: 1, time: 2_000 }),
    { ok: true, results: [{ ok: true, revision: 5 }] },
    'sequences survive a snapshot',
  );
  t.match(
    copy.apply(entry('s', 6, 'alice~s1:7', alice.localInsert(7, 'h')), { index: ++index, term: 1, time: 2_000 }),
    { ok: false, code: 'out_of_order' },
  );
  t.throws(
    () =>
      checkCommand({
        op: 'append',
        doc_id: 'd1',
        generation: 1,
        session: 's',
        changes: [{ op_id: 'a:0', author: 'alice', ops: [], parent_revision: 0 }],
      }),
    'session without seq',
  );
  t.throws(
    () =>
      checkCommand({
        op: 'append',
        doc_id: 'd1',
        generation: 1,
        session: 's',
        seq: 0,
        changes: [{ op_id: 'a:0', author: 'alice', ops: [], parent_revision: 0 }],
      }),
    'seq 0',
  );
});

t.test(
  'quota and delete: an owner has at most max_docs documents; a delete removes one and frees its slot',
  async (t) => {
    const m = new CollabMachine();
    for (let i = 0; i < 3; i++)
      t.match(
        run(m, { op: 'create', doc_id: `q${i}`, title: 'T', owner: 'quinn', template: 'x', max_docs: 3 }, 1_000),
        { ok: true, op: 'create' },
      );
    t.match(
      run(m, { op: 'create', doc_id: 'q3', title: 'T', owner: 'quinn', template: null, max_docs: 3 }, 1_000),
      { ok: false, code: 'quota' },
      'the fourth is refused',
    );
    t.match(
      run(m, { op: 'create', doc_id: 'r0', title: 'T', owner: 'rita', template: null, max_docs: 3 }, 1_000),
      { ok: true },
      'other owners are counted apart',
    );
    t.equal(m.ownedBy('quinn'), 3);
    run(m, { op: 'acquire', doc_id: 'q0', worker: 'w1', url: 'http://w1' }, 1_000);
    t.match(
      run(m, { op: 'delete', doc_id: 'q0' }, 1_001),
      { ok: true, op: 'delete', owner: { worker: 'w1' } },
      'the answer names the worker holding it',
    );
    t.equal(m.meta('q0'), null, 'gone');
    t.match(run(m, { op: 'delete', doc_id: 'q0' }, 1_002), { ok: false, code: 'no_such_doc' });
    t.match(
      run(m, { op: 'renew', worker: 'w1', docs: [['q0', 1]] }, 1_002),
      { lost: ['q0'] },
      'its owner learns it is gone',
    );
    t.equal(m.ownedBy('quinn'), 2);
    // The count is derived state: a restored machine counts the same.
    const copy = new CollabMachine();
    copy.restore(m.snapshot());
    t.equal(copy.ownedBy('quinn'), 2);
    t.match(
      run(copy, { op: 'create', doc_id: 'q4', title: 'T', owner: 'quinn', template: null, max_docs: 3 }, 1_003),
      { ok: true },
      'the freed slot takes one',
    );
    t.match(
      run(copy, { op: 'create', doc_id: 'q5', title: 'T', owner: 'quinn', template: null, max_docs: 3 }, 1_003),
      { ok: false, code: 'quota' },
      'and no more',
    );
    t.throws(
      () => checkCommand({ op: 'create', doc_id: 'x', title: 'T', owner: 'quinn', template: null, max_docs: -1 }),
      'a negative quota is not a command',
    );
  },
);
