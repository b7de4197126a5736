/**
 * The peer of `bench auction`'s fan-out: a bare `ws` broadcast server, the least a live-auction socket server can
 * do. `node ws-broadcast-server.js PORT`: WebSocket on any path; `{type: subscribe}` gets a snapshot of the last
 * message; `POST /publish` with a bid_update body sends it, encoded once, to every socket as a text frame, and answers
 * `{sent}`. No auth, no log, no routing, no sequence checks: what is left is the cost of the sockets themselves.
 * Prints "listening PORT" when ready.
 */
import { createServer } from 'node:http';
import { WebSocketServer, type WebSocket } from 'ws';

const port = Number(process.argv[2] ?? '0');
const sockets = new Set<WebSocket>();
let last = '{"type":"snapshot","seq":0}';

const server = createServer((req, res) => {
  if (req.method !== 'POST' || req.url !== '/publish') {
    res
      .writeHead(404, { 'content-type': 'application/json' })
      .end('{"error":{"code":"not_found","message":"POST /publish"}}');
    return;
  }
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const text = Buffer.concat(chunks).toString('utf8');
    last = text.replace('"bid_update"', '"snapshot"');
    // Encoded once: ws frames the same bytes for every socket (a string would be encoded again per socket).
    const bytes = Buffer.from(text);
    for (const ws of sockets) ws.send(bytes, { binary: false });
    res.writeHead(200, { 'content-type': 'application/json' }).end(`{"sent":${sockets.size}}`);
  });
});

const wss = new WebSocketServer({ server, perMessageDeflate: false, maxPayload: 4096 });
wss.on('connection', (ws) => {
  ws.on('message', () => {
    if (sockets.has(ws)) return;
    sockets.add(ws);
    ws.send(last);
  });
  ws.on('close', () => sockets.delete(ws));
  ws.on('error', () => undefined);
});

server.listen(port, '127.0.0.1', () => {
  const address = server.address();
  process.stdout.write(`listening ${typeof address === 'object' && address !== null ? address.port : port}\n`);
});
process.on('SIGTERM', () => process.exit(0));
