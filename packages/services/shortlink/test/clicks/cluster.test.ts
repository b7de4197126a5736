/**
 * The partitioned click path on a real cluster (5 members, 2 stream partitions, 2 analytics workers and 2 app
 * servers, started through the cluster CLI): the analytics worker killed mid-stream counts every click exactly
 * once after its restart, while the other partition goes on; and redirects keep answering 302 while a link's
 * stream partition and its analytics worker are killed, with the aggregates right after replay.
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { StreamProducer } from '@raftkit/stream';
import t from 'tap';
import { request } from 'undici';
import { partitionOf } from '../../src/workers/clicks/partition.js';
import { encodeClick, encodeClicks } from '../../src/workers/clicks/wire.js';
import { call, startShortlink, until } from '../helpers/cluster.js';

const execFileAsync = promisify(execFile);
const replayCli = fileURLToPath(new URL('../../../bin/replay.js', import.meta.url));
const CLICK_BUFFER = 300;
const PARTITIONS = 2;
const cluster = await startShortlink({
  workers: `app=2,stream=${PARTITIONS},analytics=2`,
  settings: {
    click_buffer: String(CLICK_BUFFER),
    trusted_country_header: 'cf-ipcountry',
    // The aggregates are written once per interval (1 s by default); the whole backlog below is counted in less, so
    // the kill could only land before the first write or after the last. 50 ms puts it between writes.
    analytics_flush_ms: '50',
  },
});
t.teardown(() => cluster.down());

const state = JSON.parse(readFileSync(join(cluster.dataDir, 'cluster.json'), 'utf8')) as {
  workers: Array<{ id: string; httpAddress: string; tcpAddress: string }>;
};
const address = (id: string) => state.workers.find((w) => w.id === id)!;

async function health(id: string): Promise<Record<string, number>> {
  const res = await request(`http://${address(id).httpAddress}/healthz`, { headersTimeout: 2_000, bodyTimeout: 2_000 });
  return (await res.body.json()) as Record<string, number>;
}

/** The stream partition of a code, and the analytics worker that owns it (src/workers/clicks/partition.ts). */
const streamOf = (code: string) => `stream${partitionOf(code, PARTITIONS) + 1}`;
const ownerOf = (code: string) => `analytics${(partitionOf(code, PARTITIONS) % 2) + 1}`;

/** Every partition's aggregates have counted everything its stream holds durably. */
async function caughtUp(): Promise<boolean> {
  const ends = await Promise.all(
    Array.from({ length: PARTITIONS }, async (_, p) => (await health(`stream${p + 1}`)).end),
  );
  const owners = await Promise.all(
    ['analytics1', 'analytics2'].map(
      async (id) => (await health(id)) as unknown as { partitions: Record<string, { offset: number }> },
    ),
  );
  const offsets = Object.assign({}, ...owners.map((h) => h.partitions)) as Record<string, { offset: number }>;
  return ends.every((end, p) => offsets[p]?.offset === end);
}

/** One partition's committed offset on its owner. */
async function partitionOffset(code: string): Promise<number> {
  const h = (await health(ownerOf(code))) as unknown as { partitions: Record<string, { offset: number }> };
  return h.partitions[partitionOf(code, PARTITIONS)]!.offset;
}

/** The public stats endpoint of an app server (the cluster token may read any link's stats). */
const stats = (code: string) => call(cluster.apps[0]!, 'GET', `/api/urls/${code}/stats`, { token: cluster.token });

/** The click counters of one app server, from its /metrics. */
async function clickMetrics(
  app: string,
): Promise<{ emitted: number; sent: number; dropped: number; buffered: number }> {
  const text = await (await request(`${app}/metrics`)).body.text();
  const sum = (name: string) =>
    [...text.matchAll(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\d+)$`, 'gm'))].reduce((n, m) => n + Number(m[1]), 0);
  return {
    emitted: sum('clicks_emitted_total'),
    sent: sum('clicks_sent_total'),
    dropped: sum('clicks_dropped_total'),
    buffered: sum('clicks_buffered'),
  };
}

async function totals() {
  const all = await Promise.all(cluster.apps.map(clickMetrics));
  return all.reduce((a, b) => ({
    emitted: a.emitted + b.emitted,
    sent: a.sent + b.sent,
    dropped: a.dropped + b.dropped,
    buffered: a.buffered + b.buffered,
  }));
}

/** Direct stats of a code from the analytics worker that owns it. */
async function ownerStats(
  code: string,
): Promise<{ total: number; by_country: Record<string, number>; by_day: Record<string, number> }> {
  const res = await request(`http://${address(ownerOf(code)).httpAddress}/internal/stats/${code}`, {
    headers: { authorization: `Bearer ${cluster.token}` },
  });
  return (await res.body.json()) as {
    total: number;
    by_country: Record<string, number>;
    by_day: Record<string, number>;
  };
}

// Two codes, one in each partition (so each analytics worker owns one of them).
const BULK = ['bulk_clicks', 'bulk_clicks_a', 'bulk_clicks_b', 'bulk_clicks_c'].filter(
  (c, i, all) => all.findIndex((d) => partitionOf(d, PARTITIONS) === partitionOf(c, PARTITIONS)) === i,
);

t.test(
  'an analytics worker killed mid-stream and restarted counts every click exactly once; the other partition goes on',
  async (t) => {
    t.same(BULK.map((c) => partitionOf(c, PARTITIONS)).sort(), [0, 1], 'one bulk code per partition');
    const [victim, other] = BULK as [string, string];
    const producers = new Map(
      BULK.map((code) => [
        code,
        new StreamProducer({
          address: () => address(streamOf(code)).tcpAddress,
          token: cluster.token,
          bufferRecords: 1_000_000,
        }),
      ]),
    );
    t.teardown(() => Promise.all([...producers.values()].map((p) => p.close())));
    const click = (code: string) => ({
      short_code: code,
      timestamp: Date.UTC(2026, 5, 1),
      referer: null,
      country: 'DE',
      user_agent: null,
    });
    const seqs = new Map(BULK.map((c) => [c, 0]));
    // Blocks of 100 clicks (as app servers send them) and, one in ten, single-click records.
    const send = (code: string, n: number) => {
      const producer = producers.get(code)!;
      for (let sent = 0; sent < n; ) {
        const seq = seqs.get(code)!;
        if ((seq / 100) % 10 === 9) {
          for (let i = 0; i < 100; i++) producer.send(encodeClick(`bulk-${code}`, seq + i, click(code)));
        } else {
          producer.send(
            encodeClicks(
              `bulk-${code}`,
              seq,
              Array.from({ length: 100 }, () => click(code)),
            ),
            100,
          );
        }
        seqs.set(code, seq + 100);
        sent += 100;
      }
    };
    for (const code of BULK) send(code, 100_000);
    const seenAtKill = await until('the victim partition to be part way through', async () => {
      const offset = await partitionOffset(victim);
      return offset > 50 ? offset : null;
    });
    const kill = await cluster.run('kill', ownerOf(victim));
    t.equal(kill.code, 0, `${ownerOf(victim)} killed (SIGKILL)`);
    const records = 100_000 / 100 + (100_000 / 1_000) * 99;
    t.ok(seenAtKill < records, `killed mid-stream (offset ${seenAtKill} of ${records} records)`);
    for (const code of BULK) send(code, 20_000);
    for (const [code, producer] of producers) {
      t.equal(await producer.flush(60_000), true, `the stream of ${code} took every click`);
      t.equal(producer.stats().dropped, 0);
    }
    await until(
      `the other partition (${ownerOf(other)}) to count everything while ${ownerOf(victim)} is dead`,
      async () => (await ownerStats(other)).total === 120_000,
      120_000,
    );
    const restart = await cluster.run('restart', ownerOf(victim));
    t.equal(restart.code, 0, `${ownerOf(victim)} restarted`);
    await until('analytics to catch up', caughtUp, 120_000);
    const answer = await stats(victim);
    t.equal(answer.status, 404, 'no such link: stats are only for links that exist');
    for (const code of BULK) {
      const body = await ownerStats(code);
      t.equal(body.total, 120_000, `each of the 120,000 clicks of ${code} counted once`);
      t.same(body.by_country, { DE: 120_000 });
      t.same(body.by_day, { '2026-06-01': 120_000 });
    }
    const wrong = await request(
      `http://${address(ownerOf(other) === 'analytics1' ? 'analytics2' : 'analytics1').httpAddress}/internal/stats/${other}`,
      {
        headers: { authorization: `Bearer ${cluster.token}` },
      },
    );
    t.equal(wrong.statusCode, 421, 'a worker asked for a code of a partition it does not own refuses');
    await wrong.body.dump();
  },
);

t.test(
  'redirects answer 302 while the stream and analytics are killed; after restart and replay the aggregates are exact',
  async (t) => {
    const key = await call(cluster.apps[0]!, 'POST', '/api/keys', { token: cluster.token, body: { user: 'clicker' } });
    t.equal(key.status, 201);
    const created = await call(cluster.apps[0]!, 'POST', '/api/urls', {
      token: key.body.api_key as string,
      body: { long_url: 'https://example.com/landing' },
    });
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
    t.equal((await cluster.run('kill', streamOf(code))).code, 0, `${streamOf(code)} (the link's partition) killed`);
    await visit(900, 'stream down');
    t.equal((await cluster.run('kill', ownerOf(code))).code, 0, `${ownerOf(code)} killed`);
    await visit(300, 'stream and analytics down');
    // A click is emitted once its 302 is flushed, which can trail the client's read of it by a moment; it waits in
    // an open block (50 ms) before it meets the full buffer and is dropped, so the buffer is read once blocks closed.
    const during = await until('one click emitted per redirect, every open block closed', async () => {
      const now = await totals();
      return now.emitted === redirects && now.buffered <= CLICK_BUFFER * cluster.apps.length ? now : null;
    });
    t.equal(during.emitted, redirects, 'one click emitted per redirect');
    t.equal(during.buffered, CLICK_BUFFER * cluster.apps.length, 'each app holds a full buffer');
    t.equal(during.dropped, redirects - 400 - during.buffered, 'the rest were dropped, and counted');

    t.equal((await cluster.run('restart', streamOf(code))).code, 0, `${streamOf(code)} restarted`);
    await until('the buffered clicks to be delivered', async () => (await totals()).buffered === 0, 60_000);
    t.equal((await cluster.run('restart', ownerOf(code))).code, 0, `${ownerOf(code)} restarted`);
    const replay = await execFileAsync(process.execPath, [replayCli, '--data', cluster.dataDir, '--wait'], {
      timeout: 120_000,
    });
    t.match(
      replay.stdout,
      /replay started on analytics1[\s\S]*replay started on analytics2[\s\S]*replay done: \d+ records consumed/,
      'bin/replay.js rebuilt the aggregates of every partition',
    );
    t.ok(await caughtUp());

    const after = await totals();
    t.equal(
      after.sent,
      400 + CLICK_BUFFER * cluster.apps.length,
      'delivered: every click made while the stream was up, plus the buffered ones',
    );
    t.equal(after.sent + after.dropped, redirects);
    const answer = await stats(code);
    t.equal(answer.status, 200);
    const body = answer.body as {
      total: number;
      by_country: Record<string, number>;
      by_referer: Record<string, number>;
    };
    t.equal(body.total, after.sent, `aggregates count exactly the ${after.sent} delivered clicks`);
    t.equal(
      Object.values(body.by_country).reduce((a, b) => a + b, 0),
      body.total,
    );
    t.same(Object.keys(body.by_referer).sort(), ['ref0.example', 'ref1.example', 'ref2.example']);
    t.same(Object.keys(body.by_country).sort(), ['DE', 'FR']);
    for (const bulk of BULK)
      t.equal((await ownerStats(bulk)).total, 120_000, `the replay rebuilt the earlier aggregates of ${bulk} too`);
  },
);
