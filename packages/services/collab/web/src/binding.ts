/**
 * The Quill <-> CRDT binding, pure (no DOM, no socket): Quill's Delta describes a document as text plus attributes
 * with line formats (header, list) on the "\n" ending each line, which is exactly what @raftkit/crdt holds, so the
 * binding is a walk over a change Delta in one direction and a diff of two document Deltas in the other.
 *
 * Quill always ends its document with a "\n" that cannot be deleted; the CRDT document does not hold it (every
 * replica would otherwise insert its own). That trailing newline is virtual: a line format on the last line
 * inserts a real "\n" carrying the format at the end of the CRDT text, and `reconcile` then puts the editor back
 * in step with the document.
 */
import type { Attrs, AttrValue, Span } from '@raftkit/crdt';
import DeltaModule from 'quill-delta';

// quill-delta is CommonJS (module.exports = Delta, and .default = Delta): Node's ESM loader hands the class over
// as the default import, a bundler may hand over the module object; take the class either way.
type DeltaClass = typeof DeltaModule.default;
const moduleValue = DeltaModule as unknown as DeltaClass & { default?: DeltaClass };
export const Delta: DeltaClass = moduleValue.default ?? moduleValue;
export type Delta = InstanceType<DeltaClass>;

/**
 * What the binding edits: a CollabClient (the page), or a bare Doc behind an adapter (the tests). Indexes are
 * visible indexes, as in Quill.
 */
export interface TextModel {
  readonly length: number;
  spans(): Span[];
  insert(index: number, text: string, attrs?: Attrs): void;
  delete(index: number, length: number): void;
  format(index: number, length: number, attrs: Attrs): void;
}

/** Only JSON scalars are attributes in the CRDT; anything else Quill could hold (none of our formats) is dropped. */
function toAttrs(source: Record<string, unknown> | undefined): Attrs | undefined {
  if (source === undefined) return undefined;
  const out: Record<string, AttrValue> = {};
  let any = false;
  for (const [k, v] of Object.entries(source)) {
    if (v === null || typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean') {
      out[k] = v;
      any = true;
    }
  }
  return any ? out : undefined;
}

/**
 * Quill's line formats: they live on the "\n" ending a line and mean nothing on other characters, while inline
 * formats (bold, italic) mean nothing on a newline. The CRDT stores whatever a range format set; the editor is
 * shown only what applies where.
 */
const BLOCK_FORMATS: ReadonlySet<string> = new Set([
  'header',
  'list',
  'blockquote',
  'code-block',
  'align',
  'indent',
  'direction',
]);

function pick(attrs: Attrs, block: boolean): Record<string, AttrValue> | undefined {
  let out: Record<string, AttrValue> | undefined;
  for (const [k, v] of Object.entries(attrs)) {
    if (BLOCK_FORMATS.has(k) !== block) continue;
    (out ??= {})[k] = v;
  }
  return out;
}

/** The editor content a document stands for: its spans (formats where they apply), then Quill's trailing newline. */
export function docDelta(doc: Pick<TextModel, 'spans'>): Delta {
  const d = new Delta();
  for (const span of doc.spans()) {
    for (const piece of span.text.split(/(\n)/)) {
      if (piece.length === 0) continue;
      d.insert(piece, pick(span.attrs, piece === '\n'));
    }
  }
  d.insert('\n');
  return d;
}

/** Attribute keys carried by the characters at `index - 1` and `index` of a document Delta (the editor's content). */
function neighbourKeysIn(content: Delta, index: number): Set<string> {
  const keys = new Set<string>();
  let pos = 0;
  for (const op of content.ops) {
    const len = typeof op.insert === 'string' ? op.insert.length : 1;
    const end = pos + len;
    // The op covers index-1 or index.
    if (end > index - 1 && pos <= index) for (const k of Object.keys(op.attributes ?? {})) keys.add(k);
    if (end > index) break;
    pos = end;
  }
  return keys;
}

/** The same from the document itself (a walk of its spans), when the editor's content is not at hand. */
function neighbourKeys(doc: TextModel, index: number): Set<string> {
  const keys = new Set<string>();
  let pos = 0;
  for (const span of doc.spans()) {
    const end = pos + span.text.length;
    if (end > index - 1 && pos <= index) for (const k of Object.keys(span.attrs)) keys.add(k);
    if (end > index) break;
    pos = end;
  }
  return keys;
}

/**
 * Applies one user change (a Quill text-change Delta, against the content `docDelta(doc)` stood for) to the
 * document as local edits (one edit per Delta operation). `before` is the editor's content before the change (Quill
 * hands it to text-change listeners): the neighbours' attributes are read from it, which costs a walk of its ops
 * instead of the document's spans. Returns true when the document's text may now differ from the editor's (a
 * newline made for the last line's format, an ignored embed, a clamped range): the caller reconciles at once.
 * Attribute-only differences (an inline format Quill does not show on a newline) do not shift indexes.
 *
 * Inserted text gets exactly the attributes Quill gave it: a key the neighbours carry that the insert lacks is
 * sent as null, because the CRDT extends an enclosing format over text typed inside it (right for concurrent
 * typing, wrong when the user turned bold off before typing inside bold text).
 */
export function applyLocalChange(doc: TextModel, change: Delta, before?: Delta): boolean {
  let index = 0;
  // Characters inserted minus deleted so far: maps an index of the changing document back into `before`.
  let shift = 0;
  let differs = false;
  for (const op of change.ops) {
    if (typeof op.retain === 'number') {
      const attrs = toAttrs(op.attributes);
      if (attrs !== undefined) {
        const inDoc = Math.max(0, Math.min(op.retain, doc.length - index));
        if (inDoc > 0) doc.format(index, inDoc, attrs);
        if (inDoc < op.retain) {
          // The retain reaches Quill's virtual trailing newline: a line format on the last line becomes a real
          // newline carrying it (null values mean "remove", which a fresh newline needs no help with; inline
          // formats do not apply to a newline).
          const set = Object.fromEntries(Object.entries(attrs).filter(([k, v]) => v !== null && BLOCK_FORMATS.has(k)));
          if (Object.keys(set).length > 0) {
            doc.insert(doc.length, '\n', set);
            differs = true;
          }
        }
      }
      index += op.retain;
    } else if (typeof op.insert === 'string') {
      if (op.insert.length === 0) continue;
      const at = Math.min(index, doc.length);
      if (at !== index) differs = true;
      const wanted: Record<string, AttrValue> = { ...(toAttrs(op.attributes) ?? {}) };
      const near = before !== undefined ? neighbourKeysIn(before, at - shift) : neighbourKeys(doc, at);
      for (const k of near) if (!(k in wanted)) wanted[k] = null;
      doc.insert(at, op.insert, Object.keys(wanted).length > 0 ? wanted : undefined);
      index = at + op.insert.length;
      shift += op.insert.length;
    } else if (typeof op.delete === 'number') {
      const n = Math.max(0, Math.min(op.delete, doc.length - index));
      if (n > 0) doc.delete(index, n);
      if (n !== op.delete) differs = true;
      shift -= n;
    } else if (op.insert !== undefined) {
      differs = true;
    }
    // Embeds (images, formulas) are not enabled in the page's toolbar: an embed insert is ignored (above), and
    // reconcile takes it out of the editor again.
  }
  return differs;
}

/**
 * The change that takes the editor from the content it showed (`before`) to the document's content after remote
 * ops were applied; also what puts an editor back in step after a local change the document normalised.
 * Returns null when there is nothing to change.
 */
export function reconcile(before: Delta, doc: Pick<TextModel, 'spans'>): { change: Delta; after: Delta } | null {
  const after = docDelta(doc);
  const change = before.diff(after);
  return change.ops.length === 0 ? null : { change, after };
}

/**
 * A remote change's visible edits (CollabClient's `edits`, applied in order) as one Delta on the editor's content:
 * what the page applies instead of diffing the whole document. Formats shown where they apply, as docDelta does.
 */
export function editsDelta(
  edits: ReadonlyArray<{ index: number; insert: string; attrs?: Attrs } | { index: number; delete: number }>,
): Delta {
  let change = new Delta();
  for (const e of edits) {
    const step = new Delta().retain(e.index);
    if ('delete' in e) step.delete(e.delete);
    else {
      for (const piece of e.insert.split(/(\n)/)) {
        if (piece.length > 0) step.insert(piece, e.attrs === undefined ? undefined : pick(e.attrs, piece === '\n'));
      }
    }
    change = change.compose(step);
  }
  return change;
}
