/**
 * Uniqueness by construction at volume, on a real cluster: 100,000 concurrent creates from many clients through 3
 * app servers all answer 201 with distinct codes; the apps' leased batches never overlap; a sample resolves to
 * the right URL; a member restarted from its snapshot and log serves the links.
 */
import t from 'tap';
import { call, startShortlink, until, type ShortlinkCluster } from './helpers/cluster.js';

const CREATES = 100_000;
const CLIENTS_PER_APP = 32;
const USERS = 24;

let cluster: ShortlinkCluster;

t.before(async () => {
  cluster = await startShortlink({
    workers: 'app=3',
    snapshotEvery: 20_000,
    settings: { create_burst_per_key: '1000000', create_rate_per_key: '1000000', create_burst_per_ip: '1000000', create_rate_per_ip: '1000000' },
  });
});
t.teardown(async () => {
  await cluster?.down();
});

t.test(`${CREATES.toLocaleString()} concurrent creates through 3 apps: every one 201, every code distinct`, async (t) => {
  const keys = await Promise.all(
    Array.from({ length: USERS }, async (_, i) => (await call(cluster.apps[0]!, 'POST', '/api/keys', { token: cluster.token, body: { user: `user${i}` } })).body.api_key as string),
  );
  const codes = new Map<string, number>();
  const failures: string[] = [];
  let next = 0;
  const started = Date.now();
  const client = async (app: string, k: number): Promise<void> => {
    for (let n = next++; n < CREATES; n = next++) {
      const a = await call(app, 'POST', '/api/urls', { token: keys[k % USERS]!, body: { long_url: `https://example.com/item/${n}` } });
      if (a.status !== 201) {
        failures.push(`item ${n}: ${a.status} ${JSON.stringify(a.body)}`);
        continue;
      }
      const code = a.body.short_code as string;
      if (codes.has(code)) failures.push(`duplicate code ${code} for items ${codes.get(code)} and ${n}`);
      codes.set(code, n);
    }
  };
  await Promise.all(cluster.apps.flatMap((app, i) => Array.from({ length: CLIENTS_PER_APP }, (_, c) => client(app, i * CLIENTS_PER_APP + c))));
  const seconds = (Date.now() - started) / 1000;
  t.comment(`${CREATES} creates in ${seconds.toFixed(1)} s (${Math.round(CREATES / seconds)}/s) through ${cluster.apps.length} apps, ${CLIENTS_PER_APP * cluster.apps.length} concurrent clients`);
  t.same(failures.slice(0, 5), [], `no create failed and no code repeated (${failures.length} problems)`);
  t.equal(codes.size, CREATES, 'every create got its own code');

  const batches = (
    await Promise.all(cluster.apps.map(async (app) => ((await call(app, 'GET', '/internal/leases', { token: cluster.token })).body.batches as Array<{ start: number; end: number }>)))
  ).flat().sort((a, b) => a.start - b.start);
  t.ok(batches.every((b, i) => b.end - b.start === 1000 && (i === 0 || batches[i - 1]!.end <= b.start)), `${batches.length} leased batches of 1,000, none overlapping`);

  const entries = [...codes.entries()];
  for (let s = 0; s < 200; s++) {
    const [code, n] = entries[Math.floor(Math.random() * entries.length)]!;
    const app = cluster.apps[s % 3]!;
    const v = await until(`${code} on ${app}`, async () => {
      const a = await call(app, 'GET', `/${code}`);
      return a.status === 302 ? a : null;
    }, 5000);
    if (v.headers.location !== `https://example.com/item/${n}`) t.fail(`${code} redirects to ${String(v.headers.location)}, not item ${n}`);
  }
  t.pass('a random sample of 200 codes redirects (302) to the right URL on every app');

  // A member rebuilt from its snapshot (taken every 20,000 entries) and the log after it serves every link.
  t.equal((await cluster.run('kill', 'n3')).code, 0);
  t.equal((await cluster.run('restart', 'n3')).code, 0);
  const member = cluster.members[2]!;
  const sample = entries.slice(0, 50);
  await until('n3 to serve the links after its restart', async () => {
    for (const [code] of sample) if ((await call(member, 'GET', `/internal/links/${code}`, { token: cluster.token })).status !== 200) return null;
    return true;
  }, 30_000);
  for (const [code, n] of sample.slice(0, 10)) {
    t.match((await call(member, 'GET', `/internal/links/${code}`, { token: cluster.token })).body, { short_code: code, long_url: `https://example.com/item/${n}` });
  }
});
