/**
 * `ratelimit`: checks per second and their latency on ONE check instance of our rate-limiting service, over the
 * binary protocol (the package's RateLimitClient) and over HTTP (POST /v1/check), beside Redis 7 running a Lua
 * token bucket of the same semantics called the way envoy's ratelimit calls redis (peers/redis.ts).
 *
 * Workload, the same on both sides: tenant "bench" with two rules on endpoint pattern `/api/*`, one per IP and
 * one per user (capacity CAPACITY, refill CAPACITY/WINDOW_S per second), so every check matches two rules and
 * touches two counters; each check draws its IP and its user uniformly from --keys values. Closed loop: the
 * workers' in-flight checks are the concurrency (the binary client and ioredis both batch what is in flight).
 *
 * Ours: `cluster up --service ratelimit` (its default workers: 2 stores, 3 check instances), the tenant and the
 * rules created through the API; every check goes to check instance 1 (the per-instance figures), whose
 * tenant's counters live on one store shard. The binary run is the headline (the issue's targets are for it);
 * the HTTP run is in `http`. Server CPU counts the check instance and the stores; `check_cpu_us_per_op` is the
 * check instance alone.
 *
 * On a 2-core machine the load generator competes with the servers for the same cores: the client CPU is
 * recorded beside the server CPU, and per-check CPU is the steadier figure.
 */
import { randomUUID } from 'node:crypto';
import { RateLimitClient, type CheckInput } from '@raftkit/ratelimit';
import type { Benchmark, RunOptions, SideResult } from '../benchmark.js';
import { Endpoints, fetchJson, scrapeCounters, send } from '../http.js';
import { OpError } from '../load.js';
import { measure, type SideSpec } from '../measure.js';
import { groupCpuPerOp, groupCpuSeconds, startOurCluster, type OurCluster } from '../ours.js';
import { RedisBuckets, startRedis } from '../peers/redis.js';
import { BenchError, sleep } from '../procs.js';
import { summarizeProfiles } from '../profile.js';

const MEMBERS = 5;
const TENANT = 'bench';
const ENDPOINT_PATTERN = '/api/*';
const ENDPOINT = '/api/orders';
const CAPACITY = 100;
const WINDOW_S = 60;
/** ioredis connections in the Redis pool (envoy's ratelimit defaults to a pool of 10 per redis; one redis
 * process serves them all on one thread, so a few connections carry the same pipelined load). */
const REDIS_POOL = 4;
const P99_GOAL_MS = 1;
const TARGET_CHECKS_PER_S = 100_000;

const DIMENSIONS = ['ip', 'user_id'] as const;
const LIMITS = { capacity: CAPACITY, refillRate: CAPACITY / WINDOW_S };

/** A check's identifiers: IP and user drawn independently and uniformly from `keys` values each. */
function identifiers(keys: number): { ip: string; user_id: string } {
  const ip = Math.floor(Math.random() * keys);
  return { ip: `10.${(ip >> 16) & 255}.${(ip >> 8) & 255}.${ip & 255}`, user_id: `u${Math.floor(Math.random() * keys)}` };
}

/**
 * Counts the answers a side gave, allowed and denied; the probes read the counts as the window opens and closes,
 * so the report has the window's figures. An answer that failed open (allowed with remaining -1: our store did not
 * answer within the check's time budget) counted nothing, so it is a failed operation, not a check.
 */
class Answers {
  allowed = 0;
  denied = 0;

  add(allowed: boolean, remaining: number): void {
    if (allowed && remaining < 0) throw new OpError('fail-open (the store did not answer within the budget)');
    if (allowed) this.allowed++;
    else this.denied++;
  }

  figures(): Record<string, number> {
    return { answers_allowed: this.allowed, answers_denied: this.denied };
  }
}

function answerFigures(delta: Record<string, number>): Record<string, number> {
  return { answers_allowed: delta.answers_allowed ?? 0, answers_denied: delta.answers_denied ?? 0 };
}

interface Setup {
  checkKey: string;
  check: OurCluster['workers'][number];
  stores: OurCluster['workers'];
}

async function setUp(cluster: OurCluster): Promise<Setup> {
  const check = cluster.workers.find((w) => w.role === 'check');
  const stores = cluster.workers.filter((w) => w.role === 'store');
  if (check === undefined || stores.length === 0) throw new BenchError('our ratelimit cluster has no check instance or no store');
  const auth = { authorization: `Bearer ${cluster.token}`, 'content-type': 'application/json' };
  const tenant = await fetchJson(`${check.url}/v1/tenants/${TENANT}`, { method: 'PUT', headers: auth, body: '{}', timeoutMs: 10_000 });
  const checkKey = (tenant.body as { check_key?: unknown } | null)?.check_key;
  if (tenant.status !== 200 || typeof checkKey !== 'string') throw new BenchError(`PUT /v1/tenants/${TENANT} answered ${tenant.status} ${JSON.stringify(tenant.body).slice(0, 200)}`);
  for (const dimension of DIMENSIONS) {
    const rule = { service_id: TENANT, dimension, endpoint_pattern: ENDPOINT_PATTERN, limit: CAPACITY, window_sec: WINDOW_S };
    const put = await fetchJson(`${check.url}/v1/rules/${randomUUID()}`, { method: 'PUT', headers: auth, body: JSON.stringify(rule), timeoutMs: 10_000 });
    if (put.status !== 200) throw new BenchError(`PUT /v1/rules answered ${put.status} ${JSON.stringify(put.body).slice(0, 200)}`);
  }
  // Rules reach the check instances by polling (about a second): wait until a check matches both.
  const deadline = Date.now() + 15_000;
  for (;;) {
    const probe = await fetchJson(`${check.url}/v1/check`, {
      method: 'POST',
      headers: { authorization: `Bearer ${checkKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ service_id: TENANT, endpoint: ENDPOINT, identifiers: { ip: 'setup', user_id: 'setup' } }),
    });
    if (probe.status === 200 && (probe.body as { rules?: unknown }).rules === DIMENSIONS.length) break;
    if (Date.now() > deadline) throw new BenchError(`check instance ${check.id} did not pick up the rules: ${probe.status} ${JSON.stringify(probe.body).slice(0, 200)}`);
    await sleep(200);
  }
  return { checkKey, check, stores };
}

async function runOurs(o: RunOptions): Promise<SideResult> {
  const env: NodeJS.ProcessEnv = {};
  if (o.profileDir !== null) {
    env.NODE_OPTIONS = `${process.env.NODE_OPTIONS ?? ''} --import=${new URL('../profile-preload.js', import.meta.url).href}`.trim();
    env.BENCH_PROFILE_DIR = o.profileDir;
  }
  const cluster = await startOurCluster({ service: 'ratelimit', nodes: MEMBERS, env });
  try {
    const { checkKey, check, stores } = await setUp(cluster);
    process.stderr.write(`bench: every check goes to ${check.id} (binary ${check.tcpAddress}, then HTTP ${check.url}); stores ${stores.map((s) => s.id).join(', ')}\n`);
    const groups = { check: [check.pid], stores: stores.map((s) => s.pid) };
    const side = (label: string, protocol: string, answers: Answers, op: SideSpec['op']): SideSpec => ({
      label,
      system: `raftkit ratelimit, one check instance over ${protocol} (+ ${stores.length} store shards)`,
      members: MEMBERS,
      serverPids: Object.values(groups).flat(),
      op,
      probe: async () => ({ ...groupCpuSeconds(groups), ...answers.figures(), ...(await scrapeCounters(`${check.url}/metrics`)) }),
      explain: (d, r) => ({
        ...groupCpuPerOp(d, Object.keys(groups), r.ops),
        ...answerFigures(d),
        fail_open_rule_evaluations: d.ratelimit_fail_open_total ?? 0,
        protocol,
      }),
    });

    const binaryAnswers = new Answers();
    const client = new RateLimitClient({ addresses: [check.tcpAddress], token: checkKey });
    let binary: SideResult;
    try {
      binary = await measure(
        side('binary', 'the binary protocol (RateLimitClient)', binaryAnswers, async () => {
          const input: CheckInput = { serviceId: TENANT, endpoint: ENDPOINT, identifiers: identifiers(o.keys) };
          const r = await client.check(input);
          binaryAnswers.add(r.allowed, r.remaining);
        }),
        o,
      );
    } finally {
      client.close();
    }

    const httpAnswers = new Answers();
    const endpoints = new Endpoints([check.url], o.concurrency);
    const headers = { authorization: `Bearer ${checkKey}`, 'content-type': 'application/json' };
    let http: SideResult;
    try {
      http = await measure(
        side('http', 'HTTP (POST /v1/check)', httpAnswers, async (w) => {
          const body = JSON.stringify({ service_id: TENANT, endpoint: ENDPOINT, identifiers: identifiers(o.keys) });
          const r = JSON.parse(await send(endpoints.forWorker(w), { method: 'POST', path: '/v1/check', headers, body })) as { allowed: boolean; remaining: number };
          httpAnswers.add(r.allowed, r.remaining);
        }),
        o,
      );
    } finally {
      await endpoints.close();
    }
    const goals = { p99_under_1ms: binary.p99_ms < P99_GOAL_MS, checks_per_s_at_least_100k: binary.ops_per_sec >= TARGET_CHECKS_PER_S };
    process.stdout.write(formatRow('ours, binary', binary) + formatRow('ours, HTTP', http));
    return { ...binary, http, goals };
  } finally {
    await cluster.stop();
    if (o.profileDir !== null) {
      const summary = summarizeProfiles(o.profileDir, cluster.workers.map((w) => w.pid));
      if (summary !== null) process.stderr.write(`bench: CPU profiles of our workers in ${o.profileDir}\n${summary}\n`);
    }
  }
}

async function runRedis(o: RunOptions): Promise<SideResult> {
  const redis = await startRedis();
  try {
    const pool = await RedisBuckets.open(redis.port, REDIS_POOL);
    try {
      const answers = new Answers();
      const result = await measure(
        {
          label: 'redis',
          system: `redis-server ${redis.version} (Debian), Lua token bucket via EVALSHA, ioredis auto-pipelining over ${REDIS_POOL} connections`,
          members: 1,
          serverPids: [redis.pid],
          op: async () => {
            const ids = identifiers(o.keys);
            const keys = DIMENSIONS.map((d) => `${TENANT}:${ENDPOINT_PATTERN}:${d}:${ids[d]}`);
            const r = await pool.check(keys, [LIMITS, LIMITS]);
            answers.add(r.allowed, r.remaining);
          },
          probe: () => Promise.resolve(answers.figures()),
          explain: (d) => ({ ...answerFigures(d), version: redis.version, connections: REDIS_POOL, call: "one EVALSHA per check, both rules' counters as KEYS" }),
        },
        o,
      );
      process.stdout.write(formatRow('redis', result));
      return result;
    } finally {
      pool.close();
    }
  } finally {
    await redis.stop();
  }
}

function formatRow(name: string, s: SideResult): string {
  return (
    `${name.padEnd(13)} ${String(s.ops_per_sec).padStart(7)} checks/s  p50 ${s.p50_ms.toFixed(3)} ms  p99 ${s.p99_ms.toFixed(3)} ms  errors ${s.errors}  ` +
    `server CPU ${s.server_cpu_us_per_op ?? '-'} us/check${s.check_cpu_us_per_op !== undefined ? ` (check instance ${String(s.check_cpu_us_per_op)})` : ''}  client CPU ${s.client_cpu_cores} cores\n`
  );
}

export const ratelimitBenchmark: Benchmark = {
  name: 'ratelimit',
  description: 'checks on one check instance of ours over the binary protocol and over HTTP (vs Redis 7 with a Lua token bucket)',
  title: (o) => `ratelimit: checks on one instance, 2 rules each, ${o.concurrency} in flight${o.vs !== null ? `, ours (binary) vs ${o.vs}` : ''}`,
  peers: ['redis'],
  target: { ops_per_sec: TARGET_CHECKS_PER_S, note: 'checks/s per instance over the binary protocol, p99 under 1 ms (the issue)' },
  defaults: { durationS: 10, concurrency: 64, size: 0, warmupS: 3 },
  workload: (o) => ({
    operation: `a check of tenant ${TENANT}, endpoint ${ENDPOINT}, matching 2 rules (per ip, per user_id; limit ${CAPACITY} per ${WINDOW_S} s): 2 counters per check`,
    identifiers: `ip and user_id each uniform over ${o.keys} values`,
    ours: 'one check instance: binary protocol with RateLimitClient (headline), then HTTP POST /v1/check with undici keep-alive',
    redis: `redis-server 7, one EVALSHA of the token-bucket script per check (all its rules' counters as KEYS, all or nothing like our store), ioredis enableAutoPipelining over ${REDIS_POOL} connections`,
    concurrency: 'closed loop: in-flight checks = --concurrency, equal for both sides',
    goals: `p99 < ${P99_GOAL_MS} ms and >= ${TARGET_CHECKS_PER_S.toLocaleString('en-US')} checks/s per instance over the binary protocol; beat redis at equal concurrency`,
  }),
  runOurs,
  runPeer: (peer, o) => {
    if (peer !== 'redis') throw new Error(`ratelimit has no peer ${peer}`);
    return runRedis(o);
  },
};
