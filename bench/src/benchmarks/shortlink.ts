/**
 * `shortlink`: redirects per second and their latency on a warm cache, and creates per second, on our short-link
 * service, beside two ceilings measured in the same run on the same machine with the same load generator,
 * concurrency and keep-alive: a bare node:http server answering a fixed 302 (one process per app server of ours,
 * each on its own port), and nginx answering a fixed 302 (worker_processes = our app server count).
 *
 * Ours: `cluster up --service shortlink` with the service's default workers, the create limits raised (the
 * benchmark creates from one address with one key) and edge entries kept 10 minutes (a warm cache); an API key from POST /api/keys; LINKS links created; every
 * code fetched once on every app server (edge caches warm); then GET /{code} for random codes, worker w -> app
 * server w mod n, each answer checked to be a 302 to that code's URL (not followed); then POST /api/urls.
 * Long URLs are `--size` characters, and the ceilings answer with a Location of the same length and the same
 * Cache-Control.
 *
 * The issue's goals are a redirect p99 under 10 ms and at least 80% of the bare node:http ceiling's throughput.
 * The second is the benchmark's target: 80% of the node302 figure measured in this run (the median over rounds).
 */
import type { Pool } from 'undici';
import type { Benchmark, RunOptions, SideResult } from '../benchmark.js';
import { Endpoints, fetchJson, parseMetrics, type HttpRequest } from '../http.js';
import { OpError } from '../load.js';
import { measure, type SideSpec } from '../measure.js';
import { groupCpuPerOp, groupCpuSeconds, startOurCluster, type OurCluster } from '../ours.js';
import { startNginx } from '../peers/nginx.js';
import { startNode302 } from '../peers/node302.js';
import { BenchError } from '../procs.js';
import { summarizeProfiles } from '../profile.js';
import { round } from '../stats.js';

const MEMBERS = 5;
/** Links created before measuring redirects; each redirect picks one uniformly. */
export const LINKS = 10_000;
const SETUP_CONCURRENCY = 32;
const P99_GOAL_MS = 10;
const CEILING_SHARE = 0.8;
/** What our app servers send with a 302 besides Location (packages/services/shortlink/src/workers/app/app.ts); the ceilings send it too. */
const REDIRECT_HEADERS = { 'cache-control': 'private, max-age=0', 'content-length': '0' };
/** The create limits (per API key and per IP) raised out of the way: the benchmark is one key on one address. */
const UNLIMITED = String(1e9);
/**
 * A warm cache, as the issue asks: edge entries live 10 minutes instead of the default 5 s (the bound on how long
 * a deleted link keeps redirecting elsewhere; nothing is deleted here). With the default, a code comes back to a
 * given app server less often than its entry lives, so most redirects would miss the edge cache and ask a member
 * (RESULTS.md, shortlink, findings).
 */
const EDGE_TTL_MS = 600_000;
const SETTINGS = {
  create_rate_per_key: UNLIMITED,
  create_burst_per_key: UNLIMITED,
  create_rate_per_ip: UNLIMITED,
  create_burst_per_ip: UNLIMITED,
  edge_cache_ttl_ms: String(EDGE_TTL_MS),
};

/** A long URL of exactly `size` characters, distinct per n. */
export function longUrl(n: number, size: number): string {
  const head = `https://example.com/bench/${n}/`;
  if (size < head.length + 1)
    throw new BenchError(`--size must be at least ${head.length + 1} for long URLs like ${head}`);
  return head + 'x'.repeat(size - head.length);
}

/** One request whose answer must have status `status` (and, when given, this Location); reads the whole body. */
async function expect(pool: Pool, req: HttpRequest, status: number, location?: string): Promise<string> {
  const res = await pool.request({ method: req.method, path: req.path, headers: req.headers, body: req.body });
  const text = await res.body.text();
  if (res.statusCode !== status) throw new OpError(`HTTP ${res.statusCode}`, text.slice(0, 300));
  if (location !== undefined && res.headers.location !== location)
    throw new OpError('wrong Location', String(res.headers.location));
  return text;
}

/** Run `count` jobs with at most `parallel` at a time; the first failure fails the whole. */
async function inParallel(
  count: number,
  parallel: number,
  job: (i: number, lane: number) => Promise<void>,
): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(parallel, count) }, async (_, lane) => {
      while (next < count) await job(next++, lane);
    }),
  );
}

/** Redirects answered, by the cache that answered them (`cache` label of shortlink_redirects_total), from /metrics text. */
export function redirectsByCache(text: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const m of text.matchAll(/^shortlink_redirects_total\{([^}]*)\}\s+(\S+)$/gm)) {
    const cache = /cache="([^"]*)"/.exec(m[1]!)?.[1] ?? 'unknown';
    const outcome = /outcome="([^"]*)"/.exec(m[1]!)?.[1] ?? 'unknown';
    const key = outcome === 'redirect' ? `redirects_from_${cache}` : `redirects_${outcome}`;
    out[key] = (out[key] ?? 0) + Number(m[2]);
  }
  return out;
}

/** The sum over processes of a counter (all its label sets) in /metrics texts. */
export function sumMetric(texts: string[], name: string): number {
  return texts.reduce((n, text) => n + (parseMetrics(text)[name] ?? 0), 0);
}

/**
 * Worker counts other than the service's defaults, from BENCH_SHORTLINK_WORKERS (`analytics=2,clicklog=3`, the
 * cluster CLI's --workers syntax), to compare click-path layouts with the same command.
 */
function workersFromEnv(): Record<string, number> | undefined {
  const raw = process.env.BENCH_SHORTLINK_WORKERS;
  if (raw === undefined || raw === '') return undefined;
  const out: Record<string, number> = {};
  for (const part of raw.split(',')) {
    const [role, n] = part.split('=');
    if (role === undefined || !/^[a-z]+$/.test(role) || !/^\d+$/.test(n ?? ''))
      throw new BenchError(`BENCH_SHORTLINK_WORKERS: expected role=N[,role=N], got ${JSON.stringify(raw)}`);
    out[role] = Number(n);
  }
  return out;
}

/** How long to wait, after the redirect phase, for the click path to count everything emitted. */
const DRAIN_TIMEOUT_MS = 120_000;

/** Node302's throughput in each round so far: the target is 80% of their median. */
const node302Rounds: number[] = [];

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor((sorted.length - 1) / 2)]!;
}

interface Ours {
  apps: OurCluster['workers'];
  endpoints: Endpoints;
  apiKey: string;
  codes: string[];
  urls: Map<string, string>;
}

async function setUp(cluster: OurCluster, o: RunOptions): Promise<Ours> {
  const apps = cluster.workers.filter((w) => w.role === 'app');
  if (apps.length === 0) throw new BenchError('our shortlink cluster has no app servers');
  const issued = await fetchJson(`${apps[0]!.url}/api/keys`, {
    method: 'POST',
    headers: { authorization: `Bearer ${cluster.token}`, 'content-type': 'application/json' },
    body: '{"user":"bench"}',
  });
  const apiKey = (issued.body as { api_key?: unknown } | null)?.api_key;
  if (issued.status !== 201 || typeof apiKey !== 'string')
    throw new BenchError(`POST /api/keys answered ${issued.status} ${JSON.stringify(issued.body).slice(0, 200)}`);
  const endpoints = new Endpoints(
    apps.map((a) => a.url),
    o.concurrency,
  );
  try {
    const headers = { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' };
    const codes: string[] = new Array<string>(LINKS);
    const urls = new Map<string, string>();
    process.stderr.write(`bench: creating ${LINKS} links through ${apps.length} app servers\n`);
    const t0 = performance.now();
    await inParallel(LINKS, SETUP_CONCURRENCY, async (i, lane) => {
      const url = longUrl(i, o.size);
      const text = await expect(
        endpoints.forWorker(lane),
        { method: 'POST', path: '/api/urls', headers, body: JSON.stringify({ long_url: url }) },
        201,
      );
      const code = (JSON.parse(text) as { short_code: string }).short_code;
      codes[i] = code;
      urls.set(code, url);
    });
    process.stderr.write(
      `bench: created ${LINKS} links in ${round((performance.now() - t0) / 1000, 1)} s; warming every app server's edge cache\n`,
    );
    await inParallel(LINKS * apps.length, SETUP_CONCURRENCY, async (i) => {
      const code = codes[Math.floor(i / apps.length)]!;
      await expect(endpoints.pools[i % apps.length]!, { method: 'GET', path: `/${code}` }, 302, urls.get(code));
    });
    return { apps, endpoints, apiKey, codes, urls };
  } catch (e) {
    await endpoints.close();
    throw e;
  }
}

async function runOurs(o: RunOptions): Promise<SideResult> {
  const env: NodeJS.ProcessEnv = {};
  if (o.profileDir !== null) {
    env.NODE_OPTIONS =
      `${process.env.NODE_OPTIONS ?? ''} --import=${new URL('../profile-preload.js', import.meta.url).href}`.trim();
    env.BENCH_PROFILE_DIR = o.profileDir;
  }
  const cluster = await startOurCluster({
    service: 'shortlink',
    nodes: MEMBERS,
    env,
    settings: SETTINGS,
    workers: workersFromEnv(),
  });
  let ours: Ours | null = null;
  let redirects: SideResult;
  let creates: SideResult;
  try {
    ours = await setUp(cluster, o);
    const { apps, endpoints, codes, urls } = ours;
    const analytics = cluster.workers.filter((w) => w.role === 'analytics');
    const groups = {
      apps: apps.map((a) => a.pid),
      clicklog: cluster.workers.filter((w) => w.role === 'clicklog').map((w) => w.pid),
      analytics: analytics.map((w) => w.pid),
      members: cluster.members.map((m) => m.pid),
    };
    const metricTexts = async (workers: OurCluster['workers']): Promise<string[]> =>
      (await Promise.all(workers.map((w) => fetchJson(`${w.url}/metrics`, { timeoutMs: 5_000 })))).map((t) =>
        typeof t.body === 'string' ? t.body : '',
      );
    /** Clicks emitted by the app servers (one per redirect), given up on by them, and counted into the aggregates. */
    const clickCounts = async () => {
      const [appTexts, analyticsTexts] = await Promise.all([metricTexts(apps), metricTexts(analytics)]);
      return {
        clicks_emitted: sumMetric(appTexts, 'clicks_emitted_total'),
        clicks_dropped: sumMetric(appTexts, 'clicks_dropped_total'),
        clicks_counted: sumMetric(analyticsTexts, 'analytics_clicks_counted_total'),
      };
    };
    const all = Object.values(groups).flat();
    const side = (label: string, op: SideSpec['op']): SideSpec => ({
      label,
      system: `raftkit shortlink, ${MEMBERS} members + ${apps.length} app servers + ${groups.clicklog.length} click log hosts + ${groups.analytics.length} analytics workers`,
      members: MEMBERS,
      serverPids: all,
      op,
      probe: async () => {
        const [texts, clicks] = await Promise.all([metricTexts(apps), clickCounts()]);
        const counts: Record<string, number> = {};
        for (const t of texts)
          for (const [k, v] of Object.entries(redirectsByCache(t))) counts[k] = (counts[k] ?? 0) + v;
        return { ...groupCpuSeconds(groups), ...counts, ...clicks };
      },
      explain: (d, r) => {
        const edge = d.redirects_from_edge ?? 0;
        const store = d.redirects_from_store ?? 0;
        const cache =
          edge + store === 0
            ? {}
            : {
                redirects_from_edge_cache: edge,
                redirects_from_members: store,
                edge_hit_ratio: round(edge / (edge + store), 3),
              };
        // Over the same window as the redirects: clicks counted into the aggregates per second, beside the redirect rate.
        const seconds = r.ops_per_sec > 0 ? r.ops / r.ops_per_sec : 0;
        const ingest =
          seconds === 0
            ? {}
            : {
                clicks_emitted_per_sec: Math.round((d.clicks_emitted ?? 0) / seconds),
                clicks_counted_per_sec: Math.round((d.clicks_counted ?? 0) / seconds),
                click_lag_growth: (d.clicks_emitted ?? 0) - (d.clicks_dropped ?? 0) - (d.clicks_counted ?? 0),
              };
        return { ...groupCpuPerOp(d, Object.keys(groups), r.ops), ...cache, ...ingest };
      },
    });
    redirects = await measure(
      {
        ...side('ours', (w) => {
          const code = codes[Math.floor(Math.random() * codes.length)]!;
          return expect(endpoints.forWorker(w), { method: 'GET', path: `/${code}` }, 302, urls.get(code)).then(
            () => undefined,
          );
        }),
        extra: { app_servers: apps.length, links: LINKS, url_bytes: o.size },
      },
      o,
    );
    // The click lag when the load stopped, and how long the click path took to count the rest.
    const atEnd = await clickCounts();
    const lagAtEnd = atEnd.clicks_emitted - atEnd.clicks_dropped - atEnd.clicks_counted;
    const drainStart = performance.now();
    let drained = lagAtEnd <= 0;
    while (!drained && performance.now() - drainStart < DRAIN_TIMEOUT_MS) {
      await new Promise((r) => setTimeout(r, 200));
      const now = await clickCounts();
      drained = now.clicks_counted >= now.clicks_emitted - now.clicks_dropped;
    }
    redirects.click_ingest = {
      clicks_counted_per_sec: redirects.clicks_counted_per_sec ?? null,
      redirects_per_sec: redirects.ops_per_sec,
      lag_at_end_clicks: lagAtEnd,
      drain_s: drained ? round((performance.now() - drainStart) / 1000, 1) : null,
      clicks_dropped_total: atEnd.clicks_dropped,
      // Keeping up: clicks counted at (nearly) the redirect rate over the window, and less than a second of
      // redirects' clicks still uncounted when the load stopped (the batching delays, not a growing backlog).
      keeps_up:
        ((redirects.clicks_counted_per_sec as number | undefined) ?? 0) >= 0.95 * redirects.ops_per_sec &&
        lagAtEnd <= redirects.ops_per_sec,
    };
    process.stderr.write(`bench: click ingest ${JSON.stringify(redirects.click_ingest)}\n`);
    const headers = { authorization: `Bearer ${ours.apiKey}`, 'content-type': 'application/json' };
    let n = LINKS;
    process.stderr.write('bench: creates (POST /api/urls)\n');
    creates = await measure(
      side('create', (w) =>
        expect(
          endpoints.forWorker(w),
          { method: 'POST', path: '/api/urls', headers, body: JSON.stringify({ long_url: longUrl(n++, o.size) }) },
          201,
        ).then(() => undefined),
      ),
      o,
    );
  } finally {
    await ours?.endpoints.close();
    await cluster.stop();
    if (o.profileDir !== null) {
      const summary = summarizeProfiles(
        o.profileDir,
        [...cluster.members, ...cluster.workers].map((p) => p.pid),
      );
      if (summary !== null)
        process.stderr.write(`bench: CPU profiles of our processes in ${o.profileDir}\n${summary}\n`);
    }
  }
  const ceilings = await runCeilings(ours.apps.length, o);
  node302Rounds.push(ceilings.node302.ops_per_sec);
  const vs = (c: SideResult): Record<string, number> => ({
    ratio: round(redirects.ops_per_sec / c.ops_per_sec, 2),
    p99_ratio: round(redirects.p99_ms / c.p99_ms, 2),
  });
  const goals = {
    clicks_ingested_as_fast_as_redirects: (redirects.click_ingest as { keeps_up: boolean }).keeps_up,
    redirect_p99_under_10ms: redirects.p99_ms < P99_GOAL_MS,
    throughput_at_least_80pct_of_node302: redirects.ops_per_sec >= CEILING_SHARE * ceilings.node302.ops_per_sec,
  };
  const result: SideResult = {
    ...redirects,
    creates,
    ceilings,
    vs_node302: vs(ceilings.node302),
    vs_nginx: vs(ceilings.nginx),
    goals,
  };
  process.stdout.write(formatShortlink(result, ceilings));
  return result;
}

interface Ceilings {
  node302: SideResult;
  nginx: SideResult;
}

async function runCeilings(processes: number, o: RunOptions): Promise<Ceilings> {
  const location = longUrl(0, o.size);
  const ceiling = (label: string, system: string, origins: string[], pids: number[]): Promise<SideResult> => {
    const endpoints = new Endpoints(origins, o.concurrency);
    const op = (w: number): Promise<void> =>
      expect(endpoints.forWorker(w), { method: 'GET', path: '/abcdefg' }, 302, location).then(() => undefined);
    return measure({ label, system, members: processes, serverPids: pids, op }, o).finally(() => endpoints.close());
  };
  process.stderr.write('bench: -- ceiling: bare node:http 302 --\n');
  const node = await startNode302(processes, { location, ...REDIRECT_HEADERS });
  let node302: SideResult;
  try {
    node302 = await ceiling('node', `bare node:http 302, ${processes} processes`, node.origins, node.pids);
  } finally {
    await node.stop();
  }
  process.stderr.write('bench: -- ceiling: nginx 302 --\n');
  const nginx = await startNginx({
    workers: processes,
    location,
    headers: { 'cache-control': REDIRECT_HEADERS['cache-control'] },
  });
  try {
    return {
      node302,
      nginx: {
        ...(await ceiling(
          'nginx',
          `nginx ${nginx.version} return 302, ${processes} workers (Debian nginx)`,
          [nginx.origin],
          nginx.pids,
        )),
        version: nginx.version,
      },
    };
  } finally {
    await nginx.stop();
  }
}

function formatShortlink(r: SideResult, c: Ceilings): string {
  const creates = r.creates as SideResult;
  const rows: [string, SideResult][] = [
    ['ours: redirects', r],
    ['ours: creates', creates],
    ['node:http 302', c.node302],
    ['nginx 302', c.nginx],
  ];
  const lines = rows.map(
    ([name, s]) =>
      `${name.padEnd(16)} ${String(s.ops_per_sec).padStart(7)} ops/s  p50 ${s.p50_ms.toFixed(2).padStart(6)} ms  p99 ${s.p99_ms.toFixed(2).padStart(7)} ms  ` +
      `errors ${s.errors}  server CPU ${s.server_cpu_us_per_op ?? '-'} us/op`,
  );
  const vs302 = r.vs_node302 as { ratio: number };
  const vsNginx = r.vs_nginx as { ratio: number };
  lines.push(
    `redirects: ${Math.round(vs302.ratio * 100)}% of node:http (goal >= 80%), ${Math.round(vsNginx.ratio * 100)}% of nginx; p99 ${r.p99_ms} ms (goal < ${P99_GOAL_MS} ms)`,
  );
  const ingest = r.click_ingest as
    | { clicks_counted_per_sec: number | null; lag_at_end_clicks: number; drain_s: number | null; keeps_up: boolean }
    | undefined;
  if (ingest !== undefined) {
    lines.push(
      `clicks: ${ingest.clicks_counted_per_sec ?? '-'} counted/s beside ${r.ops_per_sec} redirects/s; lag at the end ${ingest.lag_at_end_clicks} clicks, ` +
        `${ingest.drain_s === null ? 'not drained' : `drained in ${ingest.drain_s} s`}: ${ingest.keeps_up ? 'clicks are ingested as fast as redirects are served' : 'clicks are NOT ingested as fast as redirects are served'}`,
    );
  }
  return lines.join('\n') + '\n';
}

export const shortlinkBenchmark: Benchmark = {
  name: 'shortlink',
  description: `redirects (warm edge cache) and creates on our short-link service, beside a bare node:http 302 and nginx 302 (ceilings, same run)`,
  title: (o) => `shortlink: GET /{code} -> 302 on a warm cache, ${o.concurrency} clients; target 80% of bare node:http`,
  peers: [],
  get target() {
    if (node302Rounds.length === 0) return undefined;
    const ceiling = median(node302Rounds);
    return {
      ops_per_sec: Math.round(CEILING_SHARE * ceiling),
      note: `80% of the bare node:http 302 ceiling measured in this run (${ceiling} redirects/s)`,
    };
  },
  defaults: { durationS: 10, concurrency: 64, size: 80, warmupS: 3 },
  workload: (o) => ({
    operation:
      'GET /{code} (302, Location checked, not followed) for uniformly random codes among the links; then POST /api/urls',
    links: LINKS,
    long_url_bytes: o.size,
    routing: 'worker w -> app server w mod n (node302: process w mod n; nginx: its one listener)',
    create_limits: 'raised with --set create_{rate,burst}_per_{key,ip}=1e9 (one key, one address)',
    edge_cache_ttl_ms: EDGE_TTL_MS,
    ceilings:
      'bare node:http 302 (n processes, one port each) and nginx return 302 (n workers), same Location length and Cache-Control',
    client: 'undici Pool, HTTP/1.1 keep-alive, one connection per worker, closed loop',
    goals: `redirect p99 < ${P99_GOAL_MS} ms; redirects/s >= 80% of the bare node:http ceiling`,
  }),
  runOurs,
};
