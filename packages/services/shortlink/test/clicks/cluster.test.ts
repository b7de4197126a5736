/**
 * The partitioned click path on a real cluster (5 members, the click log on 3 clicklog workers with 2 partitions,
 * 3 analytics workers counting each partition twice, and 2 app servers, started through the cluster CLI): the
 * analytics worker killed mid-stream counts every click exactly once after its restart, while its partition's
 * other copy and the other partition go on with no takeover to wait for; redirects keep answering
 * 302 while the click log has no quorum and its analytics worker is killed, with the aggregates right after
 * replay; and a click log host killed with its data folder wiped loses no acknowledged click.
 */
import { execFile } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { LogClient } from '@raftkit/log';
import t from 'tap';
import { request } from 'undici';
import { CLICK_TOPIC, encodeValue } from '../../src/workers/clicks/click-log.js';
import { partitionOf } from '../../src/workers/clicks/partition.js';
import { encodeClick, encodeClicks } from '../../src/workers/clicks/wire.js';
import { call, startShortlink, until } from '../helpers/cluster.js';

const execFileAsync = promisify(execFile);
const replayCli = fileURLToPath(new URL('../../../bin/replay.js', import.meta.url));
const CLICK_BUFFER = 300;
const PARTITIONS = 2;
const cluster = await startShortlink({
  workers: 'app=2,analytics=3',
  settings: {
    click_partitions: String(PARTITIONS),
    analytics_replicas: '2',
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
const CLICK_LOG = ['clicklog1', 'clicklog2', 'clicklog3'];
const log = new LogClient({
  endpoints: CLICK_LOG.map((id) => `http://${address(id).httpAddress}`),
  token: cluster.token,
  timeoutMs: 5_000,
});
t.teardown(() => log.close());

/**
 * Appends blocks to a partition one append at a time, each resent until acknowledged (as the app servers do), and
 * resolves once every one is acknowledged.
 */
async function appendAll(partition: number, records: Uint8Array[]): Promise<void> {
  for (let i = 0; i < records.length; ) {
    const batch = records.slice(i, i + 500).map((r) => ({ value: encodeValue(r) }));
    try {
      await log.append(CLICK_TOPIC, partition, batch);
      i += batch.length;
    } catch {
      await new Promise((r) => setTimeout(r, 200));
    }
  }
}

async function health(id: string): Promise<Record<string, number>> {
  const res = await request(`http://${address(id).httpAddress}/healthz`, { headersTimeout: 2_000, bodyTimeout: 2_000 });
  return (await res.body.json()) as Record<string, number>;
}

/**
 * The analytics worker that first owns a code's partition, the one holding its second copy, and one that does not
 * count it (src/workers/clicks/partition.ts: partition p on workers p mod 3 and the next, of 3).
 */
const ownerOf = (code: string) => `analytics${(partitionOf(code, PARTITIONS) % 3) + 1}`;
const secondOwnerOf = (code: string) => `analytics${((partitionOf(code, PARTITIONS) + 1) % 3) + 1}`;
const nonOwnerOf = (code: string) => `analytics${((partitionOf(code, PARTITIONS) + 2) % 3) + 1}`;
const ANALYTICS = ['analytics1', 'analytics2', 'analytics3'];

/** Every partition's aggregates have counted everything the click log holds (linearizable: every acknowledged append). */
async function caughtUp(): Promise<boolean> {
  const ends = await Promise.all(
    Array.from({ length: PARTITIONS }, async (_, p) => {
      const answer = (await log.router.call(
        `log.${CLICK_TOPIC}.${p}`,
        'GET',
        `/v1/topics/${CLICK_TOPIC}/partitions/${p}/records?offset=0&max_records=1&consistency=linearizable`,
      )) as { end_offset: number };
      return answer.end_offset;
    }),
  );
  const copies = await Promise.all(
    ANALYTICS.map(async (id) => (await health(id)) as unknown as { partitions: Record<string, { offset: number }> }),
  );
  // Every copy of every partition (each partition is counted by two workers).
  return ends.every((end, p) =>
    copies.filter((h) => h.partitions[p] !== undefined).every((h) => h.partitions[p]!.offset === end),
  );
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

/** Direct stats of a code from the analytics worker that owns it (or another: `from`). */
async function ownerStats(
  code: string,
  from = ownerOf(code),
): Promise<{ total: number; by_country: Record<string, number>; by_day: Record<string, number> }> {
  const res = await request(`http://${address(from).httpAddress}/internal/stats/${code}`, {
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
    const click = (code: string) => ({
      short_code: code,
      timestamp: Date.UTC(2026, 5, 1),
      referer: null,
      country: 'DE',
      user_agent: null,
    });
    const seqs = new Map(BULK.map((c) => [c, 0]));
    // Blocks of 100 clicks (as app servers send them) and, one in ten, single-click records.
    const recordsOf = (code: string, n: number): Uint8Array[] => {
      const out: Uint8Array[] = [];
      for (let sent = 0; sent < n; ) {
        const seq = seqs.get(code)!;
        if ((seq / 100) % 10 === 9) {
          for (let i = 0; i < 100; i++) out.push(encodeClick(`bulk-${code}`, seq + i, click(code)));
        } else {
          out.push(
            encodeClicks(
              `bulk-${code}`,
              seq,
              Array.from({ length: 100 }, () => click(code)),
            ),
          );
        }
        seqs.set(code, seq + 100);
        sent += 100;
      }
      return out;
    };
    const send = (code: string, n: number) => appendAll(partitionOf(code, PARTITIONS), recordsOf(code, n));
    const first = Promise.all(BULK.map((code) => send(code, 100_000)));
    const seenAtKill = await until('the victim partition to be part way through', async () => {
      const offset = await partitionOffset(victim);
      return offset > 50 ? offset : null;
    });
    const kill = await cluster.run('kill', ownerOf(victim));
    t.equal(kill.code, 0, `${ownerOf(victim)} killed (SIGKILL)`);
    const records = 100_000 / 100 + (100_000 / 1_000) * 99;
    t.ok(seenAtKill < records, `killed mid-stream (offset ${seenAtKill} of ${records} records)`);
    await first;
    await Promise.all(BULK.map((code) => send(code, 20_000)));
    t.pass('the click log acknowledged every click');
    await until(
      `the other partition (${ownerOf(other)}) to count everything while ${ownerOf(victim)} is dead`,
      async () => (await ownerStats(other)).total === 120_000,
      120_000,
    );
    // No takeover to wait for: the partition's second copy counts on, and answers the stats, with its first owner dead.
    await until(
      `the second copy (${secondOwnerOf(victim)}) to count every click of ${victim} while ${ownerOf(victim)} is dead`,
      async () => (await ownerStats(victim, secondOwnerOf(victim))).total === 120_000,
      120_000,
    );
    t.pass(`${secondOwnerOf(victim)} answered the stats of ${victim}: 120,000 clicks, with ${ownerOf(victim)} dead`);
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
    const wrong = await request(`http://${address(nonOwnerOf(other)).httpAddress}/internal/stats/${other}`, {
      headers: { authorization: `Bearer ${cluster.token}` },
    });
    t.equal(wrong.statusCode, 421, 'a worker asked for a code of a partition it does not own refuses');
    await wrong.body.dump();
  },
);

t.test(
  'redirects answer 302 while the click log has no quorum and analytics is killed; after restart and replay the aggregates are exact',
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
    for (const id of ['clicklog2', 'clicklog3'])
      t.equal((await cluster.run('kill', id)).code, 0, `${id} killed: the click log has no quorum`);
    await visit(900, 'click log down');
    t.equal((await cluster.run('kill', ownerOf(code))).code, 0, `${ownerOf(code)} killed`);
    await visit(300, 'click log and analytics down');
    // A click is emitted once its 302 is flushed, which can trail the client's read of it by a moment; it waits in
    // an open block (50 ms) before it meets the full buffer and is dropped, so the buffer is read once blocks closed.
    const during = await until('one click emitted per redirect, every open block closed', async () => {
      const now = await totals();
      return now.emitted === redirects && now.buffered <= CLICK_BUFFER * cluster.apps.length ? now : null;
    });
    t.equal(during.emitted, redirects, 'one click emitted per redirect');
    t.equal(during.buffered, CLICK_BUFFER * cluster.apps.length, 'each app holds a full buffer');
    t.equal(during.dropped, redirects - 400 - during.buffered, 'the rest were dropped, and counted');

    for (const id of ['clicklog2', 'clicklog3']) t.equal((await cluster.run('restart', id)).code, 0, `${id} restarted`);
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
      'delivered: every click made while the click log was up, plus the buffered ones',
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

t.test(
  'a click log host killed -9 with its data folder wiped, then restarted: every acknowledged click counted once',
  async (t) => {
    const code = 'wiped_host_clicks';
    const partition = partitionOf(code, PARTITIONS);
    const click = { short_code: code, timestamp: Date.UTC(2026, 6, 1), referer: null, country: 'FR', user_agent: null };
    let seq = 0;
    const blocks = (n: number) =>
      Array.from({ length: n }, () => {
        const block = encodeClicks(
          'wiped-host',
          seq,
          Array.from({ length: 50 }, () => click),
        );
        seq += 50;
        return block;
      });
    await appendAll(partition, blocks(200));
    // The partition's leader: the host whose loss matters most (it has every acknowledged record).
    const leader = await until('the partition to name its leader', async () => {
      const topic = await log.topic(CLICK_TOPIC);
      return topic.partition_groups[partition]?.leader ?? null;
    });
    t.ok(CLICK_LOG.includes(leader), `${leader} leads partition ${partition}`);
    t.equal((await cluster.run('kill', leader)).code, 0, `${leader} killed (SIGKILL)`);
    // Its disk is lost; its worker.log stays for the post-mortem, as `cluster wipe` keeps it.
    const folder = join(cluster.dataDir, leader);
    for (const name of readdirSync(folder))
      if (name !== 'worker.log') rmSync(join(folder, name), { recursive: true, force: true });
    // Acknowledged by the two others while it is gone.
    await appendAll(partition, blocks(200));
    t.equal((await cluster.run('restart', leader)).code, 0, `${leader} restarted on an empty data folder`);
    const view = async (id: string) => {
      const res = await request(`http://${address(id).httpAddress}/v1/topics/${CLICK_TOPIC}/partitions/${partition}`, {
        headers: { authorization: `Bearer ${cluster.token}` },
        headersTimeout: 2_000,
        bodyTimeout: 2_000,
      });
      return res.statusCode === 200
        ? ((await res.body.json()) as { end_offset: number })
        : (await res.body.dump(), null);
    };
    const others = CLICK_LOG.filter((id) => id !== leader);
    const end = (await view(others[0]!))?.end_offset ?? -1;
    try {
      await until(
        `${leader} to hold the partition again, caught up`,
        async () => ((await view(leader))?.end_offset ?? -1) >= end,
        120_000,
      );
    } catch (error) {
      const logFile = join(folder, 'worker.log');
      const tail = existsSync(logFile) ? readFileSync(logFile, 'utf8').split('\n').slice(-80).join('\n') : '(none)';
      const groups = async (id: string) => {
        const res = await request(`http://${address(id).httpAddress}/v1/cluster/groups`, {
          headers: { authorization: `Bearer ${cluster.token}` },
          headersTimeout: 2_000,
          bodyTimeout: 2_000,
        });
        return await res.body.text();
      };
      const views = await Promise.all(
        CLICK_LOG.map(
          async (id) =>
            `${id}: ${JSON.stringify(await view(id).catch(String))}\n${id} groups: ${await groups(id).catch(String)}`,
        ),
      );
      t.comment(`partition ${partition} as each host sees it:\n${views.join('\n')}\n${leader}'s worker.log:\n${tail}`);
      throw error;
    }
    // Another host goes: the partition's quorum now needs the rebuilt one, so what it serves is what it copied.
    t.equal((await cluster.run('kill', others[0]!)).code, 0, `${others[0]} killed: ${leader} is now needed`);
    await appendAll(partition, blocks(100));
    t.equal((await cluster.run('restart', others[0]!)).code, 0, `${others[0]} restarted`);
    const replay = await execFileAsync(process.execPath, [replayCli, '--data', cluster.dataDir, '--wait'], {
      timeout: 120_000,
    });
    t.match(replay.stdout, /replay done/, 'every partition rebuilt from offset 0 of the click log');
    await until(
      'analytics to count every click of the link',
      async () => (await ownerStats(code)).total === seq,
      60_000,
    );
    const body = await ownerStats(code);
    t.equal(body.total, 500 * 50, 'all 25,000 acknowledged clicks, each once');
    t.same(body.by_country, { FR: 25_000 });
    for (const bulk of BULK) t.equal((await ownerStats(bulk)).total, 120_000, `the ${bulk} clicks are all there too`);
  },
);
