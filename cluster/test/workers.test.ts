/**
 * Workers through the CLI: a service's processes besides its Raft members (here the short-link service's
 * application servers and click workers) are started by `up`, listed by `status`, killed, paused, resumed and
 * restarted by id, and stopped by `down`.
 */
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { request } from 'undici';
import { ownerOnlyModes } from '@raftkit/testkit';
import { freeBases, isAlive, TestCluster, until } from './helpers/cluster.js';

// The usual shell umask for whoever runs `cluster up`: the processes it starts must restrict their files themselves.
process.umask(0o022);

const [base] = await freeBases(1, 1, { fromTop: true });
const cluster = new TestCluster(base!, { nodes: 3, tickMs: 50, service: 'shortlink' });
t.teardown(() => cluster.teardown());

async function healthy(address: string): Promise<boolean> {
  try {
    const res = await request(`http://${address}/healthz`, { headersTimeout: 1_000, bodyTimeout: 1_000 });
    await res.body.text();
    return res.statusCode === 200;
  } catch {
    return false;
  }
}

t.test('bad --workers and --set are refused before anything starts', async (t) => {
  const cases: Array<[string[], RegExp]> = [
    [['--workers', 'nope=1'], /^cluster: --workers: shortlink has no role nope \(roles: .*app/],
    [['--workers', 'app=x'], /^cluster: --workers: expected role=N, got app=x/],
    [['--workers', 'app=25'], /^cluster: --workers: at most 20 workers in all, asked for \d+/],
    [['--set', 'novalue'], /^cluster: --set: expected key=value, got novalue/],
  ];
  for (const [extra, message] of cases) {
    const r = await cluster.cli('up', '--service', 'shortlink', '--base-port', String(base), ...extra);
    t.equal(r.code, 1, `${extra.join(' ')}: exit 1`);
    t.match(r.stderr, message, `${extra.join(' ')}: says why`);
    t.equal(existsSync(join(cluster.dataDir, 'cluster.json')), false, `${extra.join(' ')}: nothing started`);
  }
});

t.test('up starts the workers after the members and lists them', async (t) => {
  const r = await cluster.up('--workers', 'app=2', '--set', 'public_url=http://sho.rt');
  const workers = cluster.state().workers ?? [];
  const apps = workers.filter((w) => w.role === 'app');
  t.same(
    apps.map((w) => w.id),
    ['app1', 'app2'],
    'two app servers, named by role and number',
  );
  for (const w of workers) {
    t.match(
      r.stdout,
      new RegExp(
        `${w.id}\\s+http://${w.httpAddress.replace(/\./g, '\\.')}\\s+tcp ${w.tcpAddress.replace(/\./g, '\\.')}`,
      ),
      `${w.id} printed`,
    );
    t.ok(await healthy(w.httpAddress), `${w.id} answers /healthz`);
  }
  // A worker at place k of the block listens on base+40+k and base+160+k: the app servers from place 3 (their
  // role's slot: the public endpoints keep their ports), the click log's hosts from place 11.
  const placeOf = (id: string) => Number(workers.find((w) => w.id === id)!.httpAddress.split(':')[1]) - base! - 40;
  t.same(
    ['analytics1', 'app1', 'app2', 'clicklog1', 'clicklog3'].map(placeOf),
    [2, 3, 4, 11, 13],
    'places: analytics 2, apps 3 on, click log 11 on',
  );
  t.equal(apps[0]!.httpAddress, `127.0.0.1:${base! + 40 + 3}`, 'app1 listens on base+40+3');
  t.equal(apps[0]!.tcpAddress, `127.0.0.1:${base! + 160 + 3}`, 'and on base+160+3');
  const status = await cluster.cli('status', '--json');
  const rows = JSON.parse(status.stdout) as Array<{ id: string; role: string; pid: number | null }>;
  t.same(
    rows.filter((row) => row.role === 'worker:app').map((row) => row.id),
    ['app1', 'app2'],
  );
  t.equal(rows.filter((row) => /^n\d$/.test(row.id)).length, 3, 'members listed too');
});

t.test('kill, restart, pause and resume a worker by id', async (t) => {
  const app2 = () => cluster.state().workers!.find((w) => w.id === 'app2')!;
  const pid = app2().pid!;
  const killed = await cluster.cli('kill', 'app2');
  t.equal(killed.code, 0);
  t.equal(isAlive(pid), false, 'the process is gone');
  t.equal(app2().pid, null, 'cluster.json forgets its pid');
  const again = await cluster.cli('kill', 'app2');
  t.match(again.stderr, /^cluster: worker app2 is not running/);
  const restarted = await cluster.cli('restart', 'app2');
  t.equal(restarted.code, 0, restarted.stderr);
  t.match(restarted.stdout, /^restarted app2 \(pid \d+\)/);
  t.ok(await healthy(app2().httpAddress), 'healthy again on its old address');

  const app1 = cluster.state().workers!.find((w) => w.id === 'app1')!;
  t.equal((await cluster.cli('pause', 'app1')).code, 0);
  t.equal(await healthy(app1.httpAddress), false, 'a paused worker does not answer');
  t.equal((await cluster.cli('resume', 'app1')).code, 0);
  await until('app1 to answer after resume', () => healthy(app1.httpAddress), 10_000);

  const logs = await cluster.cli('logs', 'app1');
  const lines = logs.stdout
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as { worker?: string; role?: string });
  t.ok(
    lines.length > 0 && lines.every((l) => l.worker === 'app1' && l.role === 'app'),
    'logs are JSON lines naming the worker',
  );

  const unknown = await cluster.cli('kill', 'app9');
  t.equal(unknown.code, 1);
  t.match(unknown.stderr, /^cluster: unknown member or worker app9 \(members: n1, n2, n3; workers: .*app1, app2/);
});

t.test('two restarts at once both keep their new pid in cluster.json', async (t) => {
  // Each CLI call read the state when it started; writing it back whole lost the other call's pid, and `down` then
  // left that process running (found when a test restarted two stores at once).
  const [a, b] = await Promise.all([cluster.cli('restart', 'app1'), cluster.cli('restart', 'app2')]);
  t.equal(a.code, 0, a.stderr);
  t.equal(b.code, 0, b.stderr);
  const pids = new Map(cluster.state().workers!.map((w) => [w.id, w.pid]));
  t.equal(pids.get('app1'), Number(/pid (\d+)/.exec(a.stdout)?.[1]), 'app1: the pid its restart printed');
  t.equal(pids.get('app2'), Number(/pid (\d+)/.exec(b.stdout)?.[1]), 'app2: the pid its restart printed');
  t.ok(isAlive(pids.get('app1')!) && isAlive(pids.get('app2')!), 'both running');
});

/** Bytes in the regular files under `dir` (0 while it holds none). */
function bytesUnder(dir: string): number {
  if (!existsSync(dir)) return 0;
  let total = 0;
  for (const name of readdirSync(dir, { recursive: true }) as string[]) {
    const st = statSync(join(dir, name), { throwIfNoEntry: false });
    if (st?.isFile()) total += st.size;
  }
  return total;
}

t.test("what the members and workers write is their owner's only: folders 0700, files 0600", async (t) => {
  // A link (the members' LevelDB) and a visit (the click log's LevelDB on its hosts, then analytics).
  const workers = cluster.state().workers ?? [];
  const app = workers.find((w) => w.id === 'app1')!;
  const clickLog = workers.filter((w) => w.role === 'clicklog');
  const headers = { authorization: `Bearer ${cluster.token}`, 'content-type': 'application/json' };
  const created = await request(`http://${app.httpAddress}/api/urls`, {
    method: 'POST',
    headers,
    body: JSON.stringify({ long_url: 'https://example.com/modes' }),
  });
  const link = (await created.body.json()) as { short_code?: string };
  t.equal(created.statusCode, 201, 'a link created');
  const logBytes = () => clickLog.reduce((n, w) => n + bytesUnder(join(cluster.dataDir, w.id)), 0);
  const before = logBytes();
  const visit = await request(`http://${app.httpAddress}/${link.short_code ?? ''}`);
  await visit.body.dump();
  t.equal(visit.statusCode, 302, 'a visit');
  await until("the click on the click log's disks", () => logBytes() > before, 30_000, 100);
  const modes = ownerOnlyModes(cluster.dataDir);
  t.ok(modes.files > 10, `members' and workers' files walked (${modes.files} files, ${modes.folders} folders)`);
  t.same(modes.loose, [], 'no folder but 0700, no file but 0600');
});

t.test('down stops the workers and the members', async (t) => {
  const state = cluster.state();
  const pids = [...state.members, ...(state.workers ?? [])].map((p) => p.pid).filter((p): p is number => p !== null);
  const r = await cluster.cli('down');
  t.equal(r.code, 0);
  t.match(r.stdout, /^stopped 3 members and \d+ workers of /);
  t.same(pids.filter(isAlive), [], 'nothing left running');
});
