/**
 * The writer's push queue per gateway is bounded: a gateway that takes a POST and never answers (a real socket)
 * holds at most MAX_QUEUED_PUSHES pushes in the writer's memory, the newest kept.
 */
import { createServer, type IncomingMessage } from 'node:http';
import t from 'tap';
import { MAX_QUEUED_PUSHES, Publisher, WatcherRegistry } from '../src/members/watchers.js';
import type { Push } from '../src/wire.js';

t.test("a gateway that never answers holds at most MAX_QUEUED_PUSHES of the writer's pushes, the newest", async (t) => {
  const held: IncomingMessage[] = [];
  const server = createServer((req) => void held.push(req));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  const registry = new WatcherRegistry();
  registry.update('gw1', `http://127.0.0.1:${port}`, 's'.repeat(32), { a1: 3 }, true);
  const publisher = new Publisher(registry, () => 'n1');
  t.teardown(async () => {
    await publisher.close();
    server.closeAllConnections();
    server.close();
  });
  const push = (seq: number): Push => ({
    type: 'bid_update',
    auction_id: 'a1',
    seq,
    high_bid: seq,
    bidder: 'b',
    close_at: 0,
  });
  let seq = 0;
  for (let i = 0; i < 5; i++) {
    for (let j = 0; j < 10_000; j++) publisher.publish(push(++seq));
    await new Promise((r) => setImmediate(r));
  }
  t.equal(publisher.published, 50_000, 'every push published');
  t.ok(
    publisher.queued <= MAX_QUEUED_PUSHES,
    `at most ${MAX_QUEUED_PUSHES} queued behind the unanswered POST (${publisher.queued})`,
  );
  t.ok(publisher.dropped > 0, 'the overflow is counted');
  t.ok(held.length >= 1, 'the gateway got its first POST, which stays unanswered');
});
