/** A log line the parser does not understand, with its 1-based line number. */
export class ParseError extends Error {
  override readonly name = 'ParseError';

  constructor(
    readonly lineNumber: number,
    readonly line: string,
    reason: string,
  ) {
    super(`line ${lineNumber}: ${reason}: ${line}`);
  }
}
