/**
 * Who may call what, on a real cluster of one service (3 members and one worker of each role): every route of every
 * member and worker, read from the routers themselves (GET /v1/routes), is called with every kind of credential the
 * cluster knows. Routes that admit the cluster only answer 403 `forbidden` (naming the cluster token) to every other
 * client token and 401 without a valid one; no route answers 5xx to any of them. Shared by
 * cluster/test/authorization*.test.ts (one file per family of services, so tap runs them side by side).
 *
 * A route list kept by each test (the cluster endpoints and internal routes that must never take a client token)
 * is checked against the routers' own lists and called too, so the test also judges servers that list nothing.
 */
import { randomBytes } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import type { Test } from 'tap';
import { deriveClientToken } from '@raftkit/http';
import { call, startCluster, until, type Answer, type TestCluster } from '@raftkit/testkit';

type Admission = 'open' | 'authenticated' | 'service' | 'cluster';
export interface Route {
  method: string;
  pattern: string;
  admits: Admission;
}

/**
 * How the router must judge a credential: no token or one that is no bearer token of this cluster (`foreign`: a
 * wrong cluster's token, or a credential a service checks itself, like a flash user token) is 401; the cluster
 * token passes everywhere; a derived client token passes `authenticated` routes and is 403 on `service` (internal to
 * the service: the cluster token or its own workers' service token) and `cluster` ones.
 */
export type Standing = 'none' | 'foreign' | 'cluster' | 'client';
export interface Credential {
  token: string | null;
  standing: Standing;
}

/** Routes every member of a single-group service keeps for the cluster token. */
export const MEMBER_CLUSTER_ROUTES = [
  'PUT /v1/cluster/partition',
  'DELETE /v1/cluster/partition',
  'POST /v1/cluster/members',
  'DELETE /v1/cluster/members/:id',
  'POST /v1/cluster/transfer-leader',
  'POST /v1/tokens',
  'GET /v1/routes',
];
/** And a member of a service on many Raft groups (cluster/src/many-groups.ts): the same, plus its group controls. */
export const GROUPED_MEMBER_CLUSTER_ROUTES = [
  ...MEMBER_CLUSTER_ROUTES,
  'GET /v1/cluster/groups',
  'POST /v1/cluster/balance',
  'POST /v1/cluster/spread',
];

/** A value for each path parameter: well-formed where cheap, so handlers run past their input checks. */
const PARAMS: Record<string, string> = {
  key: 'authz-key',
  id: '00000000-0000-4000-8000-000000000000',
  name: 'authz-lock',
  service_id: 'authz-tenant',
  rule_id: '00000000-0000-4000-8000-000000000001',
  code: 'Abc1234',
  topic: 'authz-topic',
  partition: '0',
  group: 'authz-group',
  doc: 'authzdoc',
  user: 'authz-other',
  snapshot: 'authzsnap',
  comment: 'authzcomment',
  file: 'index.html',
  // No such deal: the cluster-token calls of go-live and prewarm must change nothing.
  deal_id: 'authz-no-deal',
  reservation_id: 'authz-no-reservation',
  user_id: 'authz-user',
  deal: 'authz-no-deal',
};

function pathOf(route: Route): string {
  const path = route.pattern.replace(/:([A-Za-z_]+)/g, (_m, name: string) => encodeURIComponent(PARAMS[name] ?? 'x'));
  // Long polls answer at once (a watch would wait 30 s by default).
  return route.pattern.endsWith('/watch') ? `${path}?timeout_ms=0` : path;
}

/** A body that changes nothing when accepted: healing no links, a refused leader balance, or an empty object the handler refuses. */
function bodyOf(route: Route): unknown {
  if (route.method === 'GET' || route.method === 'DELETE') return undefined;
  if (route.pattern === '/v1/cluster/partition') return { blocked: [] };
  if (route.pattern === '/v1/cluster/balance') return { leaders: 'none' };
  return {};
}

export interface Target {
  /** "n1" or a worker id, for messages. */
  id: string;
  /** "member" or the worker's role. */
  role: string;
  url: string;
}

/** The routes a server lists, merged with the cluster-only and service-only routes this test knows it must have. */
async function routesOf(
  t: Test,
  target: Target,
  token: string,
  mustBeCluster: string[],
  mustBeService: string[],
): Promise<Route[]> {
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
  for (const known of mustBeService) {
    t.equal(declared.get(known), 'service', `${target.id}: ${known} admits the service's internal callers only`);
    if (!declared.has(known)) {
      const [method, pattern] = known.split(' ') as [string, string];
      routes.push({ method, pattern, admits: 'service' });
    }
  }
  for (const r of routes)
    t.ok(
      ['open', 'authenticated', 'service', 'cluster'].includes(r.admits),
      `${target.id}: ${r.method} ${r.pattern} declares whom it admits`,
    );
  return routes;
}

export function describe(a: Answer): string {
  return `${a.status} ${JSON.stringify(a.body).slice(0, 200)}`;
}

async function checkRoute(
  t: Test,
  target: Target,
  route: Route,
  credentials: Record<string, Credential>,
  ownSecret: boolean,
): Promise<void> {
  const what = `${target.id} ${route.method} ${route.pattern}`;
  for (const [kind, { token, standing }] of Object.entries(credentials)) {
    const a = await call(target.url, route.method, pathOf(route), { token, body: bodyOf(route), timeoutMs: 20_000 });
    const with_ = `${what} with ${kind === 'none' ? 'no token' : `a ${kind}`}`;
    t.ok(a.status < 500, `${with_}: no 5xx (${describe(a)})`);
    if (ownSecret) {
      // Open to the router, but it takes a secret of its own that no credential here is: refused to all of them.
      t.equal(route.admits, 'open', `${with_}: checks its own secret, so the router lets it through`);
      t.equal(a.status, 401, `${with_}: 401 without the route's own secret (${describe(a)})`);
      continue;
    }
    if (route.admits === 'open') {
      t.not(a.status, 401, `${with_}: open`);
      continue;
    }
    if (standing === 'none' || standing === 'foreign') {
      t.equal(a.status, 401, `${with_}: 401 (${describe(a)})`);
      t.equal((a.body.error as { code?: string } | undefined)?.code, 'unauthorized', `${with_}: code unauthorized`);
    } else if (standing === 'cluster') {
      t.ok(a.status !== 401 && a.status !== 403, `${with_}: admitted (${describe(a)})`);
    } else if (route.admits === 'cluster') {
      t.equal(a.status, 403, `${with_}: 403 (${describe(a)})`);
      const error = a.body.error as { code?: string; message?: string } | undefined;
      t.equal(error?.code, 'forbidden', `${with_}: code forbidden`);
      t.match(error?.message ?? '', /cluster token/, `${with_}: the message names the cluster token`);
    } else if (route.admits === 'service') {
      t.equal(a.status, 403, `${with_}: 403, internal callers only (${describe(a)})`);
      const error = a.body.error as { code?: string; required?: string } | undefined;
      t.equal(error?.code, 'forbidden', `${with_}: code forbidden`);
      t.equal(error?.required, 'service', `${with_}: requires the service's internal callers`);
    } else {
      t.not(a.status, 401, `${with_}: authenticated (${describe(a)})`);
    }
  }
}

export interface ServiceCase {
  service: string;
  workers?: string;
  /** Routes that take the cluster token only, by the role they live on ("member" for every member). */
  clusterOnly: Record<string, string[]>;
  /** Routes internal to the service (`admits: 'service'`: the cluster token or its own workers' service token), by role. */
  serviceOnly?: Record<string, string[]>;
  /** The credentials this service issues itself (beyond none, a wrong one, the cluster token and a client token). */
  credentials?: (cluster: TestCluster) => Promise<Record<string, Credential>>;
  /** Routes ("METHOD /pattern") open to the router that take a secret of their own none of the credentials is (a writer's push secret). */
  ownSecret?: Record<string, string[]>;
  /** Routes that are open to the router but check a credential of their own: called with every credential. */
  selfChecked?: (t: Test, cluster: TestCluster, credentials: Record<string, Credential>) => Promise<void>;
}

/** The credentials every cluster has. */
async function baseCredentials(cluster: TestCluster): Promise<Record<string, Credential>> {
  const client = await call(cluster.members[0]!, 'POST', '/v1/tokens', {
    token: cluster.token,
    body: { client: 'authz-client' },
  });
  if (client.status !== 201) throw new Error(`POST /v1/tokens: ${client.status} ${JSON.stringify(client.body)}`);
  return {
    none: { token: null, standing: 'none' },
    wrong: { token: deriveClientToken('not-this-cluster', 'authz-client'), standing: 'foreign' },
    cluster: { token: cluster.token, standing: 'cluster' },
    client: { token: client.body.token as string, standing: 'client' },
  };
}

/** One cluster of `c.service`, every route of every process called with every credential. */
export function testService(t: Test, c: ServiceCase): void {
  t.test(`${c.service}: every route admits exactly whom it declares`, async (t) => {
    const cluster = await startCluster(c.service, {
      nodes: 3,
      ...(c.workers === undefined ? {} : { workers: c.workers }),
    });
    t.teardown(() => cluster.down());
    await until(`${c.service} has a leader`, async () => {
      const s = await call(cluster.members[0]!, 'GET', '/v1/cluster/status', { token: cluster.token });
      return s.status === 200 && typeof s.body.leader_id === 'string';
    });
    const credentials = {
      ...(await baseCredentials(cluster)),
      ...(c.credentials === undefined ? {} : await c.credentials(cluster)),
    };
    const targets: Target[] = [
      { id: 'n1', role: 'member', url: cluster.members[0]! },
      ...cluster.workers.map((w) => ({ id: w.id, role: w.role, url: w.url })),
    ];
    for (const target of targets) {
      const routes = await routesOf(
        t,
        target,
        cluster.token,
        c.clusterOnly[target.role] ?? ['GET /v1/routes'],
        c.serviceOnly?.[target.role] ?? [],
      );
      t.ok(
        routes.some((r) => r.pattern === '/healthz' && r.admits === 'open'),
        `${target.id}: /healthz is open`,
      );
      for (const route of routes)
        await checkRoute(
          t,
          target,
          route,
          credentials,
          c.ownSecret?.[target.role]?.includes(`${route.method} ${route.pattern}`) ?? false,
        );
    }
    if (c.selfChecked !== undefined) await c.selfChecked(t, cluster, credentials);
    // Nothing above may have cut a link: every member still agrees on one leader.
    await until(`${c.service} members agree on a leader`, async () => {
      const all = await Promise.all(
        cluster.members.map((m) => call(m, 'GET', '/v1/cluster/status', { token: cluster.token })),
      );
      const leaders = new Set(all.map((s) => s.body.leader_id));
      return leaders.size === 1 && typeof all[0]!.body.leader_id === 'string';
    });
  });
}

/** The status a WebSocket upgrade of `path` gets (101 when accepted), the token as a bearer token; the socket is closed at once. */
export function upgradeStatus(base: string, path: string, token: string | null): Promise<number> {
  const url = new URL(path, base);
  return new Promise((resolve, reject) => {
    const req = httpRequest({
      host: url.hostname,
      port: url.port,
      path: url.pathname + url.search,
      headers: {
        connection: 'Upgrade',
        upgrade: 'websocket',
        'sec-websocket-key': randomBytes(16).toString('base64'),
        'sec-websocket-version': '13',
        ...(token === null ? {} : { authorization: `Bearer ${token}` }),
      },
      timeout: 20_000,
    });
    req.on('upgrade', (res, socket) => {
      socket.destroy();
      resolve(res.statusCode ?? 0);
    });
    req.on('response', (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('timeout', () => req.destroy(new Error(`upgrade ${path}: no answer in 20 s`)));
    req.on('error', reject);
    req.end();
  });
}

/** Each credential on a WebSocket route: `admits` judged as for HTTP routes (open: never 401; else by standing). */
export async function checkUpgrade(
  t: Test,
  base: string,
  path: string,
  admits: 'open' | 'authenticated',
  credentials: Record<string, Credential>,
): Promise<void> {
  for (const [kind, { token, standing }] of Object.entries(credentials)) {
    const status = await upgradeStatus(base, path, token);
    const with_ = `upgrade ${path} with ${kind === 'none' ? 'no token' : `a ${kind}`}`;
    t.ok(status < 500, `${with_}: no 5xx (${status})`);
    if (admits === 'open' || standing === 'cluster' || standing === 'client')
      t.equal(status, 101, `${with_}: accepted`);
    else t.equal(status, 401, `${with_}: 401`);
  }
}

/** The credential a call issued (a 200 or 201 answer's `field`), or an error naming the call. */
export async function issued(
  what: string,
  answer: Promise<{ status: number; body: Record<string, unknown> }>,
  field: string,
): Promise<string> {
  const a = await answer;
  if (a.status !== 200 && a.status !== 201) throw new Error(`${what}: ${a.status} ${JSON.stringify(a.body)}`);
  return a.body[field] as string;
}
