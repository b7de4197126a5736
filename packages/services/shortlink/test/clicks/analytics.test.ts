/**
 * The click path with the emitter and the analytics worker in this process (so they can be stopped, wiped and
 * restarted with other settings at will), on a real click log (the `clicklog` workers of a cluster started through
 * the CLI with no other workers), real sockets and LevelDB: emitter -> click log -> analytics worker -> fetchStats.
 * (Process kills are in cluster.test.ts.)
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  HttpError,
  MetricsRegistry,
  deriveClientToken,
  jsonLogger,
  type PeerAddress,
  type RunningWorker,
  type WorkerOptions,
} from '@raftkit/http';
import t from 'tap';
import { request } from 'undici';
import {
  ClickEmitter,
  clickWorkerRoles,
  fetchStats,
  type ClickRecord,
  type LinkStats,
} from '../../src/workers/clicks/index.js';
import { freePort, startCluster } from '@raftkit/testkit';

const logger = jsonLogger(
  () => ({}),
  () => undefined,
);
const dir = mkdtempSync(join(tmpdir(), 'clicks-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

// Three members (the link store is not used here) and the click log's three hosts.
const cluster = await startCluster('shortlink', { nodes: 3, workers: 'analytics=0,app=0' });
t.teardown(() => cluster.down());
const TOKEN = cluster.token;
const workers: PeerAddress[] = cluster.role('clicklog').map((w) => ({
  id: w.id,
  role: 'clicklog',
  httpAddress: new URL(w.url).host,
}));
workers.push({
  id: 'analytics1',
  role: 'analytics',
  httpAddress: `127.0.0.1:${await freePort()}`,
  tcpAddress: `127.0.0.1:${await freePort()}`,
});

function optionsFor(id: string, settings: Record<string, string> = {}): WorkerOptions {
  const me = workers.find((w) => w.id === id)!;
  return {
    id,
    role: me.role,
    index: 1,
    dataDir: join(dir, id),
    httpAddress: me.httpAddress,
    tcpAddress: me.tcpAddress!,
    members: [],
    workers,
    tokens: [TOKEN],
    settings,
    logger,
  };
}
const start = (id: string, settings?: Record<string, string>): Promise<RunningWorker> =>
  clickWorkerRoles.find((r) => `${r.role}1` === id)!.start(optionsFor(id, settings));
const stats = (code: string) => fetchStats({ workers, token: TOKEN, partitions: 1, replicas: 1 }, code);

async function health(id: string): Promise<Record<string, unknown>> {
  const res = await request(`http://${workers.find((w) => w.id === id)!.httpAddress}/healthz`);
  return (await res.body.json()) as Record<string, unknown>;
}

async function until(what: string, probe: () => Promise<boolean>, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await probe().catch(() => false))) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The aggregates on disk hold `total` clicks (a log record is a block of clicks, so offsets do not count clicks). */
const caught = (total: number) => async () => {
  const all = await Promise.all(codes.map((c) => stats(c)));
  return all.reduce((n, s) => n + s.total, 0) === total;
};

/** What the aggregates must say for `clicks` of one code. */
function expected(code: string, clicks: ClickRecord[]): LinkStats {
  const stats: LinkStats = { short_code: code, total: 0, by_day: {}, by_country: {}, by_referer: {} };
  const inc = (m: Record<string, number>, k: string) => (m[k] = (m[k] ?? 0) + 1);
  for (const c of clicks.filter((c) => c.short_code === code)) {
    stats.total++;
    inc(stats.by_day, new Date(c.timestamp).toISOString().slice(0, 10));
    inc(stats.by_country, c.country ?? 'unknown');
    inc(stats.by_referer, c.referer === null ? 'direct' : new URL(c.referer).hostname);
  }
  return stats;
}

const codes = ['aaaaaaa', 'bbbbbbb', 'custom-alias_1'];
const clicks: ClickRecord[] = Array.from({ length: 5_000 }, (_, i) => ({
  short_code: codes[i % 3]!,
  timestamp: Date.UTC(2026, 0, 1 + (i % 7), i % 24),
  referer: i % 5 === 0 ? null : `https://site${i % 4}.example/page${i}`,
  country: i % 11 === 0 ? null : ['DE', 'US', 'FR'][i % 3]!,
  user_agent: 'test-agent',
}));

let analytics = await start('analytics1');
const metrics = new MetricsRegistry();
const emitter = new ClickEmitter({ workers, token: TOKEN, settings: {}, logger, metrics });
t.teardown(async () => {
  await emitter.stop();
  await analytics.stop();
});

t.test('emitted clicks reach the aggregates exactly, and fetchStats returns them', async (t) => {
  for (const c of clicks) emitter.emit(c);
  await until('analytics to count 5,000 clicks', caught(5_000));
  const h = await health('analytics1');
  t.match(h, { lag: 0, partitions: { 0: { lag: 0 } } }, 'healthz: nothing left to count');
  t.ok(
    (h.offset as number) > 0 && (h.offset as number) < 5_000,
    `clicks travelled in blocks (${String(h.offset)} log records for 5,000 clicks)`,
  );
  for (const code of codes) t.same(await stats(code), expected(code, clicks), `stats of ${code}`);
  t.match(metrics.render(), /clicks_emitted_total 5000[\s\S]*clicks_sent_total 5000[\s\S]*clicks_dropped_total 0/);
  t.same(await stats('neverclicked'), {
    short_code: 'neverclicked',
    total: 0,
    by_day: {},
    by_country: {},
    by_referer: {},
  });
});

t.test('replay wipes the aggregates and rebuilds the same numbers from offset 0', async (t) => {
  const before = await Promise.all(codes.map((c) => stats(c)));
  const res = await request(`http://${workers.find((w) => w.id === 'analytics1')!.httpAddress}/internal/replay`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TOKEN}` },
  });
  t.equal(res.statusCode, 200);
  t.same(await res.body.json(), { status: 'replaying', from: 0, partitions: [0] });
  await until('the replay to finish', caught(5_000));
  t.same(await Promise.all(codes.map((c) => stats(c))), before);
});

t.test('an analytics restart resumes from its committed offset without counting twice', async (t) => {
  await analytics.stop();
  for (const c of clicks.slice(0, 1_000)) emitter.emit(c);
  await until(
    'the click log to take the clicks while analytics is down',
    async () => /^clicks_buffered 0$/m.test(metrics.render()) && /^clicks_sent_total 6000$/m.test(metrics.render()),
  );
  analytics = await start('analytics1');
  await until('analytics to catch up', caught(6_000));
  const twice = [...clicks, ...clicks.slice(0, 1_000)];
  for (const code of codes) t.same(await stats(code), expected(code, twice), `stats of ${code}`);
});

t.test('stats are cluster-only, codes are validated, and fetchStats says 503 when analytics is down', async (t) => {
  const url = `http://${workers.find((w) => w.id === 'analytics1')!.httpAddress}/internal/stats/aaaaaaa`;
  const asClient = await request(url, { headers: { authorization: `Bearer ${deriveClientToken(TOKEN, 'alice')}` } });
  t.equal(asClient.statusCode, 403);
  t.equal(((await asClient.body.json()) as { error: { code: string } }).error.code, 'forbidden');
  const anonymous = await request(url);
  t.equal(anonymous.statusCode, 401);
  await anonymous.body.text();
  const bad = await request(
    `http://${workers.find((w) => w.id === 'analytics1')!.httpAddress}/internal/stats/bad!code`,
    {
      headers: { authorization: `Bearer ${TOKEN}` },
    },
  );
  t.equal(bad.statusCode, 400);
  t.equal(((await bad.body.json()) as { error: { field: string } }).error.field, 'code');
  await analytics.stop();
  const error = await stats('aaaaaaa').catch((e: unknown) => e);
  t.ok(
    error instanceof HttpError && error.status === 503 && error.headers['retry-after'] === '1',
    '503 with Retry-After',
  );
  analytics = await start('analytics1');
});

t.test('past the referer cap, new referer hosts count as "other"', async (t) => {
  await analytics.stop();
  rmSync(join(dir, 'analytics1'), { recursive: true, force: true });
  analytics = await start('analytics1', { analytics_max_referers: '3' });
  await until('a fresh analytics to count everything again', caught(6_000));
  const capped = await stats('aaaaaaa');
  t.equal(Object.keys(capped.by_referer).length, 4, '3 hosts + other');
  t.ok(capped.by_referer.other! > 0);
  t.equal(
    Object.values(capped.by_referer).reduce((a, b) => a + b, 0),
    capped.total,
    'every click is still counted once',
  );
});
