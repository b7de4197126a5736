/**
 * The bare node:http ceiling's server process: answers every request with the same 302 and no body, with
 * keep-alive as our app servers have it. Nothing else happens per request, so it measures what node:http itself
 * costs on this machine.
 *
 *   node node302-server.js <port> '<JSON object of response headers>'
 */
import { createServer } from 'node:http';

const port = Number(process.argv[2]);
const headers = JSON.parse(process.argv[3] ?? '{}') as Record<string, string>;
if (!Number.isInteger(port) || port <= 0 || port > 65535 || typeof headers.location !== 'string') {
  process.stderr.write('usage: node302-server.js <port> \'{"location": "...", ...}\'\n');
  process.exit(2);
}
const server = createServer((req, res) => {
  req.resume();
  res.writeHead(302, headers);
  res.end();
});
server.keepAliveTimeout = 30_000;
server.listen(port, '127.0.0.1');
process.on('SIGTERM', () => {
  server.closeAllConnections();
  server.close(() => process.exit(0));
});
