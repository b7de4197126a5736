/**
 * HTTPS for a process's HTTP side, in one process on loopback with certificates from scripts/make-test-ca.sh (the
 * openssl binary): processHttp serves TLS with a member certificate; a ClusterClient reaches it when given the CA,
 * and clients fail without it or over plain HTTP; the connection limit still counts and evicts idle TLS
 * connections; readClusterTls names the flag of a missing or non-PEM file.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { connect as connectTls, type TLSSocket } from 'node:tls';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { request } from 'undici';
import { ClusterClient, limitServer, processHttp, readClusterTls } from '../src/index.js';

const MAKE_CA = fileURLToPath(new URL('../../../../../scripts/make-test-ca.sh', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'http-tls-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
execFileSync('sh', [MAKE_CA, dir, 'm1=127.0.0.1'], { stdio: 'pipe' });
const tls = readClusterTls({ cert: join(dir, 'm1.pem'), key: join(dir, 'm1.key'), ca: join(dir, 'ca.pem') })!;

t.test('processHttp serves HTTPS; clients need the CA', async (t) => {
  const http = processHttp({
    id: 'm1',
    httpAddress: '127.0.0.1:0',
    tokens: ['secret-token'],
    logger: { log: () => undefined },
    tls: { cert: tls.cert!, key: tls.key! },
  });
  http.router.get('/v1/hello', { admits: 'cluster' }, () => ({ hello: 'over tls' }));
  const port = await http.listen();
  t.teardown(() => http.close());
  t.equal(http.scheme, 'https');
  const url = `https://127.0.0.1:${port}`;

  const client = new ClusterClient({
    endpoints: [url],
    token: 'secret-token',
    ca: tls.ca,
    connections: 1,
    timeoutMs: 5_000,
  });
  t.same(await client.call('GET', '/v1/hello'), { hello: 'over tls' }, 'with the CA: answered');
  await client.close();

  await t.rejects(request(`${url}/healthz`, { headersTimeout: 5_000 }), 'without the CA: the certificate is refused');
  await t.rejects(
    request(`http://127.0.0.1:${port}/healthz`, { headersTimeout: 5_000, bodyTimeout: 5_000 }),
    'plain http: refused',
  );
});

t.test('the connection cap counts TLS connections and evicts idle ones', async (t) => {
  const server = createHttpsServer({ cert: tls.cert!, key: tls.key! }, (_req, res) => res.end('ok'));
  const limit = limitServer(server, { budget: 2 });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  t.teardown(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  );
  // Idle TLS connections (handshake done, no request), then one more: the oldest idle one is closed to make room.
  const open = (): Promise<TLSSocket> =>
    new Promise((resolve, reject) => {
      const s = connectTls({ host: '127.0.0.1', port, ca: tls.ca, servername: 'm1' }, () => resolve(s));
      s.once('error', reject);
    });
  const sockets = [await open(), await open(), await open(), await open()];
  for (const s of sockets) s.on('error', () => undefined);
  await new Promise((r) => setTimeout(r, 300));
  t.ok(limit.evicted > 0, `idle TLS connections were evicted at the cap (${limit.evicted})`);
  const client = new ClusterClient({
    endpoints: [`https://127.0.0.1:${port}`],
    token: 'secret-token',
    ca: tls.ca,
    connections: 1,
    timeoutMs: 5_000,
  });
  t.equal((await client.ask(0, 'GET', '/')).status, 200, 'a real client is still served');
  await client.close();
  for (const s of sockets) s.destroy();
});

t.test('readClusterTls names what is wrong', async (t) => {
  t.equal(readClusterTls({}), null, 'no files: no TLS');
  t.throws(() => readClusterTls({ cert: join(dir, 'm1.pem') }), /--tls-cert and --tls-key go together/);
  t.throws(() => readClusterTls({ cert: join(dir, 'm1.pem'), key: join(dir, 'm1.key') }), /--tls-ca is needed/);
  t.throws(() => readClusterTls({ ca: join(dir, 'missing.pem') }), /--tls-ca: cannot read .*missing\.pem: ENOENT/);
  writeFileSync(join(dir, 'not-pem.txt'), 'hello');
  t.throws(() => readClusterTls({ ca: join(dir, 'not-pem.txt') }), /--tls-ca: .*not-pem\.txt is not a PEM file/);
  t.same(
    readClusterTls({ ca: join(dir, 'ca.pem') }),
    { ca: readFileSync(join(dir, 'ca.pem'), 'utf8') },
    'a CA alone: a client',
  );
});
