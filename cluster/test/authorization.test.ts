/**
 * Who may call what on the single-group services (kv, lock, ratelimit, shortlink), on real clusters: every listed
 * route of every member and worker with every kind of credential: none, a wrong one, the cluster token, a client
 * token, a rate-limit tenant's admin and check keys and a short-link user key (helpers/authorization.ts).
 * The services on Raft groups are in authorization-groups.test.ts, so tap runs the two files side by side.
 */
import t from 'tap';
import { deriveClientToken } from '@raftkit/http';
import { call, type TestCluster } from '@raftkit/testkit';
import {
  GROUPED_MEMBER_CLUSTER_ROUTES,
  MEMBER_CLUSTER_ROUTES,
  testService,
  type Credential,
  type ServiceCase,
} from './helpers/authorization.js';

t.setTimeout(600_000);

/** The tenant and user keys: the service's own where it issues them, else derived ones of the same names. */
async function keys(cluster: TestCluster, service: string): Promise<Record<string, Credential>> {
  const member = cluster.members[0]!;
  let adminKey = deriveClientToken(cluster.token, 'admin.authz-tenant');
  let checkKey = deriveClientToken(cluster.token, 'check.authz-tenant');
  let userKey = deriveClientToken(cluster.token, 'authz-user');
  if (service === 'ratelimit') {
    const tenant = await call(member, 'PUT', '/v1/tenants/authz-tenant', { token: cluster.token });
    if (tenant.status !== 200) throw new Error(`PUT /v1/tenants: ${tenant.status} ${JSON.stringify(tenant.body)}`);
    adminKey = tenant.body.admin_key as string;
    checkKey = tenant.body.check_key as string;
  }
  if (service === 'shortlink') {
    const key = await call(cluster.role('app')[0]!.url, 'POST', '/api/keys', {
      token: cluster.token,
      body: { user: 'authz-user' },
    });
    if (key.status !== 201) throw new Error(`POST /api/keys: ${key.status} ${JSON.stringify(key.body)}`);
    userKey = key.body.api_key as string;
  }
  return {
    'tenant admin key': { token: adminKey, standing: 'client' },
    'tenant check key': { token: checkKey, standing: 'client' },
    'shortlink user key': { token: userKey, standing: 'client' },
  };
}

const cases: Array<Omit<ServiceCase, 'credentials'>> = [
  { service: 'kv', clusterOnly: { member: MEMBER_CLUSTER_ROUTES } },
  { service: 'lock', clusterOnly: { member: MEMBER_CLUSTER_ROUTES } },
  {
    service: 'ratelimit',
    workers: 'store=1,check=1',
    clusterOnly: {
      member: [
        ...MEMBER_CLUSTER_ROUTES,
        'PUT /v1/tenants/:service_id',
        'GET /v1/tenants/:service_id',
        'GET /v1/rule-set',
      ],
      check: ['PUT /v1/tenants/:service_id', 'GET /v1/tenants/:service_id', 'GET /v1/routes'],
      store: ['GET /v1/routes'],
    },
  },
  {
    service: 'shortlink',
    workers: 'app=1,analytics=1',
    clusterOnly: {
      member: [
        ...MEMBER_CLUSTER_ROUTES,
        'POST /internal/leases',
        'POST /internal/links',
        'POST /internal/link-batches',
        'GET /internal/links/:code',
        'DELETE /internal/links/:code',
      ],
      app: ['POST /api/keys', 'GET /internal/leases', 'GET /v1/routes'],
      analytics: ['GET /internal/stats/:code', 'POST /internal/replay', 'GET /v1/routes'],
      // The click log's hosts (the event log's member runtime): as on the log's own cluster.
      clicklog: [...GROUPED_MEMBER_CLUSTER_ROUTES, 'DELETE /v1/topics/:topic'],
    },
    serviceOnly: { clicklog: ['POST /v1/topics'] },
  },
];

for (const c of cases) testService(t, { ...c, credentials: (cluster) => keys(cluster, c.service) });
