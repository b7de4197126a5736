/**
 * The bare node:http answer of the flash benchmark: one process answering every request with the same small JSON
 * body our gateways give a locally rejected attempt (`{"status":"lost","reason":"sold_out"}`), keep-alive, the
 * request body read and dropped. Nothing else happens per request: it is what node:http itself costs here, the
 * floor the rejection path is compared with.
 *
 *   node node-json-server.js <port>
 */
import { createServer } from 'node:http';

const port = Number(process.argv[2]);
if (!Number.isInteger(port) || port <= 0 || port > 65535) {
  process.stderr.write('usage: node-json-server.js <port>\n');
  process.exit(2);
}
const body = JSON.stringify({ status: 'lost', reason: 'sold_out' });
const server = createServer((req, res) => {
  req.resume();
  req.on('end', () => {
    res.writeHead(200, {
      'content-type': 'application/json; charset=utf-8',
      'content-length': Buffer.byteLength(body),
      'cache-control': 'no-store',
    });
    res.end(body);
  });
});
server.keepAliveTimeout = 30_000;
server.listen(port, '127.0.0.1');
process.on('SIGTERM', () => {
  server.closeAllConnections();
  server.close(() => process.exit(0));
});
