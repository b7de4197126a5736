import type { ClusterUnderTest } from '../cluster.js';
import type { Network } from '../net/network.js';
import type { Rng } from '../rng.js';
import type { Fault, Target } from './faults.js';
import type { TrafficGate } from './traffic.js';

/** What a nemesis acts on. */
export interface NemesisContext {
  cluster: ClusterUnderTest;
  network: Network;
  /** Runtime choices (which members), derived from the run's seed. */
  rng: Rng;
  /** The clients' operations pass through it: the quiet nemesis holds it. */
  traffic: TrafficGate;
  say: (line: string) => void;
}

/** A fault that has started: what it hit, so that stopping it undoes exactly that. */
export interface ActiveFault {
  id: number;
  fault: Fault;
  /** Members hit. */
  targets: string[];
  /** Extra detail for the history and the report (e.g. the cut links). */
  detail: Record<string, unknown>;
  description: string;
}

export interface NemesisHandler {
  start(id: number, fault: Fault, ctx: NemesisContext, others: readonly ActiveFault[]): Promise<ActiveFault>;
  stop(active: ActiveFault, ctx: NemesisContext, others: readonly ActiveFault[]): Promise<Record<string, unknown>>;
  /** The final heal's last step, once every link is restored and every member resumed: undo what stop could not. */
  heal?(ctx: NemesisContext): Promise<void>;
}

/** Resolves a Jepsen node selection to member ids, from `candidates` (e.g. the running members). */
export async function resolveTarget(
  target: Target,
  candidates: readonly string[],
  ctx: NemesisContext,
): Promise<string[]> {
  const all = ctx.cluster.ids;
  const pool = candidates.length > 0 ? [...candidates] : [];
  if (pool.length === 0) return [];
  switch (target) {
    case 'one':
      return [ctx.rng.pick(pool)];
    case 'leader': {
      const leader = await ctx.cluster.leader();
      return [leader !== null && pool.includes(leader) ? leader : ctx.rng.pick(pool)];
    }
    case 'minority':
      return ctx.rng
        .shuffle(pool)
        .slice(0, Math.max(1, Math.floor((all.length - 1) / 2)))
        .sort();
    case 'majority':
      return ctx.rng
        .shuffle(pool)
        .slice(0, Math.floor(all.length / 2) + 1)
        .sort();
    case 'all':
      return pool.sort();
  }
}

/**
 * One of the workload's fault-target workers (e.g. a rate limiter's counter store) among `candidates`, or none when
 * the workload names no such role. The process nemeses hit it besides the members they picked.
 */
export function pickWorker(candidates: readonly string[], ctx: NemesisContext): string[] {
  return candidates.length > 0 ? [ctx.rng.pick([...candidates])] : [];
}

/** The members among a fault's targets (the rest are workers). */
export function memberTargets(targets: readonly string[], ctx: NemesisContext): string[] {
  return targets.filter((t) => ctx.cluster.ids.includes(t));
}

/** The workers among a fault's targets. */
export function workerTargets(targets: readonly string[], ctx: NemesisContext): string[] {
  return targets.filter((t) => !ctx.cluster.ids.includes(t));
}
