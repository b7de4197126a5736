/**
 * Check instances in two regions (real processes through the CLI, `--set regions=2`): a strict rule's counters are
 * in the one global store group, so every region draws on one bucket; a sync rule's counters are per region.
 */
import t from 'tap';
import { v4 as uuid } from 'uuid';
import { call, startRateLimitCluster, until, type RateLimitCluster } from './helpers/cluster.js';

let c: RateLimitCluster;

t.before(async () => {
  c = await startRateLimitCluster({ workers: 'store=4,check=2', set: ['regions=2', 'store_timeout_ms=200'] });
});
t.teardown(async () => {
  await c?.down();
});

t.test(
  'strict rules share one global bucket across regions; sync rules count per region until the stores sync',
  async (t) => {
    const [east, west] = c.checks;
    t.match((await call(east!.http, 'GET', '/healthz', null)).body, { region: 1 });
    t.match((await call(west!.http, 'GET', '/healthz', null)).body, { region: 2 });
    const keys = (await call(c.members[0]!, 'PUT', '/v1/tenants/geo', c.token)).body;
    const admin = keys.admin_key as string;
    let revision = 0;
    for (const [endpoint, mode] of [
      ['/strict', 'strict'],
      ['/sync', 'sync'],
    ] as const) {
      const put = await call(c.members[0]!, 'PUT', `/v1/rules/${uuid()}`, admin, {
        service_id: 'geo',
        dimension: 'ip',
        endpoint_pattern: endpoint,
        limit: 1,
        window_sec: 3600,
        region_mode: mode,
      });
      t.equal(put.status, 200);
      revision = put.body.revision as number;
    }
    for (const w of [east!, west!])
      await until(
        `${w.id} has the rules`,
        async () => ((await call(w.http, 'GET', '/healthz', null)).body.rules_revision as number) >= revision,
        10_000,
        50,
      );
    const check = (w: typeof east, endpoint: string) =>
      call(w!.http, 'POST', '/v1/check', keys.check_key as string, {
        service_id: 'geo',
        endpoint,
        identifiers: { ip: '7.7.7.7' },
      });
    t.match((await check(east, '/strict')).body, { allowed: true });
    t.match(
      (await check(west, '/strict')).body,
      { allowed: false },
      'the other region drew on the same (global) bucket',
    );
    t.match((await check(east, '/sync')).body, { allowed: true });
    t.match(
      (await check(west, '/sync')).body,
      { allowed: true },
      'a sync rule has a bucket per region (merged later by the stores)',
    );
  },
);
