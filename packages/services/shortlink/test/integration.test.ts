/**
 * The short-link service on a real cluster (5 members, click workers, 3 app servers; separate processes, TCP,
 * LevelDB): every row of the spec's Endpoints, States and Errors parts, the decided endpoints, authentication,
 * limits, concurrent alias claims, and failures of members and app servers.
 */
import t, { type Test } from 'tap';
import type { ServiceError } from '@raftkit/http';
import { ShortlinkClient } from '../src/client.js';
import { codeForId } from '../src/codes.js';
import { call, startShortlink, until, type Answer, type ShortlinkCluster } from './helpers/cluster.js';

/** A CLI call that must succeed; its output names the problem when it does not. */
function expectCli(t: Test, r: { code: number; stdout: string; stderr: string }): void {
  t.equal(r.code, 0, `cluster exit 0 (${r.stderr.trim() || r.stdout.trim()})`);
}

let cluster: ShortlinkCluster;
let ann: string;
let bob: string;

/** Edge-cache TTL of this cluster: how long another app server may still redirect a deleted link. */
const EDGE_TTL_MS = 1000;
/**
 * Purge grace of this cluster (default one day): long enough that the other tests' deleted links are still there
 * when they look at them again, short enough to watch a purge.
 */
const PURGE_GRACE_MS = 8000;

const app = (i: number): string => cluster.apps[i]!;
const create = (i: number, token: string | null, body: unknown): Promise<Answer> =>
  call(app(i), 'POST', '/api/urls', { token, body });
const visit = (i: number, code: string, headers: Record<string, string> = {}): Promise<Answer> =>
  call(app(i), 'GET', `/${code}`, { headers });

/** A metric of a process's /metrics (0 when absent). */
async function metric(base: string, name: string): Promise<number> {
  const text = (await call(base, 'GET', '/metrics')).body.text as string;
  return Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? 0);
}

/** A metric summed over the members (a leader-only counter: whoever led counted). */
async function memberSum(name: string): Promise<number> {
  return (await Promise.all(cluster.members.map((m) => metric(m, name).catch(() => 0)))).reduce((a, b) => a + b, 0);
}

async function key(user: string): Promise<string> {
  const a = await call(app(0), 'POST', '/api/keys', { token: cluster.token, body: { user } });
  if (a.status !== 201) throw new Error(`key: ${a.status} ${JSON.stringify(a.body)}`);
  return a.body.api_key as string;
}

t.before(async () => {
  cluster = await startShortlink({
    workers: 'app=3',
    settings: { edge_cache_ttl_ms: String(EDGE_TTL_MS), negative_cache_ttl_ms: '300' },
    env: { SHORTLINK_PURGE_GRACE_MS: String(PURGE_GRACE_MS), SHORTLINK_PURGE_EVERY_MS: '500' },
  });
  ann = await key('ann');
  bob = await key('bob');
});
t.teardown(async () => {
  await cluster?.down();
});

t.test('the cluster runs 3 app servers besides its members', async (t) => {
  t.equal(cluster.apps.length, 3);
  for (const url of cluster.apps) t.match((await call(url, 'GET', '/healthz')).body, { status: 'ok', role: 'app' });
});

t.test('POST /api/keys: the cluster token issues a key per user; others are refused', async (t) => {
  const issued = await call(app(1), 'POST', '/api/keys', { token: cluster.token, body: { user: 'carol' } });
  t.equal(issued.status, 201);
  t.match(issued.body, { user: 'carol', api_key: /^client\.carol\./ });
  t.equal(
    (await call(app(1), 'POST', '/api/keys', { token: ann, body: { user: 'mallory' } })).status,
    403,
    'an API key cannot issue keys',
  );
  t.equal((await call(app(1), 'POST', '/api/keys', { token: null, body: { user: 'x' } })).status, 401);
  t.match((await call(app(1), 'POST', '/api/keys', { token: cluster.token, body: { user: 'no spaces' } })).body, {
    error: { code: 'invalid_field', field: 'user' },
  });
  t.equal(
    (await call(app(1), 'POST', '/api/keys', { token: cluster.token, body: { user: 'cluster' } })).status,
    400,
    'the cluster name is not issued',
  );
});

t.test(
  'create: 201 {short_url, short_code, expires_at}; 5-year default expiry; GET /{code} answers 302 with Location',
  async (t) => {
    const before = Date.now();
    const a = await create(0, ann, { long_url: 'https://example.com/some/page?q=1' });
    t.equal(a.status, 201);
    const code = a.body.short_code as string;
    t.match(code, /^[0-9A-Za-z]{7}$/, 'a generated code is 7 base62 characters');
    t.equal(a.body.short_url, `${app(0)}/${code}`);
    t.equal(a.body.long_url, 'https://example.com/some/page?q=1');
    const expires = Date.parse(a.body.expires_at as string);
    const fiveYears = new Date(before);
    fiveYears.setUTCFullYear(fiveYears.getUTCFullYear() + 5);
    t.ok(Math.abs(expires - fiveYears.getTime()) < 60_000, `expires_at ${a.body.expires_at as string} is 5 years out`);
    const r = await call(a.body.short_url as string, 'GET', '');
    t.equal(r.status, 302, 'never 301');
    t.equal(r.headers.location, 'https://example.com/some/page?q=1');
    t.match(r.headers['cache-control'], /max-age=0|no-store/, 'browsers come back, so every click is counted');
    for (const i of [1, 2]) {
      const other = await until(
        `app ${i + 1} to resolve ${code}`,
        async () => {
          const v = await visit(i, code);
          return v.status === 302 ? v : null;
        },
        5000,
      );
      t.equal(
        other.headers.location,
        'https://example.com/some/page?q=1',
        `app ${i + 1} redirects within a few seconds`,
      );
    }
    t.equal((await call(app(2), 'HEAD', `/${code}`)).status, 302, 'HEAD redirects too');
    t.equal((await visit(1, `${code}?utm_source=x`)).status, 302, 'a query string does not change the code');
  },
);

t.test(
  'ShortlinkClient: create, read, resolve and delete through the typed client, over every app server',
  async (t) => {
    const admin = new ShortlinkClient({ endpoints: cluster.apps, token: cluster.token });
    const issued = await admin.issueKey('cleo');
    const cleo = new ShortlinkClient({ endpoints: cluster.apps, token: issued.api_key });
    const other = new ShortlinkClient({ endpoints: cluster.apps, token: bob });
    t.teardown(async () => {
      await Promise.all([admin.close(), cleo.close(), other.close()]);
    });
    const link = await cleo.create({ long_url: 'https://example.com/client/path?q=1' });
    t.match(link, { short_code: /^[A-Za-z0-9]+$/, long_url: 'https://example.com/client/path?q=1' });
    t.equal(
      await cleo.resolve(link.short_code),
      'https://example.com/client/path?q=1',
      'resolve follows the 302 to its Location',
    );
    t.match(await cleo.get(link.short_code), { short_code: link.short_code, created_by: 'cleo' });
    const refused = await other.get(link.short_code).then(
      () => null,
      (e: unknown) => e as ServiceError,
    );
    t.match(
      refused,
      { status: 403, code: 'forbidden' },
      "another key cannot read cleo's link: a ServiceError with the code",
    );
    t.match(await cleo.delete(link.short_code), { short_code: link.short_code, deleted: true });
    const gone = await cleo.get(link.short_code).then(
      () => null,
      (e: unknown) => e as ServiceError,
    );
    t.equal(gone?.status, 404, 'a deleted link is not found');
  },
);

t.test('GET /{code}: 404 with a JSON error for codes that were never created', async (t) => {
  for (const code of ['zzzzzzz', 'never-made-alias', 'abc_def']) {
    const a = await visit(0, code);
    t.equal(a.status, 404, code);
    t.match(a.body, { error: { code: 'not_found', message: String } });
  }
  t.equal((await call(app(0), 'GET', '/a/b')).status, 404, 'other paths: 404 too');
  // The redirect path looks in the edge cache before it checks a code's form: reserved names must never get there.
  for (const name of ['healthz', 'metrics']) {
    t.equal(
      (await call(app(0), 'DELETE', `/api/urls/${name}`, { token: cluster.token })).status,
      404,
      `DELETE /api/urls/${name}: no such link`,
    );
    t.equal((await visit(0, name)).status, 200, `GET /${name} is still the route, not a code`);
  }
});

t.test('create validation: clear 400s naming the field; no side effects', async (t) => {
  const cases: Array<[unknown, string, string]> = [
    [{}, 'long_url', 'invalid_url'],
    [{ long_url: 'not a url' }, 'long_url', 'invalid_url'],
    [{ long_url: 'ftp://example.com/file' }, 'long_url', 'invalid_url'],
    [{ long_url: 'javascript:alert(1)' }, 'long_url', 'invalid_url'],
    [{ long_url: 'https://example.com/' + 'a'.repeat(2100) }, 'long_url', 'invalid_url'],
    [{ long_url: 'https://example.com/', custom_alias: 'short' }, 'custom_alias', 'invalid_alias'],
    [{ long_url: 'https://example.com/', custom_alias: 'has/slash1' }, 'custom_alias', 'invalid_alias'],
    [{ long_url: 'https://example.com/', expiry: 'P0D' }, 'expiry', 'invalid_expiry'],
    [{ long_url: 'https://example.com/', expiry: '2001-01-01T00:00:00Z' }, 'expiry', 'invalid_expiry'],
    [{ long_url: 'https://example.com/', expiry: 'P200Y' }, 'expiry', 'invalid_expiry'],
    [{ long_url: 'https://example.com/', expiry: 30 }, 'expiry', 'invalid_expiry'],
    [{ long_url: 'https://example.com/', colour: 'red' }, 'colour', 'unknown_field'],
    [[1, 2], 'body', 'invalid_body'],
  ];
  for (const [body, field, code] of cases) {
    const a = await create(1, ann, body);
    t.equal(a.status, 400, JSON.stringify(body).slice(0, 60));
    t.match(a.body, { error: { code, field, message: String } });
  }
  const notJson = await call(app(1), 'POST', '/api/urls', { token: ann, raw: '{"long_url":' });
  t.match(notJson, { status: 400, body: { error: { code: 'invalid_json' } } });
  t.match(await call(app(1), 'POST', '/api/urls', { token: ann, raw: 'x'.repeat(2 * 1024 * 1024) }), { status: 413 });
});

t.test('authentication: creation and deletion need an API key; redirects are public', async (t) => {
  const none = await create(0, null, { long_url: 'https://example.com/' });
  t.equal(none.status, 401);
  t.match(none.body, { error: { code: 'unauthorized' } });
  t.equal((await create(0, 'client.ann.forged', { long_url: 'https://example.com/' })).status, 401, 'a forged key');
  t.equal((await call(app(0), 'DELETE', '/api/urls/zzzzzzz', { token: null })).status, 401);
  t.equal((await call(app(0), 'GET', '/api/urls/zzzzzzz', { token: null })).status, 401);
  t.equal(
    (await call(app(0), 'GET', '/internal/leases', { token: ann })).status,
    403,
    'internal routes are for the cluster',
  );
  t.equal(
    (await call(cluster.members[0]!, 'GET', '/internal/links/zzzzzzz', { token: ann })).status,
    403,
    'the link store is for app servers',
  );
});

t.test(
  'custom aliases: 201 with the alias as code; taken -> 409; concurrent claims through 3 apps give exactly one 201',
  async (t) => {
    const first = await create(0, ann, { long_url: 'https://example.com/alias', custom_alias: 'my-first_alias' });
    t.equal(first.status, 201);
    t.equal(first.body.short_code, 'my-first_alias');
    t.equal((await visit(0, 'my-first_alias')).headers.location, 'https://example.com/alias');
    const again = await create(2, bob, { long_url: 'https://example.com/other', custom_alias: 'my-first_alias' });
    t.equal(again.status, 409);
    t.match(again.body, { error: { code: 'alias_taken', field: 'custom_alias' } });
    const mine = await create(1, ann, { long_url: 'https://example.com/alias', custom_alias: 'my-first_alias' });
    t.equal(mine.status, 409, 'even its creator gets 409 for a second create');

    const users = await Promise.all(Array.from({ length: 15 }, (_, i) => key(`racer${i}`)));
    const claims = await Promise.all(
      users.map((u, i) =>
        create(i % 3, u, { long_url: `https://example.com/racer/${i}`, custom_alias: 'contested-alias' }),
      ),
    );
    const statuses = claims.map((c) => c.status).sort();
    t.same(statuses, [201, ...Array<number>(14).fill(409)], 'exactly one 201, every other claim 409');
    const winner = claims.findIndex((c) => c.status === 201);
    for (const i of [0, 1, 2]) {
      const r = await until(
        `app ${i + 1} to resolve the alias`,
        async () => ((await visit(i, 'contested-alias')).headers.location as string | undefined) ?? null,
        5000,
      );
      t.equal(r, `https://example.com/racer/${winner}`, `app ${i + 1} redirects to the winner's URL`);
    }
  },
);

t.test(
  'expiry: a link with a short expiry redirects, then answers 404 everywhere once expired (ISO durations and timestamps)',
  async (t) => {
    const a = await create(0, ann, { long_url: 'https://example.com/soon', expiry: 'PT3S' });
    t.equal(a.status, 201);
    const code = a.body.short_code as string;
    t.ok(Math.abs(Date.parse(a.body.expires_at as string) - (Date.now() + 3000)) < 2000, 'expires_at = now + 3 s');
    t.equal((await visit(0, code)).status, 302, 'active: redirects');
    const at = new Date(Date.now() + 60 * 60_000).toISOString();
    const b = await create(1, ann, { long_url: 'https://example.com/later', expiry: at });
    t.equal(b.body.expires_at, at, 'a timestamp expiry is kept as given');
    await new Promise((r) => setTimeout(r, 3500));
    for (const i of [0, 1, 2]) {
      const v = await visit(i, code);
      t.equal(v.status, 404, `expired -> 404 on app ${i + 1}`);
    }
    t.equal(
      (await call(app(0), 'GET', `/api/urls/${code}`, { token: ann })).status,
      404,
      'metadata of an expired link: 404',
    );
  },
);

t.test(
  'GET /api/urls/{code}: metadata for its creator and the cluster; 403 for others; 404 unknown; 400 malformed',
  async (t) => {
    const a = await create(2, ann, { long_url: 'https://example.com/meta', custom_alias: 'meta-alias' });
    const m = await call(app(0), 'GET', '/api/urls/meta-alias', { token: ann });
    t.equal(m.status, 200, 'a linearizable read: visible at once through another app');
    t.same(m.body, {
      short_url: `${app(0)}/meta-alias`,
      short_code: 'meta-alias',
      long_url: 'https://example.com/meta',
      created_at: m.body.created_at,
      expires_at: a.body.expires_at,
      created_by: 'ann',
    });
    t.equal((await call(app(0), 'GET', '/api/urls/meta-alias', { token: cluster.token })).status, 200);
    t.match(await call(app(0), 'GET', '/api/urls/meta-alias', { token: bob }), {
      status: 403,
      body: { error: { code: 'forbidden' } },
    });
    t.equal((await call(app(0), 'GET', '/api/urls/nothing-at-all', { token: ann })).status, 404);
    t.match(await call(app(0), 'GET', '/api/urls/bad.code', { token: ann }), {
      status: 400,
      body: { error: { code: 'invalid_code' } },
    });
  },
);

t.test(
  'DELETE /api/urls/{code}: creator only (or the cluster); deleted -> 404 on every app within the edge TTL; code never reissued',
  async (t) => {
    const a = await create(0, ann, { long_url: 'https://example.com/doomed' });
    const code = a.body.short_code as string;
    for (const i of [0, 1, 2])
      await until(`app ${i + 1} caches ${code}`, async () => (await visit(i, code)).status === 302, 5000);
    t.match(await call(app(1), 'DELETE', `/api/urls/${code}`, { token: bob }), {
      status: 403,
      body: { error: { code: 'forbidden' } },
    });
    t.equal((await visit(1, code)).status, 302, 'a refused delete changes nothing');
    const deletedAt = Date.now();
    const d = await call(app(1), 'DELETE', `/api/urls/${code}`, { token: ann });
    t.same(d, { ...d, status: 200, body: { short_code: code, deleted: true } });
    t.equal((await visit(1, code)).status, 404, 'the deleting app answers 404 at once');
    for (const i of [0, 2]) {
      await until(`app ${i + 1} to see the delete`, async () => (await visit(i, code)).status === 404, 10_000);
      t.ok(Date.now() - deletedAt < EDGE_TTL_MS + 3000, `app ${i + 1} saw the delete within the edge TTL (+ margin)`);
    }
    t.equal(
      (await call(app(2), 'DELETE', `/api/urls/${code}`, { token: ann })).status,
      200,
      'deleting again succeeds (idempotent)',
    );
    t.equal((await call(app(2), 'GET', `/api/urls/${code}`, { token: ann })).status, 404);
    t.equal((await call(app(2), 'DELETE', '/api/urls/nothing-at-all', { token: ann })).status, 404);
    const alias = await create(0, ann, { long_url: 'https://example.com/x', custom_alias: 'delete-me-alias' });
    t.equal(alias.status, 201);
    t.equal(
      (await call(app(0), 'DELETE', '/api/urls/delete-me-alias', { token: cluster.token })).status,
      200,
      'the cluster deletes any link',
    );
    t.equal(
      (await create(0, ann, { long_url: 'https://example.com/y', custom_alias: 'delete-me-alias' })).status,
      409,
      'a deleted alias is not reissued',
    );
  },
);

t.test(
  'POST /internal/link-batches on a member: one result per link in order; first claim wins; a re-sent batch gets the same answers',
  async (t) => {
    const member = cluster.members[3]!;
    const lease = await call(member, 'POST', '/internal/leases', {
      token: cluster.token,
      body: { server: 'batch-test' },
    });
    t.equal(lease.status, 201);
    const code = codeForId(lease.body.start as number)!;
    const link = (c: string, alias: boolean, over: Record<string, unknown> = {}) => ({
      code: c,
      long_url: 'https://example.com/batched',
      created_at: Date.now(),
      expires_at: Date.now() + 3_600_000,
      created_by: 'ann',
      alias,
      ...over,
    });
    const links = [
      link(code, false),
      link('batch-alias-1', true),
      link('batch-alias-1', true, { created_by: 'bob', long_url: 'https://example.com/late' }),
      link('batch-alias-2', true, { long_url: 'ftp://example.com/' }),
      link(codeForId((lease.body.end as number) + 50_000)!, false),
    ];
    const first = await call(member, 'POST', '/internal/link-batches', { token: cluster.token, body: { links } });
    t.equal(first.status, 200);
    const statuses = (r: Answer) => (r.body.results as Array<{ status: string }>).map((x) => x.status);
    t.same(statuses(first), ['created', 'created', 'taken', 'invalid', 'not_leased']);
    t.match(
      (first.body.results as unknown[])[3],
      { status: 'invalid', error: { code: 'invalid_url', field: 'long_url' } },
      'a malformed link is refused alone',
    );
    t.match((first.body.results as unknown[])[1], {
      status: 'created',
      link: { short_code: 'batch-alias-1', long_url: 'https://example.com/batched', created_by: 'ann' },
    });
    const again = await call(cluster.members[1]!, 'POST', '/internal/link-batches', {
      token: cluster.token,
      body: { links },
    });
    t.same(
      statuses(again),
      ['retried', 'retried', 'taken', 'invalid', 'not_leased'],
      'a re-sent batch (to another member) is idempotent',
    );
    t.equal(
      (await visit(0, 'batch-alias-1')).headers.location,
      'https://example.com/batched',
      'the batch is committed: the alias redirects',
    );
    t.match(await call(member, 'POST', '/internal/link-batches', { token: cluster.token, body: { links: [] } }), {
      status: 400,
      body: { error: { field: 'links' } },
    });
    t.match(
      await call(member, 'POST', '/internal/link-batches', {
        token: cluster.token,
        body: { links: Array.from({ length: 1001 }, () => links[0]) },
      }),
      { status: 400, body: { error: { field: 'links' } } },
    );
    t.equal(
      (await call(member, 'POST', '/internal/link-batches', { token: ann, body: { links } })).status,
      403,
      'app servers only (cluster token)',
    );
  },
);

t.test(
  'purge: links dead for the grace period leave the store; they stay 404, and a purged alias stays taken',
  async (t) => {
    const expiring = await create(0, ann, { long_url: 'https://example.com/short-lived', expiry: 'PT1S' });
    const live = await create(1, ann, { long_url: 'https://example.com/long-lived' });
    t.equal((await create(2, ann, { long_url: 'https://example.com/gone', custom_alias: 'purged-alias' })).status, 201);
    t.equal((await call(app(2), 'DELETE', '/api/urls/purged-alias', { token: ann })).status, 200);
    const code = expiring.body.short_code as string;
    t.equal(
      (await call(app(1), 'DELETE', '/api/urls/purged-alias', { token: ann })).status,
      200,
      'within the grace period a deleted link still exists: a retried delete succeeds',
    );
    const purgedBefore = await memberSum('shortlink_purged_total');
    // A purged link no longer exists at all, so even its creator's delete answers 404 (before the purge: 200).
    const started = Date.now();
    await until(
      'the deleted alias to be purged',
      async () => (await call(app(0), 'DELETE', '/api/urls/purged-alias', { token: ann })).status === 404,
      PURGE_GRACE_MS + 15_000,
    );
    t.ok(Date.now() - started > PURGE_GRACE_MS - 2000, 'not purged before the grace period');
    await until(
      'the expired link to be purged',
      async () => (await call(app(0), 'DELETE', `/api/urls/${code}`, { token: ann })).status === 404,
      PURGE_GRACE_MS + 15_000,
    );
    t.ok((await memberSum('shortlink_purged_total')) >= purgedBefore + 2, 'the leader counted the purges');
    for (const i of [0, 1, 2]) {
      t.equal((await visit(i, code)).status, 404, `the purged expired link: 404 on app ${i + 1}`);
      t.equal((await visit(i, 'purged-alias')).status, 404, `the purged alias: 404 on app ${i + 1}`);
    }
    t.equal((await call(app(1), 'GET', `/api/urls/${code}`, { token: ann })).status, 404);
    t.match(
      await create(1, bob, { long_url: 'https://example.com/squatter', custom_alias: 'purged-alias' }),
      { status: 409, body: { error: { code: 'alias_taken' } } },
      'a purged alias is never claimed again',
    );
    for (const member of cluster.members) {
      t.ok(
        (await metric(member, 'shortlink_retired_aliases')) >= 1,
        `${member} keeps the purged alias reserved (replicated)`,
      );
    }
    t.equal((await visit(2, live.body.short_code as string)).status, 302, 'a live link is untouched');
  },
);

t.test('GET /api/urls/{code}/stats: clicks by day, country and referer, for the creator; 403 others', async (t) => {
  const a = await create(0, ann, { long_url: 'https://example.com/counted' });
  const code = a.body.short_code as string;
  for (let i = 0; i < 6; i++) {
    // Another app may answer 404 for a moment (reads are eventually consistent); a 404 makes no click.
    const referer = i % 2 === 0 ? 'https://news.example/' : 'https://blog.example/';
    await until(`visit ${i} redirected`, async () => (await visit(i % 3, code, { referer })).status === 302, 5000);
  }
  t.pass('6 redirects through the 3 apps');
  t.equal((await call(app(0), 'GET', `/api/urls/${code}/stats`, { token: bob })).status, 403);
  const stats = await until(
    'the 6 clicks in the stats',
    async () => {
      const s = await call(app(1), 'GET', `/api/urls/${code}/stats`, { token: ann });
      return s.status === 200 && s.body.total === 6 ? s : null;
    },
    20_000,
  );
  t.match(stats.body, { short_code: code, total: 6, by_referer: { 'news.example': 3, 'blog.example': 3 } });
  t.equal(
    Object.values(stats.body.by_day as Record<string, number>).reduce((x, y) => x + y, 0),
    6,
  );
});

t.test('members and app servers fail: redirects and creates go on; a restarted app leases a fresh batch', async (t) => {
  const a = await create(0, ann, { long_url: 'https://example.com/survivor' });
  const code = a.body.short_code as string;
  const beforeLeases = (await call(app(1), 'GET', '/internal/leases', { token: cluster.token })).body as {
    batches: Array<{ start: number; end: number }>;
  };
  t.ok(beforeLeases.batches.length >= 1);
  // The leader is one of the two killed, so the creates below need an election (members heartbeat every 3 ticks).
  const leader = (await call(cluster.members[0]!, 'GET', '/healthz')).body.leader as string;
  t.match(leader, /^n[1-5]$/, 'a leader is known');
  const other = leader === 'n1' ? 'n2' : 'n1';
  expectCli(t, await cluster.run('kill', leader));
  expectCli(t, await cluster.run('kill', other));
  const r = await until(
    'a redirect with two members down',
    async () => ((await visit(1, code)).status === 302 ? true : null),
    15_000,
  );
  t.ok(r);
  const made = await until(
    'a create with two members down',
    async () => {
      const c = await create(1, ann, { long_url: 'https://example.com/during-failure' });
      return c.status === 201 ? c : null;
    },
    20_000,
  );
  t.ok(
    await until(
      'the new link on another app',
      async () => (await visit(2, made.body.short_code as string)).status === 302,
      5000,
    ),
  );
  expectCli(t, await cluster.run('restart', leader));
  expectCli(t, await cluster.run('restart', other));

  expectCli(t, await cluster.run('kill', 'app2'));
  t.ok(
    await until('app1 serving with app2 down', async () => (await visit(0, code)).status === 302, 5000),
    'other apps keep serving',
  );
  expectCli(t, await cluster.run('restart', 'app2'));
  await until('app2 back', async () => (await call(app(1), 'GET', '/healthz')).status === 200);
  const c = await until('a create on the restarted app2', async () => {
    const x = await create(1, ann, { long_url: 'https://example.com/after-restart' });
    return x.status === 201 ? x : null;
  });
  const after = (await call(app(1), 'GET', '/internal/leases', { token: cluster.token })).body as {
    batches: Array<{ start: number; end: number }>;
  };
  const highest = Math.max(...beforeLeases.batches.map((b) => b.end));
  t.ok(
    after.batches.length >= 1 && after.batches.every((b) => b.start >= highest),
    'the restarted app never got its old batch back',
  );
  t.ok(
    await until(
      'the restarted app redirects',
      async () => (await visit(1, c.body.short_code as string)).status === 302,
      5000,
    ),
  );
});

t.test('create limits: per API key and per IP, 429 with Retry-After and a JSON body', async (t) => {
  // Defaults: 100 per key burst (10/s), 200 per IP burst (20/s), per app server; app3 has seen few creates.
  const flood = await key('flooder');
  const answers = await Promise.all(
    Array.from({ length: 130 }, (_, i) => create(2, flood, { long_url: `https://example.com/f/${i}` })),
  );
  const limited = answers.filter((a) => a.status === 429);
  t.ok(limited.length >= 20 && limited.length <= 40, `${limited.length} of 130 limited by the key's bucket of 100`);
  t.ok(answers.filter((a) => a.status === 201).length >= 90);
  t.match(limited[0]!.body, { error: { code: 'rate_limited', dimension: 'api_key', retry_after_ms: Number } });
  t.match(limited[0]!.headers['retry-after'], /^\d+$/);
  t.equal(
    (await create(1, flood, { long_url: 'https://example.com/elsewhere' })).status,
    201,
    'limits are per app server',
  );
  const others = await Promise.all(Array.from({ length: 10 }, (_, i) => key(`crowd${i}`)));
  const crowd = await Promise.all(
    Array.from({ length: 200 }, (_, i) => create(2, others[i % 10]!, { long_url: `https://example.com/c/${i}` })),
  );
  const byIp = crowd.filter((a) => a.status === 429);
  t.ok(
    byIp.length > 0 && byIp.every((a) => (a.body.error as { dimension: string }).dimension === 'ip'),
    `${byIp.length} limited by the address's bucket`,
  );
  t.equal(
    (await visit(2, answers.find((a) => a.status === 201)!.body.short_code as string)).status,
    302,
    'redirects are not limited',
  );
});
