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
 * With --sweep, the run repeats at rising rates and reports, for each side, the highest rate whose acquire p99
 * stayed under 50 ms.
 */
import type { Pool } from 'undici';
import type { Benchmark, RunOptions, SideResult } from '../benchmark.js';
import { Endpoints, send } from '../http.js';
import { OpError } from '../load.js';
import { measure } from '../measure.js';
import { startOurCluster } from '../ours.js';
import { b64, startEtcd } from '../peers/etcd.js';
import { round, summarize } from '../stats.js';

const MEMBERS = 5;
const NAMES = 10_000;
const P99_GOAL_MS = 50;

function rateFromArgs(): number {
  const i = process.argv.indexOf('--rate');
  const rate = i >= 0 ? Number(process.argv[i + 1]) : 10_000;
  if (!Number.isFinite(rate) || rate <= 0) throw new Error('--rate must be a positive number of lock operations per second');
  return rate;
}

/** What one side needs to run cycles: open per-worker state, then acquire and release. */
interface LockApi {
  open(pool: Pool, worker: number): Promise<void>;
  acquire(pool: Pool, worker: number, name: string): Promise<string>;
  release(pool: Pool, worker: number, name: string, grant: string): Promise<void>;
  close(pool: Pool, worker: number): Promise<void>;
}

async function runCycles(label: string, system: string, pids: number[], origins: string[], api: LockApi, o: RunOptions, rate: number, extra: Record<string, unknown>): Promise<SideResult> {
  const endpoints = new Endpoints(origins, o.concurrency);
  const opened = new Set<number>();
  const acquireMs: number[] = [];
  let contended = 0;
  // Two lock operations per cycle: each worker starts a cycle every concurrency * 2 / rate seconds.
  const cycleGapMs = (o.concurrency * 2 * 1000) / rate;
  const next = new Map<number, number>();
  // The load generator's warm-up is not counted; neither are acquires scheduled during it.
  const measureFrom = performance.now() + o.warmupS * 1000;
  try {
    const result = await measure(
      {
        label,
        system,
        members: MEMBERS,
        serverPids: pids,
        op: async (w) => {
          const pool = endpoints.forWorker(w);
          if (!opened.has(w)) {
            await api.open(pool, w);
            opened.add(w);
            next.set(w, performance.now() + Math.random() * cycleGapMs);
          }
          const scheduled = next.get(w)!;
          next.set(w, scheduled + cycleGapMs);
          const wait = scheduled - performance.now();
          if (wait > 0) await new Promise((r) => setTimeout(r, wait));
          const name = `bench-${Math.floor(Math.random() * NAMES)}`;
          let grant: string;
          try {
            grant = await api.acquire(pool, w, name);
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
          await api.release(pool, w, name, grant);
        },
        extra: { ...extra, target_lock_ops_per_sec: rate, names: NAMES },
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
    await endpoints.close();
  }
}

function oursApi(token: string): LockApi & { sessions: Map<number, string> } {
  const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
  const sessions = new Map<number, string>();
  const beats = new Map<number, NodeJS.Timeout>();
  return {
    sessions,
    async open(pool, w) {
      const body = JSON.parse(await send(pool, { method: 'POST', path: '/v1/sessions', headers, body: '{"timeout_ms":30000}' })) as { session_id: string };
      sessions.set(w, body.session_id);
      const beat = setInterval(() => void send(pool, { method: 'POST', path: `/v1/sessions/${body.session_id}/heartbeat`, headers, body: '' }).catch(() => undefined), 5_000);
      beat.unref();
      beats.set(w, beat);
    },
    async acquire(pool, w, name) {
      const text = await send(pool, { method: 'POST', path: `/v1/locks/${name}/acquire`, headers, body: `{"session_id":"${sessions.get(w)}","wait":false}` });
      const body = JSON.parse(text) as { granted: boolean; fencing_token?: number };
      if (!body.granted) throw new OpError('contended');
      return String(body.fencing_token);
    },
    async release(pool, w, name, grant) {
      await send(pool, { method: 'POST', path: `/v1/locks/${name}/release`, headers, body: `{"session_id":"${sessions.get(w)}","fencing_token":${grant}}` });
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
    async open(pool, w) {
      const body = JSON.parse(await send(pool, { method: 'POST', path: '/v3/lease/grant', headers, body: '{"TTL":30}' })) as { ID: string };
      leases.set(w, body.ID);
      const beat = setInterval(() => void send(pool, { method: 'POST', path: '/v3/lease/keepalive', headers, body: `{"ID":"${body.ID}"}` }).catch(() => undefined), 5_000);
      beat.unref();
      beats.set(w, beat);
    },
    async acquire(pool, w, name) {
      // etcd's lock waits while the name is held; with 10,000 names and this concurrency that is rare.
      const body = JSON.parse(await send(pool, { method: 'POST', path: '/v3/lock/lock', headers, body: `{"name":"${b64(name)}","lease":"${leases.get(w)}"}` })) as { key: string };
      return body.key;
    },
    async release(pool, _w, _name, key) {
      await send(pool, { method: 'POST', path: '/v3/lock/unlock', headers, body: `{"key":"${key}"}` });
    },
    async close(pool, w) {
      clearInterval(beats.get(w));
      await send(pool, { method: 'POST', path: '/v3/lease/revoke', headers, body: `{"ID":"${leases.get(w)}"}` });
    },
  };
}

async function runOurs(o: RunOptions): Promise<SideResult> {
  const cluster = await startOurCluster({ service: 'lock', nodes: MEMBERS });
  try {
    const leader = await cluster.leader();
    const targets = o.routing === 'leader' ? cluster.members.filter((m) => m.id === leader) : cluster.members;
    return await runCycles('ours', `raftkit lock, ${MEMBERS} members`, cluster.members.map((m) => m.pid), targets.map((m) => m.url), oursApi(cluster.token), o, rateFromArgs(), { leader, routing: o.routing });
  } finally {
    await cluster.stop();
  }
}

async function runEtcd(o: RunOptions): Promise<SideResult> {
  const etcd = await startEtcd(MEMBERS);
  try {
    const leader = await etcd.leader();
    const targets = o.routing === 'leader' ? etcd.members.filter((m) => m.name === leader) : etcd.members;
    return await runCycles('etcd', `etcd ${etcd.version} v3lock, ${MEMBERS} members (Debian etcd-server)`, etcd.members.map((m) => m.pid), targets.map((m) => m.clientUrl), etcdApi(), o, rateFromArgs(), { leader, routing: o.routing, version: etcd.version });
  } finally {
    await etcd.stop();
  }
}

export const lockBenchmark: Benchmark = {
  name: 'lock',
  description: `acquire+release cycles on ${NAMES} lock names at --rate lock operations/s (default 10,000) on a ${MEMBERS}-member cluster (vs etcd 3.4 v3lock)`,
  title: (o) => `lock: acquire+release at ${rateFromArgs()} lock ops/s, ${MEMBERS} members${o.vs !== null ? `, ours vs ${o.vs}` : ''}`,
  peers: ['etcd'],
  defaults: { durationS: 20, concurrency: 128, size: 0, warmupS: 3 },
  workload: (o) => ({
    operation: 'acquire then release one lock (ours: /v1/locks/{name}/acquire + release in a session; etcd: /v3/lock/lock + unlock with a lease)',
    target_lock_ops_per_sec: rateFromArgs(),
    names: NAMES,
    p99_goal_ms: P99_GOAL_MS,
    members: MEMBERS,
    routing: o.routing === 'all' ? 'worker w -> member w mod 5' : 'every request to the leader',
    pacing: 'each worker starts a cycle every concurrency*2/rate seconds; acquire latency from the scheduled start',
  }),
  runOurs,
  runPeer: (peer, o) => {
    if (peer !== 'etcd') throw new Error(`lock has no peer ${peer}`);
    return runEtcd(o);
  },
};
