/**
 * The pure parts of `npx bench groups`: where groups live, how the in-flight proposals are split between the active
 * groups, when every group has a leader, and which goals a run met. Tested without processes (test/groups.test.ts).
 */
import type { Goal } from '../benchmark.js';

export interface Placement {
  name: string;
  members: string[];
}

/** Group i on processes i, i+1, i+2 (mod the process count): each process holds 3/n of the groups. */
export function placeGroups(count: number, ids: string[], replicas = 3): Placement[] {
  return Array.from({ length: count }, (_, i) => ({
    name: `g${i}`,
    members: Array.from({ length: replicas }, (_, k) => ids[(i + k) % ids.length]!),
  }));
}

/**
 * `total` in-flight proposals split over `groups` active groups as evenly as possible, at least one each: the
 * same offered load whatever the number of groups, so a gain with more groups is the system's, not the load's.
 */
export function splitWorkers(total: number, groups: number): number[] {
  const base = Math.floor(total / groups);
  const extra = total % groups;
  return Array.from({ length: groups }, (_, i) => Math.max(1, base + (i < extra ? 1 : 0)));
}

/** One process's view of one group: [name, term, role, leader, quiesced]. */
export type GroupView = [string, number, string, string | null, boolean];

/**
 * Groups without a leader, judged from the live processes' views: a group has a leader when a live process says
 * it leads it in a term no live member has gone past (a deposed leader that has not heard yet does not count).
 */
export function groupsWithoutLeader(views: Map<string, GroupView[]>, groups: string[]): string[] {
  const maxTerm = new Map<string, number>();
  const leading = new Map<string, number>();
  for (const list of views.values()) {
    for (const [name, term, role] of list) {
      maxTerm.set(name, Math.max(maxTerm.get(name) ?? 0, term));
      if (role === 'leader') leading.set(name, Math.max(leading.get(name) ?? -1, term));
    }
  }
  return groups.filter((g) => {
    const t = leading.get(g);
    return t === undefined || t < (maxTerm.get(g) ?? 0);
  });
}

/** Leaders per process, from the processes' own views. */
export function leadersPerProcess(views: Map<string, GroupView[]>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [id, list] of views) out[id] = list.filter((v) => v[2] === 'leader').length;
  return out;
}

/**
 * How far the busiest or idlest process is from an even share of the leaders, as a fraction of that share
 * (0.1: within 10% of even). `groups` is the number of groups, `processes` the processes that may lead them.
 */
export function spreadOff(leaders: Record<string, number>, groups: number, processes: number): number {
  const even = groups / processes;
  const counts = Object.values(leaders);
  while (counts.length < processes) counts.push(0);
  return Math.max(...counts.map((n) => Math.abs(n - even) / even));
}

export interface GroupsFigures {
  /** Per process, % of one core, quiescence on. */
  idle_quiesced_pct: Record<string, number>;
  idle_active_pct: Record<string, number>;
  /** Active groups -> committed proposals/s. */
  proposals_per_s: Record<string, number>;
  /** Seconds from SIGKILL until every group had a leader (null: not within the wait). */
  failover_s: number | null;
  failover_wait_s: number;
  /** Active groups -> server CPU (all processes) per committed proposal, in microseconds. */
  cpu_us_per_proposal?: Record<string, number | null>;
  /** Leaders per process once creation settled, and after the killed process was started again (absent: not measured). */
  leaders_after_creation?: Record<string, number>;
  leaders_after_restart?: Record<string, number>;
  /** Groups and processes, for the spread goal. */
  groups?: number;
  processes?: number;
}

const IDLE_GOAL_PCT = 1;
const SCALE_GOAL = 1.0;
const SCALE_10_GOAL = 1.2;
const FAILOVER_GOAL_S = 5;
const SPREAD_GOAL = 0.1;

export function groupsGoals(f: GroupsFigures): Goal[] {
  const idle = Object.values(f.idle_quiesced_pct);
  const worst = idle.length === 0 ? Infinity : Math.max(...idle);
  const one = f.proposals_per_s['1'] ?? 0;
  const hundred = f.proposals_per_s['100'] ?? 0;
  const ten = f.proposals_per_s['10'] ?? 0;
  const scale = one > 0 ? hundred / one : 0;
  const scale10 = one > 0 ? ten / one : 0;
  const cpu = (k: string): string => {
    const us = f.cpu_us_per_proposal?.[k];
    return us === null || us === undefined ? '' : `, ${us} µs CPU a proposal`;
  };
  const spread = (when: string, leaders: Record<string, number> | undefined): Goal => {
    const off = leaders === undefined ? Infinity : spreadOff(leaders, f.groups ?? 1000, f.processes ?? 5);
    return {
      goal: `leaders within ${SPREAD_GOAL * 100}% of even per process ${when}, with no balance run`,
      met: off <= SPREAD_GOAL,
      detail:
        leaders === undefined
          ? 'not measured'
          : `${Object.values(leaders).join(' / ')} (${(off * 100).toFixed(1)}% off even at worst)`,
    };
  };
  return [
    {
      goal: `idle CPU under ${IDLE_GOAL_PCT}% of a core per process with 1,000 quiesced groups`,
      met: worst < IDLE_GOAL_PCT,
      detail: `busiest process ${worst.toFixed(2)}% (quiescence off: ${Math.max(...Object.values(f.idle_active_pct), 0).toFixed(2)}%)`,
    },
    {
      goal: `100 active groups at least ${SCALE_GOAL.toFixed(1)}x the proposals/s of one`,
      met: scale >= SCALE_GOAL,
      detail: `${Math.round(hundred)}${cpu('100')} vs ${Math.round(one)} proposals/s${cpu('1')}: ${scale.toFixed(2)}x`,
    },
    {
      goal: `10 active groups at least ${SCALE_10_GOAL.toFixed(1)}x the proposals/s of one`,
      met: scale10 >= SCALE_10_GOAL,
      detail: `${Math.round(ten)}${cpu('10')} vs ${Math.round(one)} proposals/s: ${scale10.toFixed(2)}x`,
    },
    {
      goal: `every group has a leader within ${FAILOVER_GOAL_S} s of a SIGKILL`,
      met: f.failover_s !== null && f.failover_s < FAILOVER_GOAL_S,
      detail: f.failover_s === null ? `not within ${f.failover_wait_s} s` : `${f.failover_s.toFixed(2)} s`,
    },
    spread('after creation', f.leaders_after_creation),
    spread('after a restart', f.leaders_after_restart),
  ];
}

function median(xs: number[]): number {
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.floor((sorted.length - 1) / 2)]!;
}

/**
 * With --rounds, each goal is judged on its own median over the rounds (the median round is chosen by the
 * 100-group throughput alone): the idle figures of the round with the median busiest process, the median
 * proposals/s per number of active groups, the median failover (a round that never got there counts as the
 * longest), the median CPU a proposal, and the leader counts of the round with the median spread. Every round's
 * figures stay listed.
 */
export function mergeGroupsFigures(rounds: GroupsFigures[]): GroupsFigures {
  const worst = (f: GroupsFigures): number => Math.max(...Object.values(f.idle_quiesced_pct));
  const idleRound = [...rounds].sort((a, b) => worst(a) - worst(b))[Math.floor((rounds.length - 1) / 2)]!;
  const keys = [...new Set(rounds.flatMap((r) => Object.keys(r.proposals_per_s)))];
  const failovers = rounds.map((r) => r.failover_s ?? Infinity);
  const failover = median(failovers);
  const cpuKeys = [...new Set(rounds.flatMap((r) => Object.keys(r.cpu_us_per_proposal ?? {})))];
  const bySpread = (
    pick: (f: GroupsFigures) => Record<string, number> | undefined,
  ): Record<string, number> | undefined => {
    const measured = rounds.filter((r) => pick(r) !== undefined);
    if (measured.length < rounds.length) return undefined;
    const off = (r: GroupsFigures): number => spreadOff(pick(r)!, r.groups ?? 1000, r.processes ?? 5);
    return pick([...measured].sort((a, b) => off(a) - off(b))[Math.floor((measured.length - 1) / 2)]!);
  };
  const merged: GroupsFigures = {
    idle_quiesced_pct: idleRound.idle_quiesced_pct,
    idle_active_pct: idleRound.idle_active_pct,
    proposals_per_s: Object.fromEntries(keys.map((k) => [k, median(rounds.map((r) => r.proposals_per_s[k] ?? 0))])),
    failover_s: Number.isFinite(failover) ? failover : null,
    failover_wait_s: rounds[0]!.failover_wait_s,
  };
  if (cpuKeys.length > 0)
    merged.cpu_us_per_proposal = Object.fromEntries(
      cpuKeys.map((k) => [k, median(rounds.map((r) => r.cpu_us_per_proposal?.[k] ?? Infinity))]),
    );
  const created = bySpread((r) => r.leaders_after_creation);
  const restarted = bySpread((r) => r.leaders_after_restart);
  if (created !== undefined) merged.leaders_after_creation = created;
  if (restarted !== undefined) merged.leaders_after_restart = restarted;
  if (rounds[0]!.groups !== undefined) merged.groups = rounds[0]!.groups;
  if (rounds[0]!.processes !== undefined) merged.processes = rounds[0]!.processes;
  return merged;
}
