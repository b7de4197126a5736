/**
 * Who may call what, on real clusters of every service (3 members and one worker of each role): every route of
 * every member and worker, read from the routers themselves (GET /v1/routes), is called with every kind of token
 * there is: none, a wrong one, the cluster token, a client token, a rate-limit tenant's admin and check keys and a
 * short-link user key. Routes that admit the cluster only answer 403 `forbidden` (naming the cluster token) to
 * every other valid token and 401 without a valid one; no route answers 5xx to any of them.
 *
 * A route list kept here (the cluster endpoints and internal routes that must never take a client token) is
 * checked against the routers' own lists and called too, so the test also judges servers that list nothing.
 */
import t, { type Test } from 'tap';
import { deriveClientToken } from '@raftkit/http';
import { call, startCluster, until, type Answer, type TestCluster } from '@raftkit/testkit';

t.setTimeout(600_000);

type Admission = 'open' | 'authenticated' | 'cluster';
interface Route {
  method: string;
  pattern: string;
  admits: Admission;
}
type TokenKind = 'none' | 'wrong' | 'cluster' | 'client' | 'tenant admin key' | 'tenant check key' | 'shortlink user key';

/** Routes that take the cluster token only, by the server role they live on ("member" for every member). */
const MEMBER_CLUSTER_ROUTES = [
  'PUT /v1/cluster/partition',
  'DELETE /v1/cluster/partition',
  'POST /v1/cluster/members',
  'DELETE /v1/cluster/members/:id',
  'POST /v1/cluster/transfer-leader',
  'POST /v1/tokens',
  'GET /v1/routes',
];
const CLUSTER_ONLY: Record<string, Record<string, string[]>> = {
  kv: { member: MEMBER_CLUSTER_ROUTES },
  lock: { member: MEMBER_CLUSTER_ROUTES },
  ratelimit: {
    member: [...MEMBER_CLUSTER_ROUTES, 'PUT /v1/tenants/:service_id', 'GET /v1/tenants/:service_id', 'GET /v1/rule-set'],
    check: ['PUT /v1/tenants/:service_id', 'GET /v1/tenants/:service_id', 'GET /v1/routes'],
    store: ['GET /v1/routes'],
  },
  shortlink: {
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
    stream: ['GET /v1/routes'],
  },
};

/** A value for each path parameter: well-formed where cheap, so handlers run past their input checks. */
const PARAMS: Record<string, string> = {
  key: 'authz-key',
  id: '00000000-0000-4000-8000-000000000000',
  name: 'authz-lock',
  service_id: 'authz-tenant',
  rule_id: '00000000-0000-4000-8000-000000000001',
  code: 'Abc1234',
};

function pathOf(route: Route): string {
  const path = route.pattern.replace(/:([A-Za-z_]+)/g, (_m, name: string) => encodeURIComponent(PARAMS[name] ?? 'x'));
  // Long polls answer at once (a watch would wait 30 s by default).
  return route.pattern.endsWith('/watch') ? `${path}?timeout_ms=0` : path;
}

/** A body that changes nothing when accepted: healing no links, or an empty object the handler refuses. */
function bodyOf(route: Route): unknown {
  if (route.method === 'GET' || route.method === 'DELETE') return undefined;
  if (route.pattern === '/v1/cluster/partition') return { blocked: [] };
  return {};
}

interface Target {
  /** "n1" or a worker id, for messages. */
  id: string;
  /** "member" or the worker's role. */
  role: string;
  url: string;
}

async function tokensOf(cluster: TestCluster, service: string): Promise<Record<TokenKind, string | null>> {
  const member = cluster.members[0]!;
  const client = await call(member, 'POST', '/v1/tokens', { token: cluster.token, body: { client: 'authz-client' } });
  if (client.status !== 201) throw new Error(`POST /v1/tokens: ${client.status} ${JSON.stringify(client.body)}`);
  let adminKey = deriveClientToken(cluster.token, 'admin.authz-tenant');
  let checkKey = deriveClientToken(cluster.token, 'check.authz-tenant');
  let userKey = deriveClientToken(cluster.token, 'authz-user');
  // Where the service issues them itself, its own keys.
  if (service === 'ratelimit') {
    const tenant = await call(member, 'PUT', '/v1/tenants/authz-tenant', { token: cluster.token });
    if (tenant.status !== 200) throw new Error(`PUT /v1/tenants: ${tenant.status} ${JSON.stringify(tenant.body)}`);
    adminKey = tenant.body.admin_key as string;
    checkKey = tenant.body.check_key as string;
  }
  if (service === 'shortlink') {
    const key = await call(cluster.role('app')[0]!.url, 'POST', '/api/keys', { token: cluster.token, body: { user: 'authz-user' } });
    if (key.status !== 201) throw new Error(`POST /api/keys: ${key.status} ${JSON.stringify(key.body)}`);
    userKey = key.body.api_key as string;
  }
  return {
    none: null,
    wrong: deriveClientToken('not-this-cluster', 'authz-client'),
    cluster: cluster.token,
    client: client.body.token as string,
    'tenant admin key': adminKey,
    'tenant check key': checkKey,
    'shortlink user key': userKey,
  };
}

/** The routes a server lists, merged with the cluster-only routes this test knows it must have. */
async function routesOf(t: Test, target: Target, token: string, mustBeCluster: string[]): Promise<Route[]> {
  const listed = await call(target.url, 'GET', '/v1/routes', { token });
  const routes: Route[] = [];
  if (listed.status === 200 && Array.isArray(listed.body.routes)) routes.push(...(listed.body.routes as Route[]));
  else t.fail(`${target.id} lists its routes at GET /v1/routes (got ${listed.status})`);
  const declared = new Map(routes.map((r) => [`${r.method} ${r.pattern}`, r.admits]));
  for (const known of mustBeCluster) {
    t.equal(declared.get(known), 'cluster', `${target.id}: ${known} admits the cluster token only`);
    if (!declared.has(known)) {
      const [method, pattern] = known.split(' ') as [string, string];
      routes.push({ method, pattern, admits: 'cluster' });
    }
  }
  for (const r of routes) t.ok(['open', 'authenticated', 'cluster'].includes(r.admits), `${target.id}: ${r.method} ${r.pattern} declares whom it admits`);
  return routes;
}

function describe(a: Answer): string {
  return `${a.status} ${JSON.stringify(a.body).slice(0, 200)}`;
}

async function checkRoute(t: Test, target: Target, route: Route, tokens: Record<TokenKind, string | null>): Promise<void> {
  const what = `${target.id} ${route.method} ${route.pattern}`;
  for (const [kind, token] of Object.entries(tokens) as Array<[TokenKind, string | null]>) {
    const a = await call(target.url, route.method, pathOf(route), { token, body: bodyOf(route), timeoutMs: 20_000 });
    const with_ = `${what} with ${kind === 'none' ? 'no token' : `a ${kind}`}`;
    t.ok(a.status < 500, `${with_}: no 5xx (${describe(a)})`);
    if (route.admits === 'open') {
      t.not(a.status, 401, `${with_}: open`);
      continue;
    }
    if (kind === 'none' || kind === 'wrong') {
      t.equal(a.status, 401, `${with_}: 401 (${describe(a)})`);
      t.equal((a.body.error as { code?: string } | undefined)?.code, 'unauthorized', `${with_}: code unauthorized`);
    } else if (kind === 'cluster') {
      t.ok(a.status !== 401 && a.status !== 403, `${with_}: admitted (${describe(a)})`);
    } else if (route.admits === 'cluster') {
      t.equal(a.status, 403, `${with_}: 403 (${describe(a)})`);
      const error = a.body.error as { code?: string; message?: string } | undefined;
      t.equal(error?.code, 'forbidden', `${with_}: code forbidden`);
      t.match(error?.message ?? '', /cluster token/, `${with_}: the message names the cluster token`);
    } else {
      t.not(a.status, 401, `${with_}: authenticated (${describe(a)})`);
    }
  }
}

const SERVICES: Array<{ service: string; workers?: string }> = [
  { service: 'kv' },
  { service: 'lock' },
  { service: 'ratelimit', workers: 'store=1,check=1' },
  { service: 'shortlink', workers: 'app=1,stream=1,analytics=1' },
];

for (const { service, workers } of SERVICES) {
  t.test(`${service}: every route admits exactly whom it declares`, async (t) => {
    const cluster = await startCluster(service, { nodes: 3, ...(workers === undefined ? {} : { workers }) });
    t.teardown(() => cluster.down());
    await until(`${service} has a leader`, async () => {
      const s = await call(cluster.members[0]!, 'GET', '/v1/cluster/status', { token: cluster.token });
      return s.status === 200 && typeof s.body.leader_id === 'string';
    });
    const tokens = await tokensOf(cluster, service);
    const targets: Target[] = [
      { id: 'n1', role: 'member', url: cluster.members[0]! },
      ...cluster.workers.map((w) => ({ id: w.id, role: w.role, url: w.url })),
    ];
    for (const target of targets) {
      const routes = await routesOf(t, target, cluster.token, CLUSTER_ONLY[service]?.[target.role] ?? ['GET /v1/routes']);
      t.ok(routes.some((r) => r.pattern === '/healthz' && r.admits === 'open'), `${target.id}: /healthz is open`);
      for (const route of routes) await checkRoute(t, target, route, tokens);
    }
    // Nothing above may have cut a link: every member still agrees on one leader.
    await until(`${service} members agree on a leader`, async () => {
      const all = await Promise.all(cluster.members.map((m) => call(m, 'GET', '/v1/cluster/status', { token: cluster.token })));
      const leaders = new Set(all.map((s) => s.body.leader_id));
      return leaders.size === 1 && typeof all[0]!.body.leader_id === 'string';
    });
  });
}
