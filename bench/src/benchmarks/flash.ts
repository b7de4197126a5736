/**
 * `flash`: a go-live burst against the flash-deal service (issue 16), ours against the same gateways with the
 * inventory as Redis counters decremented in Lua (the industry's usual design: ../peers/redis-inventory.ts, passed
 * to flash's gateway by the peer's own gateway processes, ../peers/flash-redis.ts). Everything in front of the
 * inventory is the same gateway code, so the comparison is about the inventory.
 *
 * One side, fresh processes (ours: `cluster up --service flash`, 5 members and 2 gateways; the peer: a
 * redis-server holding the inventory and 2 gateway processes on it, no members):
 * 1. USERS simulated users (`--keys`, at most MAX_USERS) are registered (older than 30 days, payment verified) and
 *    each solves the bot check (4 bits) before go-live; each has its own client address (X-Forwarded-For, the
 *    gateways run with trust_proxy) so the per-IP limit sees a crowd, as behind a real edge.
 * 2. A deal of 1,000 units in 20 shards goes live; `--concurrency` connections (spread over the two gateways)
 *    send attempts in a closed loop, each from the next user in turn with a fresh idempotency key, from go-live
 *    until the 1,000th win ("burst"), then for `--duration` seconds more ("rejection": every answer is a local
 *    rejection: sold out from the bitmap or the token pool, or a rate limit).
 * 3. The bare node:http answer (one JSON answer per request, peers/node-json-server.ts, two processes like the
 *    two gateways) under the same load loop with the same requests (the crowd's attempts, fresh keys) for
 *    `--duration` seconds, right after the rejection window while ours is still up and idle as it was then: the
 *    same client work and the same machine, so the two CPU figures are taken at comparable request rates.
 *
 * Figures: requests/s in the rejection window (the side's ops_per_sec); the winning path's latency (the side's
 * p50/p99: attempts answered won, from send to answer); go-live to sold out (start_at to the 1,000th win's answer);
 * the fraction of requests answered before the inventory (the gateways' flash_attempts_total by gate: all but
 * gate="inventory"); server CPU per rejected request (rejection window: gateways, and members or redis) and per winning
 * request (burst window's CPU less its rejected requests at the rejection window's cost, over the wins); oversell
 * (distinct reservations won beyond 1,000, and the state's remaining after the run).
 */
import { fileURLToPath } from 'node:url';
import { createHash } from 'node:crypto';
import { Pool } from 'undici';
import type { Benchmark, Goal, RunOptions, SideResult } from '../benchmark.js';
import { fetchJson } from '../http.js';
import { startOurCluster } from '../ours.js';
import { startRedisGateways } from '../peers/flash-redis.js';
import { startRedis } from '../peers/redis.js';
import { startNodeServers } from '../peers/daemon.js';
import { BenchError, cpuSeconds, sleep } from '../procs.js';
import { monotonicUs, summarizeProfiles, type ProfileWindow } from '../profile.js';
import { round, summarize } from '../stats.js';

const MEMBERS = 5;
const GATEWAYS = 2;
const UNITS = 1000;
const SHARDS = 20;
const MAX_USERS = 10_000;
const CHALLENGE_BITS = 4;
const SETUP_CONCURRENCY = 64;
const REJECTION_GOAL = 1.3;
const WIN_P99_GOAL = 2;
const jsonServer = fileURLToPath(new URL('../peers/node-json-server.js', import.meta.url));

interface User {
  id: string;
  token: string;
  bot: string;
  ip: string;
  keys: number;
}

/** One request's answer, as the load loop saw it. */
type Kind = 'won' | 'lost' | 'queued' | 'rejected' | 'error';

function users(o: RunOptions): number {
  return Math.min(o.keys, MAX_USERS);
}

function solve(challenge: string, bits: number): string {
  for (let nonce = 0; ; nonce++) {
    const d = createHash('sha256').update(`${challenge}:${nonce}`).digest();
    const lead = d.readUInt32BE(0);
    if ((lead === 0 ? 32 : Math.clz32(lead)) >= bits) return String(nonce);
  }
}

async function pool<T>(items: readonly T[], n: number, work: (item: T, i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(n, items.length) }, async () => {
      while (next < items.length) {
        const i = next++;
        await work(items[i]!, i);
      }
    }),
  );
}

async function must(
  url: string,
  init: { method: string; headers: Record<string, string>; body?: unknown },
  what: string,
): Promise<Record<string, unknown>> {
  for (let i = 0; ; i++) {
    const r = await fetchJson(url, {
      method: init.method,
      headers: { 'content-type': 'application/json', ...init.headers },
      ...(init.body !== undefined ? { body: JSON.stringify(init.body) } : {}),
      timeoutMs: 10_000,
    });
    if (r.status >= 200 && r.status < 300) return r.body as Record<string, unknown>;
    if (i >= 20 || (r.status >= 400 && r.status < 500 && r.status !== 429 && r.status !== 409))
      throw new BenchError(`${what}: HTTP ${r.status} ${JSON.stringify(r.body).slice(0, 200)}`);
    await sleep(250);
  }
}

/** The gateways' flash_attempts_total, summed by gate. */
async function attemptsByGate(urls: string[]): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const url of urls) {
    const r = await fetchJson(`${url}/metrics`, { timeoutMs: 5_000 });
    if (typeof r.body !== 'string') continue;
    for (const line of r.body.split('\n')) {
      const m = /^flash_attempts_total\{([^}]*)\}\s+(\S+)$/.exec(line);
      if (m === null) continue;
      const gate = /gate="([^"]*)"/.exec(m[1]!)?.[1] ?? 'unknown';
      out[gate] = (out[gate] ?? 0) + Number(m[2]);
    }
  }
  return out;
}

function cpuOf(pids: number[]): number {
  return pids.reduce((s, pid) => s + (cpuSeconds(pid) ?? 0), 0);
}

/**
 * The closed load loop shared by every phase: `concurrency` connections, worker w on origin w mod n, each sending
 * `request(worker)` and classifying the answer, until `stop()` says so.
 */
async function loop(
  origins: string[],
  concurrency: number,
  request: (w: number) => { path: string; headers: Record<string, string>; body: string },
  onAnswer: (kind: Kind, ms: number, body: unknown) => void,
  stop: () => boolean,
): Promise<void> {
  const per = Math.max(1, Math.ceil(concurrency / origins.length));
  const pools = origins.map(
    (o) =>
      new Pool(o, {
        connections: per,
        pipelining: 1,
        keepAliveTimeout: 30_000,
        headersTimeout: 10_000,
        bodyTimeout: 10_000,
      }),
  );
  try {
    await Promise.all(
      Array.from({ length: concurrency }, async (_, w) => {
        const p = pools[w % pools.length]!;
        while (!stop()) {
          const r = request(w);
          const t0 = performance.now();
          try {
            const res = await p.request({ method: 'POST', path: r.path, headers: r.headers, body: r.body });
            const text = await res.body.text();
            const ms = performance.now() - t0;
            // 429: bot check or rate limit; 409 deal_not_live: before this gateway saw the go-live broadcast.
            if (res.statusCode === 429 || res.statusCode === 409) onAnswer('rejected', ms, null);
            else if (res.statusCode === 200 || res.statusCode === 202) {
              const body = JSON.parse(text) as { status?: string };
              onAnswer(body.status === 'won' ? 'won' : body.status === 'queued' ? 'queued' : 'lost', ms, body);
            } else onAnswer('error', ms, text.slice(0, 200));
          } catch (e) {
            onAnswer('error', performance.now() - t0, String((e as Error).message));
            await sleep(5);
          }
        }
      }),
    );
  } finally {
    await Promise.all(pools.map((p) => p.destroy().catch(() => undefined)));
  }
}

/**
 * The bare node:http answer under the same loop and the same requests as the rejection window (the crowd's
 * attempts, each user in turn with a fresh key: the same bytes, and the same work for the load loop), while our
 * cluster is still up and idle as it was during that window: requests/s and CPU per request.
 */
async function bare(
  o: RunOptions,
  request: () => { path: string; headers: Record<string, string>; body: string },
): Promise<Record<string, number | null>> {
  const servers = await startNodeServers('bare node:http servers', jsonServer, GATEWAYS);
  try {
    const origins = servers.origins;
    let n = 0;
    const until = Date.now() + 1000 + o.durationS * 1000;
    let cpu0 = 0;
    let t0 = 0;
    let counting = false;
    setTimeout(() => {
      counting = true;
      cpu0 = cpuOf(servers.pids);
      t0 = performance.now();
    }, 1000);
    await loop(
      origins,
      o.concurrency,
      request,
      () => void (counting && n++),
      () => Date.now() >= until,
    );
    const seconds = (performance.now() - t0) / 1000;
    const cpu = cpuOf(servers.pids) - cpu0;
    return {
      bare_requests_per_s: round(n / seconds, 0),
      bare_cpu_us_per_request: n === 0 ? null : round((cpu * 1e6) / n, 1),
      bare_requests: n,
    };
  } finally {
    await servers.stop();
  }
}

/** The gateways' settings, the same on both sides. */
const GATEWAY_SETTINGS = { challenge_bits: String(CHALLENGE_BITS), trust_proxy: '1', expected_peak_rps: '100' };

/** One side's processes: its gateways, every server process (gateways, and members or redis) and how to stop them. */
interface Side {
  token: string;
  gateways: Array<{ url: string; pid: number }>;
  serverPids(): number[];
  stop(): Promise<void>;
}

async function ourSide(o: RunOptions): Promise<Side> {
  const cluster = await startOurCluster({
    service: 'flash',
    nodes: MEMBERS,
    workers: { gateway: GATEWAYS },
    settings: GATEWAY_SETTINGS,
    env: profileEnv(o),
  });
  return {
    token: cluster.token,
    gateways: cluster.workers.filter((w) => w.role === 'gateway'),
    serverPids: () => [...cluster.members.map((m) => m.pid), ...cluster.workers.map((w) => w.pid)],
    stop: () => cluster.stop(),
  };
}

async function runSide(system: string, o: RunOptions, side: Side, withBare = false): Promise<SideResult> {
  // --profile: the rejection window, as the profiles' clock counts it (the gateways' summary covers it alone).
  const rejectionWindow: ProfileWindow = { fromUs: 0, toUs: 0 };
  try {
    const gws = side.gateways.map((w) => w.url);
    if (gws.length === 0) throw new BenchError('the flash side has no gateways');
    const serverPids = (): number[] => side.serverPids();
    const gatewayPids = (): number[] => side.gateways.map((w) => w.pid);
    const n = users(o);
    const admin = { authorization: `Bearer ${side.token}` };
    const age = new Date(Date.now() - 60 * 86_400_000).toISOString();
    const crowd: User[] = Array.from({ length: n }, (_, i) => ({
      id: `u${i}`,
      token: '',
      bot: '',
      ip: `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`,
      keys: 0,
    }));
    const t0 = Date.now();
    process.stderr.write(`bench: ${system}: registering ${n} users\n`);
    await pool(crowd, SETUP_CONCURRENCY, async (u, i) => {
      const r = await must(
        `${gws[i % gws.length]}/api/flash/accounts/${u.id}`,
        { method: 'PUT', headers: admin, body: { created_at: age, payment_verified: true } },
        `register ${u.id}`,
      );
      u.token = String(r.user_token);
    });
    const registerMs = Date.now() - t0;
    const startAt = Date.now() + Math.max(20_000, 4 * registerMs + 10_000);
    const deal = await must(
      `${gws[0]}/api/flash/deals`,
      {
        method: 'POST',
        headers: admin,
        body: {
          sku_id: 'bench',
          total_inventory: UNITS,
          start_at: new Date(startAt).toISOString(),
          end_at: new Date(startAt + 3_600_000).toISOString(),
          shards: SHARDS,
        },
      },
      'create the deal',
    );
    const dealId = String(deal.deal_id);
    process.stderr.write(
      `bench: ${system}: deal ${dealId}, ${UNITS} units in ${SHARDS} shards, go-live in ${((startAt - Date.now()) / 1000).toFixed(1)} s; solving ${n} bot checks\n`,
    );
    await pool(crowd, SETUP_CONCURRENCY, async (u, i) => {
      const g = gws[i % gws.length]!;
      const h = { authorization: `Bearer ${u.token}`, 'x-forwarded-for': u.ip };
      const c = await must(
        `${g}/api/flash/${dealId}/challenge`,
        { method: 'POST', headers: h, body: { user_id: u.id } },
        `challenge ${u.id}`,
      );
      const a = await must(
        `${g}/api/flash/${dealId}/challenge/answer`,
        {
          method: 'POST',
          headers: h,
          body: { user_id: u.id, challenge: c.challenge, nonce: solve(String(c.challenge), Number(c.difficulty)) },
        },
        `answer ${u.id}`,
      );
      u.bot = String(a.anti_bot_token);
    });
    if (Date.now() > startAt) throw new BenchError(`${system}: the setup ran past go-live`);
    await sleep(startAt - Date.now());

    // The load: every request the next user in turn, with a fresh key.
    let next = 0;
    const request = (): { path: string; headers: Record<string, string>; body: string } => {
      const u = crowd[next++ % crowd.length]!;
      return {
        path: `/api/flash/${dealId}/attempt`,
        headers: {
          'content-type': 'application/json',
          authorization: `Bearer ${u.token}`,
          'x-forwarded-for': u.ip,
          cookie: `flash_bot=${u.bot}`,
        },
        body: JSON.stringify({ user_id: u.id, idempotency_key: `${u.id}-${u.keys++}`, anti_bot_token: u.bot }),
      };
    };
    const won = new Map<string, string>();
    const winMs: number[] = [];
    const rejectMs: number[] = [];
    // won: a new reservation (the winning path); replayed: a winner's later request answered its win locally (the
    // gateway's winners list); lost: sold out or lost after the re-route; rejected: 429 or 409 (not live yet).
    const counts = {
      burst: { won: 0, replayed: 0, lost: 0, queued: 0, rejected: 0, error: 0 },
      rejection: { won: 0, replayed: 0, lost: 0, queued: 0, rejected: 0, error: 0 },
    };
    const errors: Record<string, number> = {};
    let phase: 'burst' | 'rejection' = 'burst';
    let soldOutAt: number | null = null;
    let lastWinAt = Date.now();
    const gates0 = await attemptsByGate(gws);
    const cpuStart = cpuOf(serverPids());
    let cpuSoldOut = 0;
    let gwCpuSoldOut = 0;
    let rejectionEnds = Number.POSITIVE_INFINITY;
    let gatesSoldOut: Record<string, number> = {};
    const enterRejection = (): void => {
      phase = 'rejection';
      rejectionWindow.fromUs = monotonicUs();
      cpuSoldOut = cpuOf(serverPids());
      gwCpuSoldOut = cpuOf(gatewayPids());
      rejectionEnds = Date.now() + o.durationS * 1000;
      void attemptsByGate(gws).then((g) => (gatesSoldOut = g));
    };
    const burstLimit = Date.now() + 120_000;
    process.stderr.write(`bench: ${system}: go-live: ${o.concurrency} connections over ${gws.length} gateways\n`);
    await loop(
      gws,
      o.concurrency,
      request,
      (kind, ms, body) => {
        const fresh = kind === 'won' && !won.has(String((body as { reservation_id?: string }).reservation_id));
        counts[phase][kind === 'won' && !fresh ? 'replayed' : kind]++;
        if (fresh) {
          // A new reservation: the winning path (a winner's later request is answered its win from the gateway's
          // winners list, locally, and counts with the local answers).
          won.set(String((body as { reservation_id?: string }).reservation_id), '');
          winMs.push(ms);
          lastWinAt = Date.now();
          if (won.size >= UNITS && soldOutAt === null) {
            soldOutAt = Date.now();
            if (phase === 'burst') enterRejection();
          }
        } else if (phase === 'rejection' && kind !== 'error') rejectMs.push(ms);
        if (kind === 'error') {
          const k = String(body).slice(0, 60);
          errors[k] = (errors[k] ?? 0) + 1;
        }
      },
      () => {
        const now = Date.now();
        // Not every unit may be won within the burst (a unit held by a queued attempt): after 3 s without a win,
        // once the gateways answer sold out, the burst is over.
        if (phase === 'burst' && ((counts.burst.lost > 0 && now - lastWinAt > 3_000) || now > burstLimit))
          enterRejection();
        return now >= rejectionEnds;
      },
    );
    rejectionWindow.toUs = monotonicUs();
    const cpuEnd = cpuOf(serverPids());
    const gwCpuEnd = cpuOf(gatewayPids());
    const gatesEnd = await attemptsByGate(gws);
    const state = await fetchJson(`${gws[0]}/api/flash/${dealId}/state`, { timeoutMs: 5_000 });
    const remaining = (state.body as { remaining?: unknown } | null)?.remaining;

    const burstRequests = Object.values(counts.burst).reduce((a, b) => a + b, 0);
    // Every answer of the rejection window is given by a gateway from local memory (checked: gate counts).
    const rejectionRequests =
      counts.rejection.lost + counts.rejection.rejected + counts.rejection.replayed + counts.rejection.won;
    const rejectionS = o.durationS;
    const cpuReject = rejectionRequests === 0 ? null : (cpuEnd - cpuSoldOut) / rejectionRequests;
    const burstRejected = counts.burst.lost + counts.burst.rejected + counts.burst.replayed;
    const cpuWin =
      counts.burst.won === 0 || cpuReject === null
        ? null
        : (cpuSoldOut - cpuStart - burstRejected * cpuReject) / counts.burst.won;
    const totalGate = (g: Record<string, number>): number => Object.values(g).reduce((a, b) => a + b, 0);
    const delta: Record<string, number> = {};
    for (const [gate, v] of Object.entries(gatesEnd)) delta[gate] = v - (gates0[gate] ?? 0);
    const all = totalGate(delta);
    const win = summarize(winMs);
    const rej = summarize(rejectMs);
    const result: SideResult = {
      system,
      members: MEMBERS,
      ops_per_sec: round(rejectionRequests / rejectionS, 0),
      ops: rejectionRequests,
      errors: counts.burst.error + counts.rejection.error,
      error_kinds: errors,
      duration_s: rejectionS,
      warmup_s: 0,
      concurrency: o.concurrency,
      interrupted: false,
      mean_ms: win.mean_ms,
      p50_ms: win.p50_ms,
      p90_ms: win.p90_ms,
      p99_ms: win.p99_ms,
      p999_ms: win.p999_ms,
      max_ms: win.max_ms,
      server_cpu_s: round(cpuEnd - cpuSoldOut, 2),
      server_cpu_cores: round((cpuEnd - cpuSoldOut) / rejectionS, 2),
      server_cpu_us_per_op: cpuReject === null ? null : round(cpuReject * 1e6, 1),
      client_cpu_cores: 0,
      users: n,
      units: UNITS,
      shards: SHARDS,
      gateways: gws.length,
      go_live_to_sold_out_s: soldOutAt === null ? null : round((soldOutAt - startAt) / 1000, 3),
      wins: won.size,
      oversell:
        Math.max(0, won.size - UNITS) +
        (typeof remaining === 'number' && won.size + remaining > UNITS
          ? won.size + remaining - UNITS - Math.max(0, won.size - UNITS)
          : 0),
      remaining_after: typeof remaining === 'number' ? remaining : null,
      burst_requests: burstRequests,
      burst_answers: counts.burst,
      rejection_answers: counts.rejection,
      win_p50_ms: win.p50_ms,
      win_p99_ms: win.p99_ms,
      reject_p50_ms: rej.p50_ms,
      reject_p99_ms: rej.p99_ms,
      requests_per_s_rejection: round(rejectionRequests / rejectionS, 0),
      cpu_us_per_rejected: cpuReject === null ? null : round(cpuReject * 1e6, 1),
      gateway_cpu_us_per_rejected:
        rejectionRequests === 0 ? null : round(((gwCpuEnd - gwCpuSoldOut) * 1e6) / rejectionRequests, 1),
      cpu_us_per_win: cpuWin === null ? null : round(cpuWin * 1e6, 1),
      answered_before_inventory: all === 0 ? null : round(1 - (delta.inventory ?? 0) / all, 4),
      answered_before_inventory_burst:
        totalGate(gatesSoldOut) === 0
          ? null
          : round(
              1 -
                ((gatesSoldOut.inventory ?? 0) - (gates0.inventory ?? 0)) /
                  (totalGate(gatesSoldOut) - totalGate(gates0)),
              4,
            ),
      attempts_by_gate: delta,
    };
    if (withBare) {
      process.stderr.write('bench: bare node:http answer (the same requests; this side still up, idle)\n');
      Object.assign(result, await bare(o, request));
    }
    process.stderr.write(
      `bench: ${system}: sold out ${String(result.go_live_to_sold_out_s)} s after go-live, ${won.size} wins, win p50/p99 ${win.p50_ms}/${win.p99_ms} ms, rejection ${String(result.requests_per_s_rejection)} req/s at ${String(result.cpu_us_per_rejected)} us CPU each\n`,
    );
    return result;
  } finally {
    await side.stop();
    if (o.profileDir !== null) {
      // --profile: the gateways' CPU profiles (the rejection path is theirs), written as they exit; the summary
      // counts the rejection window's samples only (the whole run is in the files).
      const summary = summarizeProfiles(
        o.profileDir,
        side.gateways.map((w) => w.pid),
        undefined,
        rejectionWindow.toUs > rejectionWindow.fromUs ? rejectionWindow : undefined,
      );
      if (summary !== null)
        process.stderr.write(
          `bench: ${system}: CPU profiles of the gateways in ${o.profileDir} (summary: the rejection window)\n${summary}\n`,
        );
    }
  }
}

/** --profile: our processes preload the profiler (bench/src/profile-preload.ts). */
function profileEnv(o: RunOptions): NodeJS.ProcessEnv {
  if (o.profileDir === null) return {};
  return {
    NODE_OPTIONS:
      `${process.env.NODE_OPTIONS ?? ''} --import=${new URL('../profile-preload.js', import.meta.url).href}`.trim(),
    BENCH_PROFILE_DIR: o.profileDir,
  };
}

export const flashBenchmark: Benchmark = {
  name: 'flash',
  description:
    'go-live burst of the flash-deal service: 1,000 units in 20 shards, thousands of users through 2 gateways; ours (Raft, 5 members) vs the same gateways on Redis DECR-in-Lua; plus a bare node:http answer',
  title: (o) => `flash go-live burst, ${users(o)} users, ${o.concurrency} connections`,
  peers: ['redis'],
  defaults: { durationS: 10, concurrency: 128, size: 0, warmupS: 0 },
  workload: (o) => ({
    users: users(o),
    units: UNITS,
    shards: SHARDS,
    gateways: GATEWAYS,
    members: MEMBERS,
    challenge_bits: CHALLENGE_BITS,
    connections: o.concurrency,
    rejection_window_s: o.durationS,
    keys: 'a fresh idempotency key per request, users in turn',
  }),
  goals(ours, peer) {
    const goals: Goal[] = [];
    goals.push({
      goal: 'zero oversell (ours)',
      met: ours.oversell === 0,
      detail: `${String(ours.wins)} wins of ${UNITS}, ${String(ours.remaining_after)} remaining after, oversell ${String(ours.oversell)}`,
    });
    const bareCpu = ours.bare_cpu_us_per_request as number | null | undefined;
    // The rejection path runs in the gateways alone (the members are idle then): their CPU per rejected request
    // against the bare server's per answer. The whole cluster's figure is in cpu_us_per_rejected.
    const rejCpu = ours.gateway_cpu_us_per_rejected as number | null | undefined;
    if (typeof bareCpu === 'number' && typeof rejCpu === 'number') {
      const ratio = rejCpu / bareCpu;
      goals.push({
        goal: `rejection path <= ${REJECTION_GOAL}x a bare node:http answer (gateway CPU per request)`,
        met: ratio <= REJECTION_GOAL,
        detail: `${rejCpu} vs ${bareCpu} us = ${round(ratio, 2)}x (whole cluster ${String(ours.cpu_us_per_rejected)} us)`,
      });
    }
    if (peer !== null) {
      const ratio = ours.p99_ms / Math.max(peer.p99_ms, 0.001);
      goals.push({
        goal: `winning path p99 within ${WIN_P99_GOAL}x of the Redis design (5 replicated members)`,
        met: ratio <= WIN_P99_GOAL,
        detail: `${ours.p99_ms} vs ${peer.p99_ms} ms = ${round(ratio, 2)}x`,
      });
    }
    return goals;
  },
  async runOurs(o) {
    return runSide('ours (Raft, 5 members)', o, await ourSide(o), true);
  },
  async runPeer(peer, o) {
    if (peer !== 'redis') throw new BenchError(`flash compares with redis only, not ${peer}`);
    const redis = await startRedis();
    try {
      const peerGateways = await startRedisGateways({
        count: GATEWAYS,
        redisPort: redis.port,
        settings: GATEWAY_SETTINGS,
        env: profileEnv(o),
      });
      const side: Side = { ...peerGateways, serverPids: () => [...peerGateways.gateways.map((g) => g.pid), redis.pid] };
      return { ...(await runSide(`gateways + redis ${redis.version} (DECR in Lua)`, o, side)), members: 1 };
    } finally {
      await redis.stop();
    }
  },
};
