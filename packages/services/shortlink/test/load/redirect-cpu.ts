/**
 * CPU per redirect of each process group of a shortlink cluster at a fixed redirect rate. `npx bench shortlink` is
 * closed-loop, and there the CPU per redirect follows how many requests each event-loop turn serves, i.e. the
 * machine's load, more than the code; at a fixed rate two builds compare on the same footing.
 *   node packages/services/shortlink/dist/test/load/redirect-cpu.js [RATE=6000] [SECONDS=10] [--set key=value ...]
 * Starts `cluster up --service shortlink` (5 members, default workers) in a temporary directory, creates 10,000 links
 * with 80-character URLs, warms every app server's edge cache, then sends RATE redirects a second over 64 keep-alive
 * connections (worker w -> app w mod 3), each answer checked to be a 302, for 3 s of warm-up and SECONDS measured,
 * and prints the CPU (from /proc) per redirect of the app servers, the click log's hosts, analytics workers and members.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Pool } from 'undici';

const args = process.argv.slice(2);
const sets = args.flatMap((a, i) => (args[i - 1] === '--set' ? ['--set', a] : []));
const [rate, seconds] = args.filter((a, i) => a !== '--set' && args[i - 1] !== '--set').map(Number);
const RATE = rate ?? 6_000;
const SECONDS = seconds ?? 10;
const LINKS = 10_000;
const CLIENTS = 64;
const cli = fileURLToPath(new URL('../../../../../../cluster/bin/cluster.js', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'redirect-cpu-'));
const basePort = 21_000 + Math.floor(Math.random() * 1_000) * 10;
const settings = ['create_rate_per_key', 'create_burst_per_key', 'create_rate_per_ip', 'create_burst_per_ip'].flatMap(
  (k) => ['--set', `${k}=1e9`],
);
execFileSync(
  process.execPath,
  [
    cli,
    'up',
    '--service',
    'shortlink',
    '--nodes',
    '5',
    '--data',
    dir,
    '--base-port',
    String(basePort),
    ...settings,
    '--set',
    'edge_cache_ttl_ms=600000',
    ...sets,
  ],
  { stdio: ['ignore', 'ignore', 'inherit'] },
);
try {
  const state = JSON.parse(readFileSync(join(dir, 'cluster.json'), 'utf8')) as {
    members: Array<{ pid: number }>;
    workers: Array<{ role: string; pid: number; httpAddress: string }>;
  };
  const token = readFileSync(join(dir, 'token'), 'utf8').trim();
  const apps = state.workers.filter((w) => w.role === 'app');
  const groups: Record<string, number[]> = {
    apps: apps.map((w) => w.pid),
    clicklog: state.workers.filter((w) => w.role === 'clicklog').map((w) => w.pid),
    analytics: state.workers.filter((w) => w.role === 'analytics').map((w) => w.pid),
    members: state.members.map((m) => m.pid),
  };
  const pools = apps.map((a) => new Pool(`http://${a.httpAddress}`, { connections: CLIENTS }));
  const call = async (
    pool: Pool,
    o: { method: 'GET' | 'POST'; path: string; headers?: Record<string, string>; body?: string },
  ) => {
    const r = await pool.request(o);
    return { status: r.statusCode, text: await r.body.text(), location: r.headers.location };
  };
  const issued = await call(pools[0]!, {
    method: 'POST',
    path: '/api/keys',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: '{"user":"bench"}',
  });
  const key = (JSON.parse(issued.text) as { api_key: string }).api_key;
  const codes: string[] = [];
  const urls = new Map<string, string>();
  let next = 0;
  await Promise.all(
    Array.from({ length: 32 }, async (_, lane) => {
      for (let i = next++; i < LINKS; i = next++) {
        const url = `https://example.com/bench/${i}/`.padEnd(80, 'x');
        const r = await call(pools[lane % pools.length]!, {
          method: 'POST',
          path: '/api/urls',
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
          body: JSON.stringify({ long_url: url }),
        });
        if (r.status !== 201) throw new Error(`create: ${r.status} ${r.text}`);
        const code = (JSON.parse(r.text) as { short_code: string }).short_code;
        codes[i] = code;
        urls.set(code, url);
      }
    }),
  );
  let warm = 0;
  await Promise.all(
    Array.from({ length: 32 }, async () => {
      for (let i = warm++; i < LINKS * pools.length; i = warm++) {
        if (
          (await call(pools[i % pools.length]!, { method: 'GET', path: `/${codes[Math.floor(i / pools.length)]}` }))
            .status !== 302
        )
          throw new Error('warming: not a 302');
      }
    }),
  );
  const cpuOf = (pid: number) => {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100;
  };
  const snapshot = () =>
    Object.fromEntries(Object.entries(groups).map(([g, pids]) => [g, pids.reduce((s, p) => s + cpuOf(p), 0)]));
  let stop = false;
  let counting = false;
  let counted = 0;
  let sent = 0;
  const started = performance.now();
  const clients = Array.from({ length: CLIENTS }, async (_, w) => {
    while (!stop) {
      const wait = started + (sent++ / RATE) * 1000 - performance.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      const code = codes[Math.floor(Math.random() * LINKS)]!;
      const r = await call(pools[w % pools.length]!, { method: 'GET', path: `/${code}` });
      if (r.status !== 302 || r.location !== urls.get(code))
        throw new Error(`redirect of ${code}: ${r.status} ${String(r.location)}`);
      if (counting) counted++;
    }
  });
  await new Promise((r) => setTimeout(r, 3_000));
  const load = readFileSync('/proc/loadavg', 'utf8').split(' ')[0];
  const before = snapshot();
  const t0 = performance.now();
  counting = true;
  await new Promise((r) => setTimeout(r, SECONDS * 1_000));
  counting = false;
  const after = snapshot();
  const elapsed = (performance.now() - t0) / 1000;
  stop = true;
  await Promise.all(clients);
  const perRedirect = Object.fromEntries(
    Object.keys(groups).map((g) => [g, Math.round(((after[g]! - before[g]!) * 1e7) / counted) / 10]),
  );
  const server = Math.round(Object.values(perRedirect).reduce((a, b) => a + b, 0) * 10) / 10;
  console.log(
    JSON.stringify({
      redirects_per_sec: Math.round(counted / elapsed),
      load_avg_1m: Number(load),
      us_per_redirect: { ...perRedirect, server },
    }),
  );
  await Promise.all(pools.map((p) => p.close()));
} finally {
  execFileSync(process.execPath, [cli, 'down', '--data', dir, '--wipe'], { stdio: 'ignore' });
  rmSync(dir, { recursive: true, force: true });
}
