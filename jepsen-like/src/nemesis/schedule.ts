/**
 * The fault schedule, drawn from the seed alone, in Jepsen's shape: operations staggered at random intervals
 * (uniform in [0.5, 1.5] x the interval), each one starting a fault of a nemesis not active yet or stopping an
 * active one, chosen at random: the nemeses mix, their faults overlap (at most `maxActive` at once) and there
 * are quiet spells between them. Whatever is still active at the end is stopped there (the final heal). The
 * same seed and options always give the same schedule.
 */
import { Rng } from '../rng.js';
import {
  PACKET_KINDS,
  PARTITION_SHAPES,
  PROCESS_TARGETS,
  variantsOf,
  type Fault,
  type NemesisChoice,
  type PacketKind,
  type PartitionShape,
  type Target,
} from './faults.js';

export interface ScheduledAction {
  /** Milliseconds after the workload starts. */
  at: number;
  action: 'start' | 'stop';
  /** Pairs a start with its stop. */
  id: number;
  fault: Fault;
}

export interface ScheduleOptions {
  seed: number;
  durationMs: number;
  nemeses: readonly NemesisChoice[];
  /** Mean time between two nemesis operations (a start or a stop). */
  intervalMs: number;
  /** Most faults active at once. Default 2. */
  maxActive?: number;
  /** No fault before this (let the workload warm up). Default: half the interval. */
  quietStartMs?: number;
}

export function makeSchedule(options: ScheduleOptions): ScheduledAction[] {
  const actions: ScheduledAction[] = [];
  if (options.nemeses.length === 0) return actions;
  const rng = Rng.derive(options.seed, 'schedule');
  const end = options.durationMs;
  const maxActive = Math.max(1, options.maxActive ?? 2);
  const active: { id: number; choice: NemesisChoice; fault: Fault }[] = [];
  let nextId = 1;
  let t = options.quietStartMs ?? Math.round(options.intervalMs / 2);
  for (;;) {
    const inactive = options.nemeses.filter((choice) => !active.some((a) => a.choice.name === choice.name));
    const canStart =
      inactive.length > 0 && active.length < maxActive && t < end - Math.min(1_000, options.intervalMs / 2);
    const stop = active.length > 0 && (!canStart || rng.chance(0.5));
    if (stop) {
      const [a] = active.splice(rng.int(0, active.length - 1), 1);
      actions.push({ at: Math.min(t, end), action: 'stop', id: a!.id, fault: a!.fault });
    } else if (canStart) {
      const choice = rng.pick(inactive);
      const fault = drawFault(choice, rng);
      const id = nextId++;
      active.push({ id, choice, fault });
      actions.push({ at: t, action: 'start', id, fault });
    }
    if (t >= end && active.length === 0) break;
    t += Math.round(options.intervalMs * rng.between(0.5, 1.5));
    if (t >= end) t = Math.max(t, end);
    if (t > end) {
      // The final heal: everything still active stops at the end.
      for (const a of active.splice(0)) actions.push({ at: end, action: 'stop', id: a.id, fault: a.fault });
      break;
    }
  }
  return actions;
}

function drawFault(choice: NemesisChoice, rng: Rng): Fault {
  const variants = choice.variants.length > 0 ? choice.variants : [...variantsOf(choice.name)];
  switch (choice.name) {
    case 'kill':
    case 'pause':
      return { nemesis: choice.name, target: rng.pick(variants.length > 0 ? (variants as Target[]) : PROCESS_TARGETS) };
    case 'wipe':
      return { nemesis: 'wipe', target: rng.pick(variants as Target[]) };
    case 'partition':
      return {
        nemesis: 'partition',
        shape: rng.pick(variants.length > 0 ? (variants as PartitionShape[]) : PARTITION_SHAPES),
      };
    case 'packet': {
      const kind = rng.pick(variants.length > 0 ? (variants as PacketKind[]) : PACKET_KINDS);
      const target = rng.pick<Target>(['one', 'minority', 'all']);
      if (kind === 'latency') {
        const delayMs = rng.int(2, 30) * 10;
        return {
          nemesis: 'packet',
          kind,
          target,
          delayMs,
          jitterMs: Math.round(delayMs * rng.between(0, 0.5)),
          probability: 1,
        };
      }
      if (kind === 'loss')
        return { nemesis: 'packet', kind, target, delayMs: 0, jitterMs: 0, probability: rng.int(1, 4) / 10 };
      return {
        nemesis: 'packet',
        kind,
        target,
        delayMs: rng.int(2, 10) * 10,
        jitterMs: 0,
        probability: rng.int(2, 5) / 10,
      };
    }
    case 'quiet':
      return { nemesis: 'quiet' };
    case 'clock': {
      const magnitude = rng.pick([250, 1_000, 3_000, 10_000, 30_000]);
      return {
        nemesis: 'clock',
        target: rng.pick(variants as Target[]),
        offsetMs: rng.chance(0.5) ? magnitude : -magnitude,
      };
    }
  }
}
