/**
 * `lock`: acquire+release cycles on many lock names, ours (sessions, POST /v1/locks/{name}/acquire and release)
 * beside etcd 3.4's lock API (v3lock through the JSON gateway: a lease per worker, POST /v3/lock/lock with the
 * lease, POST /v3/lock/unlock with the returned key).
 *
 * Each worker holds one session (ours, heartbeating) or one lease (etcd, kept alive), and runs cycles on names
 * drawn from 10,000, so contention is rare and each cycle is two writes through the log. Cycles are paced so the
 * whole run aims at `--rate` lock operations per second (an acquire or a release is one operation; the spec's
 * target is 10,000/s), and acquire latency is measured from each cycle's scheduled start, so a server that falls
 * behind shows it in the latency instead of silently lowering the rate (no coordinated omission).
 *
 * With --sweep (rates 500 ... 10,000, or `--sweep 500,1000,...`), the run repeats at each rate, ours then the peer
 * side by side per rate (a fresh cluster for each, so no rate inherits another's log), and reports, for each side,
 * the highest rate whose acquire p99 stayed under 50 ms with no errors, their ratio, and the verdict on the goal
 * (ours at least 2x the peer's). The 1-minute load average is recorded at each step: the machine is shared.
 */
import { loadavg } from 'node:os';
import type { Pool } from 'undici';
import type { Benchmark, Goal, RunOptions, SideResult } from '../benchmark.js';
import { interrupted } from '../cleanup.js';
import { Endpoints, send } from '../http.js';
import { OpError } from '../load.js';
import { measure } from '../measure.js';
import {
  gcCounters,
  gcPauseFigures,
  groupCpuPerOp,
  groupCpuSeconds,
  memberCounters,
  startOurCluster,
} from '../ours.js';
import { b64, startEtcd } from '../peers/etcd.js';
import { summarizeProfiles } from '../profile.js';
import { WorkerConnection } from './lock-http.js';
import { round, summarize } from '../stats.js';

const MEMBERS = 5;
const NAMES = 10_000;
const P99_GOAL_MS = 50;
/** Ours must reach at least this multiple of the peer's highest rate under the p99 goal (issue 21, item 2). */
const RATE_GOAL_RATIO = 2;
export const DEFAULT_SWEEP = [500, 1000, 1500, 2000, 3000, 5000, 10_000];

function rateFromArgs(): number {
  const i = process.argv.indexOf('--rate');
  const rate = i >= 0 ? Number(process.argv[i + 1]) : 10_000;
  if (!Number.isFinite(rate) || rate <= 0)
    throw new Error('--rate must be a positive number of lock operations per second');
  return rate;
}

/** The rates of --sweep (a comma-separated list may follow it), or null without --sweep. */
export function sweepFromArgs(argv: readonly string[] = process.argv): number[] | null {
  const i = argv.indexOf('--sweep');
  if (i < 0) return null;
  const next = argv[i + 1];
  if (next === undefined || next.startsWith('--')) return DEFAULT_SWEEP;
  const rates = next.split(',').map(Number);
  if (rates.length === 0 || rates.some((r) => !Number.isFinite(r) || r <= 0))
    throw new Error('--sweep takes positive rates separated by commas, e.g. 500,1000,2000');
  return [...new Set(rates)].sort((a, b) => a - b);
}

/** One rate of a sweep, for one side. */
export interface SweepStep {
  rate: number;
  lock_ops_per_sec: number;
  acquire_p50_ms: number;
  acquire_p99_ms: number;
  errors: number;
  server_cpu_us_per_op: number | null;
  /** Ours: acquires and releases per Raft entry (the per-turn batch). */
  lock_commands_per_entry?: number;
  /** Ours: entries per log write (with fsync) of the leader. */
  entries_per_leader_write?: number;
  /** Members' CPU per cycle: the leader's, and one follower's (the followers' mean). */
  leader_cpu_us_per_cycle?: number;
  follower_cpu_us_per_cycle?: number;
  load_avg_1m_before: number;
}

/** The highest rate whose acquire p99 stayed under the goal with no errors, or 0 when none did. */
export function highestRateUnderGoal(steps: readonly SweepStep[]): number {
  let best = 0;
  for (const s of steps) if (s.errors === 0 && s.acquire_p99_ms < P99_GOAL_MS && s.rate > best) best = s.rate;
  return best;
}

/**
 * What one side needs to run cycles: open per-worker state (through undici), then acquire and release (on the
 * worker's own lean connection, src/benchmarks/lock-http.ts), each side with its request header lines.
 */
interface LockApi {
  headers: string;
  open(pool: Pool, worker: number): Promise<void>;
  acquire(conn: WorkerConnection, worker: number, name: string): Promise<string>;
  release(conn: WorkerConnection, worker: number, name: string, grant: string): Promise<void>;
  close(pool: Pool, worker: number): Promise<void>;
}

/** Server counters read as the window opens and closes, and what their change says (ours: how much was batched). */
interface Probe {
  probe: () => Promise<Record<string, number>>;
  explain: (delta: Record<string, number>, result: { ops: number }) => Record<string, unknown>;
}

/**
 * CPU per acquire+release cycle of the leader and of one follower (their mean), from the change of
 * `groupCpuSeconds({ leader, followers })`: which member the cycles cost.
 */
export function roleCpu(
  delta: Record<string, number>,
  cycles: number,
  followers: number,
): Record<string, number | null> {
  const per = groupCpuPerOp(delta, ['leader', 'followers'], cycles);
  return {
    leader_cpu_us_per_cycle: per.leader_cpu_us_per_op ?? null,
    follower_cpu_us_per_cycle:
      per.followers_cpu_us_per_op === null || per.followers_cpu_us_per_op === undefined || followers === 0
        ? null
        : round(per.followers_cpu_us_per_op / followers, 1),
  };
}

async function runCycles(
  label: string,
  system: string,
  pids: number[],
  origins: string[],
  api: LockApi,
  o: RunOptions,
  rate: number,
  extra: Record<string, unknown>,
  probe?: Probe,
): Promise<SideResult> {
  const endpoints = new Endpoints(origins, o.concurrency);
  // Worker w talks to origin w mod the number of origins, as Endpoints.forWorker.
  const conns = Array.from(
    { length: o.concurrency },
    (_, w) => new WorkerConnection(origins[w % origins.length]!, api.headers),
  );
  const opened = new Set<number>();
  const acquireMs: number[] = [];
  let contended = 0;
  // Two lock operations per cycle: each worker starts a cycle every concurrency * 2 / rate seconds.
  const cycleGapMs = (o.concurrency * 2 * 1000) / rate;
  const next = new Map<number, number>();
  try {
    // Every worker's session (or lease) is opened before the clock starts: opening 64 at once is a burst of
    // writes that, on a crowded machine, outlasted the warm-up and left a backlog counted against the first rate.
    await Promise.all(
      Array.from({ length: o.concurrency }, async (_, w) => {
        // `cluster up` returns at the first leader: a member may still be opening its HTTP listener.
        for (let attempt = 1; ; attempt++) {
          try {
            await api.open(endpoints.forWorker(w), w);
            break;
          } catch (e) {
            if (attempt >= 100 || interrupted.aborted) throw e;
            await new Promise((r) => setTimeout(r, 300));
          }
        }
        opened.add(w);
      }),
    );
    // The load generator's warm-up is not counted; neither are acquires scheduled during it.
    const measureFrom = performance.now() + o.warmupS * 1000;
    const result = await measure(
      {
        label,
        system,
        members: MEMBERS,
        serverPids: pids,
        op: async (w) => {
          const conn = conns[w]!;
          if (!next.has(w)) next.set(w, performance.now() + Math.random() * cycleGapMs);
          const scheduled = next.get(w)!;
          next.set(w, scheduled + cycleGapMs);
          const wait = scheduled - performance.now();
          if (wait > 0) await new Promise((r) => setTimeout(r, wait));
          const name = `bench-${Math.floor(Math.random() * NAMES)}`;
          let grant: string;
          try {
            grant = await api.acquire(conn, w, name);
          } catch (e) {
            if (e instanceof OpError && e.kind === 'contended') {
              contended++;
              return;
            }
            throw e;
          }
          // Kept when it completed in the measured window; timed from its scheduled start, so a server that cannot
          // keep the rate shows a growing backlog here.
          const done = performance.now();
          if (done >= measureFrom) acquireMs.push(done - scheduled);
          await api.release(conn, w, name, grant);
        },
        extra: { ...extra, target_lock_ops_per_sec: rate, names: NAMES },
        ...(probe !== undefined ? { probe: probe.probe, explain: probe.explain } : {}),
      },
      o,
    );
    const acquire = summarize(acquireMs);
    return {
      ...result,
      // A cycle is two lock operations.
      lock_ops_per_sec: round(result.ops_per_sec * 2, 0),
      acquire_p50_ms: acquire.p50_ms,
      acquire_p99_ms: acquire.p99_ms,
      acquires_measured: acquire.count,
      contended,
    };
  } finally {
    await Promise.all([...opened].map((w) => api.close(endpoints.forWorker(w), w).catch(() => undefined)));
    for (const conn of conns) conn.close();
    await endpoints.close();
  }
}

function oursApi(token: string): LockApi & { sessions: Map<number, string> } {
  const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
  const sessions = new Map<number, string>();
  const beats = new Map<number, NodeJS.Timeout>();
  return {
    sessions,
    headers: `authorization: Bearer ${token}\r\ncontent-type: application/json\r\n`,
    async open(pool, w) {
      const body = JSON.parse(
        await send(pool, { method: 'POST', path: '/v1/sessions', headers, body: '{"timeout_ms":30000}' }),
      ) as { session_id: string };
      sessions.set(w, body.session_id);
      const beat = setInterval(
        () =>
          void send(pool, {
            method: 'POST',
            path: `/v1/sessions/${body.session_id}/heartbeat`,
            headers,
            body: '',
          }).catch(() => undefined),
        5_000,
      );
      beat.unref();
      beats.set(w, beat);
    },
    async acquire(conn, w, name) {
      const text = await conn.request(
        'POST',
        `/v1/locks/${name}/acquire`,
        `{"session_id":"${sessions.get(w)}","wait":false}`,
      );
      const body = JSON.parse(text) as { granted: boolean; fencing_token?: number };
      if (!body.granted) throw new OpError('contended');
      return String(body.fencing_token);
    },
    async release(conn, w, name, grant) {
      await conn.request(
        'POST',
        `/v1/locks/${name}/release`,
        `{"session_id":"${sessions.get(w)}","fencing_token":${grant}}`,
      );
    },
    async close(pool, w) {
      clearInterval(beats.get(w));
      await send(pool, { method: 'DELETE', path: `/v1/sessions/${sessions.get(w)}`, headers });
    },
  };
}

function etcdApi(): LockApi {
  const headers = { 'content-type': 'application/json' };
  const leases = new Map<number, string>();
  const beats = new Map<number, NodeJS.Timeout>();
  return {
    headers: 'content-type: application/json\r\n',
    async open(pool, w) {
      const body = JSON.parse(
        await send(pool, { method: 'POST', path: '/v3/lease/grant', headers, body: '{"TTL":30}' }),
      ) as { ID: string };
      leases.set(w, body.ID);
      const beat = setInterval(
        () =>
          void send(pool, { method: 'POST', path: '/v3/lease/keepalive', headers, body: `{"ID":"${body.ID}"}` }).catch(
            () => undefined,
          ),
        5_000,
      );
      beat.unref();
      beats.set(w, beat);
    },
    async acquire(conn, w, name) {
      // etcd's lock waits while the name is held; with 10,000 names and this concurrency that is rare.
      const body = JSON.parse(
        await conn.request('POST', '/v3/lock/lock', `{"name":"${b64(name)}","lease":"${leases.get(w)}"}`),
      ) as { key: string };
      return body.key;
    },
    async release(conn, _w, _name, key) {
      await conn.request('POST', '/v3/lock/unlock', `{"key":"${key}"}`);
    },
    async close(pool, w) {
      clearInterval(beats.get(w));
      await send(pool, { method: 'POST', path: '/v3/lease/revoke', headers, body: `{"ID":"${leases.get(w)}"}` });
    },
  };
}

/** One rate on a fresh cluster of ours. */
async function runOursAt(o: RunOptions, rate: number): Promise<SideResult> {
  const env: NodeJS.ProcessEnv = {};
  if (o.profileDir !== null) {
    env.NODE_OPTIONS =
      `${process.env.NODE_OPTIONS ?? ''} --import=${new URL('../profile-preload.js', import.meta.url).href}`.trim();
    env.BENCH_PROFILE_DIR = o.profileDir;
  }
  const cluster = await startOurCluster({ service: 'lock', nodes: MEMBERS, env });
  let leaderPid: number | undefined;
  try {
    const leader = await cluster.leader();
    leaderPid = cluster.members.find((m) => m.id === leader)?.pid;
    const targets = o.routing === 'leader' ? cluster.members.filter((m) => m.id === leader) : cluster.members;
    // Acquires and releases per Raft entry of the batcher, over every member (each batches what it received).
    const leaderMember = cluster.members.find((m) => m.id === leader);
    const followerPids = cluster.members.filter((m) => m.id !== leader).map((m) => m.pid);
    const batching: Probe = {
      probe: async () => {
        const cpu = groupCpuSeconds({ leader: leaderPid === undefined ? [] : [leaderPid], followers: followerPids });
        const all = await Promise.all(
          cluster.members.map((m) => memberCounters(m).catch(() => ({}) as Record<string, number>)),
        );
        const sum = (k: string): number => all.reduce((n, c) => n + (c[k] ?? 0), 0);
        const own = all[cluster.members.findIndex((m) => m === leaderMember)] ?? {};
        return {
          ...cpu,
          entries: sum('lock_batched_entries'),
          commands: sum('lock_batched_commands'),
          leader_writes: own.raft_fsync_seconds_count ?? 0,
          leader_index: own.raft_applied_index ?? 0,
          ...gcCounters(own),
        };
      },
      explain: (d, r) => ({
        lock_commands_per_entry:
          d.entries !== undefined && d.entries > 0 ? round((d.commands ?? 0) / d.entries, 2) : null,
        // The leader's log writes (each with fsync) and the entries each carried: how much a Raft round was shared.
        leader_log_writes_per_sec: r.ops > 0 && o.durationS > 0 ? round((d.leader_writes ?? 0) / o.durationS, 0) : null,
        entries_per_leader_write:
          d.leader_writes !== undefined && d.leader_writes > 0
            ? round((d.leader_index ?? 0) / d.leader_writes, 2)
            : null,
        ...roleCpu(d, r.ops, followerPids.length),
        ...gcPauseFigures(d, 'leader'),
      }),
    };
    return await runCycles(
      'ours',
      `raftkit lock, ${MEMBERS} members`,
      cluster.members.map((m) => m.pid),
      targets.map((m) => m.url),
      oursApi(cluster.token),
      o,
      rate,
      { leader, routing: o.routing },
      batching,
    );
  } finally {
    await cluster.stop();
    if (o.profileDir !== null) {
      const summary = summarizeProfiles(
        o.profileDir,
        cluster.members.map((m) => m.pid),
        leaderPid,
      );
      if (summary !== null) process.stderr.write(`bench: CPU profiles of our members in ${o.profileDir}\n${summary}\n`);
    }
  }
}

/** One rate on a fresh etcd cluster. */
async function runEtcdAt(o: RunOptions, rate: number): Promise<SideResult> {
  const etcd = await startEtcd(MEMBERS);
  try {
    const leader = await etcd.leader();
    const targets = o.routing === 'leader' ? etcd.members.filter((m) => m.name === leader) : etcd.members;
    const leaderPids = etcd.members.filter((m) => m.name === leader).map((m) => m.pid);
    const followerPids = etcd.members.filter((m) => m.name !== leader).map((m) => m.pid);
    const roles: Probe = {
      probe: async () => groupCpuSeconds({ leader: leaderPids, followers: followerPids }),
      explain: (d, r) => roleCpu(d, r.ops, followerPids.length),
    };
    return await runCycles(
      'etcd',
      `etcd ${etcd.version} v3lock, ${MEMBERS} members (Debian etcd-server)`,
      etcd.members.map((m) => m.pid),
      targets.map((m) => m.clientUrl),
      etcdApi(),
      o,
      rate,
      { leader, routing: o.routing, version: etcd.version },
      roles,
    );
  } finally {
    await etcd.stop();
  }
}

function step(rate: number, load: number, r: SideResult): SweepStep {
  return {
    rate,
    lock_ops_per_sec: r.lock_ops_per_sec as number,
    acquire_p50_ms: r.acquire_p50_ms as number,
    acquire_p99_ms: r.acquire_p99_ms as number,
    errors: r.errors,
    server_cpu_us_per_op: r.server_cpu_us_per_op,
    ...(typeof r.lock_commands_per_entry === 'number' ? { lock_commands_per_entry: r.lock_commands_per_entry } : {}),
    ...(typeof r.entries_per_leader_write === 'number' ? { entries_per_leader_write: r.entries_per_leader_write } : {}),
    ...(typeof r.leader_cpu_us_per_cycle === 'number' ? { leader_cpu_us_per_cycle: r.leader_cpu_us_per_cycle } : {}),
    ...(typeof r.follower_cpu_us_per_cycle === 'number'
      ? { follower_cpu_us_per_cycle: r.follower_cpu_us_per_cycle }
      : {}),
    load_avg_1m_before: load,
  };
}

/**
 * A sweep's side: the step at the highest rate stands for the side in the report's generic figures (throughput and
 * p99 at the spec's rate), with every step and the highest rate under the goal beside it.
 */
function sweepSide(steps: Array<{ step: SweepStep; result: SideResult }>): SideResult {
  const top = steps[steps.length - 1]!.result;
  return {
    ...top,
    sweep: steps.map((s) => s.step),
    highest_rate_under_p99_goal: highestRateUnderGoal(steps.map((s) => s.step)),
  };
}

/**
 * With --sweep and a peer, each rate runs ours then the peer back to back (side by side per rate: a load spike
 * from the other users of the machine hits both sides of one rate rather than all rates of one side). The peer's
 * steps are kept here for runPeer, which the runner calls right after runOurs.
 */
let peerSweep: Promise<SideResult> | null = null;

async function runOurs(o: RunOptions): Promise<SideResult> {
  const rates = sweepFromArgs();
  if (rates === null) return runOursAt(o, rateFromArgs());
  const ours: Array<{ step: SweepStep; result: SideResult }> = [];
  const peer: Array<{ step: SweepStep; result: SideResult }> = [];
  for (const rate of rates) {
    for (const side of o.vs === null ? (['ours'] as const) : (['ours', 'etcd'] as const)) {
      const load = round(loadavg()[0] ?? 0, 2);
      process.stderr.write(`bench: sweep: ${side} at ${rate} lock ops/s (1-minute load average before: ${load})\n`);
      const result = side === 'ours' ? await runOursAt(o, rate) : await runEtcdAt(o, rate);
      (side === 'ours' ? ours : peer).push({ step: step(rate, load, result), result });
      process.stderr.write(
        `bench: sweep: ${side} at ${rate}: acquire p50 ${result.acquire_p50_ms} ms, p99 ${result.acquire_p99_ms} ms, ${result.lock_ops_per_sec} lock ops/s, ${result.errors} errors\n`,
      );
    }
  }
  peerSweep = peer.length > 0 ? Promise.resolve(sweepSide(peer)) : null;
  return sweepSide(ours);
}

async function runEtcd(o: RunOptions): Promise<SideResult> {
  if (sweepFromArgs() === null) return runEtcdAt(o, rateFromArgs());
  if (peerSweep === null) throw new Error('the sweep ran no etcd steps');
  const result = await peerSweep;
  peerSweep = null;
  return result;
}

/** The sweep's goal: ours' highest rate under 50 ms at least twice the peer's. */
function sweepGoals(ours: SideResult, peer: SideResult | null): Goal[] {
  const mine = ours.highest_rate_under_p99_goal;
  if (typeof mine !== 'number') return [];
  if (peer === null || typeof peer.highest_rate_under_p99_goal !== 'number') {
    return [
      {
        goal: `acquire p99 under ${P99_GOAL_MS} ms at the spec's 10,000 lock ops/s`,
        met: mine >= 10_000,
        detail: `ours: highest rate under the goal ${mine}`,
      },
    ];
  }
  const theirs = peer.highest_rate_under_p99_goal;
  const ratio = theirs > 0 ? round(mine / theirs, 2) : null;
  return [
    {
      goal: `highest rate with acquire p99 under ${P99_GOAL_MS} ms at least ${RATE_GOAL_RATIO}x etcd's`,
      met: ratio !== null ? ratio >= RATE_GOAL_RATIO : mine > 0,
      detail: `ours ${mine} lock ops/s, etcd ${theirs}, ratio ${ratio ?? 'n/a'}`,
    },
    {
      goal: `acquire p99 under ${P99_GOAL_MS} ms at the spec's 10,000 lock ops/s`,
      met: mine >= 10_000,
      detail: `ours: highest rate under the goal ${mine}`,
    },
  ];
}

export const lockBenchmark: Benchmark = {
  name: 'lock',
  description: `acquire+release cycles on ${NAMES} lock names at --rate lock operations/s (default 10,000) on a ${MEMBERS}-member cluster (vs etcd 3.4 v3lock)`,
  title: (o) =>
    `lock: acquire+release at ${sweepFromArgs()?.join(', ') ?? rateFromArgs()} lock ops/s, ${MEMBERS} members${o.vs !== null ? `, ours vs ${o.vs}` : ''}`,
  peers: ['etcd'],
  // A 10 s warm-up (not 3 as elsewhere): a fresh cluster of ours spends its first seconds compiling (JIT) at a
  // fraction of its rate, and the paced schedule carries the lateness it leaves into the measured window, where it
  // can be most of the acquire latency (bench/RESULTS.md, lock, findings). Both sides get the same warm-up.
  defaults: { durationS: 20, concurrency: 128, size: 0, warmupS: 10 },
  workload: (o) => ({
    operation:
      'acquire then release one lock (ours: /v1/locks/{name}/acquire + release in a session; etcd: /v3/lock/lock + unlock with a lease)',
    target_lock_ops_per_sec: rateFromArgs(),
    ...(sweepFromArgs() !== null
      ? {
          sweep_rates: sweepFromArgs(),
          sweep:
            'each rate: ours then the peer, each on a fresh cluster; the side figures are those at the highest rate',
        }
      : {}),
    names: NAMES,
    p99_goal_ms: P99_GOAL_MS,
    members: MEMBERS,
    routing: o.routing === 'all' ? 'worker w -> member w mod 5' : 'every request to the leader',
    pacing: 'each worker starts a cycle every concurrency*2/rate seconds; acquire latency from the scheduled start',
  }),
  goals: sweepGoals,
  runOurs,
  runPeer: (peer, o) => {
    if (peer !== 'etcd') throw new Error(`lock has no peer ${peer}`);
    return runEtcd(o);
  },
};
