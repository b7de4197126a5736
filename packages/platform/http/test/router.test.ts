import { createServer, type Server } from 'node:http';
import t from 'tap';
import { deriveClientToken, deriveServiceToken, processHttp, Router, type RouteOptions } from '../src/index.js';

const TOKENS = ['cluster-secret'];

async function serve(router: Router): Promise<{ url: string; server: Server }> {
  const server = createServer(router.listener);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return { url: `http://127.0.0.1:${(server.address() as { port: number }).port}`, server };
}

async function get(
  url: string,
  method: string,
  token: string | null,
): Promise<{ status: number; body: { error?: { code?: string; message?: string; required?: string } } }> {
  const res = await fetch(url, { method, headers: token === null ? {} : { authorization: `Bearer ${token}` } });
  const text = await res.text();
  return { status: res.status, body: text.length > 0 ? (JSON.parse(text) as { error?: { code?: string } }) : {} };
}

t.test('a route cannot be registered without a known admission', async (t) => {
  const router = new Router({ tokens: TOKENS });
  t.throws(() => router.get('/x', {} as RouteOptions, () => 1), TypeError);
  t.throws(() => router.get('/x', { admits: 'everyone' } as unknown as RouteOptions, () => 1), TypeError);
  t.same(router.routes(), [], 'nothing was registered');
});

t.test('routes() lists every route with whom it admits', async (t) => {
  const router = new Router({ tokens: TOKENS })
    .get('/healthz', { admits: 'open' }, () => ({ ok: true }))
    .put('/v1/things/:id/', { admits: 'authenticated' }, () => ({}))
    .delete('/v1/admin', { admits: 'cluster' }, () => ({}));
  t.same(router.routes(), [
    { method: 'GET', pattern: '/healthz', admits: 'open' },
    { method: 'PUT', pattern: '/v1/things/:id', admits: 'authenticated' },
    { method: 'DELETE', pattern: '/v1/admin', admits: 'cluster' },
  ]);
});

t.test('the router admits by declaration before the handler runs', async (t) => {
  const ran: string[] = [];
  const router = new Router({ tokens: TOKENS })
    .get('/open', { admits: 'open' }, (ctx) => {
      ran.push('open');
      return { principal: ctx.principal };
    })
    .get('/any', { admits: 'authenticated' }, (ctx) => {
      ran.push('any');
      return { kind: ctx.principal.kind };
    })
    .post('/admin', { admits: 'cluster' }, (ctx) => {
      ran.push('admin');
      return { kind: ctx.principal.kind };
    });
  const { url, server } = await serve(router);
  t.teardown(() => server.close());
  const client = deriveClientToken(TOKENS[0]!, 'alice');
  const wrong = deriveClientToken('another-secret', 'alice');

  t.same(await get(`${url}/open`, 'GET', null), { status: 200, body: { principal: null } }, 'open: no token needed');
  t.equal((await get(`${url}/open`, 'GET', wrong)).status, 200, 'open: a wrong token is not even read');

  t.equal((await get(`${url}/any`, 'GET', null)).status, 401, 'authenticated: 401 without a token');
  t.equal(
    (await get(`${url}/any`, 'GET', wrong)).body.error?.code,
    'unauthorized',
    'authenticated: 401 with a wrong token',
  );
  t.same(
    await get(`${url}/any`, 'GET', client),
    { status: 200, body: { kind: 'client' } },
    'authenticated: a client token',
  );
  t.same(
    await get(`${url}/any`, 'GET', TOKENS[0]!),
    { status: 200, body: { kind: 'cluster' } },
    'authenticated: the cluster token',
  );

  ran.length = 0;
  t.equal((await get(`${url}/admin`, 'POST', null)).status, 401, 'cluster: 401 without a token');
  t.equal((await get(`${url}/admin`, 'POST', wrong)).status, 401, 'cluster: 401 with a wrong token');
  const refused = await get(`${url}/admin`, 'POST', client);
  t.equal(refused.status, 403, 'cluster: 403 for a client token');
  t.equal(refused.body.error?.code, 'forbidden');
  t.equal(refused.body.error?.required, 'cluster', 'names what is required');
  t.match(refused.body.error?.message, /POST \/admin requires the cluster token/);
  t.same(ran, [], 'no refused request reached its handler');
  t.same(
    await get(`${url}/admin`, 'POST', TOKENS[0]!),
    { status: 200, body: { kind: 'cluster' } },
    'cluster: the cluster token',
  );
});

t.test(
  "service: the cluster token and the router's own service token; never a client token, whatever its name",
  async (t) => {
    const ran: string[] = [];
    const router = new Router({ tokens: TOKENS, service: 'notify' })
      .post('/internal', { admits: 'service' }, (ctx) => {
        ran.push('internal');
        return { kind: ctx.principal.kind, name: ctx.principal.name };
      })
      .get('/any', { admits: 'authenticated' }, (ctx) => ({ kind: ctx.principal.kind }))
      .post('/admin', { admits: 'cluster' }, () => ({}));
    const bare = new Router({ tokens: TOKENS }).post('/internal', { admits: 'service' }, (ctx) => ({
      kind: ctx.principal.kind,
    }));
    const { url, server } = await serve(router);
    const other = await serve(bare);
    t.teardown(() => {
      server.close();
      other.server.close();
    });
    const own = deriveServiceToken(TOKENS[0]!, 'notify');
    t.same(
      await get(`${url}/internal`, 'POST', own),
      { status: 200, body: { kind: 'service', name: 'service.notify' } },
      "the service's own workers",
    );
    t.same(
      await get(`${url}/internal`, 'POST', TOKENS[0]!),
      { status: 200, body: { kind: 'cluster', name: 'cluster' } },
      'the cluster token',
    );
    ran.length = 0;
    const refusals: Array<[string, string | null, number]> = [
      ['no token', null, 401],
      ['a client token', deriveClientToken(TOKENS[0]!, 'x'), 403],
      ['a user token', deriveClientToken(TOKENS[0]!, 'user.alice'), 403],
      ['a client token named service.notify', deriveClientToken(TOKENS[0]!, 'service.notify'), 403],
      ["another service's worker token", deriveServiceToken(TOKENS[0]!, 'feed'), 403],
      ["this service's worker token of another cluster", deriveServiceToken('another-secret', 'notify'), 401],
      ['a made-up service token', 'service.notify.AAAA', 401],
    ];
    for (const [what, token, status] of refusals) {
      const a = await get(`${url}/internal`, 'POST', token);
      t.equal(a.status, status, `${what}: ${status}`);
      if (status === 403) t.equal(a.body.error?.required, 'service', `${what}: names what is required`);
    }
    t.same(ran, [], 'no refused request reached its handler');
    t.equal(
      (await get(`${url}/any`, 'GET', deriveServiceToken(TOKENS[0]!, 'feed'))).status,
      403,
      "another service's worker token: refused on authenticated routes too",
    );
    t.same(await get(`${url}/any`, 'GET', own), { status: 200, body: { kind: 'service' } }, 'its own: authenticated');
    t.equal((await get(`${url}/admin`, 'POST', own)).status, 403, 'its own: not the cluster token');
    t.equal(
      (await get(`${other.url}/internal`, 'POST', own)).status,
      403,
      'a router serving no named service takes no service token',
    );
    t.equal((await get(`${other.url}/internal`, 'POST', TOKENS[0]!)).status, 200, 'and still the cluster token');
  },
);

t.test('the query reaches the handler as URL parsing gave it; the path keeps its raw segments', async (t) => {
  const router = new Router({ tokens: TOKENS }).get('/q/:name', { admits: 'open' }, (ctx) => ({
    name: ctx.params.name,
    query: [...ctx.query.entries()],
  }));
  const { url, server } = await serve(router);
  t.teardown(() => server.close());
  const answer = async (path: string): Promise<unknown> => (await fetch(url + path)).json();
  t.same(await answer('/q/a%2Fb'), { name: 'a/b', query: [] }, 'no query');
  t.same(
    await answer('/q/x?a=1&b=two%20words&a=3&c'),
    {
      name: 'x',
      query: [
        ['a', '1'],
        ['b', 'two words'],
        ['a', '3'],
        ['c', ''],
      ],
    },
    'repeated, encoded and empty values',
  );
  t.same(
    await answer('/q/x?plus=a+b&empty='),
    {
      name: 'x',
      query: [
        ['plus', 'a b'],
        ['empty', ''],
      ],
    },
    '+ is a space, as URLSearchParams has it',
  );
  const missing = await fetch(url + '/nope/x?y=1');
  t.equal(missing.status, 404);
  t.match(((await missing.json()) as { error: { message: string } }).error.message, 'no route for GET /nope/x');
});

t.test(
  'routes match in table order; other methods on a known path get 405 with Allow; bad percent-encoding 400',
  async (t) => {
    const router = new Router({ tokens: TOKENS })
      .get('/r/:id', { admits: 'open' }, (ctx) => ({ route: 'param', id: ctx.params.id }))
      .get('/r/fixed', { admits: 'open' }, () => ({ route: 'fixed' }))
      .put('/r/fixed', { admits: 'open' }, () => ({ route: 'put fixed' }))
      .post('/r/:id/do/:what', { admits: 'open' }, (ctx) => ({ id: ctx.params.id, what: ctx.params.what }))
      .delete('/r/:id/do/:what', { admits: 'open' }, () => undefined);
    const { url, server } = await serve(router);
    t.teardown(() => server.close());
    const call = async (
      method: string,
      path: string,
    ): Promise<{ status: number; allow: string | null; body: unknown }> => {
      const res = await fetch(url + path, { method });
      const text = await res.text();
      return { status: res.status, allow: res.headers.get('allow'), body: text.length > 0 ? JSON.parse(text) : null };
    };
    t.same((await call('GET', '/r/fixed')).body, { route: 'param', id: 'fixed' }, 'the first route in the table wins');
    t.same((await call('PUT', '//r///fixed/')).body, { route: 'put fixed' }, 'empty segments are ignored');
    t.same(
      (await call('POST', '/r/a%20b/do/x%2Fy')).body,
      { id: 'a b', what: 'x/y' },
      'two parameters, percent-decoded',
    );
    t.equal((await call('DELETE', '/r/a/do/b')).status, 204, 'a handler returning nothing answers 204');
    const wrong = await call('PATCH', '/r/a/do/b');
    t.same(
      [wrong.status, wrong.allow, (wrong.body as { error: { code: string } }).error.code],
      [405, 'POST, DELETE', 'method_not_allowed'],
      '405 names the methods of the path, in table order',
    );
    const fixed = await call('DELETE', '/r/fixed');
    t.same([fixed.status, fixed.allow], [405, 'GET, GET, PUT'], 'every route whose pattern matches the path counts');
    t.equal((await call('GET', '/r/a/do')).status, 404, 'a path of no route: 404');
    t.equal((await call('GET', '/r')).status, 404);
    const bad = await call('GET', '/r/%E0%A4%A');
    t.same(
      [bad.status, (bad.body as { error: { code: string } }).error.code],
      [400, 'invalid_path'],
      'bad percent-encoding: 400 invalid_path',
    );
  },
);

t.test('processHttp counts every answer by method and status in /metrics', async (t) => {
  const logger = { log: () => undefined };
  const ph = processHttp({ id: 'm1', httpAddress: '127.0.0.1:0', tokens: TOKENS, logger, tls: null });
  ph.router
    .get('/ok', { admits: 'open' }, () => ({ ok: true }))
    .post('/ok', { admits: 'authenticated' }, () => ({ ok: true }));
  const port = await ph.listen();
  t.teardown(() => ph.close());
  const base = `http://127.0.0.1:${port}`;
  await Promise.all(Array.from({ length: 5 }, () => fetch(`${base}/ok`).then((r) => r.text())));
  await Promise.all(Array.from({ length: 3 }, () => fetch(`${base}/ok`, { method: 'POST' }).then((r) => r.text())));
  await fetch(`${base}/missing`).then((r) => r.text());
  const text = await (await fetch(`${base}/metrics`)).text();
  const count = (labels: string): number =>
    Number(new RegExp(`^http_requests_total\\{${labels}\\} (\\d+)$`, 'm').exec(text)?.[1] ?? 0);
  t.equal(count('method="GET",status="200"'), 5, 'five GETs answered 200');
  t.equal(count('method="POST",status="401"'), 3, 'three POSTs without a token answered 401');
  t.equal(count('method="GET",status="404"'), 1, 'one 404');
  t.match(text, /^http_request_seconds_count 9$/m, 'nine latencies observed');
});

t.test("processHttp serves the process's own GC pauses once listening", async (t) => {
  const logger = { log: () => undefined };
  const ph = processHttp({ id: 'm1', httpAddress: '127.0.0.1:0', tokens: TOKENS, logger, tls: null });
  const port = await ph.listen();
  t.teardown(() => ph.close());
  // Garbage enough for several scavenges (a young generation is at most tens of MB).
  let keep = 0;
  for (let i = 0; i < 400; i++) keep += new Array(50_000).fill(i).length;
  t.ok(keep > 0);
  // GC entries reach the observer asynchronously: give them a turn or two.
  await new Promise((r) => setTimeout(r, 50));
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const value = (name: string): number =>
    Number(new RegExp(`^${name} ([0-9.e+-]+)$`, 'm').exec(text)?.[1] ?? Number.NaN);
  t.ok(value('process_gc_pauses_total') >= 1, `GC pauses counted (${value('process_gc_pauses_total')})`);
  t.ok(value('process_gc_scavenges_total') >= 1, 'scavenges among them');
  t.ok(value('process_gc_pause_seconds_total') > 0, 'their time');
  t.ok(
    value('process_gc_pauses_over_1ms_total') >= 0 && value('process_gc_pauses_over_5ms_total') >= 0,
    'the over-threshold counters are served',
  );
});

t.test(
  'exact routes: only for a declared route with the same admission; the exact target only; admission, body bound and errors as routes',
  async (t) => {
    const seen: string[] = [];
    const router = new Router({ tokens: TOKENS })
      .post('/v1/check', { admits: 'authenticated' }, async (ctx) => ({ via: 'route', body: await ctx.text() }))
      .get('/items/:id', { admits: 'open' }, (ctx) => ({ via: 'route', id: ctx.params.id }));
    t.throws(
      () => router.exact('POST', '/v1/other', { admits: 'authenticated' }, () => undefined),
      /no route declares it/,
      'no declared route: refused',
    );
    t.throws(
      () => router.exact('POST', '/v1/check', { admits: 'open' }, () => undefined),
      /admits open, but POST \/v1\/check admits authenticated/,
      'another admission: refused',
    );
    t.throws(
      () => router.exact('GET', '/items/a?x=1', { admits: 'open' }, () => undefined),
      TypeError,
      'a query: refused',
    );
    t.throws(
      () => router.exact('GET', '/items/%41', { admits: 'open' }, () => undefined),
      TypeError,
      'percent-encoding: refused',
    );
    router
      .exact('POST', '/v1/check', { admits: 'authenticated', body: { maxBytes: 8 } }, (_req, res, body, principal) => {
        seen.push(`check ${principal.kind} ${body?.toString()}`);
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ via: 'exact', body: body?.toString() }));
      })
      .exact('GET', '/items/a', { admits: 'open' }, (_req, res) => {
        seen.push('item a');
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ via: 'exact', id: 'a' }));
      })
      .exact('GET', '/items/bad', { admits: 'open' }, () => {
        throw new Error('a bug');
      });
    t.throws(
      () => router.exact('GET', '/items/a', { admits: 'open' }, () => undefined),
      /already registered/,
      'twice: refused',
    );
    t.same(
      router.routes().map((r) => r.pattern),
      ['/v1/check', '/items/:id'],
      'routes() lists the declared routes only',
    );
    const { url, server } = await serve(router);
    t.teardown(() => server.close());
    const post = async (
      path: string,
      token: string | null,
      body: string,
    ): Promise<{ status: number; body: unknown }> => {
      const res = await fetch(`${url}${path}`, {
        method: 'POST',
        body,
        headers: token === null ? {} : { authorization: `Bearer ${token}` },
      });
      return { status: res.status, body: (await res.json()) as unknown };
    };
    t.same(
      await post('/v1/check', TOKENS[0]!, 'abc'),
      { status: 200, body: { via: 'exact', body: 'abc' } },
      'the exact target: the exact route',
    );
    t.same(
      await post('/v1/check?x=1', TOKENS[0]!, 'abc'),
      { status: 200, body: { via: 'route', body: 'abc' } },
      'with a query: the general route',
    );
    t.equal((await post('/v1/check', null, 'abc')).status, 401, 'no token: 401 before the handler');
    t.same(
      await post('/v1/check', TOKENS[0]!, 'too long a body'),
      { status: 413, body: { error: { code: 'body_too_large', message: 'the body is over 8 bytes', limit: 8 } } },
      'over the bound: 413 naming it',
    );
    t.same(await get(`${url}/items/a`, 'GET', null), { status: 200, body: { via: 'exact', id: 'a' } });
    t.same(
      await get(`${url}/items/b`, 'GET', null),
      { status: 200, body: { via: 'route', id: 'b' } },
      'another target: the general route',
    );
    t.same(
      await get(`${url}/items/bad`, 'GET', null),
      { status: 500, body: { error: { code: 'internal', message: 'internal error' } } },
      'a throw: a 500, the process lives',
    );
    t.ok(router.dropExact('GET', '/items/a'), 'dropped');
    t.same(
      await get(`${url}/items/a`, 'GET', null),
      { status: 200, body: { via: 'route', id: 'a' } },
      'once dropped: the general route',
    );
    t.same(seen, ['check cluster abc', 'item a'], 'the exact handlers ran for the exact targets only');
  },
);

t.test(
  'processHttp answers exact routes before it counts requests (as the hand-written fast paths were)',
  async (t) => {
    const logger = { log: () => undefined };
    const ph = processHttp({ id: 'm1', httpAddress: '127.0.0.1:0', tokens: TOKENS, logger, tls: null });
    ph.router
      .get('/hot/:id', { admits: 'open' }, () => ({ via: 'route' }))
      .exact('GET', '/hot/1', { admits: 'open' }, (_req, res) => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{"via":"exact"}');
      });
    const port = await ph.listen();
    t.teardown(() => ph.close());
    const base = `http://127.0.0.1:${port}`;
    t.same(await (await fetch(`${base}/hot/1`)).json(), { via: 'exact' });
    t.same(await (await fetch(`${base}/hot/2`)).json(), { via: 'route' });
    const text = await (await fetch(`${base}/metrics`)).text();
    t.match(text, /^http_requests_total\{method="GET",status="200"\} 1$/m, 'only the general route counted');
  },
);
