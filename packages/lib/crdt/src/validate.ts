import type { Id, Op } from './types.js';

/** An op that can never apply: malformed, or anchored on something that is not an inserted character. */
export class InvalidOpError extends Error {
  constructor(
    message: string,
    readonly op: unknown,
  ) {
    super(message);
    this.name = 'InvalidOpError';
  }
}

const isCounter = (x: unknown): x is number => typeof x === 'number' && Number.isSafeInteger(x) && x >= 0;
const isId = (x: unknown): x is Id =>
  Array.isArray(x) && x.length === 2 && typeof x[0] === 'string' && x[0].length > 0 && isCounter(x[1]);
const isAttrs = (x: unknown): boolean =>
  x !== null &&
  typeof x === 'object' &&
  !Array.isArray(x) &&
  Object.values(x as Record<string, unknown>).every(
    (v) =>
      v === null || typeof v === 'string' || typeof v === 'boolean' || (typeof v === 'number' && Number.isFinite(v)),
  );

/**
 * Checks an op's shape (what a decoder or a JSON message cannot guarantee): ids are (non-empty client, counter),
 * the Lamport stamp is at least the counter (as every replica makes it), anchors of the author's own characters
 * come before the op, inserts carry text, attributes are flat JSON values.
 */
export function checkOp(op: unknown): asserts op is Op {
  const fail = (why: string): never => {
    throw new InvalidOpError(`invalid op: ${why}`, op);
  };
  if (op === null || typeof op !== 'object') fail('not an object');
  const o = op as Record<string, unknown>;
  if (!isId(o.id)) fail('id must be [client, counter]');
  const [c, s] = o.id as Id;
  if (!isCounter(o.lamport) || (o.lamport as number) < s) fail('lamport must be an integer at least the counter');
  const anchor = (x: unknown, name: string, nullable: boolean): void => {
    if (x === null && nullable) return;
    if (!isId(x)) fail(`${name} must be [client, counter]${nullable ? ' or null' : ''}`);
    if ((x as Id)[0] === c && (x as Id)[1] >= s) fail(`${name} names a counter of this op or later`);
  };
  switch (o.type) {
    case 'insert':
      anchor(o.left, 'left', true);
      anchor(o.right, 'right', true);
      if (typeof o.text !== 'string' || o.text.length === 0) fail('text must be a non-empty string');
      if (o.attrs !== undefined && !isAttrs(o.attrs))
        fail('attrs must be an object of strings, numbers, booleans or null');
      break;
    case 'delete':
      anchor(o.target, 'target', false);
      if (!isCounter(o.length) || o.length === 0) fail('length must be a positive integer');
      break;
    case 'format':
      anchor(o.start, 'start', false);
      anchor(o.end, 'end', false);
      if (!isAttrs(o.attrs)) fail('attrs must be an object of strings, numbers, booleans or null');
      break;
    default:
      fail('type must be insert, delete or format');
  }
}
