/**
 * The dashboard's API (issue 22) on real processes: one 3-member kv cluster started by the CLI and one
 * `cluster dashboard` process over its data root, shared by every case. Auth on every route and on the WebSocket,
 * the login cookie, the overview's leader, faults from the API and from the CLI on the timeline, bad input, and
 * live updates that neither come faster than once a second nor multiply the collector's polling; a paused remote
 * member slow then down (never down at its first miss), its missed rates null; no polling without a page.
 */
import { randomBytes } from 'node:crypto';
import { appendFileSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { join } from 'node:path';
import t from 'tap';
import WebSocket from 'ws';
import { reservePorts } from '@raftkit/testkit';
import { MAX_LINES, recordFault, timelinePath } from '../src/actions.js';
import { dashboardToken, dashboardTokenPath } from '../src/dashboard/command.js';
import { MAX_EVENTS, Timeline } from '../src/dashboard/timeline.js';
import { startDashboard } from '../src/dashboard/server.js';
import { sleep, spawnCli, TestCluster, until } from './helpers/cluster.js';

t.setTimeout(120_000);

const ports = await reservePorts();
// A snapshot every 20 entries, so a few writes show snapshot events.
const cluster = new TestCluster(ports.base, { nodes: 3, tickMs: 50, snapshotEvery: 20 });
const NAME = 'data'; // the cluster's folder under the data root (cluster.root)
const dashPort = ports.base + 14;
const jepsenDir = join(cluster.root, 'jepsen');
mkdirSync(join(jepsenDir, 'kv-partition'), { recursive: true });
writeFileSync(join(jepsenDir, 'kv-partition', 'report.html'), '<html><body>report</body></html>');
writeFileSync(
  join(jepsenDir, 'kv-partition', 'result.json'),
  JSON.stringify({ valid: true, run: { workload: 'kv', nemesis: ['partition'] } }),
);
writeFileSync(join(cluster.root, 'secret.txt'), 'not for the page');

// The dashboard and the cluster start side by side (both slow to load on a busy machine): the dashboard finds
// the cluster on its next scan of the data root. How it finds its secret without --auth-token is its own case.
const token = randomBytes(18).toString('base64url');
const dashboard = spawnCli(
  [
    'dashboard',
    '--data-root',
    cluster.root,
    '--port',
    String(dashPort),
    '--jepsen-dir',
    jepsenDir,
    '--auth-token',
    token,
  ],
  cluster.cwd,
);
let dashOut = '';
let dashErr = '';
dashboard.stdout!.on('data', (d: Buffer) => (dashOut += d.toString()));
dashboard.stderr!.on('data', (d: Buffer) => (dashErr += d.toString()));
const sockets: WebSocket[] = [];
t.teardown(async () => {
  for (const s of sockets) s.terminate();
  if (dashboard.exitCode === null) {
    const exited = new Promise((r) => dashboard.once('exit', r));
    dashboard.kill('SIGTERM');
    await Promise.race([exited, new Promise((r) => setTimeout(r, 5_000))]);
    if (dashboard.exitCode === null) dashboard.kill('SIGKILL');
  }
  await cluster.teardown();
  ports.release();
});
await cluster.up('--auth-token', token);
await until('the dashboard to print its address', () => dashOut.includes('\n') || dashboard.exitCode !== null, 30_000);
const base = `http://127.0.0.1:${dashPort}`;

interface Answer {
  status: number;
  headers: Headers;
  json: any;
}

async function call(
  method: string,
  path: string,
  options: { token?: string | null; cookie?: string; body?: string } = {},
): Promise<Answer> {
  const headers: Record<string, string> = {};
  const bearer = options.token === undefined ? token : options.token;
  if (bearer !== null) headers.authorization = `Bearer ${bearer}`;
  if (options.cookie !== undefined) headers.cookie = options.cookie;
  if (options.body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(base + path, { method, headers, body: options.body, signal: AbortSignal.timeout(30_000) });
  const text = await res.text();
  let json: unknown;
  try {
    json = text.length > 0 ? JSON.parse(text) : undefined;
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, json };
}

/** A GET sent with its path as written (fetch would resolve the dot segments before sending). */
function rawGet(path: string): Promise<{ status: number; json: any }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      { host: '127.0.0.1', port: dashPort, path, headers: { authorization: `Bearer ${token}` } },
      (res) => {
        let text = '';
        res.on('data', (d: Buffer) => (text += d.toString()));
        res.on('end', () => {
          let json: unknown;
          try {
            json = JSON.parse(text);
          } catch {
            json = undefined;
          }
          resolve({ status: res.statusCode ?? 0, json });
        });
      },
    );
    req.on('error', reject);
    req.end();
  });
}

const fault = (body: unknown): Promise<Answer> =>
  call('POST', `/api/clusters/${NAME}/faults`, { body: typeof body === 'string' ? body : JSON.stringify(body) });
const overview = async (): Promise<any> =>
  (await call('GET', '/api/overview')).json.clusters.find((c: { name: string }) => c.name === NAME);
const leaderOf = (view: any): string | null =>
  view?.members.find((m: { state: string }) => m.state === 'leader')?.id ?? null;

t.test(
  "the command prints its address with the token; without one given it keeps a secret of its own, never a cluster's",
  async (t) => {
    t.equal(dashboard.exitCode, null, `the dashboard runs (stderr: ${dashErr})`);
    t.equal(dashOut.trim(), `dashboard: ${base}/#token=${encodeURIComponent(token)}`);
    t.match(dashErr, /--auth-token shows in ps/, 'a secret on the command line gets a note');
    const saved = { cluster: process.env.CLUSTER_AUTH_TOKEN, dashboard: process.env.DASHBOARD_AUTH_TOKEN };
    process.env.CLUSTER_AUTH_TOKEN = token; // a cluster token in the environment is not the page's
    delete process.env.DASHBOARD_AUTH_TOKEN;
    const file = dashboardTokenPath(cluster.root);
    try {
      const own = dashboardToken(cluster.root);
      t.ok(own.length >= 32 && own !== token, 'a generated secret, not the cluster token');
      t.equal(readFileSync(file, 'utf8').trim(), own, 'kept in DATA_ROOT/dashboard.token');
      t.equal(statSync(file).mode & 0o777, 0o600, 'readable by its owner only');
      t.equal(dashboardToken(cluster.root), own, 'the same one next time');
      t.equal(dashboardToken(cluster.root, { authToken: 'given' }), 'given', '--auth-token wins');
      const given = join(cluster.root, 'given.token');
      writeFileSync(given, 'from-a-file\n', { mode: 0o600 });
      t.equal(dashboardToken(cluster.root, { authTokenFile: given }), 'from-a-file', '--auth-token-file');
      t.throws(
        () => dashboardToken(cluster.root, { authToken: 'x', authTokenFile: given }),
        /not both/,
        'both: refused',
      );
      process.env.DASHBOARD_AUTH_TOKEN = 'from-the-environment';
      t.equal(dashboardToken(cluster.root), 'from-the-environment', '$DASHBOARD_AUTH_TOKEN before the file');
      delete process.env.DASHBOARD_AUTH_TOKEN;
      // An older `make up` wrote the token every cluster shared into dashboard.token: it is replaced.
      writeFileSync(file, token + '\n', { mode: 0o600 });
      const replaced = dashboardToken(cluster.root);
      t.ok(
        replaced !== token && replaced.length >= 32,
        'a dashboard.token holding a cluster token is replaced by a new secret',
      );
      t.equal(readFileSync(file, 'utf8').trim(), replaced, 'and the file holds the new one');
    } finally {
      for (const [name, value] of [
        ['CLUSTER_AUTH_TOKEN', saved.cluster],
        ['DASHBOARD_AUTH_TOKEN', saved.dashboard],
      ] as const) {
        if (value === undefined) delete process.env[name];
        else process.env[name] = value;
      }
      rmSync(file, { force: true });
    }
  },
);

t.test('no token or a wrong one: 401 on every /api route, the reports and the WebSocket', async (t) => {
  const routes: Array<[string, string, string | undefined]> = [
    ['GET', '/api/overview', undefined],
    ['GET', `/api/timeline?cluster=${NAME}&since=0`, undefined],
    ['POST', `/api/clusters/${NAME}/faults`, JSON.stringify({ action: 'heal' })],
    ['GET', '/api/jepsen', undefined],
    ['GET', '/api/debug', undefined],
    ['GET', '/api/nothing-here', undefined],
    ['GET', '/jepsen/kv-partition/report.html', undefined],
  ];
  for (const [method, path, body] of routes) {
    for (const [what, presented] of [
      ['no token', null],
      ['a wrong token', 'not-the-token'],
    ] as const) {
      const a = await call(method, path, {
        token: presented,
        body,
        cookie: presented === null ? undefined : 'raftkit_dash=forged',
      });
      t.equal(a.status, 401, `${method} ${path} with ${what}: 401`);
      t.equal(a.json?.error?.code, 'unauthorized', `${method} ${path} with ${what}: JSON error`);
    }
  }
  for (const headers of [{}, { authorization: 'Bearer wrong' }, { cookie: 'raftkit_dash=forged' }] as Array<
    Record<string, string>
  >) {
    t.equal(await upgrade(headers), 401, `upgrade with ${JSON.stringify(headers)}: 401`);
  }
  t.equal(
    await upgrade({ authorization: `Bearer ${token}`, origin: 'http://evil.example' }),
    403,
    "another site's page: 403 even with the token",
  );
  // The page itself holds no data and needs no token: the bundle, or a 404 JSON while it is not built.
  const page = await call('GET', '/', { token: null });
  t.not(page.status, 401, 'GET / needs no token');
  t.ok(
    page.status === 200
      ? page.headers.get('content-type')?.startsWith('text/html')
      : page.status === 404 && page.json?.error?.code === 'not_found',
    `GET /: the page or a 404 JSON (${page.status})`,
  );
});

t.test('login: a wrong token is refused, the right one gives a cookie that works in place of the token', async (t) => {
  const wrong = await call('POST', '/api/login', { token: null, body: JSON.stringify({ token: 'nope' }) });
  t.equal(wrong.status, 401);
  t.equal(wrong.json?.error?.code, 'unauthorized');
  const right = await call('POST', '/api/login', { token: null, body: JSON.stringify({ token }) });
  t.equal(right.status, 204);
  const setCookie = right.headers.get('set-cookie') ?? '';
  t.match(setCookie, /^raftkit_dash=[A-Za-z0-9_-]{20,};/);
  t.match(setCookie, /HttpOnly/);
  t.match(setCookie, /SameSite=Strict/);
  t.match(setCookie, /Path=\//);
  const cookie = setCookie.split(';')[0]!;
  const withCookie = await call('GET', '/api/overview', { token: null, cookie });
  t.equal(withCookie.status, 200, 'the cookie admits /api/overview');
  t.ok(Array.isArray(withCookie.json?.clusters));
  const report = await call('GET', '/jepsen/kv-partition/result.json', { token: null, cookie });
  t.equal(report.status, 200, 'the cookie admits the reports');
  t.equal(await upgrade({ cookie, origin: base }), 101, 'the cookie admits the live socket from the page');
});

t.test(
  'a fault behind the login cookie: refused from another origin (403) and without a JSON body (415); nothing happens',
  async (t) => {
    const login = await call('POST', '/api/login', { token: null, body: JSON.stringify({ token }) });
    const cookie = (login.headers.get('set-cookie') ?? '').split(';')[0]!;
    const faultsSoFar = async (): Promise<number> =>
      (await call('GET', `/api/timeline?cluster=${NAME}&since=0`)).json.events.filter(
        (e: { kind: string }) => e.kind === 'fault',
      ).length;
    const before = await faultsSoFar();
    const pause = JSON.stringify({ action: 'pause', member: 'n1', confirm: true });
    const send = (headers: Record<string, string>, body = pause): Promise<Response> =>
      fetch(`${base}/api/clusters/${NAME}/faults`, {
        method: 'POST',
        headers: { cookie, ...headers },
        body,
        signal: AbortSignal.timeout(30_000),
      });
    const cases: Array<[string, Record<string, string>, number, string]> = [
      [
        "another site's page, JSON",
        { origin: 'http://evil.example', 'content-type': 'application/json' },
        403,
        'forbidden_origin',
      ],
      [
        'another port of this host, JSON',
        { origin: `http://127.0.0.1:${dashPort + 1}`, 'content-type': 'application/json' },
        403,
        'forbidden_origin',
      ],
      [
        "another site's page, text/plain (a fetch with no preflight)",
        { origin: 'http://evil.example', 'content-type': 'text/plain' },
        403,
        'forbidden_origin',
      ],
      [
        'this page, text/plain',
        { origin: base, 'content-type': 'text/plain;charset=UTF-8' },
        415,
        'unsupported_media_type',
      ],
      [
        'a form post (no Origin), urlencoded',
        { 'content-type': 'application/x-www-form-urlencoded' },
        415,
        'unsupported_media_type',
      ],
      ['no content-type', {}, 415, 'unsupported_media_type'],
    ];
    for (const [what, headers, status, code] of cases) {
      const res = await send(headers);
      const body = (await res.json()) as { error?: { code?: string } };
      t.equal(res.status, status, `${what}: ${status}`);
      t.equal(body.error?.code, code, `${what}: ${code}`);
    }
    const loginElsewhere = await fetch(`${base}/api/login`, {
      method: 'POST',
      headers: { origin: 'http://evil.example', 'content-type': 'application/json' },
      body: JSON.stringify({ token }),
    });
    t.equal(loginElsewhere.status, 403, 'a login posted from another origin: 403');
    t.equal(await faultsSoFar(), before, 'no fault reached the cluster');
    const own = await send({ origin: base, 'content-type': 'application/json' }, JSON.stringify({ action: 'heal' }));
    t.equal(own.status, 200, 'the page itself (its origin, JSON) still acts');
  },
);

t.test('the overview shows the cluster and its leader', async (t) => {
  const view = await until(
    'the overview to show a leader',
    async () => {
      const v = await overview();
      return leaderOf(v) !== null && v.members.every((m: { pid: number | null }) => m.pid !== null) ? v : null;
    },
    20_000,
  );
  const leader = leaderOf(view)!;
  t.equal(view.service, 'kv');
  t.equal(view.members.length, 3);
  t.equal(view.groups.length, 1, 'one group for a single-group service');
  t.equal(view.groups[0].name, 'kv', 'named after the service');
  t.equal(view.groups[0].leader, leader, 'the group names the same leader');
  t.equal(view.partition, null);
  for (const m of view.members) {
    t.equal(m.leader, leader, `${m.id} follows ${leader}`);
    t.ok(typeof m.rssBytes === 'number' && m.rssBytes > 1_000_000, `${m.id}: its memory (${m.rssBytes})`);
    t.ok(
      m.metrics.requestsPerSec === null || typeof m.metrics.requestsPerSec === 'number',
      `${m.id}: a request rate, or null for no sample yet`,
    );
    t.equal(m.role, m.id === leader ? 'leader' : 'follower', `${m.id}: its role`);
    t.ok(typeof m.latencyMs === 'number' && m.missedPolls === 0, `${m.id}: answered in ${m.latencyMs} ms`);
    t.ok(m.term >= 1 && m.commit >= 1, `${m.id}: term and commit`);
  }
});

t.test("--endpoints: a cluster on other hosts is shown from its members' URLs, read-only", async (t) => {
  const empty = join(cluster.root, 'no-clusters-here');
  mkdirSync(empty, { recursive: true });
  const remotePort = ports.base + 15;
  const endpoints = cluster
    .ids()
    .map((id) => cluster.url(id))
    .join(',');
  const far = spawnCli(
    [
      'dashboard',
      '--data-root',
      empty,
      '--port',
      String(remotePort),
      '--auth-token',
      token,
      '--endpoints',
      endpoints,
      '--name',
      'far',
    ],
    cluster.cwd,
  );
  let out = '';
  far.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  t.teardown(() => {
    far.kill('SIGKILL');
  });
  await until('the remote dashboard to print its address', () => out.includes('\n') || far.exitCode !== null, 30_000);
  t.match(out, new RegExp(`^dashboard: http://127\\.0\\.0\\.1:${remotePort}/#token=`), 'it serves');
  const farBase = `http://127.0.0.1:${remotePort}`;
  const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
  const view = await until(
    'the remote cluster with a leader',
    async () => {
      const res = await fetch(`${farBase}/api/overview`, { headers, signal: AbortSignal.timeout(10_000) });
      const body = (await res.json()) as { clusters: any[] };
      const c = body.clusters.find((x) => x.name === 'far');
      return c !== undefined && leaderOf(c) !== null ? c : null;
    },
    20_000,
  );
  t.equal(view.members.length, 3, 'every endpoint is a member');
  t.same(view.members.map((m: { id: string }) => m.id).sort(), cluster.ids().sort(), 'named by their own status');
  t.ok(
    view.members.every((m: { pid: unknown; cpuPercent: unknown }) => m.pid === null && m.cpuPercent === null),
    'no pid or CPU: they are on another host',
  );
  t.equal(view.groups[0].leader, leaderOf(view), 'the group shows the leader');
  const fault = await fetch(`${farBase}/api/clusters/far/faults`, {
    method: 'POST',
    headers,
    body: JSON.stringify({ action: 'kill', member: leaderOf(view), confirm: true }),
  });
  t.equal(fault.status, 409, 'faults are refused on a remote cluster');
  t.equal(((await fault.json()) as { error: { code: string } }).error.code, 'remote_cluster');
  const noToken = await fetch(`${farBase}/api/overview`);
  t.equal(noToken.status, 401, 'and it wants the token like any dashboard');

  // A remote member has no /proc here: a SIGSTOPped one is known only by its silence. It is slow (last role kept,
  // its rates a gap, not zero) for a few polls, then down; the group keeps its leader meanwhile.
  const farView = async (): Promise<any> => {
    const res = await fetch(`${farBase}/api/overview`, { headers, signal: AbortSignal.timeout(15_000) });
    return ((await res.json()) as { clusters: any[] }).clusters.find((x) => x.name === 'far');
  };
  const leader = leaderOf(view)!;
  const quiet = view.members.find((m: { id: string }) => m.id !== leader).id as string;
  const pid = cluster.pid(quiet)!;
  process.kill(pid, 'SIGSTOP');
  t.teardown(() => {
    try {
      process.kill(pid, 'SIGCONT');
    } catch {
      // already gone
    }
  });
  const stoppedAt = Date.now();
  const slow = await until(
    `${quiet} slow`,
    async () =>
      (await farView()).members.find((m: { id: string; state: string }) => m.id === quiet && m.state === 'slow') ??
      null,
    15_000,
  );
  t.equal(slow.role, 'follower', 'a slow member keeps its last role');
  t.equal(slow.latencyMs, null, 'it did not answer');
  t.ok(slow.missedPolls >= 1 && slow.missedPolls < 3, `missed ${slow.missedPolls} poll(s)`);
  t.equal(slow.metrics.requestsPerSec, null, 'its missed /metrics is a gap, not 0 requests/s');
  const down = await until(
    `${quiet} down`,
    async () => {
      const v = await farView();
      return v.members.find((m: { id: string; state: string }) => m.id === quiet && m.state === 'down') !== undefined
        ? v
        : null;
    },
    30_000,
  );
  t.ok(Date.now() - stoppedAt >= 4_000, `down only after ${Date.now() - stoppedAt} ms of silence`);
  t.ok(down.members.find((m: { id: string }) => m.id === quiet).missedPolls >= 3, 'after three misses in a row');
  t.equal(down.groups[0].leader, leader, 'the group kept its leader');
  process.kill(pid, 'SIGCONT');
  await until(
    `${quiet} back as a follower`,
    async () => (await farView()).members.find((m: { id: string }) => m.id === quiet).state === 'follower',
    15_000,
  );
});

t.test(
  'no page, no polls: requests and open sockets start the collector, it parks after them and slows when nothing changes',
  async (t) => {
    // In this process, with short settings (the command's are 15 s idle, 5 s slowest pace).
    const d = await startDashboard({
      dataRoot: cluster.root,
      jepsenDir,
      token,
      port: ports.base + 16,
      idleAfterMs: 2_000,
      maxIntervalMs: 4_000,
    });
    t.teardown(() => d.close());
    const local = `http://127.0.0.1:${d.port}`;
    const get = async (path: string): Promise<any> =>
      (
        await fetch(local + path, {
          headers: { authorization: `Bearer ${token}` },
          signal: AbortSignal.timeout(15_000),
        })
      ).json();
    const debug = async (): Promise<{ ticks: number; parked: boolean; paceMs: number }> =>
      (await get('/api/debug')).collector;
    await sleep(1_500);
    t.equal((await debug()).ticks, 0, 'started with no page: not one poll');
    const first = await get('/api/overview');
    t.ok(
      first.clusters.some((c: { name: string }) => c.name === NAME),
      'an overview request polls at once',
    );
    await until('parked after the idle time', async () => (await debug()).parked, 15_000);
    const parkedTicks = (await debug()).ticks;
    await sleep(2_500);
    t.equal((await debug()).ticks, parkedTicks, 'no polls while parked (GET /api/debug does not count as a page)');

    const ws = new WebSocket(`ws://127.0.0.1:${d.port}/api/live`, { headers: { authorization: `Bearer ${token}` } });
    sockets.push(ws);
    await new Promise((r, j) => (ws.once('open', r), ws.once('error', j)));
    const openedAt = Date.now();
    const slowed = await until(
      'the pace to slow down on an unchanged cluster',
      async () => {
        const c = await debug();
        return c.paceMs >= 2_000 ? c : null;
      },
      20_000,
    );
    await sleep(5_000);
    const later = await debug();
    t.notOk(later.parked, 'an open socket keeps it polling past the idle time');
    t.ok(
      later.ticks - slowed.ticks >= 1,
      `polled while the socket is open (${later.ticks - slowed.ticks} rounds in the last 5 s, ${later.ticks - parkedTicks} since it opened ${((Date.now() - openedAt) / 1000).toFixed(0)} s ago)`,
    );
    ws.close();
    await until('parked again once the socket closed', async () => (await debug()).parked, 15_000);
  },
);

t.test('writes make snapshots, which show on the timeline', async (t) => {
  const leader = leaderOf(await overview())!;
  for (let i = 0; i < 30; i++)
    t.equal((await cluster.call(leader, 'PUT', `/v1/kv/k${i}`, { body: String(i) })).status, 200, `put k${i}`);
  const events = await until(
    'snapshot events',
    async () => {
      const all = (await call('GET', `/api/timeline?cluster=${NAME}&since=0`)).json.events as Array<{
        kind: string;
        member: string;
        text: string;
      }>;
      const snaps = all.filter((e) => e.kind === 'snapshot');
      return snaps.length > 0 ? snaps : null;
    },
    15_000,
  );
  t.match(events[0]!.text, /took a snapshot at index \d+/);
  // The overview is a poll of up to a second ago, and followers learn a commit one message after the leader.
  const view = await until(
    'every member to show the writes committed',
    async () => {
      const v = await overview();
      return v.members.every((m: { commit: number }) => m.commit >= 30) ? v : null;
    },
    10_000,
  );
  t.ok(
    view.members.every((m: { commit: number }) => m.commit >= 30),
    'every member committed the writes',
  );
});

t.test('kill through the API: confirmation needed, then a new leader and the fault on the timeline', async (t) => {
  const old = leaderOf(await overview())!;
  t.ok(old, 'a leader to kill');
  const refused = await fault({ action: 'kill', member: old });
  t.equal(refused.status, 400);
  t.equal(refused.json?.error?.code, 'confirmation_required');
  const killed = await fault({ action: 'kill', member: old, confirm: true });
  t.equal(killed.status, 200, JSON.stringify(killed.json));
  t.equal(killed.json.ok, true);
  t.equal(killed.json.event.kind, 'fault');
  t.equal(killed.json.event.member, old);
  t.equal(killed.json.event.cluster, NAME);
  const after = await until(
    'a new leader on the overview',
    async () => {
      const v = await overview();
      const leader = leaderOf(v);
      return leader !== null && leader !== old && v.members.find((m: { id: string }) => m.id === old).state === 'down'
        ? v
        : null;
    },
    15_000,
  );
  t.not(leaderOf(after), old, `the new leader is ${leaderOf(after)}`);
  const events = (await call('GET', `/api/timeline?cluster=${NAME}&since=0`)).json.events as Array<{
    seq: number;
    kind: string;
    member: string | null;
    text: string;
  }>;
  t.ok(
    events.some((e) => e.seq === killed.json.event.seq && e.kind === 'fault'),
    'the fault is on the timeline',
  );
  t.ok(
    events.some((e) => e.kind === 'down' && e.member === old),
    `${old} going down is on the timeline`,
  );
  await until(
    'the new leader on the timeline',
    async () => {
      const all = (await call('GET', `/api/timeline?cluster=${NAME}&since=${killed.json.event.seq}`)).json
        .events as typeof events;
      return all.some((e) => e.kind === 'leader' && e.member === leaderOf(after));
    },
    10_000,
  );
  const since = (await call('GET', `/api/timeline?since=${killed.json.event.seq}`)).json.events as typeof events;
  t.ok(
    since.every((e) => e.seq > killed.json.event.seq),
    'since= returns only later events',
  );
  // Back, without waiting: the next cases run while it starts.
  const restarted = await fault({ action: 'restart', member: old, confirm: true });
  t.equal(restarted.status, 200, 'restart through the API');
  t.match(restarted.json.event.text, new RegExp(`restart ${old}`));
});

t.test('a fault made with the CLI shows on the timeline too', async (t) => {
  const view = await overview();
  const follower = view.members.find((m: { state: string }) => m.state === 'follower').id as string;
  const before = (await call('GET', `/api/timeline?cluster=${NAME}&since=0`)).json.events.at(-1)?.seq ?? 0;
  const r = await cluster.cli('pause', follower);
  t.equal(r.code, 0, r.stderr);
  t.equal(r.stdout, `pause: ${follower}\n`, 'the CLI prints what it always printed');
  const found = await until(
    'the CLI pause on the timeline',
    async () => {
      const events = (await call('GET', `/api/timeline?cluster=${NAME}&since=${before}`)).json.events as Array<{
        kind: string;
        member: string;
        text: string;
      }>;
      return events.find((e) => e.kind === 'fault' && e.member === follower) ?? null;
    },
    10_000,
  );
  t.match(found.text, /pause .*from the CLI/);
  await until(
    `${follower} paused on the overview`,
    async () => (await overview()).members.find((m: { id: string }) => m.id === follower).state === 'paused',
    10_000,
  );
  const resumed = await fault({ action: 'resume', member: follower });
  t.equal(resumed.status, 200, 'resume needs no confirmation');
});

t.test('partition and heal through the API', async (t) => {
  const ids = cluster.ids();
  await until(
    'every member up',
    async () =>
      (await overview()).members.every((m: { state: string }) => m.state === 'leader' || m.state === 'follower'),
    20_000,
  );
  const cut = await fault({ action: 'partition', sides: [[ids[0]], ids.slice(1)], confirm: true });
  t.equal(cut.status, 200, JSON.stringify(cut.json));
  t.match(cut.json.event.text, /partition/);
  t.same(cut.json.warnings, [], 'every member took its side');
  const sides = await until('the sides on the overview', async () => (await overview()).partition, 10_000);
  t.same(sides, [[ids[0]], ids.slice(1)], 'the overview shows the sides');
  const healed = await fault({ action: 'heal' });
  t.equal(healed.status, 200, 'heal needs no confirmation');
  await until('no partition on the overview', async () => (await overview()).partition === null, 10_000);
});

t.test('bad input: a 4xx JSON naming the problem, and the dashboard still serves', async (t) => {
  const cases: Array<[string, string | object, number, string]> = [
    ['an unknown action', { action: 'explode', member: 'n1', confirm: true }, 400, 'invalid_action'],
    ['no action', { member: 'n1' }, 400, 'invalid_action'],
    ['an unknown member', { action: 'kill', member: 'n9', confirm: true }, 400, 'unknown_member'],
    ['no member', { action: 'pause', confirm: true }, 400, 'invalid_field'],
    ['one side', { action: 'partition', sides: [['n1', 'n2', 'n3']], confirm: true }, 400, 'invalid_sides'],
    ['an empty side', { action: 'partition', sides: [['n1'], []], confirm: true }, 400, 'invalid_sides'],
    [
      'a member on two sides',
      {
        action: 'partition',
        sides: [
          ['n1', 'n2'],
          ['n2', 'n3'],
        ],
        confirm: true,
      },
      400,
      'invalid_sides',
    ],
    [
      'an unknown member in sides',
      { action: 'partition', sides: [['n1'], ['n7']], confirm: true },
      400,
      'unknown_member',
    ],
    ['sides not a list', { action: 'partition', sides: 'n1|n2', confirm: true }, 400, 'invalid_sides'],
    ['partition without confirm', { action: 'partition', sides: [['n1'], ['n2', 'n3']] }, 400, 'confirmation_required'],
    ['confirm not true', { action: 'pause', member: 'n1', confirm: 'yes' }, 400, 'confirmation_required'],
    ['a body that is not JSON', '{"action": kill', 400, 'invalid_json'],
    ['a JSON array', '[1,2]', 400, 'invalid_body'],
  ];
  for (const [what, body, status, code] of cases) {
    const a = await fault(body);
    t.equal(a.status, status, `${what}: ${status}`);
    t.equal(a.json?.error?.code, code, `${what}: ${code} (${a.json?.error?.message})`);
    t.ok(typeof a.json?.error?.message === 'string' && a.json.error.message.length > 0, `${what}: a message`);
  }
  const unknown = await call('POST', '/api/clusters/nope/faults', { body: JSON.stringify({ action: 'heal' }) });
  t.equal(unknown.status, 404, 'an unknown cluster: 404');
  t.equal(unknown.json?.error?.code, 'not_found');
  const big = await fault(JSON.stringify({ action: 'heal', pad: 'x'.repeat(100_000) }));
  t.equal(big.status, 413, 'an oversized body: 413');
  t.equal(big.json?.error?.code, 'body_too_large');
  const since = await call('GET', `/api/timeline?cluster=${NAME}&since=abc`);
  t.equal(since.status, 400, 'since=abc: 400');
  t.equal(since.json?.error?.field, 'since');
  const noCluster = await call('GET', '/api/timeline?cluster=nope&since=0');
  t.equal(noCluster.status, 404, 'the timeline of an unknown cluster: 404');
  for (const path of [
    '/jepsen/../secret.txt',
    '/jepsen/kv-partition/..%2F..%2Fsecret.txt',
    '/jepsen/%2e%2e/secret.txt',
    '/jepsen/kv-partition/%2e%2e/%2e%2e/secret.txt',
  ]) {
    const a = await rawGet(path);
    t.equal(a.status, 400, `${path}: 400`);
    t.equal(a.json?.error?.code, 'invalid_path', `${path}: invalid_path`);
  }
  const missing = await call('GET', '/jepsen/kv-partition/nothing.html');
  t.equal(missing.status, 404);
  const runs = await call('GET', '/api/jepsen');
  t.equal(runs.status, 200);
  t.same(
    runs.json.runs.map((r: { name: string; workload: string; nemesis: string; valid: boolean; reportUrl: string }) => [
      r.name,
      r.workload,
      r.nemesis,
      r.valid,
      r.reportUrl,
    ]),
    [['kv-partition', 'kv', 'partition', true, '/jepsen/kv-partition/report.html']],
  );
  const report = await fetch(`${base}/jepsen/kv-partition/report.html`, {
    headers: { authorization: `Bearer ${token}` },
  });
  t.equal(report.status, 200);
  t.match(await report.text(), /report/);
  t.equal(dashboard.exitCode, null, 'the dashboard still runs');
  t.equal((await call('GET', '/api/overview')).status, 200, 'and still serves');
});

/** The status of a WebSocket upgrade to /api/live with these headers (101 when it opened). */
function upgrade(headers: Record<string, string>): Promise<number> {
  return new Promise<number>((resolve) => {
    const ws = new WebSocket(`ws://127.0.0.1:${dashPort}/api/live`, { headers });
    ws.on('unexpected-response', (_req, res) => {
      resolve(res.statusCode ?? 0);
      ws.terminate();
    });
    ws.on('open', () => {
      resolve(101);
      ws.terminate();
    });
    ws.on('error', () => resolve(-1));
  });
}

/** Opens a live socket with the bearer token; resolves once open. */
function openLive(received: Array<{ at: number; type: string }>): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`ws://127.0.0.1:${dashPort}/api/live`, { headers: { authorization: `Bearer ${token}` } });
    sockets.push(ws);
    ws.on('message', (data) => {
      const msg = JSON.parse(String(data)) as { type: string };
      received.push({ at: Date.now(), type: msg.type });
    });
    ws.once('open', () => resolve(ws));
    ws.once('error', reject);
  });
}

t.test('live: updates at most once a second, and 200 sockets do not multiply the polling', async (t) => {
  const one: Array<{ at: number; type: string }> = [];
  await openLive(one);
  const debug0 = (await call('GET', '/api/debug')).json;
  await until(
    'four overview updates on one socket',
    () => one.filter((m) => m.type === 'overview').length >= 4,
    20_000,
  );
  const debug1 = (await call('GET', '/api/debug')).json;
  const overviews = one.filter((m) => m.type === 'overview');
  for (let i = 1; i < overviews.length; i++) {
    // The server spaces updates by 1,000 ms; the receiving side may see them a little closer (scheduling).
    t.ok(
      overviews[i]!.at - overviews[i - 1]!.at >= 900,
      `update ${i} came ${overviews[i]!.at - overviews[i - 1]!.at} ms after the previous one`,
    );
  }
  const ticks1 = debug1.collector.ticks - debug0.collector.ticks;
  const calls1 = debug1.collector.httpCalls - debug0.collector.httpCalls;

  const many = Array.from({ length: 200 }, () => [] as Array<{ at: number; type: string }>);
  await Promise.all(many.map((r) => openLive(r)));
  t.equal((await call('GET', '/api/debug')).json.live.sockets, 201, '201 sockets open');
  const debug2 = (await call('GET', '/api/debug')).json;
  await until(
    'every socket to get three updates',
    () => many.every((r) => r.filter((m) => m.type === 'overview').length >= 3),
    30_000,
  );
  const debug3 = (await call('GET', '/api/debug')).json;
  const ticks3 = debug3.collector.ticks - debug2.collector.ticks;
  const calls3 = debug3.collector.httpCalls - debug2.collector.httpCalls;
  t.ok(ticks1 > 0 && ticks3 > 0, `the collector ticked (${ticks1}, ${ticks3})`);
  // Three members, two calls each (status and /metrics) per tick, whatever the number of sockets.
  t.ok(calls1 / ticks1 <= 6, `one socket: ${calls1} calls in ${ticks1} ticks`);
  t.ok(calls3 / ticks3 <= 6, `201 sockets: ${calls3} calls in ${ticks3} ticks`);
  const elapsed = debug3.collector.ticks - debug0.collector.ticks;
  t.ok(elapsed > 0, `ticks went on (${elapsed})`);
});

t.test('the timeline file stays bounded, and a trimmed file is read again without repeats', async (t) => {
  const dir = join(cluster.root, 'timeline-only');
  mkdirSync(dir);
  const timeline = new Timeline();
  recordFault(dir, 'heal', null, 'first');
  timeline.ingestFaults('x', dir);
  t.equal(timeline.since(0, 'x').length, 1, 'the first record');
  // A file at the limit (written at once: ten thousand appends are slow on a busy machine), then a few appends.
  const filler = Array.from({ length: MAX_LINES - 1 }, (_, i) =>
    JSON.stringify({
      id: `f${i}`,
      at: Date.now(),
      action: 'kill',
      member: 'n1',
      text: `kill ${i} padding the line to a realistic length`,
    }),
  );
  appendFileSync(timelinePath(dir), filler.join('\n') + '\n');
  for (let i = MAX_LINES - 1; i < MAX_LINES + 50; i++)
    recordFault(dir, 'kill', 'n1', `kill ${i} padding the line to a realistic length`);
  const lines = readFileSync(timelinePath(dir), 'utf8')
    .split('\n')
    .filter((l) => l.length > 0);
  t.ok(lines.length <= MAX_LINES, `${lines.length} lines kept`);
  t.match(lines.at(-1)!, new RegExp(`kill ${MAX_LINES + 49} `), 'the newest kept');
  timeline.ingestFaults('x', dir);
  const events = timeline.since(0, 'x', 100_000);
  const texts = events.map((e) => e.text);
  t.equal(new Set(texts).size, texts.length, 'no record twice');
  t.equal(texts.at(-1), `kill ${MAX_LINES + 49} padding the line to a realistic length`);
  t.ok(events.length <= MAX_EVENTS, `memory bounded: ${events.length} events`);
});
