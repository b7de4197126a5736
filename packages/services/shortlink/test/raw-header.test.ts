/** The click's referer and user agent, read from rawHeaders, are what req.headers gives (real sockets, real parser). */
import { createServer, type IncomingMessage } from 'node:http';
import { connect } from 'node:net';
import t from 'tap';
import { rawHeader } from '../src/workers/app/app.js';

const CASES: Array<{ name: string; headers: string[] }> = [
  { name: 'none', headers: [] },
  { name: 'plain', headers: ['Referer: https://a.example/x', 'User-Agent: curl/8'] },
  { name: 'odd case', headers: ['rEfErEr: https://b.example/', 'USER-AGENT: UA'] },
  {
    name: 'repeated (first wins)',
    headers: [
      'Referer: https://first.example/',
      'referer: https://second.example/',
      'User-Agent: one',
      'user-agent: two',
    ],
  },
  { name: 'empty value', headers: ['Referer:', 'User-Agent: '] },
  { name: 'look-alike names', headers: ['Referers: nope', 'X-Referer: nope', 'User-Agent2: nope'] },
];

t.test('rawHeader(referer | user-agent) equals req.headers for each case', async (t) => {
  const seen: IncomingMessage[] = [];
  const server = createServer((req, res) => {
    seen.push(req);
    res.end();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => server.close());
  const port = (server.address() as { port: number }).port;
  for (const c of CASES) {
    await new Promise<void>((resolve, reject) => {
      const socket = connect(port, '127.0.0.1', () =>
        socket.end(['GET /abcdefg HTTP/1.1', 'Host: x', ...c.headers, 'Connection: close', '', ''].join('\r\n')),
      );
      socket.on('data', () => undefined);
      socket.on('close', () => resolve());
      socket.on('error', reject);
    });
    const req = seen.at(-1)!;
    t.equal(rawHeader(req.rawHeaders, 'referer'), req.headers.referer ?? null, `${c.name}: referer`);
    t.equal(rawHeader(req.rawHeaders, 'user-agent'), req.headers['user-agent'] ?? null, `${c.name}: user-agent`);
  }
  t.equal(seen.length, CASES.length);
});
