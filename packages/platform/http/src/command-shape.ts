/**
 * Shape checks for replicated commands, used by every service's state machine before it changes anything.
 *
 * The HTTP layer validates input before it proposes, so a command of the wrong shape can only come from a bug or a
 * forged entry. A machine that meets one throws CommandShapeError before touching its state; the Raft session
 * layer turns that throw into an ApplyError (`apply_failed`) for the proposer, identically on every member and on
 * every replay, and the group goes on. Without these checks such a command either threw halfway through a change
 * or, worse, was applied and left state no read could serve (a `null` key, a NaN deadline).
 */

/** A command that is not one of the machine's commands. */
export class CommandShapeError extends TypeError {
  override name = 'CommandShapeError';
}

/** The fields of a command object, with its `op` one of `ops`. */
export type CommandFields<Op extends string> = Record<string, unknown> & { op: Op };

/** The command as an object whose `op` is one of `ops`; throws CommandShapeError otherwise. */
export function commandOf<Op extends string>(value: unknown, ops: readonly Op[]): CommandFields<Op> {
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new CommandShapeError(`a command is an object, not ${describe(value)}`);
  const op = (value as { op?: unknown }).op;
  if (typeof op !== 'string' || !(ops as readonly string[]).includes(op))
    throw new CommandShapeError(`unknown op ${describe(op)} (expected one of ${ops.join(', ')})`);
  return value as CommandFields<Op>;
}

/** An object field (a nested spec); throws CommandShapeError otherwise. */
export function objectField(fields: Record<string, unknown>, key: string): Record<string, unknown> {
  const v = fields[key];
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw shapeError(fields, key, 'an object', v);
  return v as Record<string, unknown>;
}

/** A string field of at most `maxLength` characters (non-empty unless `minLength` is 0). */
export function stringField(fields: Record<string, unknown>, key: string, maxLength = 1 << 26, minLength = 1): string {
  const v = fields[key];
  if (typeof v !== 'string' || v.length < minLength || v.length > maxLength)
    throw shapeError(fields, key, `a string of ${minLength} to ${maxLength} characters`, v);
  return v;
}

/** A string field, or null. */
export function nullableStringField(
  fields: Record<string, unknown>,
  key: string,
  maxLength = 1 << 26,
  minLength = 0,
): string | null {
  return fields[key] === null ? null : stringField(fields, key, maxLength, minLength);
}

/** A safe integer field in [min, max]. */
export function integerField(
  fields: Record<string, unknown>,
  key: string,
  min = 0,
  max = Number.MAX_SAFE_INTEGER,
): number {
  const v = fields[key];
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < min || v > max)
    throw shapeError(fields, key, `an integer from ${min} to ${max}`, v);
  return v;
}

/** A safe integer field in [min, max], or null. */
export function nullableIntegerField(
  fields: Record<string, unknown>,
  key: string,
  min = 0,
  max = Number.MAX_SAFE_INTEGER,
): number | null {
  return fields[key] === null ? null : integerField(fields, key, min, max);
}

/** A finite number field in [min, max]. */
export function numberField(
  fields: Record<string, unknown>,
  key: string,
  min = -Number.MAX_VALUE,
  max = Number.MAX_VALUE,
): number {
  const v = fields[key];
  if (typeof v !== 'number' || !Number.isFinite(v) || v < min || v > max)
    throw shapeError(fields, key, `a finite number from ${min} to ${max}`, v);
  return v;
}

/** A boolean field. */
export function booleanField(fields: Record<string, unknown>, key: string): boolean {
  const v = fields[key];
  if (typeof v !== 'boolean') throw shapeError(fields, key, 'true or false', v);
  return v;
}

/** An array field of at most `maxItems` items, each checked by `item` (which throws on a bad one). */
export function arrayField<T>(
  fields: Record<string, unknown>,
  key: string,
  item: (value: unknown, at: string) => T,
  maxItems = 1 << 20,
): T[] {
  const v = fields[key];
  if (!Array.isArray(v) || v.length > maxItems)
    throw shapeError(fields, key, `an array of at most ${maxItems} items`, v);
  return v.map((x, i) => item(x, `${key}[${i}]`));
}

/**
 * The `commands` of a batch command: a non-empty array of at most `maxItems` commands, each with an op among `ops`
 * and checked by `check`. Every command is checked before any applies, so a malformed one refuses the whole entry
 * unchanged; the error names the failing item.
 */
export function batchCommandsField<Op extends string>(
  fields: Record<string, unknown>,
  ops: readonly Op[],
  check: (command: CommandFields<Op>) => void,
  maxItems: number,
): CommandFields<Op>[] {
  const commands = arrayField(
    fields,
    'commands',
    (item, at) => {
      const inner = commandOf(item, ops);
      try {
        check(inner);
      } catch (e) {
        throw new CommandShapeError(`${at}: ${(e as Error).message}`);
      }
      return inner;
    },
    maxItems,
  );
  if (commands.length === 0) throw new CommandShapeError('a batch carries at least one command');
  return commands;
}

/** An array of non-empty strings of at most `maxLength` characters. */
export function stringArrayField(
  fields: Record<string, unknown>,
  key: string,
  maxItems = 1 << 20,
  maxLength = 1 << 16,
): string[] {
  return arrayField(
    fields,
    key,
    (x, at) => {
      if (typeof x !== 'string' || x.length === 0 || x.length > maxLength)
        throw new CommandShapeError(
          `${opOf(fields)}.${at}: expected a string of 1 to ${maxLength} characters, got ${describe(x)}`,
        );
      return x;
    },
    maxItems,
  );
}

function shapeError(fields: Record<string, unknown>, key: string, expected: string, got: unknown): CommandShapeError {
  return new CommandShapeError(`${opOf(fields)}.${key}: expected ${expected}, got ${describe(got)}`);
}

function opOf(fields: Record<string, unknown>): string {
  return typeof fields.op === 'string' ? fields.op : 'command';
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'string')
    return value.length > 40 ? `a string of ${value.length} characters` : JSON.stringify(value);
  if (typeof value === 'number') return String(value);
  return typeof value;
}
