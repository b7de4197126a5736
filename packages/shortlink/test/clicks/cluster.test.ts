/**
 * The click path on a real cluster (5 members, the stream, analytics and 2 app servers, started through the
 * cluster CLI): the analytics worker killed mid-stream counts every click exactly once after its restart, and
 * redirects keep answering 302 while the stream and analytics are killed, with the aggregates right after replay.
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { StreamProducer } from '@raftkit/stream';
import t from 'tap';
import { request } from 'undici';
import { encodeClick } from '../../src/clicks/wire.js';
import { call, startShortlink, until } from '../helpers/cluster.js';

const execFileAsync = promisify(execFile);
const replayCli = fileURLToPath(new URL('../../../bin/replay.js', import.meta.url));
const CLICK_BUFFER = 300;
const cluster = await startShortlink({ workers: 'app=2', settings: { click_buffer: String(CLICK_BUFFER), trusted_country_header: 'cf-ipcountry' } });
t.teardown(() => cluster.down());

const state = JSON.parse(readFileSync(join(cluster.dataDir, 'cluster.json'), 'utf8')) as { workers: Array<{ id: string; httpAddress: string; tcpAddress: string }> };
const address = (id: string) => state.workers.find((w) => w.id === id)!;

async function health(id: string): Promise<Record<string, number>> {
  const res = await request(`http://${address(id).httpAddress}/healthz`, { headersTimeout: 2_000, bodyTimeout: 2_000 });
  return (await res.body.json()) as Record<string, number>;
}

/** Analytics has consumed everything the stream holds durably. */
async function caughtUp(): Promise<boolean> {
  const [stream, analytics] = await Promise.all([health('stream1'), health('analytics1')]);
  return analytics.offset === stream.end;
}

/** The public stats endpoint of an app server (the cluster token may read any link's stats). */
const stats = (code: string) => call(cluster.apps[0]!, 'GET', `/api/urls/${code}/stats`, { token: cluster.token });

/** The click counters of one app server, from its /metrics. */
async function clickMetrics(app: string): Promise<{ emitted: number; sent: number; dropped: number; buffered: number }> {
  const text = await (await request(`${app}/metrics`)).body.text();
  const sum = (name: string) =>
    [...text.matchAll(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\d+)$`, 'gm'))].reduce((n, m) => n + Number(m[1]), 0);
  return { emitted: sum('clicks_emitted_total'), sent: sum('clicks_sent_total'), dropped: sum('clicks_dropped_total'), buffered: sum('clicks_buffered') };
}

async function totals() {
  const all = await Promise.all(cluster.apps.map(clickMetrics));
  return all.reduce((a, b) => ({ emitted: a.emitted + b.emitted, sent: a.sent + b.sent, dropped: a.dropped + b.dropped, buffered: a.buffered + b.buffered }));
}

t.test('analytics killed mid-stream and restarted counts every click exactly once', async (t) => {
  const producer = new StreamProducer({ address: () => address('stream1').tcpAddress, token: cluster.token, bufferRecords: 1_000_000 });
  t.teardown(() => producer.close());
  const code = 'bulk_clicks';
  const click = { short_code: code, timestamp: Date.UTC(2026, 5, 1), referer: null, country: 'DE', user_agent: null };
  let seq = 0;
  const send = (n: number) => {
    for (let i = 0; i < n; i++) producer.send(encodeClick('bulk-producer', seq++, click));
  };
  send(100_000);
  const seenAtKill = await until('analytics to be part way through', async () => {
    const offset = (await health('analytics1')).offset!;
    return offset > 5_000 ? offset : null;
  });
  const kill = await cluster.run('kill', 'analytics1');
  t.equal(kill.code, 0, 'analytics1 killed (SIGKILL)');
  t.ok(seenAtKill < 100_000, `killed mid-stream (offset ${seenAtKill} of 100,000)`);
  send(20_000);
  t.equal(await producer.flush(60_000), true, 'the stream took every click while analytics was dead');
  t.equal(producer.stats().dropped, 0);
  const restart = await cluster.run('restart', 'analytics1');
  t.equal(restart.code, 0, 'analytics1 restarted');
  await until('analytics to catch up', caughtUp, 120_000);
  const answer = await stats(code);
  t.equal(answer.status, 404, 'no such link: stats are only for links that exist');
  const direct = await request(`http://${address('analytics1').httpAddress}/internal/stats/${code}`, { headers: { authorization: `Bearer ${cluster.token}` } });
  const body = (await direct.body.json()) as { total: number; by_country: Record<string, number>; by_day: Record<string, number> };
  t.equal(body.total, 120_000, 'each of the 120,000 clicks counted once');
  t.same(body.by_country, { DE: 120_000 });
  t.same(body.by_day, { '2026-06-01': 120_000 });
});

t.test('redirects answer 302 while the stream and analytics are killed; after restart and replay the aggregates are exact', async (t) => {
  const key = await call(cluster.apps[0]!, 'POST', '/api/keys', { token: cluster.token, body: { user: 'clicker' } });
  t.equal(key.status, 201);
  const created = await call(cluster.apps[0]!, 'POST', '/api/urls', { token: key.body.api_key as string, body: { long_url: 'https://example.com/landing' } });
  t.equal(created.status, 201);
  const code = created.body.short_code as string;
  let redirects = 0;
  const visit = async (n: number, label: string) => {
    const statuses = new Map<number, number>();
    await Promise.all(
      Array.from({ length: n }, async (_, i) => {
        const res = await call(cluster.apps[i % cluster.apps.length]!, 'GET', `/${code}`, {
          headers: { referer: `https://ref${i % 3}.example/x`, 'cf-ipcountry': i % 2 === 0 ? 'DE' : 'FR' },
        });
        statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
      }),
    );
    t.same(Object.fromEntries(statuses), { 302: n }, `${label}: all ${n} redirects answered 302`);
    redirects += n;
  };

  await visit(400, 'everything up');
  await until('the first clicks to be acknowledged', async () => (await totals()).sent === 400);
  t.equal((await cluster.run('kill', 'stream1')).code, 0, 'stream1 killed');
  await visit(900, 'stream down');
  t.equal((await cluster.run('kill', 'analytics1')).code, 0, 'analytics1 killed');
  await visit(300, 'stream and analytics down');
  // A click is emitted once its 302 is flushed, which can trail the client's read of it by a moment.
  const during = await until('one click emitted per redirect', async () => {
    const now = await totals();
    return now.emitted === redirects ? now : null;
  });
  t.equal(during.emitted, redirects, 'one click emitted per redirect');
  t.equal(during.buffered, CLICK_BUFFER * cluster.apps.length, 'each app holds a full buffer');
  t.equal(during.dropped, redirects - 400 - during.buffered, 'the rest were dropped, and counted');

  t.equal((await cluster.run('restart', 'stream1')).code, 0, 'stream1 restarted');
  await until('the buffered clicks to be delivered', async () => (await totals()).buffered === 0, 60_000);
  t.equal((await cluster.run('restart', 'analytics1')).code, 0, 'analytics1 restarted');
  const replay = await execFileAsync(process.execPath, [replayCli, '--data', cluster.dataDir, '--wait'], { timeout: 120_000 });
  t.match(replay.stdout, /replay started on analytics1[\s\S]*replay done: \d+ records consumed/, 'bin/replay.js rebuilt the aggregates');
  t.ok(await caughtUp());

  const after = await totals();
  t.equal(after.sent, 400 + CLICK_BUFFER * cluster.apps.length, 'delivered: every click made while the stream was up, plus the buffered ones');
  t.equal(after.sent + after.dropped, redirects);
  const answer = await stats(code);
  t.equal(answer.status, 200);
  const body = answer.body as { total: number; by_country: Record<string, number>; by_referer: Record<string, number> };
  t.equal(body.total, after.sent, `aggregates count exactly the ${after.sent} delivered clicks`);
  t.equal(Object.values(body.by_country).reduce((a, b) => a + b, 0), body.total);
  t.same(Object.keys(body.by_referer).sort(), ['ref0.example', 'ref1.example', 'ref2.example']);
  t.same(Object.keys(body.by_country).sort(), ['DE', 'FR']);
  const bulk = await request(`http://${address('analytics1').httpAddress}/internal/stats/bulk_clicks`, { headers: { authorization: `Bearer ${cluster.token}` } });
  t.equal(((await bulk.body.json()) as { total: number }).total, 120_000, 'the replay rebuilt the earlier aggregates too');
});
