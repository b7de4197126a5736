/**
 * Remote ops as the visible edits they make (index-based, in the order to apply), so an editor page can apply a
 * remote keystroke directly instead of diffing the whole document (60-80 ms at 100K characters). Only plain
 * changes get edits: inserts only, or deletes only (up to MAX_EDIT_DELETES characters); anything else (formats, a
 * paste over a selection, ops the replica drops) answers null and the page falls back to its diff.
 */
import { type Doc, InvalidOpError, opLength, type Attrs, type Op } from '@raftkit/crdt';

export type Edit = { index: number; insert: string; attrs?: Attrs } | { index: number; delete: number };

/** Deleted characters located one by one (each a walk over the document's chunks): beyond this, the diff is cheaper. */
export const MAX_EDIT_DELETES = 64;

/**
 * Applies `ops` to `doc` (a replica: ops it holds already are skipped by the CRDT) and returns the visible edits
 * they made, or null when they are not a plain change (the ops are applied all the same).
 */
export function applyWithEdits(doc: Doc, ops: readonly Op[]): Edit[] | null {
  const sv = doc.stateVector();
  const have = (op: Op): number => sv[op.id[0]] ?? -1;
  // Ops the replica already holds change nothing; one it holds in part is not a plain change.
  const fresh = ops.filter((op) => op.id[1] + opLength(op) - 1 > have(op));
  if (fresh.length === 0) return [];
  let plain =
    fresh.every((op) => op.id[1] > have(op)) &&
    (fresh.every((op) => op.type === 'insert') || fresh.every((op) => op.type === 'delete'));
  let deletes: number[] = [];
  if (plain && fresh[0]!.type === 'delete') {
    if (fresh.reduce((n, op) => n + (op.type === 'delete' ? op.length : 0), 0) > MAX_EDIT_DELETES) plain = false;
    else {
      for (const op of fresh) {
        if (op.type !== 'delete') continue;
        for (let k = 0; k < op.length; k++) {
          const at = doc.indexOf([op.target[0], op.target[1] + k]);
          if (at === null) plain = false;
          else if (at.visible) deletes.push(at.index);
        }
      }
    }
  }
  try {
    doc.apply(ops);
  } catch (error) {
    if (!(error instanceof InvalidOpError)) throw error;
    return null;
  }
  if (!plain) return null;
  if (fresh[0]!.type === 'delete') {
    // Highest first, so each edit's index holds whatever the previous ones removed; runs merged.
    deletes = [...new Set(deletes)].sort((a, b) => b - a);
    const edits: Edit[] = [];
    for (let i = 0; i < deletes.length; ) {
      let j = i;
      while (j + 1 < deletes.length && deletes[j + 1] === deletes[j]! - 1) j++;
      edits.push({ index: deletes[j]!, delete: j - i + 1 });
      i = j + 1;
    }
    return edits;
  }
  // Inserts at their final places, lowest first: each lands after the ones placed before it.
  const edits: Array<Edit & { insert: string }> = [];
  for (const op of fresh) {
    if (op.type !== 'insert') continue;
    const at = doc.indexOf(op.id);
    if (at === null || !at.visible) return null;
    // Formats as the document holds them (an insert inside a formatted range takes the range's format).
    let index = at.index;
    for (const span of doc.slice(at.index, op.text.length)) {
      edits.push({ index, insert: span.text, ...(Object.keys(span.attrs).length > 0 ? { attrs: span.attrs } : {}) });
      index += span.text.length;
    }
  }
  return edits.sort((a, b) => a.index - b.index);
}
