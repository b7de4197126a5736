/**
 * Per-user undo and redo over a Doc: only this replica's own changes are undone, never other people's, even after
 * they edited around them. A change is remembered by character ids (which concurrent edits never move), not by
 * indexes, and undoing it is a new forward change (ops like any other), so it merges with concurrent work:
 *
 * - undo of an insert deletes those of its characters still visible (someone else may have deleted some);
 * - undo of a delete inserts the deleted text again, with its attributes, where its tombstones are;
 * - undo of a format sets each formatted piece's previous attribute values back (null where it had none).
 *
 * Each undo pushes its own inverse on the redo stack, and a fresh change clears the redo stack (as editors do).
 */
import type { Doc } from './doc.js';
import type { Attrs, AttrValue, Id, Op, Span } from './types.js';

/** What one user change did, in ids, enough to build its inverse later. */
export type Change =
  | { kind: 'insert'; runs: Array<{ id: Id; length: number }> }
  /** Each piece: its first deleted character (where its tombstones are) and the text with its attributes. */
  | { kind: 'delete'; pieces: Array<{ at: Id; spans: Span[] }> }
  | { kind: 'format'; pieces: Array<{ id: Id; length: number; attrs: Attrs }> };

/** Undo entries kept per user; older ones are forgotten. */
export const UNDO_DEPTH = 500;

export class UndoManager {
  private undoStack: Change[] = [];
  private redoStack: Change[] = [];

  constructor(private readonly doc: Doc) {}

  get canUndo(): boolean {
    return this.undoStack.length > 0;
  }

  get canRedo(): boolean {
    return this.redoStack.length > 0;
  }

  /** An insert at `index` (call after the local insert, with its ops). */
  recordInsert(ops: readonly Op[]): void {
    const runs = ops.flatMap((op) => (op.type === 'insert' ? [{ id: op.id, length: op.text.length }] : []));
    if (runs.length > 0) this.push({ kind: 'insert', runs });
  }

  /** A delete of `length` at `index`: call before deleting (it reads the text about to go). */
  beforeDelete(index: number, length: number): Change | null {
    if (length <= 0) return null;
    return { kind: 'delete', pieces: [{ at: this.doc.charId(index), spans: this.doc.slice(index, length) }] };
  }

  /** A format of `length` at `index` with `attrs`: call before formatting (it reads the values about to change). */
  beforeFormat(index: number, length: number, attrs: Attrs): Change | null {
    if (length <= 0) return null;
    const pieces: Array<{ id: Id; length: number; attrs: Attrs }> = [];
    let at = index;
    for (const span of this.doc.slice(index, length)) {
      const old: Record<string, AttrValue> = {};
      for (const key of Object.keys(attrs)) old[key] = span.attrs[key] ?? null;
      pieces.push({ id: this.doc.charId(at), length: span.text.length, attrs: old });
      at += span.text.length;
    }
    return { kind: 'format', pieces };
  }

  /** Records a change made (from beforeDelete/beforeFormat); clears the redo stack. */
  record(change: Change | null): void {
    if (change !== null) this.push(change);
  }

  /** Undoes this user's last change still undoable: the ops to send (empty when nothing is left to undo). */
  undo(): Op[] {
    while (this.undoStack.length > 0) {
      const change = this.undoStack.pop()!;
      const [ops, inverse] = this.invert(change);
      if (inverse !== null) this.redoStack.push(inverse);
      if (ops.length > 0) return ops;
    }
    return [];
  }

  redo(): Op[] {
    while (this.redoStack.length > 0) {
      const change = this.redoStack.pop()!;
      const [ops, inverse] = this.invert(change);
      if (inverse !== null) this.undoStack.push(inverse);
      if (ops.length > 0) return ops;
    }
    return [];
  }

  private push(change: Change): void {
    this.undoStack.push(change);
    if (this.undoStack.length > UNDO_DEPTH) this.undoStack.shift();
    this.redoStack = [];
  }

  /**
   * Inserts a span back with exactly its attributes: text typed inside someone's formatted range takes that format
   * (Peritext), so whatever the place adds that the span did not have is formatted away in the same change.
   */
  private insertSpan(index: number, span: Span): Op[] {
    const doc = this.doc;
    const attrs = Object.keys(span.attrs).length > 0 ? span.attrs : undefined;
    const ops: Op[] = [...doc.localInsert(index, span.text, attrs)];
    const fix: Record<string, AttrValue> = {};
    for (const got of doc.slice(index, span.text.length)) {
      for (const key of Object.keys(got.attrs))
        if (got.attrs[key] !== (span.attrs[key] ?? null)) fix[key] = span.attrs[key] ?? null;
    }
    if (Object.keys(fix).length > 0) ops.push(...doc.localFormat(index, span.text.length, fix));
    return ops;
  }

  /** Applies the inverse of `change` locally: its ops and the change that would invert it back. */
  private invert(change: Change): [Op[], Change | null] {
    const doc = this.doc;
    if (change.kind === 'insert') {
      // The characters of the insert still visible, as index ranges, deleted from the last one back.
      const ranges: Array<[number, number]> = [];
      for (const run of change.runs) {
        for (let k = 0; k < run.length; k++) {
          const where = doc.indexOf([run.id[0], run.id[1] + k]);
          if (where === null || !where.visible) continue;
          const last = ranges[ranges.length - 1];
          if (last !== undefined && last[0] + last[1] === where.index) last[1]++;
          else ranges.push([where.index, 1]);
        }
      }
      if (ranges.length === 0) return [[], null];
      ranges.sort((a, b) => b[0] - a[0]);
      const ops: Op[] = [];
      const pieces: Array<{ at: Id; spans: Span[] }> = [];
      for (const [index, length] of ranges) {
        pieces.push({ at: doc.charId(index), spans: doc.slice(index, length) });
        ops.push(...doc.localDelete(index, length));
      }
      return [ops, { kind: 'delete', pieces }];
    }
    if (change.kind === 'delete') {
      // Where each piece's tombstones are now; the last place first, so earlier indexes stay right.
      const places = change.pieces
        .map((piece) => ({ piece, where: doc.indexOf(piece.at) }))
        .filter(
          (p): p is { piece: { at: Id; spans: Span[] }; where: { index: number; visible: boolean } } =>
            p.where !== null,
        )
        .sort((x, y) => y.where.index - x.where.index);
      const ops: Op[] = [];
      for (const { piece, where } of places) {
        let index = where.index;
        for (const span of piece.spans) {
          ops.push(...this.insertSpan(index, span));
          index += span.text.length;
        }
      }
      const runs = ops.flatMap((op) => (op.type === 'insert' ? [{ id: op.id, length: op.text.length }] : []));
      return [ops, runs.length > 0 ? { kind: 'insert', runs } : null];
    }
    const ops: Op[] = [];
    const pieces: Array<{ id: Id; length: number; attrs: Attrs }> = [];
    for (const piece of change.pieces) {
      const where = doc.indexOf(piece.id);
      if (where === null || !where.visible) continue;
      const length = Math.min(piece.length, doc.length - where.index);
      const back = this.beforeFormat(where.index, length, piece.attrs);
      if (back?.kind === 'format') pieces.push(...back.pieces);
      ops.push(...doc.localFormat(where.index, length, piece.attrs));
    }
    return [ops, pieces.length > 0 ? { kind: 'format', pieces } : null];
  }
}
