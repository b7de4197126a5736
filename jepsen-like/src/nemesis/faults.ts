/**
 * The faults a run can inject, as data: what the schedule says to do. Which members a fault hits is decided
 * when it starts (the leader is only known then), from the run's seed.
 */

/** Jepsen's node selections: one member, the leader, a minority, a majority, or every member. */
export type Target = 'one' | 'leader' | 'minority' | 'majority' | 'all';

export type PartitionShape = 'halves' | 'isolate-leader' | 'majority-ring' | 'bridge' | 'one-way';
export type PacketKind = 'latency' | 'loss' | 'reorder';

export type Fault =
  | { nemesis: 'kill'; target: Target }
  /** kill -9, delete the member's data, bring it back empty through a membership change (nemesis/wipe.ts). */
  | { nemesis: 'wipe'; target: Target }
  | { nemesis: 'pause'; target: Target }
  | { nemesis: 'partition'; shape: PartitionShape }
  | { nemesis: 'packet'; kind: PacketKind; target: Target; delayMs: number; jitterMs: number; probability: number }
  | { nemesis: 'clock'; target: Target; offsetMs: number }
  /** No client traffic for longer than the session timeout (nemesis/quiet.ts). */
  | { nemesis: 'quiet' };

export type NemesisName = Fault['nemesis'];

export const NEMESES: readonly NemesisName[] = ['partition', 'kill', 'pause', 'packet', 'clock', 'quiet', 'wipe'];
/**
 * What `all` means: every nemesis but wipe, which is named on its own (its remove-and-add of a member is run
 * against single-group services, kv, lock, shortlink and ratelimit; a process of many groups is left to its own test).
 */
const ALL_NEMESES: readonly NemesisName[] = NEMESES.filter((n) => n !== 'wipe');
export const PARTITION_SHAPES: readonly PartitionShape[] = [
  'halves',
  'isolate-leader',
  'majority-ring',
  'bridge',
  'one-way',
];
export const PACKET_KINDS: readonly PacketKind[] = ['latency', 'loss', 'reorder'];
export const PROCESS_TARGETS: readonly Target[] = ['one', 'leader', 'minority', 'majority'];
/** Wiping a majority loses acknowledged writes by definition (no quorum holds them): a minority at most. */
export const WIPE_TARGETS: readonly Target[] = ['one', 'leader', 'minority'];

/**
 * A nemesis as chosen on the command line: a name and, optionally, the variants it may use
 * (`partition:majority-ring+bridge`, `kill:leader`, `packet:latency`).
 */
export interface NemesisChoice {
  name: NemesisName;
  variants: string[];
}

export class NemesisSpecError extends Error {
  override name = 'NemesisSpecError';
}

/** Parses `--nemesis partition,kill:leader+minority,pause` ("all" = every nemesis; "none" = no faults). */
export function parseNemesisList(text: string): NemesisChoice[] {
  const items = text
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s.length > 0);
  if (items.length === 1 && items[0] === 'none') return [];
  const choices: NemesisChoice[] = [];
  for (const item of items) {
    if (item === 'all') {
      for (const name of ALL_NEMESES) if (!choices.some((c) => c.name === name)) choices.push({ name, variants: [] });
      continue;
    }
    const [name, variantText] = item.split(':') as [string, string | undefined];
    if (!NEMESES.includes(name as NemesisName))
      throw new NemesisSpecError(`unknown nemesis ${JSON.stringify(name)} (known: ${NEMESES.join(', ')}, all, none)`);
    const variants = variantText === undefined ? [] : variantText.split('+').filter((v) => v.length > 0);
    const allowed = variantsOf(name as NemesisName);
    for (const v of variants)
      if (!allowed.includes(v))
        throw new NemesisSpecError(`${name} has no variant ${JSON.stringify(v)} (known: ${allowed.join(', ')})`);
    const existing = choices.find((c) => c.name === name);
    if (existing) existing.variants.push(...variants);
    else choices.push({ name: name as NemesisName, variants });
  }
  return choices;
}

export function variantsOf(name: NemesisName): readonly string[] {
  switch (name) {
    case 'partition':
      return PARTITION_SHAPES;
    case 'packet':
      return PACKET_KINDS;
    case 'kill':
    case 'pause':
      return PROCESS_TARGETS;
    case 'wipe':
      return WIPE_TARGETS;
    case 'clock':
      return ['one', 'leader', 'minority', 'majority', 'all'];
    case 'quiet':
      return [];
  }
}

/** A short human description of a fault, for progress lines and the report. */
export function describeFault(fault: Fault): string {
  switch (fault.nemesis) {
    case 'kill':
      return `kill ${fault.target}`;
    case 'wipe':
      return `wipe ${fault.target}`;
    case 'pause':
      return `pause ${fault.target}`;
    case 'partition':
      return `partition ${fault.shape}`;
    case 'packet':
      return fault.kind === 'latency'
        ? `latency ${fault.delayMs}±${fault.jitterMs} ms on ${fault.target}`
        : fault.kind === 'loss'
          ? `loss ${Math.round(fault.probability * 100)}% on ${fault.target}`
          : `reorder ${Math.round(fault.probability * 100)}% (+${fault.delayMs} ms) on ${fault.target}`;
    case 'clock':
      return `clock ${fault.offsetMs >= 0 ? '+' : ''}${fault.offsetMs} ms on ${fault.target}`;
    case 'quiet':
      return 'quiet';
  }
}
