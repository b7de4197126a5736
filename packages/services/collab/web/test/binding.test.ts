// The Quill <-> CRDT binding without a browser: each "editor" is the Delta content Quill would show, changed by
// the Deltas Quill's text-change event reports; ops travel between replicas like the server relays them.
import t, { type Test } from 'tap';
import fc from 'fast-check';
import { isDeepStrictEqual } from 'node:util';
import { Doc, type Attrs, type Op } from '@raftkit/crdt';
import { applyWithEdits } from '@raftkit/collab/core';
import { applyLocalChange, Delta, docDelta, editsDelta, reconcile, type TextModel } from '../src/binding.js';

/** A Doc as the binding's TextModel (CollabClient's editing calls), collecting the ops a change made. */
class DocModel implements TextModel {
  ops: Op[] = [];
  constructor(readonly doc: Doc) {}
  get length(): number {
    return this.doc.length;
  }
  spans() {
    return this.doc.spans();
  }
  insert(index: number, text: string, attrs?: Attrs): void {
    this.ops.push(...this.doc.localInsert(index, text, attrs));
  }
  delete(index: number, length: number): void {
    this.ops.push(...this.doc.localDelete(index, length));
  }
  format(index: number, length: number, attrs: Attrs): void {
    this.ops.push(...this.doc.localFormat(index, length, attrs));
  }
}

class Editor {
  readonly doc: Doc;
  private readonly model: DocModel;
  content: Delta = new Delta().insert('\n');
  constructor(id: string) {
    this.doc = new Doc(id);
    this.model = new DocModel(this.doc);
  }
  /** Set when a change reported "same text" but the texts differed (the page would then skip reconciling). */
  missedDifference = false;
  /** What the page does on a user's text-change: edit the model, then show what the document holds. */
  user(change: Delta): Op[] {
    const before = this.content;
    this.content = this.content.compose(change);
    this.model.ops = [];
    const differs = applyLocalChange(this.model, change, before);
    if (!differs && plain(this.content) !== this.doc.text() + '\n') this.missedDifference = true;
    const fix = reconcile(this.content, this.doc);
    if (fix !== null) this.content = this.content.compose(fix.change);
    return this.model.ops;
  }
  /** What the page does on a remote change: show the document's content, moving only what changed. */
  remote(ops: readonly Op[]): void {
    this.doc.apply(ops);
    const r = reconcile(this.content, this.doc);
    if (r !== null) this.content = this.content.compose(r.change);
  }
}

const plain = (d: Delta): string => d.ops.map((o) => (typeof o.insert === 'string' ? o.insert : '')).join('');
const same = (t: Test, e: Editor, msg: string) => t.same(e.content.ops, docDelta(e.doc).ops, msg);

t.test('typing, bold, italic, headings and lists travel to another editor', async (t) => {
  const a = new Editor('a');
  const b = new Editor('b');
  const send = (ops: Op[]) => b.remote(ops);
  send(a.user(new Delta().insert('Title\nhello world\nitem one\nitem two')));
  send(a.user(new Delta().retain(5).retain(1, { header: 1 })));
  send(a.user(new Delta().retain(6).retain(5, { bold: true }).retain(1).retain(5, { italic: true })));
  send(a.user(new Delta().retain(18 + 8).retain(1, { list: 'bullet' })));
  // The last line has no newline in the CRDT: its list format creates one.
  send(a.user(new Delta().retain(35).retain(1, { list: 'bullet' })));
  send(a.user(new Delta().retain(6).delete(6)));
  same(t, a, 'editor a shows its document');
  same(t, b, 'editor b shows its document');
  t.same(b.content.ops, a.content.ops, 'both show the same content');
  t.same(a.content.ops, [
    { insert: 'Title' },
    { insert: '\n', attributes: { header: 1 } },
    { insert: 'world', attributes: { italic: true } },
    { insert: '\nitem one' },
    { insert: '\n', attributes: { list: 'bullet' } },
    { insert: 'item two' },
    { insert: '\n', attributes: { list: 'bullet' } },
    { insert: '\n' },
  ]);
});

t.test('typing unbolded text inside bold text stays plain', async (t) => {
  const a = new Editor('a');
  a.user(new Delta().insert('abcd'));
  a.user(new Delta().retain(4, { bold: true }));
  a.user(new Delta().retain(2).insert('X'));
  t.same(a.content.ops, [
    { insert: 'ab', attributes: { bold: true } },
    { insert: 'X' },
    { insert: 'cd', attributes: { bold: true } },
    { insert: '\n' },
  ]);
  same(t, a, 'editor matches the document');
});

t.test('a remote change keeps both editors equal to their documents under concurrency', async (t) => {
  const a = new Editor('a');
  const b = new Editor('b');
  b.remote(a.user(new Delta().insert('abcd')));
  const fromA = a.user(new Delta().retain(1).retain(2, { bold: true }));
  const fromB = b.user(new Delta().retain(2).insert('X').retain(1).insert('Y'));
  a.remote(fromB);
  b.remote(fromA);
  t.same(a.content.ops, b.content.ops, 'converged');
  same(t, a, 'a matches');
  t.same(
    a.content.ops,
    [{ insert: 'a' }, { insert: 'bXc', attributes: { bold: true } }, { insert: 'Yd\n' }],
    'the concurrent X inside the bold range is bold, the Y after it is not',
  );
});

t.test('the change reports when the texts may differ', async (t) => {
  const a = new Editor('a');
  a.user(new Delta().insert('abc'));
  const model = {
    length: 3,
    spans: () => [{ text: 'abc', attrs: {} }],
    insert: () => undefined,
    delete: () => undefined,
    format: () => undefined,
  };
  t.equal(applyLocalChange(model, new Delta().retain(2).insert('x'), a.content), false, 'plain typing: same text');
  t.equal(
    applyLocalChange(model, new Delta().retain(3).retain(1, { header: 1 }), a.content),
    true,
    'a heading on the last line makes a newline',
  );
  t.equal(
    applyLocalChange(model, new Delta().retain(1).insert({ image: 'x' }), a.content),
    true,
    'an embed is not taken',
  );
});

// Random user changes of the kinds the toolbar makes, on 2-3 editors, with random deliveries.
export type Action =
  | { kind: 'insert'; who: number; at: number; text: string; bold: boolean }
  | { kind: 'delete'; who: number; at: number; len: number }
  | { kind: 'format'; who: number; at: number; len: number; attrs: Record<string, unknown> }
  | { kind: 'deliver'; who: number };

const action = fc.oneof(
  fc.record({
    kind: fc.constant('insert' as const),
    who: fc.nat(2),
    at: fc.nat(60),
    text: fc.constantFrom('x', 'yz', 'hello', '\n', 'a\nb'),
    bold: fc.boolean(),
  }),
  fc.record({
    kind: fc.constant('delete' as const),
    who: fc.nat(2),
    at: fc.nat(60),
    len: fc.integer({ min: 1, max: 5 }),
  }),
  fc.record({
    kind: fc.constant('format' as const),
    who: fc.nat(2),
    at: fc.nat(60),
    len: fc.integer({ min: 1, max: 8 }),
    attrs: fc.constantFrom<Record<string, unknown>>(
      { bold: true },
      { bold: null },
      { italic: true },
      { header: 1 },
      { header: null },
      { list: 'ordered' },
    ),
  }),
  fc.record({ kind: fc.constant('deliver' as const), who: fc.nat(2) }),
);

t.test('random edits: every editor shows its document and all converge', async (t) => {
  fc.assert(
    fc.property(fc.integer({ min: 2, max: 3 }), fc.array(action, { maxLength: 40 }), (n, actions) => {
      const editors = Array.from({ length: n }, (_, i) => new Editor(`c${i}`));
      const log: Op[][] = [];
      const seen = editors.map(() => 0);
      const deliver = (i: number) => {
        for (; seen[i]! < log.length; seen[i]!++) editors[i]!.remote(log[seen[i]!]!);
      };
      for (const act of actions) {
        const i = act.who % n;
        const e = editors[i]!;
        const len = e.content.length(); // includes the trailing newline
        let change: Delta;
        if (act.kind === 'deliver') {
          deliver(i);
          continue;
        } else if (act.kind === 'insert') {
          change = new Delta().retain(act.at % len).insert(act.text, act.bold ? { bold: true } : undefined);
        } else if (act.kind === 'delete') {
          if (len <= 1) continue;
          const at = act.at % (len - 1);
          change = new Delta().retain(at).delete(Math.min(act.len, len - 1 - at));
        } else {
          const at = act.at % len;
          change = new Delta().retain(at).retain(Math.min(act.len, len - at), act.attrs as never);
        }
        const ops = e.user(change);
        if (ops.length > 0) log.push(ops);
        if (!isDeepStrictEqual(e.content.ops, docDelta(e.doc).ops) || e.missedDifference) return false;
      }
      editors.forEach((_, i) => deliver(i));
      const first = editors[0]!.content.ops;
      return editors.every(
        (e) => isDeepStrictEqual(e.content.ops, first) && isDeepStrictEqual(docDelta(e.doc).ops, first),
      );
    }),
    { numRuns: 300 },
  );
  t.pass('300 random sessions converged with every editor showing its document');
});

t.test(
  'remote changes as edits: applied to the editor they give the document, a diff only when not plain',
  async (t) => {
    let plain = 0;
    let total = 0;
    const change = fc.oneof(
      fc.record({
        kind: fc.constant('insert' as const),
        at: fc.nat(),
        text: fc.constantFrom('a', 'bc', 'x\ny', '\n', 'hello '),
        bold: fc.boolean(),
      }),
      fc.record({ kind: fc.constant('delete' as const), at: fc.nat(), n: fc.integer({ min: 1, max: 80 }) }),
      fc.record({ kind: fc.constant('format' as const), at: fc.nat(), n: fc.integer({ min: 1, max: 5 }) }),
      fc.record({ kind: fc.constant('replace' as const), at: fc.nat(), n: fc.integer({ min: 1, max: 3 }) }),
    );
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.nat({ max: 1 }), change), { maxLength: 40 }), (script) => {
        // Two writers; the reader's replica gets their changes, sometimes a change twice (a replay).
        const writers = [new Doc('w1'), new Doc('w2')];
        const reader = new Doc('r');
        let shown = docDelta(reader);
        for (const [w, c] of script) {
          const doc = writers[w]!;
          const at = doc.length === 0 ? 0 : c.at % (doc.length + 1);
          let ops: Op[] = [];
          if (c.kind === 'insert') ops = doc.localInsert(at, c.text, c.bold ? { bold: true } : undefined);
          else if (doc.length > 0 && at < doc.length) {
            const n = Math.min(c.n, doc.length - at);
            if (c.kind === 'delete') ops = doc.localDelete(at, n);
            else if (c.kind === 'format') ops = doc.localFormat(at, n, { italic: true });
            else ops = [...doc.localDelete(at, n), ...doc.localInsert(at, 'R')];
          }
          if (ops.length === 0) continue;
          writers[1 - w]!.apply(ops);
          total++;
          const edits = applyWithEdits(reader, ops);
          if (edits !== null) {
            plain++;
            shown = shown.compose(editsDelta(edits));
          } else {
            shown = reconcile(shown, reader)?.after ?? shown;
          }
          if (!isDeepStrictEqual(shown.ops, docDelta(reader).ops)) return false;
          if (c.kind === 'insert' && applyWithEdits(reader, ops)?.length !== 0) return false; // a replay changes nothing
        }
        return reader.text() === writers[0]!.text();
      }),
      { numRuns: 300 },
    );
    t.ok(plain > total / 3, `${plain} of ${total} remote changes applied as edits (the rest by the diff)`);
  },
);
