/**
 * `kv`: blind PUTs of fixed-size values to random keys on a 5-member cluster, ours (PUT /v1/kv/{key}, value as
 * the body) beside etcd 3.4 (POST /v3/kv/put through its JSON gateway, key and value base64 in a JSON body).
 *
 * Routing (the same for both, --routing): by default, "all": worker w talks to member w mod 5 over its own
 * keep-alive connection, so 4/5 of the writes land on followers, which forward them to the leader and answer
 * once the write is applied locally. That is how clients spread over the member list load a cluster (etcd's
 * clientv3 round-robin balancer; our KvClients, each sticking to the first member that answers, handed the
 * members in different orders), and it spreads the HTTP parsing over five processes. "leader" sends everything to the leader: the best case for a single writer.
 *
 * Writes carry no client session (no Client-Id): one request, one log entry, like etcd's Put without a lease.
 */
import { randomBytes } from 'node:crypto';
import type { Benchmark, Goal, RunOptions, SideResult } from '../benchmark.js';
import { scrapeCounters } from '../http.js';
import { measureHttp } from '../measure.js';
import { gcPauseFigures, memberCounters, startOurCluster } from '../ours.js';
import { round } from '../stats.js';
import { b64, startEtcd } from '../peers/etcd.js';
import { summarizeProfiles } from '../profile.js';

const MEMBERS = 5;
const ALPHABET = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789';

/** `count` random ASCII values of `size` bytes (so the UTF-8 body is exactly `size` bytes). */
function makeValues(count: number, size: number): string[] {
  return Array.from({ length: count }, () => {
    const bytes = randomBytes(size);
    let s = '';
    for (const b of bytes) s += ALPHABET[b % ALPHABET.length];
    return s;
  });
}

/**
 * How the leader's durable log writes went over the window: how often, how long, how many entries each carried.
 * Ours times the whole storage.append (queue, encoding, LevelDB batch with sync, callback); etcd's
 * etcd_disk_wal_fsync_duration_seconds times the WAL fsync call alone.
 */
function logSyncFigures(
  count: number | undefined,
  sumSeconds: number | undefined,
  entries: number | undefined,
  durationS: number,
): Record<string, number | null> {
  if (count === undefined || count <= 0)
    return { leader_log_syncs_per_sec: null, leader_log_sync_mean_ms: null, leader_entries_per_log_sync: null };
  return {
    leader_log_syncs_per_sec: round(count / durationS, 0),
    leader_log_sync_mean_ms: sumSeconds === undefined ? null : round((1000 * sumSeconds) / count, 2),
    leader_entries_per_log_sync: entries === undefined ? null : round(entries / count, 1),
  };
}

function randomKey(keys: number): string {
  return `k${Math.floor(Math.random() * keys)}`;
}

async function runOurs(o: RunOptions): Promise<SideResult> {
  const env: NodeJS.ProcessEnv = {};
  if (o.profileDir !== null) {
    env.NODE_OPTIONS =
      `${process.env.NODE_OPTIONS ?? ''} --import=${new URL('../profile-preload.js', import.meta.url).href}`.trim();
    env.BENCH_PROFILE_DIR = o.profileDir;
  }
  const cluster = await startOurCluster({
    service: 'kv',
    nodes: MEMBERS,
    env,
    ...(o.snapshotEvery !== null ? { snapshotEvery: o.snapshotEvery } : {}),
  });
  let leaderPid: number | undefined;
  try {
    const leader = await cluster.leader();
    leaderPid = cluster.members.find((m) => m.id === leader)?.pid;
    const targets = o.routing === 'leader' ? cluster.members.filter((m) => m.id === leader) : cluster.members;
    process.stderr.write(`bench: our leader is ${leader}; sending to ${targets.map((m) => m.id).join(', ')}\n`);
    const values = makeValues(1024, o.size);
    const headers = { authorization: `Bearer ${cluster.token}`, 'content-type': 'text/plain' };
    let n = 0;
    return await measureHttp(
      {
        label: 'ours',
        system: `raftkit kv, ${MEMBERS} members${o.snapshotEvery !== null ? `, --snapshot-every ${o.snapshotEvery}` : ''}`,
        members: MEMBERS,
        serverPids: cluster.members.map((m) => m.pid),
        origins: targets.map((m) => m.url),
        request: () => ({ method: 'PUT', path: `/v1/kv/${randomKey(o.keys)}`, headers, body: values[n++ & 1023]! }),
        extra: { leader, routing: o.routing },
        probe: () => memberCounters(cluster.members.find((m) => m.id === leader)!),
        explain: (d, r) => ({
          ...logSyncFigures(
            d.raft_fsync_seconds_count,
            d.raft_fsync_seconds_sum,
            d.raft_applied_entries_total,
            r.duration_s,
          ),
          ...gcPauseFigures(d, 'leader'),
        }),
      },
      o,
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

async function runEtcd(o: RunOptions): Promise<SideResult> {
  const etcd = await startEtcd(MEMBERS);
  try {
    const leader = await etcd.leader();
    const targets = o.routing === 'leader' ? etcd.members.filter((m) => m.name === leader) : etcd.members;
    process.stderr.write(`bench: etcd's leader is ${leader}; sending to ${targets.map((m) => m.name).join(', ')}\n`);
    const values = makeValues(1024, o.size).map((v) => b64(v));
    const headers = { 'content-type': 'application/json' };
    let n = 0;
    return await measureHttp(
      {
        label: 'etcd',
        system: `etcd ${etcd.version}, ${MEMBERS} members (Debian etcd-server)`,
        members: MEMBERS,
        serverPids: etcd.members.map((m) => m.pid),
        origins: targets.map((m) => m.clientUrl),
        request: () => ({
          method: 'POST',
          path: '/v3/kv/put',
          headers,
          body: `{"key":"${b64(randomKey(o.keys))}","value":"${values[n++ & 1023]!}"}`,
        }),
        extra: { leader, routing: o.routing, version: etcd.version },
        probe: () => scrapeCounters(`${etcd.members.find((m) => m.name === leader)!.clientUrl}/metrics`),
        explain: (d, r) =>
          logSyncFigures(
            d.etcd_disk_wal_fsync_duration_seconds_count,
            d.etcd_disk_wal_fsync_duration_seconds_sum,
            d.etcd_server_proposals_committed_total,
            r.duration_s,
          ),
      },
      o,
    );
  } finally {
    await etcd.stop();
  }
}

/** Issue 21, item 1: against etcd, at 64 and 256 in flight alike. */
const THROUGHPUT_RATIO_GOAL = 1.5;
const P99_RATIO_GOAL = 0.8;

/**
 * Issue 21's kv goal, judged on the run's figures (each side's median round with --rounds): at least 1.5x etcd's
 * PUT/s at a p99 no worse than 0.8x etcd's. The harness's own "goal against etcd" (>= 100% at <= 100%) is the
 * weaker floor every benchmark shares.
 */
export function kvGoals(ours: SideResult, peer: SideResult | null): Goal[] {
  if (peer === null || peer.ops_per_sec <= 0 || peer.p99_ms <= 0) return [];
  const ratio = ours.ops_per_sec / peer.ops_per_sec;
  const p99Ratio = ours.p99_ms / peer.p99_ms;
  return [
    {
      goal: `at least ${THROUGHPUT_RATIO_GOAL}x etcd's throughput at a p99 no worse than ${P99_RATIO_GOAL}x etcd's (issue 21, at ${ours.concurrency} in flight)`,
      met: ratio >= THROUGHPUT_RATIO_GOAL && p99Ratio <= P99_RATIO_GOAL,
      detail: `${round(ratio, 2)}x at ${round(p99Ratio, 2)}x (${ours.ops_per_sec} against ${peer.ops_per_sec} PUT/s, p99 ${ours.p99_ms} against ${peer.p99_ms} ms)`,
    },
  ];
}

export const kvBenchmark: Benchmark = {
  name: 'kv',
  description: `PUTs of fixed-size values to random keys on a ${MEMBERS}-member cluster (vs etcd 3.4 through its JSON gateway)`,
  title: (o) =>
    `kv: PUT ${o.size}-byte values, ${MEMBERS} members${o.vs !== null ? `, ours vs ${o.vs}` : ''}, routing ${o.routing}`,
  peers: ['etcd'],
  // Ten seconds of warm-up, as lock: our members run slower until V8 has optimized their code, and those first
  // seconds would count against ours only (etcd is flat from the start). Figures: RESULTS.md, kv, findings.
  defaults: { durationS: 20, concurrency: 64, size: 256, warmupS: 10 },
  workload: (o) => ({
    operation: 'PUT one key (ours: PUT /v1/kv/{key}; etcd: POST /v3/kv/put)',
    value_bytes: o.size,
    keys: `k0..k${o.keys - 1}, uniform`,
    members: MEMBERS,
    routing:
      o.routing === 'all'
        ? 'worker w -> member w mod 5 (followers forward to the leader)'
        : 'every request to the leader',
    client: 'undici Pool, HTTP/1.1 keep-alive, one connection per worker, closed loop',
  }),
  goals: kvGoals,
  runOurs,
  runPeer: (peer, o) => {
    if (peer !== 'etcd') throw new Error(`kv has no peer ${peer}`);
    return runEtcd(o);
  },
};
