/**
 * The lock benchmark's lean worker connection (src/benchmarks/lock-http.ts): answers parsed whole whatever way they
 * arrive (Content-Length or chunked, split anywhere), non-2xx answers as OpError with the body's code, a closed
 * connection failing the request and the next one reconnecting. Against a real node:http server on a real socket.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import t from 'tap';
import { parseResponse, WorkerConnection } from '../src/benchmarks/lock-http.js';
import { OpError } from '../src/load.js';

t.test('parseResponse: incomplete until the whole body is there, at any split', async (t) => {
  const whole = Buffer.from(
    'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nContent-Length: 15\r\n\r\n{"granted":true}'.replace(
      '15',
      '16',
    ),
  );
  for (let cut = 0; cut < whole.length; cut++) t.equal(parseResponse(whole.subarray(0, cut)), null, `cut at ${cut}`);
  t.same(parseResponse(whole), { status: 200, body: '{"granted":true}', close: false });
  const chunked = Buffer.from(
    'HTTP/1.1 409 Conflict\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n5\r\n{"err\r\nb\r\nor":"gone"}\r\n0\r\n\r\n',
  );
  for (let cut = 0; cut < chunked.length; cut++)
    t.equal(parseResponse(chunked.subarray(0, cut)), null, `chunked cut at ${cut}`);
  t.same(parseResponse(chunked), { status: 409, body: '{"error":"gone"}', close: true });
  t.equal(parseResponse(Buffer.from('SMTP nonsense\r\n\r\n')), 'malformed');
  t.same(parseResponse(Buffer.from('HTTP/1.1 204 No Content\r\n\r\n')), { status: 204, body: '', close: false });
});

async function listen(server: Server): Promise<string> {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

t.test(
  'requests on one keep-alive connection; errors as OpError; a dropped connection fails and the next reconnects',
  async (t) => {
    let connections = 0;
    const seen: Array<{ method: string; url: string; auth: string | undefined; body: string }> = [];
    const server = createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        seen.push({ method: req.method ?? '', url: req.url ?? '', auth: req.headers.authorization, body });
        if (req.url === '/drop') return req.socket.destroy();
        if (req.url === '/held') {
          res.writeHead(409, { 'content-type': 'application/json' });
          return res.end('{"error":{"code":"stale_token","message":"no"}}');
        }
        if (req.url === '/chunked') {
          res.writeHead(200, { 'content-type': 'application/json' });
          res.write('{"key":');
          setTimeout(() => res.end('"k1"}'), 5);
          return;
        }
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
        res.end(body);
      });
    });
    server.on('connection', () => connections++);
    const origin = await listen(server);
    t.teardown(() => server.close());
    const conn = new WorkerConnection(origin, 'authorization: Bearer secret\r\ncontent-type: application/json\r\n');
    t.teardown(() => conn.close());
    t.equal(await conn.request('POST', '/echo', '{"n":"é1"}'), '{"n":"é1"}', 'the body, UTF-8 both ways');
    t.equal(await conn.request('POST', '/chunked', ''), '{"key":"k1"}', 'a chunked answer');
    const refused = await conn.request('POST', '/held', '{}').catch((e: unknown) => e);
    t.ok(refused instanceof OpError && refused.kind === 'HTTP 409 stale_token', `409 as OpError (${String(refused)})`);
    t.equal(connections, 1, 'one connection for all of them');
    await t.rejects(conn.request('POST', '/drop', '{}'), /connection closed/);
    t.equal(await conn.request('POST', '/echo', '{"again":true}'), '{"again":true}', 'the next request reconnects');
    t.equal(connections, 2);
    t.same(
      seen[0],
      { method: 'POST', url: '/echo', auth: 'Bearer secret', body: '{"n":"é1"}' },
      'method, path, headers and body as given',
    );
  },
);
