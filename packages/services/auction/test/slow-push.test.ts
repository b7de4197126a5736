/**
 * writeFrame (src/workers/gateway/frames.ts), as the gateway pushes to its watchers: a ws client reads the prebuilt
 * frames (short, 16-bit and 64-bit lengths) interleaved with ws's own sends, whole and in order; a client that
 * never reads is dropped with at most the bound queued. Real sockets on loopback.
 */
import { createServer } from 'node:http';
import { connect } from 'node:net';
import t from 'tap';
import { WebSocket, WebSocketServer } from 'ws';
import { textFrame, writeFrame } from '../src/workers/gateway/frames.js';

t.test('prebuilt frames reach a ws client whole and in order with ws sends between them', async (t) => {
  const server = createServer();
  const wss = new WebSocketServer({ server, perMessageDeflate: false });
  const accepted = new Promise<WebSocket>((resolve) => wss.once('connection', resolve));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => {
    for (const c of wss.clients) c.terminate();
    wss.close();
    server.close();
  });
  const client = new WebSocket(`ws://127.0.0.1:${(server.address() as { port: number }).port}/`);
  const got: string[] = [];
  const all = new Promise<void>((resolve) =>
    client.on('message', (data, binary) => {
      t.notOk(binary, 'a text frame');
      got.push(String(data));
      if (got.length === 5) resolve();
    }),
  );
  const ws = await accepted;
  const texts = ['{"seq":1}', `{"seq":2,"pad":"${'é'.repeat(100)}"}`, 'x'.repeat(70_000), '{"seq":4}'];
  t.ok(writeFrame(ws, textFrame(texts[0]!), 1 << 20));
  ws.send('{"via":"ws"}');
  for (const text of texts.slice(1)) t.ok(writeFrame(ws, textFrame(text), 1 << 20));
  await all;
  t.same(got, [texts[0], '{"via":"ws"}', ...texts.slice(1)], 'every message, whole, in the order written');
  client.close();
});

t.test('a socket that never reads is dropped past the bound', async (t) => {
  const server = createServer();
  const wss = new WebSocketServer({ server });
  const accepted = new Promise<WebSocket>((resolve) => wss.once('connection', resolve));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => {
    for (const c of wss.clients) c.terminate();
    wss.close();
    server.close();
  });
  const port = (server.address() as { port: number }).port;
  // A raw client: sends the upgrade, then pauses and never reads a byte.
  const raw = connect(port, '127.0.0.1');
  raw.on('error', () => undefined);
  await new Promise<void>((resolve) => raw.once('connect', resolve));
  raw.write(
    `GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n`,
  );
  const ws = await accepted;
  raw.pause();
  const closed = new Promise<void>((resolve) => ws.once('close', () => resolve()));
  const bound = 256 * 1024;
  const text = 'x'.repeat(16 * 1024);
  const frame = textFrame(text);
  let sent = 0;
  let maxQueued = 0;
  // The kernel takes some MB of a paused loopback connection first: keep pushing until the socket is dropped.
  for (let i = 0; i < 20_000; i++) {
    maxQueued = Math.max(maxQueued, ws.bufferedAmount);
    if (!writeFrame(ws, frame, bound)) break;
    sent++;
    if (i % 64 === 0) await new Promise((r) => setImmediate(r));
  }
  t.ok(sent < 20_000, `dropped after ${sent} messages of 16 KiB`);
  t.ok(maxQueued <= bound + text.length + 64, `never more than the bound and one message queued (${maxQueued} bytes)`);
  await closed;
  t.pass('the server side closed');
  raw.destroy();
});
