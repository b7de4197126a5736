/** The shortlink ceilings as real processes: N bare node:http servers and nginx, each answering the fixed 302. */
import t from 'tap';
import { request } from 'undici';
import { cleanupAll } from '../src/cleanup.js';
import { isAlive } from '../src/procs.js';
import { nginxConfig, startNginx } from '../src/peers/nginx.js';
import { startNode302 } from '../src/peers/node302.js';

const location = 'https://example.com/bench/0123456789abcdef';
const headers = { 'cache-control': 'private, max-age=0' };
t.teardown(cleanupAll);

async function get(
  origin: string,
  path: string,
): Promise<{ status: number; location: unknown; cacheControl: unknown }> {
  const res = await request(`${origin}${path}`, { maxRedirections: 0 } as Parameters<typeof request>[1]);
  await res.body.dump();
  return { status: res.statusCode, location: res.headers.location, cacheControl: res.headers['cache-control'] };
}

t.test('node302: one process per port, every path answers the same 302', async (t) => {
  const ceiling = await startNode302(2, { location, ...headers });
  t.equal(ceiling.origins.length, 2);
  t.equal(ceiling.pids.length, 2);
  for (const origin of ceiling.origins) {
    for (const path of ['/abcdefg', '/x/y?z=1'])
      t.same(await get(origin, path), { status: 302, location, cacheControl: headers['cache-control'] });
  }
  await ceiling.stop();
  t.ok(
    ceiling.pids.every((p) => !isAlive(p)),
    'stopped',
  );
});

t.test('nginx: the generated configuration', async (t) => {
  const conf = nginxConfig({ dir: '/tmp/x', port: 4321, workers: 3, location, headers });
  t.match(conf, /worker_processes 3;/);
  t.match(conf, /listen 127\.0\.0\.1:4321;/);
  t.match(conf, /access_log off;/);
  t.match(conf, /pid \/tmp\/x\/nginx\.pid;/);
  t.match(conf, new RegExp(`return 302 "${location}";`));
  t.throws(() => nginxConfig({ dir: '/tmp/x', port: 1, workers: 1, location: 'http://a/$x', headers: {} }));
});

t.test('nginx: a master and N workers answering the same 302', async (t) => {
  const nginx = await startNginx({ workers: 2, location, headers });
  t.match(nginx.version, /^1\./);
  t.same(await get(nginx.origin, '/abcdefg'), { status: 302, location, cacheControl: headers['cache-control'] });
  t.equal(nginx.pids.length, 3, 'master + 2 workers');
  await nginx.stop();
  t.ok(
    nginx.pids.every((p) => !isAlive(p)),
    'master and workers stopped',
  );
});
