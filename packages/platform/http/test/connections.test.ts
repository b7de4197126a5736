import { readFileSync } from 'node:fs';
import { createServer as createHttpServer, type Server as HttpServer } from 'node:http';
import { connect, createServer as createNetServer, type Server as NetServer, type Socket } from 'node:net';
import t from 'tap';
import { connectionBudget, fileLimit, limitServer } from '../src/index.js';

async function listen(server: NetServer | HttpServer): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return (server.address() as { port: number }).port;
}

function open(port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const s = connect(port, '127.0.0.1', () => resolve(s));
    s.once('error', reject);
  });
}

const closed = (s: Socket): Promise<void> =>
  new Promise((resolve) => (s.destroyed ? resolve() : s.once('close', () => resolve())));

async function until(what: string, probe: () => boolean, ms = 5_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!probe()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

t.test('the file limit is the soft limit of this process', async (t) => {
  const m = /^Max open files\s+(\d+)/m.exec(readFileSync('/proc/self/limits', 'utf8'));
  if (m === null) {
    t.comment('no /proc/self/limits here');
    return;
  }
  t.equal(fileLimit(), Number(m[1]));
  t.equal(connectionBudget(20_000), 16_000, 'a fifth kept for storage and peers');
  t.equal(connectionBudget(1024), 512, 'at most half kept');
  t.equal(connectionBudget(4096), 3072, 'at least 1,024 kept');
});

t.test('HTTP at its cap closes the oldest idle connection, and refuses only when all are busy', async (t) => {
  let release: () => void = () => undefined;
  const server = createHttpServer((req, res) => {
    if (req.url === '/slow') release = () => res.end('slow');
    else res.end('ok');
  });
  const limit = limitServer(server, { budget: 3 });
  const port = await listen(server);
  // Waits for 'close': a listener leaves the process's split only then, and the next test counts on that.
  t.teardown(() => {
    server.closeAllConnections();
    return new Promise<void>((r) => server.close(() => r()));
  });
  t.equal(limit.max, 3);
  const a = await open(port);
  const b = await open(port);
  const c = await open(port);
  const d = await open(port);
  await closed(a);
  t.ok(a.destroyed && !b.destroyed && !c.destroyed && !d.destroyed, 'the oldest idle connection made room');
  t.equal(limit.evicted, 1);

  // Busy: a request in flight on each of the three.
  for (const s of [b, c, d]) s.write('GET /slow HTTP/1.1\r\nhost: x\r\n\r\n');
  await new Promise((r) => setTimeout(r, 100));
  const e = await open(port);
  await closed(e);
  t.equal(limit.refused, 1, 'a newcomer is refused when every connection is busy');
  t.ok(!b.destroyed && !c.destroyed && !d.destroyed, 'busy connections are kept');
  release();
  for (const s of [b, c, d, e]) s.destroy();
});

t.test('an HTTP connection that sends no request is closed after the headers timeout', async (t) => {
  const server = createHttpServer((_req, res) => res.end('ok'));
  limitServer(server, { budget: 10, headersTimeoutMs: 200 });
  const port = await listen(server);
  // Waits for 'close': a listener leaves the process's split only then, and the next test counts on that.
  t.teardown(() => {
    server.closeAllConnections();
    return new Promise<void>((r) => server.close(() => r()));
  });
  const silent = await open(port);
  const started = Date.now();
  await closed(silent);
  t.ok(Date.now() - started < 3_000, 'closed by the server');
});

t.test(
  'a keep-alive connection outlives the headers timeout between requests, counts as idle once answered, and closes after the keep-alive timeout',
  async (t) => {
    const server = createHttpServer((_req, res) => res.end('ok'));
    const limit = limitServer(server, { budget: 2, headersTimeoutMs: 200, keepAliveTimeoutMs: 1_000 });
    const port = await listen(server);
    t.teardown(() => {
      server.closeAllConnections();
      return new Promise<void>((r) => server.close(() => r()));
    });
    const answers = (s: Socket, n: number): Promise<void> => {
      let text = '';
      return new Promise((resolve) => {
        const onData = (chunk: Buffer): void => {
          text += chunk.toString();
          if ((text.match(/\r\n\r\nok/g) ?? []).length >= n) {
            s.off('data', onData);
            resolve();
          }
        };
        s.on('data', onData);
      });
    };
    const busy = await open(port);
    for (let i = 1; i <= 3; i++) {
      const got = answers(busy, 1);
      busy.write('GET / HTTP/1.1\r\nhost: x\r\n\r\n');
      await got;
      // Longer than the headers timeout: only the first request's wait is bounded by it.
      await new Promise((r) => setTimeout(r, 400));
      t.notOk(busy.destroyed, `still open after request ${i} and a pause past the headers timeout`);
    }
    // Answered, the connection is idle: at the cap it is the one that makes room.
    const newer = await open(port);
    const newest = await open(port);
    await closed(busy);
    t.ok(busy.destroyed && !newer.destroyed && !newest.destroyed, 'the answered connection was idle and made room');
    t.equal(limit.evicted, 1);
    newest.destroy();
    // A connection idle after its answer closes after the keep-alive timeout.
    const got = answers(newer, 1);
    newer.write('GET / HTTP/1.1\r\nhost: x\r\n\r\n');
    await got;
    const started = Date.now();
    await closed(newer);
    t.ok(Date.now() - started >= 500, `closed by the keep-alive timeout (${Date.now() - started} ms after its answer)`);
  },
);

t.test('a binary listener refuses new connections at its cap; its share returns when another closes', async (t) => {
  const first = createNetServer(() => undefined);
  const second = createNetServer(() => undefined);
  const one = limitServer(first, { budget: 4 });
  t.equal(first.maxConnections, 4);
  limitServer(second, { budget: 4 });
  t.equal(one.max, 2, 'two listeners split the budget');
  t.equal(first.maxConnections, 2);
  await listen(second);
  await new Promise<void>((r) => second.close(() => r()));
  t.equal(first.maxConnections, 4, 'the whole budget again once the other closed');

  const port = await listen(first);
  t.teardown(() => new Promise<void>((r) => first.close(() => r())));
  const held: Socket[] = [];
  for (let i = 0; i < 4; i++) held.push(await open(port));
  const extra = await open(port);
  await closed(extra);
  await until('the refusal is counted', () => one.refused === 1);
  t.ok(
    held.every((s) => !s.destroyed),
    'the first four are kept',
  );
  for (const s of held) s.destroy();
});
