/** A character's identity: the client that typed it and that client's counter (one count per character or op). */
export type Id = readonly [client: string, seq: number];

/** Formatting attributes; a null value removes the attribute (an "unbold"). Values are JSON. */
export type AttrValue = string | number | boolean | null;
export type Attrs = Readonly<Record<string, AttrValue>>;

/**
 * Inserts `text` (characters seq .. seq+text.length-1 of the client, Lamport lamport .. lamport+len-1)
 * between the characters `left` and `right` (null = document start / end). Each later character of the run
 * has the previous one as its left origin and the same right origin.
 */
export interface InsertOp {
  readonly type: 'insert';
  readonly id: Id;
  readonly lamport: number;
  readonly left: Id | null;
  readonly right: Id | null;
  readonly text: string;
  readonly attrs?: Attrs;
}

/** Tombstones the characters target.seq .. target.seq+length-1 of target's client (one insert run or part of it). */
export interface DeleteOp {
  readonly type: 'delete';
  readonly id: Id;
  readonly lamport: number;
  readonly target: Id;
  readonly length: number;
}

/** Sets `attrs` on every character from `start` to `end` inclusive, including characters inserted concurrently between them. */
export interface FormatOp {
  readonly type: 'format';
  readonly id: Id;
  readonly lamport: number;
  readonly start: Id;
  readonly end: Id;
  readonly attrs: Attrs;
}

export type Op = InsertOp | DeleteOp | FormatOp;

/** client id -> highest counter applied from that client (every lower counter is applied too). */
export type StateVector = Record<string, number>;

/** A run of visible text with the attributes every character of it carries (null-valued attributes omitted). */
export interface Span {
  readonly text: string;
  readonly attrs: Attrs;
}

/** How many counters an op consumes: one per inserted character, one for a delete or a format. */
export function opLength(op: Op): number {
  return op.type === 'insert' ? op.text.length : 1;
}
