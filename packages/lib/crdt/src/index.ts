export { Doc } from './doc.js';
export { encodeOps as encodeUpdate, decodeOps as decodeUpdate } from './encoding.js';
export type { AttrValue, Attrs, DeleteOp, FormatOp, Id, InsertOp, Op, Span, StateVector } from './types.js';
export { opLength } from './types.js';
export { checkOp, InvalidOpError } from './validate.js';
export { UndoManager, UNDO_DEPTH } from './undo.js';
export type { Change } from './undo.js';
