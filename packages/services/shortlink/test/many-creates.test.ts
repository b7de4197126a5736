/**
 * Uniqueness by construction at volume, on a real cluster: 100,000 concurrent creates from many clients through 3
 * app servers all answer 201 with distinct codes, committed in batches (group commit); the apps' leased id batches
 * never overlap; a sample resolves to the right URL; a member restarted from its snapshot and log serves the links.
 */
import t from 'tap';
import { call, startShortlink, until, type ShortlinkCluster } from './helpers/cluster.js';
import { apiKeys, createMany } from './helpers/creates.js';

const CREATES = 100_000;
/** Many clients per app make the app servers' batches large: fewer Raft entries, less CPU per create. */
const CLIENTS_PER_APP = 128;
const USERS = 24;

let cluster: ShortlinkCluster;

t.before(async () => {
  cluster = await startShortlink({
    workers: 'app=3',
    // Creates come ~50 to an entry: a snapshot every 500 entries is one every ~25,000 links.
    snapshotEvery: 500,
    settings: {
      create_burst_per_key: '1000000',
      create_rate_per_key: '1000000',
      create_burst_per_ip: '1000000',
      create_rate_per_ip: '1000000',
    },
  });
});
t.teardown(async () => {
  await cluster?.down();
});

t.test(
  `${CREATES.toLocaleString()} concurrent creates through 3 apps: every one 201, every code distinct`,
  async (t) => {
    const keys = await apiKeys(cluster, USERS);
    const { codes, failures, seconds } = await createMany(cluster.apps, keys, CREATES, CLIENTS_PER_APP);
    t.comment(
      `${CREATES} creates in ${seconds.toFixed(1)} s (${Math.round(CREATES / seconds)}/s) through ${cluster.apps.length} apps, ${CLIENTS_PER_APP * cluster.apps.length} concurrent clients`,
    );
    t.same(failures.slice(0, 5), [], `no create failed and no code repeated (${failures.length} problems)`);
    t.equal(codes.size, CREATES, 'every create got its own code');

    const batchCounts = await Promise.all(
      cluster.apps.map(async (app) =>
        Number(
          /shortlink_create_batch_size_count (\d+)/.exec((await call(app, 'GET', '/metrics')).body.text as string)?.[1],
        ),
      ),
    );
    const storeCalls = batchCounts.reduce((a, b) => a + b, 0);
    t.ok(
      storeCalls < CREATES / 4,
      `creates were committed in batches: ${storeCalls} store calls for ${CREATES} creates (${(CREATES / storeCalls).toFixed(1)} links per batch)`,
    );

    const batches = (
      await Promise.all(
        cluster.apps.map(
          async (app) =>
            (
              await call(app, 'GET', '/internal/leases', { token: cluster.token })
            ).body.batches as Array<{ start: number; end: number }>,
        ),
      )
    )
      .flat()
      .sort((a, b) => a.start - b.start);
    t.ok(
      batches.every((b, i) => b.end - b.start === 1000 && (i === 0 || batches[i - 1]!.end <= b.start)),
      `${batches.length} leased batches of 1,000, none overlapping`,
    );

    const links = [...codes.entries()];
    for (let s = 0; s < 200; s++) {
      const [code, n] = links[Math.floor(Math.random() * links.length)]!;
      const app = cluster.apps[s % 3]!;
      const v = await until(
        `${code} on ${app}`,
        async () => {
          const a = await call(app, 'GET', `/${code}`);
          return a.status === 302 ? a : null;
        },
        5000,
      );
      if (v.headers.location !== `https://example.com/item/${n}`)
        t.fail(`${code} redirects to ${String(v.headers.location)}, not item ${n}`);
    }
    t.pass('a random sample of 200 codes redirects (302) to the right URL on every app');

    // A member rebuilt from its snapshot (taken every 500 entries) and the log after it serves every link.
    t.equal((await cluster.run('kill', 'n3')).code, 0);
    t.equal((await cluster.run('restart', 'n3')).code, 0);
    const member = cluster.members[2]!;
    const sample = links.slice(0, 50);
    await until(
      'n3 to serve the links after its restart',
      async () => {
        for (const [code] of sample)
          if ((await call(member, 'GET', `/internal/links/${code}`, { token: cluster.token })).status !== 200)
            return null;
        return true;
      },
      30_000,
    );
    for (const [code, n] of sample.slice(0, 10)) {
      t.match((await call(member, 'GET', `/internal/links/${code}`, { token: cluster.token })).body, {
        short_code: code,
        long_url: `https://example.com/item/${n}`,
      });
    }
  },
);
