/**
 * The property every service's state machine must have against malformed commands (a bug or a forged entry):
 * apply either accepts the command or throws CommandShapeError having changed nothing. Any other throw, or a
 * change of state before the throw, fails. Commands are drawn as valid ones with one field replaced by an
 * arbitrary value or removed, and as arbitrary values.
 */
import fc from 'fast-check';

/** What the property needs of a machine: apply, and its state as bytes to compare. */
export interface ShapedMachine {
  apply(command: never, context: { index: number; term: number; time: number }): unknown;
  snapshot(): Uint8Array;
}

export interface CommandShapeCheck {
  /** A machine in some state worth protecting (sessions, links, rules already applied). */
  make: () => ShapedMachine;
  /** Valid commands of every op, to start from. */
  valid: ReadonlyArray<Record<string, unknown>>;
  /** Commands that must be refused (hand-picked cases). */
  malformed: readonly unknown[];
  runs?: number;
}

export interface ShapeOutcome {
  /** Drawn commands refused with CommandShapeError, state unchanged. */
  refused: number;
  /** Drawn commands the machine accepted (a replacement that happened to be valid). */
  accepted: number;
  /** The first violation: what was applied and what went wrong; null when none. */
  violation: string | null;
}

const ctx = { index: 1_000_000, term: 9, time: 1_700_000_000_000 };

function tryApply(make: () => ShapedMachine, command: unknown): 'refused' | 'accepted' | string {
  const machine = make();
  const before = Buffer.from(machine.snapshot());
  try {
    machine.apply(command as never, ctx);
    return 'accepted';
  } catch (error) {
    const name = (error as Error)?.name;
    if (name !== 'CommandShapeError') return `threw ${name}: ${(error as Error)?.message} on ${safeJson(command)}`;
    if (!before.equals(Buffer.from(machine.snapshot()))) return `state changed before refusing ${safeJson(command)}`;
    return 'refused';
  }
}

/** Runs the property; the caller asserts on the outcome (violation null, refused > 0). */
export function checkCommandShapes(check: CommandShapeCheck): ShapeOutcome {
  const outcome: ShapeOutcome = { refused: 0, accepted: 0, violation: null };
  const note = (result: string): boolean => {
    if (result === 'refused') outcome.refused++;
    else if (result === 'accepted') outcome.accepted++;
    else if (outcome.violation === null) outcome.violation = result;
    return result === 'refused' || result === 'accepted';
  };
  for (const command of check.malformed) {
    const result = tryApply(check.make, command);
    if (result !== 'refused' && outcome.violation === null)
      outcome.violation = result === 'accepted' ? `accepted ${safeJson(command)}` : result;
    if (result === 'refused') outcome.refused++;
  }
  const mutated = fc
    .tuple(fc.constantFrom(...check.valid), fc.nat(), fc.option(fc.anything(), { nil: undefined }))
    .map(([valid, pick, value]) => {
      const keys = Object.keys(valid).filter((k) => k !== 'op');
      if (keys.length === 0) return { ...valid, extra: value };
      const key = keys[pick % keys.length]!;
      const copy: Record<string, unknown> = { ...valid };
      if (value === undefined) delete copy[key];
      else copy[key] = value;
      return copy;
    });
  const command = fc.oneof(mutated, fc.anything(), fc.record({ op: fc.constantFrom(...check.valid.map((v) => v.op)) }));
  try {
    fc.assert(
      fc.property(command, (c) => note(tryApply(check.make, c))),
      { numRuns: check.runs ?? 500, seed: 424242 },
    );
  } catch {
    // The violation was recorded by note(); fast-check's shrunk report adds nothing the caller needs.
  }
  return outcome;
}

function safeJson(value: unknown): string {
  try {
    const text = JSON.stringify(value, (_k, v: unknown) => (typeof v === 'bigint' ? `${v}n` : v));
    return text === undefined ? String(value) : text.slice(0, 300);
  } catch {
    return String(value);
  }
}
