/** Per-user undo: only the user's own changes, located by character ids, undone as new forward ops. */
import t from 'tap';
import { Doc, UndoManager, type Op } from '../src/index.js';

function pair(): { a: Doc; b: Doc; ua: UndoManager; sync: () => void } {
  const a = new Doc('alice');
  const b = new Doc('bob');
  const sync = (): void => {
    b.apply(a.opsSince(b.stateVector()));
    a.apply(b.opsSince(a.stateVector()));
  };
  return { a, b, ua: new UndoManager(a), sync };
}

t.test("undo of an insert removes only that user's text, after others edited around it", async (t) => {
  const { a, b, ua, sync } = pair();
  b.localInsert(0, '[]');
  sync();
  ua.recordInsert(a.localInsert(1, 'mine'));
  sync();
  b.localInsert(0, 'B>');
  b.localInsert(b.length, '<B');
  b.localInsert(5, '|'); // inside alice's word
  sync();
  t.equal(a.text(), 'B>[mi|ne]<B');
  const ops: Op[] = ua.undo();
  t.ok(ops.length > 0);
  b.apply(ops);
  t.equal(a.text(), 'B>[|]<B', "bob's text stays");
  t.equal(b.text(), a.text());
  b.apply(ua.redo());
  t.equal(a.text(), b.text());
  t.equal(a.text(), 'B>[mi|ne]<B', "redo brings the word back around bob's character");
  t.same(ua.undo().length > 0, true, 'undo again after redo');
  t.equal(a.text(), 'B>[|]<B');
});

t.test('undo of a delete puts the text back, with its formatting; undo of a format restores values', async (t) => {
  const { a, b, ua, sync } = pair();
  a.localInsert(0, 'hello world');
  a.localFormat(0, 5, { bold: true });
  sync();
  ua.record(ua.beforeDelete(3, 5));
  a.localDelete(3, 5);
  b.localInsert(0, '>');
  sync();
  t.equal(a.text(), '>helrld');
  b.apply(ua.undo());
  t.equal(a.text(), '>hello world');
  t.same(a.spans(), b.spans());
  t.same(a.spans()[1], { text: 'hello', attrs: { bold: true } });
  ua.record(ua.beforeFormat(1, 11, { italic: true, bold: null }));
  a.localFormat(1, 11, { italic: true, bold: null });
  b.apply(a.opsSince(b.stateVector()));
  t.same(a.spans(), [
    { text: '>', attrs: {} },
    { text: 'hello world', attrs: { italic: true } },
  ]);
  b.apply(ua.undo());
  t.same(a.spans(), [
    { text: '>', attrs: {} },
    { text: 'hello', attrs: { bold: true } },
    { text: ' world', attrs: {} },
  ]);
  t.same(b.spans(), a.spans());
  t.ok(ua.canRedo, "the format can be redone (the delete's redo was cleared by the new change)");
  t.same(ua.undo(), [], 'nothing left');
});

t.test('indexOf and charId', async (t) => {
  const d = new Doc('x');
  d.localInsert(0, 'abc');
  const id = d.charId(1);
  t.same(id, ['x', 1]);
  t.same(d.indexOf(id), { index: 1, visible: true });
  d.localDelete(0, 2);
  t.same(d.indexOf(id), { index: 0, visible: false });
  t.equal(d.indexOf(['nobody', 0]), null);
  t.same(d.slice(0, 1), [{ text: 'c', attrs: {} }]);
});
