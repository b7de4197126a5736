/**
 * One secret per cluster, on clusters started the way `make up` starts them (scripts/up-all.sh itself, with
 * SERVICES, a temporary DATA_ROOT and a PORT_OFFSET onto reserved ports): kv; ratelimit with a counter store and a
 * check instance; shortlink with an app server, the click stream and analytics; 3 members each, and the dashboard.
 *
 * - Every credential of one cluster (its token, a client token from POST /v1/tokens, a rate-limit tenant's admin
 *   and check keys, a short-link user key) is refused with 401 by every member and worker of the other two, and
 *   taken by its own (members: GET /v1/cluster/status; workers: GET /v1/routes, 200 for the cluster token and 403,
 *   not 401, for a derived one), and in the hello of every binary listener of the others (the rate limiter's store
 *   and check instance, the short-link click stream).
 * - The dashboard's login secret is its own file (mode 600), no cluster token logs in to it, and no process the
 *   script started carries a secret on its command line.
 * - The script's output ends with the table (service, processes, entry point, token file) and the dashboard's
 *   address, and holds no token; the CLI picks a cluster with --service and will not guess among several.
 */
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Packr } from 'msgpackr';
import t from 'tap';
import { call, reserveShiftedPorts, until } from '@raftkit/testkit';
import { defaultBasePort } from '../src/service-list.js';
import { describe } from './helpers/authorization.js';
import { runCli } from './helpers/cluster.js';

t.setTimeout(300_000);

const packr = new Packr({ useRecords: false });
const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const SERVICES = ['kv', 'ratelimit', 'shortlink'] as const;
type Service = (typeof SERVICES)[number];

const ports = await reserveShiftedPorts(SERVICES.map((s) => defaultBasePort(s)));
const work = mkdtempSync(join(tmpdir(), 'stack-tokens-'));
const dataRoot = join(work, 'data');
const dashboardPort = defaultBasePort('kv') + ports.offset + 14; // inside kv's reserved block, unused by 3 members
const env: NodeJS.ProcessEnv = {
  ...process.env,
  SERVICES: SERVICES.join(' '),
  DATA_ROOT: dataRoot,
  PORT_OFFSET: String(ports.offset),
  DASHBOARD_PORT: String(dashboardPort),
  UP_OPTIONS: '--nodes 3 --tick-ms 50',
  UP_OPTIONS_ratelimit: '--workers store=1,check=1',
  UP_OPTIONS_shortlink: '--workers app=1,analytics=1',
};
for (const name of ['CLUSTER_AUTH_TOKEN', 'CLUSTER_DATA', 'DASHBOARD_AUTH_TOKEN']) delete env[name];

function script(name: string, ...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      'bash',
      [join(ROOT, 'scripts', name), ...args],
      { cwd: ROOT, env, timeout: 240_000 },
      (error, stdout, stderr) => {
        resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : 1, stdout, stderr });
      },
    );
  });
}

t.teardown(async () => {
  await script('down-all.sh', '--wipe');
  rmSync(work, { recursive: true, force: true });
  ports.release();
});

const up = await script('up-all.sh');
t.equal(up.code, 0, `up-all.sh succeeds (stderr: ${up.stderr.slice(-2000)})`);

interface State {
  members: Array<{ id: string; pid: number | null; httpAddress: string }>;
  workers?: Array<{ id: string; role: string; pid: number | null; httpAddress: string; tcpAddress: string }>;
}
const states = Object.fromEntries(
  SERVICES.map((s) => [s, JSON.parse(readFileSync(join(dataRoot, s, 'cluster.json'), 'utf8')) as State]),
) as Record<Service, State>;
const tokens = Object.fromEntries(
  SERVICES.map((s) => [s, readFileSync(join(dataRoot, s, 'token'), 'utf8').trim()]),
) as Record<Service, string>;
const dashboardSecret = readFileSync(join(dataRoot, 'dashboard.token'), 'utf8').trim();

t.test('each cluster has its own token, the dashboard a secret of its own', async (t) => {
  t.equal(new Set(Object.values(tokens)).size, SERVICES.length, 'three clusters, three tokens');
  for (const s of SERVICES)
    t.equal(statSync(join(dataRoot, s, 'token')).mode & 0o777, 0o600, `${s}'s token file is its owner's only`);
  t.ok(dashboardSecret.length >= 32, 'the dashboard has a generated secret');
  t.notOk(Object.values(tokens).includes(dashboardSecret), 'which is no cluster token');
  t.equal(statSync(join(dataRoot, 'dashboard.token')).mode & 0o777, 0o600, "dashboard.token is its owner's only");
  t.equal(
    statSync(join(dataRoot, 'dashboard.log')).mode & 0o777,
    0o600,
    "so is the dashboard's log (its address carries the secret)",
  );
});

t.test("the output ends with the table and the dashboard's address, and prints no token", async (t) => {
  const lines = up.stdout.trimEnd().split('\n');
  const last = lines.at(-1)!;
  t.match(
    last,
    new RegExp(
      `^dashboard: http://127\\.0\\.0\\.1:${dashboardPort}/#token=${encodeURIComponent(dashboardSecret)}  \\(login secret in ${dataRoot}/dashboard\\.token\\)$`,
    ),
    'the dashboard line last',
  );
  const table = lines.slice(-2 - SERVICES.length, -1);
  t.match(table[0]!, /^service +running +entry point +token file$/, "the table's header");
  const entries: Record<Service, string> = {
    kv: `http://${states.kv.members[0]!.httpAddress} (n1)`,
    ratelimit: `http://${states.ratelimit.workers!.find((w) => w.role === 'check')!.httpAddress} (check1)`,
    shortlink: `http://${states.shortlink.workers!.find((w) => w.role === 'app')!.httpAddress} (app1)`,
  };
  const processes: Record<Service, number> = { kv: 3, ratelimit: 5, shortlink: 8 }; // shortlink: 3 members, 3 click log hosts, analytics, app
  SERVICES.forEach((s, i) => {
    t.same(
      table[i + 1]!.split(/ {2,}/),
      [s, `${processes[s]}/${processes[s]}`, entries[s], join(dataRoot, s, 'token')],
      `${s}: its row`,
    );
  });
  for (const s of SERVICES)
    t.match(
      up.stdout,
      new RegExp(`^${s}: up in \\d+ s \\(${processes[s]} processes\\)$`, 'm'),
      `${s}: one line while starting`,
    );
  for (const s of SERVICES)
    t.notOk(up.stdout.includes(tokens[s]) || up.stderr.includes(tokens[s]), `${s}'s token is not printed`);
});

t.test(
  'a credential of one cluster is refused (401) by every member and worker of the others, taken by its own',
  async (t) => {
    const first = (s: Service): string => `http://${states[s].members[0]!.httpAddress}`;
    const issue = async (
      what: string,
      answer: Promise<{ status: number; body: Record<string, unknown> }>,
      field: string,
    ): Promise<string> => {
      const a = await answer;
      if (a.status !== 200 && a.status !== 201) throw new Error(`${what}: ${a.status} ${JSON.stringify(a.body)}`);
      return a.body[field] as string;
    };
    const clientToken = (s: Service): Promise<string> =>
      issue(
        `${s} POST /v1/tokens`,
        call(first(s), 'POST', '/v1/tokens', { token: tokens[s], body: { client: 'alice' } }),
        'token',
      );
    const tenant = await call(first('ratelimit'), 'PUT', '/v1/tenants/acme', { token: tokens.ratelimit });
    t.equal(tenant.status, 200, `a rate-limit tenant (${describe(tenant)})`);
    const app = `http://${states.shortlink.workers!.find((w) => w.role === 'app')!.httpAddress}`;
    const credentials: Record<Service, Record<string, string>> = {
      kv: { 'cluster token': tokens.kv, 'client token alice': await clientToken('kv') },
      ratelimit: {
        'cluster token': tokens.ratelimit,
        'client token alice': await clientToken('ratelimit'),
        'tenant admin key': tenant.body.admin_key as string,
        'tenant check key': tenant.body.check_key as string,
      },
      shortlink: {
        'cluster token': tokens.shortlink,
        'client token alice': await clientToken('shortlink'),
        'user key alice': await issue(
          'POST /api/keys',
          call(app, 'POST', '/api/keys', { token: tokens.shortlink, body: { user: 'alice' } }),
          'api_key',
        ),
      },
    };
    // The issue's case: the same name no longer gives the same token in two clusters.
    t.not(
      credentials.shortlink['user key alice'],
      credentials.kv['client token alice'],
      'a short-link user key for alice is not the kv client token for alice',
    );

    const targets = SERVICES.flatMap((s) => [
      ...states[s].members.map((m) => ({ service: s, id: m.id, url: `http://${m.httpAddress}`, member: true })),
      ...(states[s].workers ?? []).map((w) => ({
        service: s,
        id: w.id,
        url: `http://${w.httpAddress}`,
        member: false,
      })),
    ]);
    let refused = 0;
    for (const owner of SERVICES) {
      for (const [kind, token] of Object.entries(credentials[owner])) {
        const answers = await Promise.all(
          targets.map((x) => call(x.url, 'GET', x.member ? '/v1/cluster/status' : '/v1/routes', { token })),
        );
        targets.forEach((x, i) => {
          const a = answers[i]!;
          const what = `${owner}'s ${kind} on ${x.service} ${x.id}`;
          if (x.service !== owner) {
            t.equal(a.status, 401, `${what}: 401 (${describe(a)})`);
            t.equal(
              (a.body.error as { code?: string } | undefined)?.code,
              'unauthorized',
              `${what}: code unauthorized`,
            );
            refused++;
          } else if (x.member || kind === 'cluster token') {
            t.equal(a.status, 200, `${what}: taken (${describe(a)})`);
          } else {
            t.equal(a.status, 403, `${what}: known, but not the cluster token (${describe(a)})`);
          }
        });
      }
    }
    // The binary listeners (packages/platform/rpc hello): the rate limiter's counter store and check instance. Every
    // credential of another cluster is refused in the hello; each one's own cluster token is welcome. (The short-link
    // click log's hosts listen for Raft, whose handshake is the cluster's secret: covered by the raft package.)
    const binary = SERVICES.flatMap((s) =>
      (states[s].workers ?? [])
        .filter((w) => ['store', 'check'].includes(w.role))
        .map((w) => ({ service: s, id: w.id, tcp: w.tcpAddress })),
    );
    t.equal(binary.length, 2, 'store1 and check1 (ratelimit)');
    for (const listener of binary) {
      t.equal(
        await hello(listener.tcp, tokens[listener.service]),
        'welcome',
        `${listener.service} ${listener.id}: its cluster token is welcome`,
      );
      for (const owner of SERVICES.filter((s) => s !== listener.service)) {
        for (const [kind, token] of Object.entries(credentials[owner])) {
          t.equal(
            await hello(listener.tcp, token),
            'unauthorized',
            `${owner}'s ${kind} in a hello to ${listener.service} ${listener.id}: unauthorized`,
          );
        }
      }
    }
    t.equal(
      await hello(binary.find((b) => b.id === 'check1')!.tcp, credentials.ratelimit['tenant check key']!),
      'welcome',
      "ratelimit check1: its tenant's check key is welcome",
    );

    const expected = SERVICES.reduce(
      (n, owner) => n + Object.keys(credentials[owner]).length * targets.filter((x) => x.service !== owner).length,
      0,
    );
    t.equal(refused, expected, `${expected} refusals: every credential on every process of the other clusters`);
  },
);

/** The answer to a binary listener's hello (packages/platform/rpc: 4-byte length, msgpack): "welcome" or the error's code. */
function hello(address: string, token: string): Promise<string> {
  const colon = address.lastIndexOf(':');
  return new Promise((resolve) => {
    const socket = connect({ host: address.slice(0, colon), port: Number(address.slice(colon + 1)) });
    let buffered = Buffer.alloc(0);
    const done = (answer: string): void => {
      clearTimeout(timer);
      socket.destroy();
      resolve(answer);
    };
    const timer = setTimeout(() => done('no answer in 10 s'), 10_000);
    const payload = packr.pack({ hello: token });
    const frame = Buffer.alloc(4 + payload.length);
    frame.writeUInt32BE(payload.length, 0);
    frame.set(payload, 4);
    socket.write(frame);
    socket.on('data', (chunk: Buffer) => {
      buffered = Buffer.concat([buffered, chunk]);
      if (buffered.length < 4 || buffered.length < 4 + buffered.readUInt32BE(0)) return;
      const message = packr.unpack(buffered.subarray(4, 4 + buffered.readUInt32BE(0))) as {
        welcome?: unknown;
        error?: { code?: string };
      };
      done(message.welcome !== undefined ? 'welcome' : (message.error?.code ?? JSON.stringify(message)));
    });
    socket.on('error', (e) => done(`error ${e.message}`));
    socket.on('close', () => done('closed without an answer'));
  });
}

t.test('the dashboard takes its own secret only, and no secret is on a command line', async (t) => {
  const base = `http://127.0.0.1:${dashboardPort}`;
  const seen = await until(
    'the dashboard to show the three clusters',
    async () => {
      const a = await call(base, 'GET', '/api/overview', { token: dashboardSecret });
      const names = ((a.body.clusters as Array<{ name: string }> | undefined) ?? []).map((c) => c.name).sort();
      return a.status === 200 && names.length === SERVICES.length ? names : null;
    },
    30_000,
  );
  t.same(seen, [...SERVICES], 'its secret shows every cluster (each polled with its own token)');
  for (const s of SERVICES) {
    const a = await call(base, 'GET', '/api/overview', { token: tokens[s] });
    t.equal(a.status, 401, `${s}'s cluster token does not log in (${describe(a)})`);
  }
  const pids = [
    Number(readFileSync(join(dataRoot, 'dashboard.pid'), 'utf8')),
    ...SERVICES.flatMap((s) => [...states[s].members, ...(states[s].workers ?? [])].map((p) => p.pid!)),
  ];
  const secrets = [dashboardSecret, ...Object.values(tokens)];
  for (const pid of pids) {
    const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ');
    t.notOk(
      secrets.some((secret) => cmdline.includes(secret)),
      `pid ${pid} (${cmdline.slice(0, 80)}...): no secret on its command line`,
    );
  }
});

t.test('the CLI picks a cluster with --service and will not guess among several', async (t) => {
  // From the folder holding data/, as a user after `make up`.
  const several = await runCli(['kill', '3'], work);
  t.equal(several.code, 1, 'kill 3 with three clusters under ./data: refused');
  t.match(
    several.stderr,
    /several clusters under \.\/data \(kv, ratelimit, shortlink\): choose one with --service NAME/,
    'naming them and --service',
  );
  const kill = await runCli(['kill', '3', '--service', 'kv'], work);
  t.equal(kill.code, 0, `kill 3 --service kv (${kill.stderr})`);
  const restart = await runCli(['restart', '3', '--service', 'kv'], work);
  t.equal(restart.code, 0, `restart 3 --service kv (${restart.stderr})`);
  const status = await runCli(['status', '--service', 'ratelimit', '--json'], work);
  t.equal(status.code, 0, `status --service ratelimit (${status.stderr})`);
  t.same(
    (JSON.parse(status.stdout) as Array<{ id: string }>).map((r) => r.id),
    ['n1', 'n2', 'n3', 'store1', 'check1'],
    "the ratelimit cluster's processes",
  );
  const list = await runCli(['list'], work);
  t.equal(list.code, 0, `list (${list.stderr})`);
  t.match(
    list.stdout,
    /^kv +3\/3 +http:\/\/127\.0\.0\.1:\d+ \(n1\) +data\/kv\/token$/m,
    'list shows token files as paths from here',
  );
  const unknown = await runCli(['status', '--service', 'nope'], work);
  t.match(unknown.stderr, /--service: no service nope/, 'an unknown service is named');
  // A token exported for one cluster is not sent to another: each call reads its cluster's token file.
  const exported = await new Promise<{ code: number; stdout: string }>((resolve) => {
    execFile(
      process.execPath,
      [join(ROOT, 'bin', 'cluster'), 'status', '--service', 'kv', '--json'],
      { cwd: work, env: { ...env, CLUSTER_AUTH_TOKEN: tokens.shortlink } },
      (error, stdout) => resolve({ code: error === null ? 0 : 1, stdout }),
    );
  });
  t.equal(exported.code, 0, 'status --service kv with the shortlink token in CLUSTER_AUTH_TOKEN');
  t.ok(
    (JSON.parse(exported.stdout) as Array<{ term: number | null }>).every((r) => typeof r.term === 'number'),
    'every kv member answered (the kv token file was used)',
  );
});

t.test('list warns about clusters that share a token (data from an older make up)', async (t) => {
  const old = join(work, 'old');
  for (const name of ['kv', 'lock']) {
    mkdirSync(join(old, name), { recursive: true });
    writeFileSync(
      join(old, name, 'cluster.json'),
      JSON.stringify({ service: name, dataDir: join(old, name), basePort: 1, tickMs: 100, bootstrap: {}, members: [] }),
    );
    writeFileSync(join(old, name, 'token'), 'one-token-for-all\n');
  }
  const list = await runCli(['list', '--data-root', old], work);
  t.equal(list.code, 0, 'list still lists them');
  t.match(
    list.stderr,
    /^warning: kv, lock share one token, so a key derived from one .* is valid on the others/,
    'and says they share a token',
  );
  const ours = await runCli(['list', '--data-root', dataRoot], work);
  t.equal(ours.stderr, '', 'clusters of make up share none');
});
