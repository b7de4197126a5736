/**
 * `groups`: many Raft groups per process (GroupHost), on 5 real OS processes over TCP on 127.0.0.1, each with one
 * LevelDB (synced writes, group commit across groups). 1,000 groups, each on 3 of the 5 processes (600 a process),
 * with preferred leaders (the first of each group's members; GroupHostOptions.leaderPreference). No peer; goals
 * from issues 13 and 43, each judged met or missed:
 *
 *  (a) idle CPU per process, as % of one core, with every group quiesced; beside it, in the same run, the same
 *      1,000 groups with quiescence off (every group ticking and heartbeating). Goal: under 1% of a core each.
 *  (b) aggregate committed proposals/s with 1, 10 and 100 active groups, the same total in-flight proposals
 *      (--concurrency) split evenly over the active groups, driven inside each leader's process (no HTTP layer),
 *      each proposal resolved when applied on the leader, with the server CPU per proposal. Goals: 100 groups at
 *      least 1.0x one group, 10 groups at least 1.2x. Beside it, as context, the same with a fixed 4 proposals in
 *      flight per active group (the load grows with the groups).
 *  (c) seconds from SIGKILL of the process leading the most groups until every group has a leader again (polled
 *      every 100 ms from the 4 others). Goal: under 5 s. Measured with quiescence on (the default) and off.
 *  (d) leaders per process after creation and after the killed process is started again on its directory.
 *      Goal: within 10% of even (200 each), with no balance call.
 *
 * The 1,000-group processes of (a) with quiescence on also run (b), then (c), then the restart of (d); a second set
 * of processes with quiescence off runs (a) and (c) for comparison. With --profile, each load of (b) and a stretch
 * at rest are CPU-profiled in every process (<dir>/<process>-<load>.cpuprofile, summarized in <dir>/<load>.txt).
 */
import type { Benchmark, RunOptions, SideResult } from '../benchmark.js';
import { interrupted } from '../cleanup.js';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { cpuSeconds, sleep } from '../procs.js';
import { formatSummary, summarize as summarizeProfile, type CpuProfile } from '../profile.js';
import { round, summarize } from '../stats.js';
import {
  groupsGoals,
  groupsWithoutLeader,
  leadersPerProcess,
  mergeGroupsFigures,
  placeGroups,
  splitWorkers,
  spreadOff,
  type GroupsFigures,
} from '../groups/figures.js';
import { startGroupCluster, waitAllLed, type GroupCluster } from '../groups/procs.js';

const IDS = ['p1', 'p2', 'p3', 'p4', 'p5'];
const GROUPS = 1000;
const REPLICAS = 3;
const TICK_MS = 100;
const QUIESCE_TICKS = 20;
/**
 * A ping to each peer process every 2 ticks (200 ms), not every tick: at rest the pings are most of a process's
 * work (a socket write each, and the shared ticker wakes for them), and 200 ms stays far under the 1-2 s
 * election timeout a quiesced follower waits out before it campaigns.
 */
const PING_TICKS = 2;
const ACTIVE = [1, 10, 100];
const FAILOVER_WAIT_S = 60;
/** In-flight proposals per group of the context series (beside the goal's series, which splits --concurrency). */
const PER_GROUP_IN_FLIGHT = 4;
/** Preferred leaders (GroupHostOptions.leaderPreference): a host hands a group over after leading it this long. */
const PREFERENCE_DELAY_MS = 3_000;
/** How long the leaders may take to spread after creation or a restart before the spread is taken as it is. */
const SPREAD_WAIT_S = 60;

function log(line: string): void {
  process.stderr.write(`bench: ${line}\n`);
}

/** % of one core each process used over `seconds`. */
async function idleCpu(cluster: GroupCluster, seconds: number): Promise<Record<string, number>> {
  const before = new Map(cluster.procs.map((p) => [p.id, cpuSeconds(p.pid) ?? 0]));
  const t0 = performance.now();
  await sleep(seconds * 1000);
  const wall = (performance.now() - t0) / 1000;
  const out: Record<string, number> = {};
  for (const p of cluster.procs) out[p.id] = round((((cpuSeconds(p.pid) ?? 0) - before.get(p.id)!) / wall) * 100, 2);
  return out;
}

async function quiescedCount(cluster: GroupCluster): Promise<number> {
  const views = await cluster.views();
  return [...views.values()].reduce((n, list) => n + list.filter((v) => v[4]).length, 0);
}

/** Waits until every replica of every group has quiesced (or `timeoutS`); returns how many had. */
async function waitQuiesced(cluster: GroupCluster, timeoutS: number): Promise<number> {
  const deadline = Date.now() + timeoutS * 1000;
  let n = 0;
  while (Date.now() < deadline && !interrupted.aborted) {
    n = await quiescedCount(cluster);
    if (n >= GROUPS * REPLICAS) break;
    await sleep(500);
  }
  return n;
}

interface LoadFigures {
  active_groups: number;
  in_flight_per_group: number[];
  proposals_per_s: number;
  ops: number;
  errors: number;
  error_kinds: Record<string, number>;
  fsyncs_per_s: number;
  /** Synced batches the groups' storages asked for per fsync written (group commit across groups; 1 = none). */
  group_writes_per_fsync: number | null;
  server_cpu_cores: number;
  /** Server CPU (all five processes, load driver included) per committed proposal, in microseconds. */
  server_cpu_us_per_op: number | null;
  latency: ReturnType<typeof summarize>;
}

async function activeLoad(
  cluster: GroupCluster,
  active: number,
  o: RunOptions,
  perGroup: number | null = null,
): Promise<LoadFigures> {
  const workers =
    perGroup === null ? splitWorkers(o.concurrency, active) : Array.from({ length: active }, () => perGroup);
  const groups = workers.map((w, i) => ({ name: `g${i}`, workers: w }));
  const label = `${active}g-${perGroup === null ? 'split' : 'fixed'}`;
  if (o.profileDir !== null) mkdirSync(o.profileDir, { recursive: true });
  const commit0 = await commitStats(cluster);
  const cpu0 = cluster.procs.map((p) => cpuSeconds(p.pid) ?? 0);
  const t0 = performance.now();
  const answers = await Promise.all(
    cluster.procs.map((p) =>
      p.call(
        {
          op: 'load',
          groups,
          warmupMs: o.warmupS * 1000,
          durationMs: o.durationS * 1000,
          size: o.size,
          ...(o.profileDir === null ? {} : { profileDir: o.profileDir, profileLabel: label }),
        },
        (o.warmupS + o.durationS) * 1000 + 120_000,
      ),
    ),
  );
  const wall = (performance.now() - t0) / 1000;
  const cpu = cluster.procs.reduce((s, p, i) => s + (cpuSeconds(p.pid) ?? 0) - cpu0[i]!, 0);
  const commit1 = await commitStats(cluster);
  const latencies: number[] = [];
  let ops = 0;
  let errors = 0;
  const kinds: Record<string, number> = {};
  const led = new Set<string>();
  for (const a of answers) {
    ops += a.ops as number;
    errors += a.errors as number;
    for (const l of a.latencies_ms as number[]) latencies.push(l);
    for (const [k, n] of Object.entries(a.error_kinds as Record<string, number>)) kinds[k] = (kinds[k] ?? 0) + n;
    for (const g of a.led as string[]) led.add(g);
  }
  if (o.profileDir !== null) profileSummary(o.profileDir, label, cluster, ops);
  if (led.size < active) log(`warning: only ${led.size} of ${active} active groups had a leader when the load started`);
  // fsyncs include the warm-up (the counters are read around the whole call); scaled to the whole call's length.
  const fsyncs = commit1.written - commit0.written;
  const figures: LoadFigures = {
    active_groups: active,
    in_flight_per_group: [...new Set(workers)].sort((a, b) => a - b),
    proposals_per_s: round(ops / o.durationS, 0),
    ops,
    errors,
    error_kinds: kinds,
    fsyncs_per_s: round(fsyncs / wall, 0),
    group_writes_per_fsync: fsyncs > 0 ? round((commit1.requested - commit0.requested) / fsyncs, 2) : null,
    server_cpu_cores: round(cpu / wall, 2),
    server_cpu_us_per_op: ops === 0 ? null : round(((cpu / wall) * o.durationS * 1e6) / ops, 0),
    latency: summarize(latencies),
  };
  log(
    `${active} active group(s), ${workers.reduce((a, b) => a + b, 0)} proposals in flight: ${figures.proposals_per_s} proposals/s, p50 ${figures.latency.p50_ms} ms, p99 ${figures.latency.p99_ms} ms, ` +
      `${errors} errors, ${figures.fsyncs_per_s} fsyncs/s (all processes), ${figures.server_cpu_cores} cores, ${figures.server_cpu_us_per_op} µs CPU a proposal`,
  );
  return figures;
}

/** --profile: where the CPU of the processes at rest goes (a load of no groups), after the idle figures were taken. */
async function profileIdle(cluster: GroupCluster, o: RunOptions): Promise<void> {
  mkdirSync(o.profileDir!, { recursive: true });
  const request = { op: 'load', groups: [], warmupMs: 0, durationMs: o.durationS * 1000, size: 1 };
  await Promise.all(
    cluster.procs.map((p) =>
      p.call({ ...request, profileDir: o.profileDir, profileLabel: 'idle' }, o.durationS * 1000 + 60_000),
    ),
  );
  profileSummary(o.profileDir!, 'idle', cluster, 0);
}

/** --profile: the five processes' profiles of one load, summarized together into <dir>/<label>.txt. */
function profileSummary(dir: string, label: string, cluster: GroupCluster, ops: number): void {
  const profiles: CpuProfile[] = [];
  for (const p of cluster.procs) {
    try {
      profiles.push(JSON.parse(readFileSync(join(dir, `${p.id}-${label}.cpuprofile`), 'utf8')) as CpuProfile);
    } catch {
      // a process that wrote none (killed): summarize the others
    }
  }
  const text = formatSummary(
    summarizeProfile(profiles, 30),
    `${label}: ${profiles.length} processes, ${ops} proposals`,
  );
  writeFileSync(join(dir, `${label}.txt`), `${text}\n`);
  log(text);
}

/** Synced batches asked for and written (fsyncs), summed over the processes. */
async function commitStats(cluster: GroupCluster): Promise<{ requested: number; written: number }> {
  const answers = await Promise.all(cluster.procs.filter((p) => !p.exited).map((p) => p.call({ op: 'status' })));
  let requested = 0;
  let written = 0;
  for (const a of answers) {
    const c = a.commit as { requested: number; written: number };
    requested += c.requested;
    written += c.written;
  }
  return { requested, written };
}

/**
 * Leaders per process once they have spread within 10% of even (polled every 500 ms), or as they are after
 * `SPREAD_WAIT_S`; with the seconds it took from `since`.
 */
async function waitSpread(
  cluster: GroupCluster,
  names: string[],
  since: number,
): Promise<{ leaders: Record<string, number>; seconds: number | null }> {
  let leaders: Record<string, number> = {};
  while ((performance.now() - since) / 1000 < SPREAD_WAIT_S && !interrupted.aborted) {
    const views = await cluster.views();
    leaders = leadersPerProcess(views);
    if (groupsWithoutLeader(views, names).length === 0 && spreadOff(leaders, GROUPS, IDS.length) <= 0.1)
      return { leaders, seconds: round((performance.now() - since) / 1000, 1) };
    await sleep(500);
  }
  return { leaders, seconds: null };
}

/** SIGKILL the process leading the most groups; seconds until every group has a leader again. */
async function failover(cluster: GroupCluster, names: string[]): Promise<Record<string, unknown>> {
  const leaders = leadersPerProcess(await cluster.views());
  const victim = Object.entries(leaders).sort((a, b) => b[1] - a[1])[0]![0];
  log(`leaders per process ${JSON.stringify(leaders)}; SIGKILL ${victim}`);
  const since = performance.now();
  cluster.kill(victim);
  const r = await waitAllLed(cluster, names, FAILOVER_WAIT_S, { since, pollMs: 100 });
  const seconds = r.seconds === null ? null : round(r.seconds, 2);
  log(
    seconds === null
      ? `${r.missing.length} groups still without a leader after ${FAILOVER_WAIT_S} s`
      : `every group has a leader ${seconds} s after the SIGKILL (${r.polls} polls)`,
  );
  return {
    killed: victim,
    leaders_before: leaders,
    groups_led_by_killed: leaders[victim],
    seconds,
    still_leaderless: r.missing.length,
    polls: r.polls,
    poll_interval_ms: 100,
  };
}

async function runOurs(o: RunOptions): Promise<SideResult> {
  const placement = placeGroups(GROUPS, IDS, REPLICAS);
  const names = placement.map((g) => g.name);

  // Quiescence on: idle CPU, then the load runs, then a kill.
  const quiet = await startGroupCluster({
    ids: IDS,
    groups: placement,
    tickMs: TICK_MS,
    quiesceTicks: QUIESCE_TICKS,
    label: 'quiescence on',
    preferenceDelayMs: PREFERENCE_DELAY_MS,
    pingTicks: PING_TICKS,
  });
  const createdAt = performance.now();
  let idleOn: Record<string, number>;
  let quiescedOn: number;
  const loads: LoadFigures[] = [];
  const perGroupLoads: LoadFigures[] = [];
  let failoverOn: Record<string, unknown>;
  let spreadCreated: Awaited<ReturnType<typeof waitSpread>> = { leaders: {}, seconds: null };
  let spreadRestarted: Awaited<ReturnType<typeof waitSpread>> = { leaders: {}, seconds: null };
  const settleStart = Date.now();
  try {
    const led = await waitAllLed(quiet, names, 120, { pollMs: 500 });
    if (led.seconds === null) log(`warning: ${led.missing.length} groups had no leader after 120 s`);
    spreadCreated = await waitSpread(quiet, names, createdAt);
    log(`leaders per process after creation ${JSON.stringify(spreadCreated.leaders)} (${spreadCreated.seconds} s)`);
    quiescedOn = await waitQuiesced(quiet, 60);
    log(`${quiescedOn} of ${GROUPS * REPLICAS} replicas quiesced; measuring idle CPU for ${o.durationS} s`);
    idleOn = await idleCpu(quiet, o.durationS);
    log(`idle CPU, quiescence on (% of a core): ${JSON.stringify(idleOn)}`);
    if (o.profileDir !== null) await profileIdle(quiet, o);
    for (const active of ACTIVE) {
      if (interrupted.aborted) break;
      loads.push(await activeLoad(quiet, active, o));
    }
    // Context, not a goal: a fixed number in flight per group, so the offered load grows with the groups.
    for (const active of ACTIVE) {
      if (interrupted.aborted) break;
      perGroupLoads.push(await activeLoad(quiet, active, o, PER_GROUP_IN_FLIGHT));
    }
    const requiesced = await waitQuiesced(quiet, 30);
    log(`${requiesced} replicas quiesced again before the kill`);
    failoverOn = { ...(await failover(quiet, names)), quiesced_replicas_before: requiesced };
    const killed = failoverOn.killed as string;
    const restartAt = performance.now();
    await quiet.restart(killed);
    spreadRestarted = await waitSpread(quiet, names, restartAt);
    log(
      `leaders per process after ${killed} restarted ${JSON.stringify(spreadRestarted.leaders)} (${spreadRestarted.seconds} s)`,
    );
  } finally {
    await quiet.stop();
  }
  const settleS = Math.max(
    10,
    (Date.now() - settleStart) / 1000 - (loads.length + perGroupLoads.length) * (o.warmupS + o.durationS),
  );

  // Quiescence off: the same groups ticking and heartbeating; idle CPU, then a kill.
  const busy = await startGroupCluster({
    ids: IDS,
    groups: placement,
    tickMs: TICK_MS,
    quiesceTicks: 0,
    label: 'quiescence off',
    preferenceDelayMs: PREFERENCE_DELAY_MS,
    pingTicks: PING_TICKS,
  });
  let idleOff: Record<string, number>;
  let failoverOff: Record<string, unknown>;
  try {
    const led = await waitAllLed(busy, names, 120, { pollMs: 500 });
    if (led.seconds === null) log(`warning: ${led.missing.length} groups had no leader after 120 s`);
    await sleep(Math.min(settleS, 20) * 1000);
    log(`quiescence off: measuring idle CPU for ${o.durationS} s`);
    idleOff = await idleCpu(busy, o.durationS);
    log(`idle CPU, quiescence off (% of a core): ${JSON.stringify(idleOff)}`);
    failoverOff = await failover(busy, names);
  } finally {
    await busy.stop();
  }

  const byActive = Object.fromEntries(loads.map((l) => [String(l.active_groups), l.proposals_per_s]));
  const headline = loads.find((l) => l.active_groups === 100) ?? loads[loads.length - 1]!;
  const figures: GroupsFigures = {
    idle_quiesced_pct: idleOn,
    idle_active_pct: idleOff,
    proposals_per_s: byActive,
    failover_s: failoverOn.seconds as number | null,
    failover_wait_s: FAILOVER_WAIT_S,
    cpu_us_per_proposal: Object.fromEntries(loads.map((l) => [String(l.active_groups), l.server_cpu_us_per_op])),
    leaders_after_creation: spreadCreated.leaders,
    leaders_after_restart: spreadRestarted.leaders,
    groups: GROUPS,
    processes: IDS.length,
  };
  const one = byActive['1'] ?? 0;
  return {
    system: `raftkit GroupHost x${IDS.length} processes, ${GROUPS} groups of ${REPLICAS} (TCP, LevelDB with synced group commit)`,
    members: IDS.length,
    ops_per_sec: headline.proposals_per_s,
    ops: headline.ops,
    errors: headline.errors,
    error_kinds: headline.error_kinds,
    duration_s: o.durationS,
    warmup_s: o.warmupS,
    concurrency: o.concurrency,
    interrupted: interrupted.aborted,
    mean_ms: headline.latency.mean_ms,
    p50_ms: headline.latency.p50_ms,
    p90_ms: headline.latency.p90_ms,
    p99_ms: headline.latency.p99_ms,
    p999_ms: headline.latency.p999_ms,
    max_ms: headline.latency.max_ms,
    server_cpu_s: null,
    server_cpu_cores: headline.server_cpu_cores,
    server_cpu_us_per_op:
      headline.ops === 0 ? null : round((headline.server_cpu_cores * o.durationS * 1e6) / headline.ops, 0),
    client_cpu_cores: 0,
    figures,
    idle: {
      quiescence_on_pct_of_core: idleOn,
      quiescence_off_pct_of_core: idleOff,
      replicas_quiesced: quiescedOn,
      replicas: GROUPS * REPLICAS,
      ratio_off_to_on: round(sum(idleOff) / Math.max(0.01, sum(idleOn)), 1),
    },
    throughput: loads,
    throughput_fixed_per_group: {
      note: `context, not the goal: ${PER_GROUP_IN_FLIGHT} proposals in flight per active group, so 100 groups are offered 100x the load of one`,
      in_flight_per_group: PER_GROUP_IN_FLIGHT,
      runs: perGroupLoads,
      scale_100_vs_1:
        perGroupLoads.length === 3 && perGroupLoads[0]!.proposals_per_s > 0
          ? round(perGroupLoads[2]!.proposals_per_s / perGroupLoads[0]!.proposals_per_s, 2)
          : null,
    },
    scale_100_vs_1: one > 0 ? round((byActive['100'] ?? 0) / one, 2) : null,
    scale_10_vs_1: one > 0 ? round((byActive['10'] ?? 0) / one, 2) : null,
    failover: { quiescence_on: failoverOn, quiescence_off: failoverOff },
    leader_spread: {
      preference_delay_ms: PREFERENCE_DELAY_MS,
      after_creation: spreadCreated,
      after_restart: spreadRestarted,
    },
    note: "the headline ops/s and latency are the 100-active-group run; the load runs inside the leaders' processes, so server CPU includes it",
  };
}

function sum(r: Record<string, number>): number {
  return Object.values(r).reduce((a, b) => a + b, 0);
}

export const groupsBenchmark: Benchmark = {
  name: 'groups',
  description: `${GROUPS.toLocaleString('en-US')} Raft groups on ${IDS.length} processes (GroupHost): idle CPU with quiescence on/off, proposals/s and CPU a proposal with 1/10/100 active groups, time to re-elect after a SIGKILL, leader spread after creation and a restart; no peer, six goals`,
  title: (o) =>
    `groups: ${GROUPS.toLocaleString('en-US')} groups on ${IDS.length} processes, ${o.concurrency} proposals in flight, ${o.size}-byte proposals`,
  peers: [],
  defaults: { durationS: 10, concurrency: 256, size: 128, warmupS: 2 },
  workload: (o) => ({
    processes: IDS.length,
    groups: GROUPS,
    replicas_per_group: REPLICAS,
    placement: 'group i on processes i, i+1, i+2 (mod 5): 600 groups per process',
    tick_ms: TICK_MS,
    quiesce_ticks: QUIESCE_TICKS,
    ping_ticks: PING_TICKS,
    storage:
      'one LevelDB per process, synced writes, one batch and one fsync per event-loop turn for every group with work',
    transport: 'one TCP listener per process on 127.0.0.1, one connection per peer process',
    idle: `CPU time of each process over ${o.durationS} s from /proc, every replica quiesced; then new processes with quiescence off, same groups`,
    proposals: `${o.concurrency} proposals in flight in total, split evenly over 1, 10 and 100 active groups (g0..g99); ${o.size}-byte values; resolved when applied on the leader; driven inside each leader's process`,
    failover:
      'SIGKILL of the process leading the most groups; polled every 100 ms from the others until every group has a leader in the highest term its live members know',
    leaders: `preferred leaders (the first of each group's members, rotating over the processes), handed over after ${PREFERENCE_DELAY_MS} ms of leading; counted after creation and after the killed process restarted, polled every 500 ms until within 10% of even or ${SPREAD_WAIT_S} s`,
  }),
  goals: (ours) => groupsGoals(ours.figures as GroupsFigures),
  mergeRounds: (median, rounds) => {
    const each = rounds.map((r) => r.figures as GroupsFigures);
    return { ...median, figures: mergeGroupsFigures(each), figures_median_round: median.figures, rounds_figures: each };
  },
  runOurs,
};
