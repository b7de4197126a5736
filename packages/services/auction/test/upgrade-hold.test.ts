/**
 * WebSocket watchers and the listener's connection cap (packages/platform/http connections.ts): at the cap an HTTP listener
 * evicts its oldest idle connection; a watcher's upgraded socket is never idle, so it must not be the one evicted
 * (holdUpgraded). Real sockets on loopback, a cap of 2.
 */
import { createServer } from 'node:http';
import t from 'tap';
import WebSocket, { WebSocketServer } from 'ws';
import { holdUpgraded, limitServer } from '@raftkit/http';

async function serve(hold: boolean): Promise<{ port: number; close: () => Promise<void> }> {
  const server = createServer((_req, res) => res.end('{}'));
  limitServer(server, { budget: 2 });
  const wss = new WebSocketServer({ noServer: true });
  server.on('upgrade', (req, socket, head) => {
    if (hold) holdUpgraded(socket);
    wss.handleUpgrade(req, socket, head, (ws) => ws.on('message', (d) => ws.send(d)));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  return {
    port,
    close: () => {
      for (const c of wss.clients) c.terminate();
      return new Promise((r) => server.close(() => r()));
    },
  };
}

async function open(port: number): Promise<{ ws: WebSocket; closed: Promise<void> }> {
  const ws = new WebSocket(`ws://127.0.0.1:${port}/`);
  const closed = new Promise<void>((r) => ws.once('close', () => r()));
  ws.on('error', () => undefined);
  await new Promise((r, j) => (ws.once('open', r), ws.once('error', j)));
  return { ws, closed };
}

t.test('held: a third connection at the cap is refused, the two watchers stay', async (t) => {
  const s = await serve(true);
  t.teardown(s.close);
  const a = await open(s.port);
  const b = await open(s.port);
  const third = new WebSocket(`ws://127.0.0.1:${s.port}/`);
  await new Promise<void>((r) => (third.once('error', () => r()), third.once('close', () => r())));
  let aClosed = false;
  void a.closed.then(() => (aClosed = true));
  await new Promise((r) => setTimeout(r, 200));
  t.notOk(aClosed, 'the oldest watcher was not evicted');
  const echo = new Promise((r) => b.ws.once('message', (d) => r(String(d))));
  b.ws.send('ping');
  t.equal(await echo, 'ping', 'the watchers still work');
  a.ws.terminate();
  b.ws.terminate();
});

t.test('not held: the same third connection evicts the oldest watcher (what holdUpgraded prevents)', async (t) => {
  const s = await serve(false);
  t.teardown(s.close);
  const a = await open(s.port);
  await open(s.port).then((b) => t.teardown(() => b.ws.terminate()));
  const third = await open(s.port);
  await a.closed;
  t.pass('the oldest watcher was evicted');
  third.ws.terminate();
});
