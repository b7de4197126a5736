import t from 'tap';
import { decodeUpdate, Doc, encodeUpdate, InvalidOpError } from '../src/index.js';

t.test('local edits', async (t) => {
  const d = new Doc('a');
  d.localInsert(0, 'hello world');
  d.localDelete(5, 6);
  d.localInsert(5, ', there');
  d.localInsert(0, '>> ');
  t.equal(d.text(), '>> hello, there');
  d.localFormat(3, 5, { bold: true });
  t.same(d.spans(), [
    { text: '>> ', attrs: {} },
    { text: 'hello', attrs: { bold: true } },
    { text: ', there', attrs: {} },
  ]);
  d.localFormat(4, 2, { bold: null, italic: true });
  t.same(d.spans(), [
    { text: '>> ', attrs: {} },
    { text: 'h', attrs: { bold: true } },
    { text: 'el', attrs: { italic: true } },
    { text: 'lo', attrs: { bold: true } },
    { text: ', there', attrs: {} },
  ]);
  t.throws(() => d.localInsert(99, 'x'), RangeError);
  t.throws(() => d.localDelete(10, 99), RangeError);
  t.same(d.stateVector(), {
    a: d.opsSince().reduce((m, op) => Math.max(m, op.id[1] + (op.type === 'insert' ? op.text.length : 1) - 1), -1),
  });
  // One entry of the state vector, read without copying it.
  t.equal(d.lastCounter('a'), d.stateVector()['a']);
  t.equal(d.lastCounter('nobody'), -1);
});

t.test('two replicas: concurrent inserts at one place stay whole, ordered by (Lamport, client)', async (t) => {
  const a = new Doc('a');
  const b = new Doc('b');
  b.apply(a.localInsert(0, '[]'));
  const opsA = [...a.localInsert(1, 'x'), ...a.localInsert(2, 'y'), ...a.localInsert(3, 'z')];
  const opsB = [...b.localInsert(1, '1'), ...b.localInsert(2, '2'), ...b.localInsert(3, '3')];
  a.apply(opsB);
  b.apply(opsA);
  t.equal(a.text(), b.text());
  t.match(a.text(), /^\[(xyz123|123xyz)\]$/);
});

t.test('ops wait for their dependencies and apply once', async (t) => {
  const a = new Doc('a');
  const ops = [
    ...a.localInsert(0, 'abc'),
    ...a.localInsert(1, 'X'),
    ...a.localDelete(0, 1),
    ...a.localFormat(0, 2, { u: true }),
  ];
  const b = new Doc('b');
  b.apply([...ops].reverse());
  t.equal(b.text(), a.text());
  t.equal(b.pendingCount, 0);
  b.apply(ops);
  b.apply(a.opsSince({}));
  t.same(b.spans(), a.spans());
  const half = new Doc('c');
  half.apply(ops.slice(2));
  t.equal(half.text(), '', 'nothing applies before the first op');
  t.equal(half.pendingCount, 2);
  half.apply(ops.slice(0, 2));
  t.same(half.spans(), a.spans());
});

t.test('opsSince trims a run known in part', async (t) => {
  const a = new Doc('a');
  a.localInsert(0, 'ab');
  const b = new Doc('b');
  b.apply(a.opsSince());
  a.localInsert(2, 'cd'); // merged with 'ab' into one logged run
  t.equal(a.opsSince().length, 1, 'consecutive typing is one op in the log');
  const missing = a.opsSince(b.stateVector());
  t.equal(missing.length, 1);
  t.equal(missing[0]!.type === 'insert' && missing[0]!.text, 'cd');
  b.apply(missing);
  t.equal(b.text(), 'abcd');
  b.apply(a.opsSince()); // the whole merged run again: recognised
  t.equal(b.text(), 'abcd');
});

t.test('encoding', async (t) => {
  const a = new Doc('alice');
  a.localInsert(0, 'héllo wörld ✓');
  a.localFormat(0, 5, { bold: true, size: 3, font: 'serif' });
  a.localDelete(2, 3);
  const bytes = a.encode();
  const b = Doc.decode(bytes, 'bob');
  t.same(b.spans(), a.spans());
  t.same(b.stateVector(), a.stateVector());
  t.same(decodeUpdate(encodeUpdate(a.opsSince())), a.opsSince());
  t.throws(() => decodeUpdate(bytes), /not an encoded update/);
  t.throws(() => Doc.decode(bytes.subarray(0, bytes.length - 1), 'x'));
  t.throws(() => decodeUpdate(new Uint8Array([0x55, 1, 0, 1, 0x40])));
});

t.test('invalid ops are refused and change nothing', async (t) => {
  const a = new Doc('a');
  const ops = [...a.localInsert(0, 'abc'), ...a.localFormat(0, 2, { bold: true })];
  const b = new Doc('b');
  b.apply(ops);
  const before = JSON.stringify(b.spans());
  const bad: unknown[] = [
    null,
    { type: 'insert', id: ['a', 99], lamport: 1, left: null, right: null, text: 'x' }, // lamport below the counter
    { type: 'insert', id: ['', 4], lamport: 9, left: null, right: null, text: 'x' },
    { type: 'insert', id: ['a', 4], lamport: 9, left: ['a', 4], right: null, text: 'x' }, // anchored on itself
    { type: 'insert', id: ['a', 4], lamport: 9, left: null, right: null, text: '' },
    { type: 'insert', id: ['a', 4], lamport: 9, left: null, right: null, text: 'x', attrs: { bold: [1] } },
    { type: 'delete', id: ['a', 4], lamport: 9, target: ['a', 0], length: 0 },
    { type: 'format', id: ['a', 4], lamport: 9, start: ['a', 0], end: ['a', 1] },
    { type: 'move', id: ['a', 4], lamport: 9 },
  ];
  for (const op of bad) t.throws(() => b.apply([op as never]), InvalidOpError, JSON.stringify(op));
  // Well formed, but anchored on counter 3, which is a's format op, not a character: dropped.
  t.throws(
    () => b.apply([{ type: 'insert', id: ['c', 0], lamport: 9, left: ['a', 3], right: null, text: 'x' }]),
    InvalidOpError,
  );
  t.throws(() => b.apply([{ type: 'delete', id: ['c', 0], lamport: 9, target: ['a', 1], length: 3 }]), InvalidOpError);
  t.throws(
    () => b.apply([{ type: 'format', id: ['c', 0], lamport: 9, start: ['a', 2], end: ['a', 0], attrs: { i: true } }]),
    InvalidOpError,
    'start after end',
  );
  t.equal(JSON.stringify(b.spans()), before);
  t.same(b.stateVector(), a.stateVector());
  t.equal(b.pendingCount, 0);
});

t.test('backspacing over typed text leaves one tombstone run', async (t) => {
  const d = new Doc('a');
  for (const [i, ch] of [...'hello world'].entries()) d.localInsert(i, ch);
  t.equal(d.runCount, 1);
  for (let i = 11; i > 6; i--) d.localDelete(i - 1, 1);
  t.equal(d.text(), 'hello ');
  t.equal(d.runCount, 2, 'the visible run and one tombstone');
  const r = new Doc('r');
  r.apply(d.opsSince());
  t.equal(r.text(), 'hello ');
  t.equal(r.runCount, 2, 'the same on a replica applying the deletes remotely');
});

t.test('typing inside or beside formatted text still makes one run per typed stretch', async (t) => {
  const d = new Doc('a');
  d.localInsert(0, 'abcdef');
  d.localFormat(1, 3, { bold: true }); // b c d
  const runs = d.runCount;
  for (const [i, ch] of [...'XYZ'].entries()) d.localInsert(3 + i, ch); // inside: after c
  t.equal(d.runCount, runs + 2, 'c is split from d once, XYZ is one run');
  for (const [i, ch] of [...'uvw'].entries()) d.localInsert(7 + i, ch); // right after d, the range's end: outside
  t.same(d.spans(), [
    { text: 'a', attrs: {} },
    { text: 'bcXYZd', attrs: { bold: true } },
    { text: 'uvwef', attrs: {} },
  ]);
  t.equal(d.runCount, runs + 3);
  const r = new Doc('r');
  r.apply(d.opsSince());
  t.same(r.spans(), d.spans());
});

t.test(
  'ties between concurrent inserts at one place go by Lamport stamp, then client id; clocks play no part',
  async (t) => {
    const base = new Doc('base');
    base.localInsert(0, '..');
    // 'z' has seen more (a higher Lamport stamp) than 'a', so its concurrent insert goes after a's despite its id.
    const busy = new Doc('a');
    const z = new Doc('z');
    busy.apply(base.opsSince());
    z.apply(base.opsSince());
    z.localInsert(0, 'q');
    z.localDelete(0, 1); // two more stamps
    const opsZ = z.localInsert(1, 'Z');
    const opsA = busy.localInsert(1, 'A');
    t.ok(opsZ[0]!.lamport > opsA[0]!.lamport);
    for (const order of [
      [...opsA, ...opsZ],
      [...opsZ, ...opsA],
    ]) {
      const d = new Doc('o');
      d.apply([...base.opsSince(), ...z.opsSince(), ...order]);
      t.equal(d.text(), '.AZ.');
    }
    // Equal stamps: the smaller client id first.
    const b1 = new Doc('b1');
    const b2 = new Doc('b2');
    b1.apply(base.opsSince());
    b2.apply(base.opsSince());
    const o1 = b1.localInsert(1, '1');
    const o2 = b2.localInsert(1, '2');
    t.equal(o1[0]!.lamport, o2[0]!.lamport);
    const d = new Doc('o');
    d.apply([...base.opsSince(), ...o2, ...o1]);
    t.equal(d.text(), '.12.');
  },
);
