/** Thrown when an invariant the algorithm relies on does not hold: a bug, never a recoverable condition. */
export class InvariantError extends Error {
  override name = 'InvariantError';
}

export function invariant(condition: boolean, message: string | (() => string)): asserts condition {
  if (!condition) throw new InvariantError(typeof message === 'string' ? message : message());
}
