/**
 * The pieces of `bench auction`'s fan-out as real processes: the bare ws broadcast peer and a watcher process.
 * 300 watchers connect and get their snapshot; a published update reaches all of them (the watcher process says
 * so, with the time of the last arrival); an update never published times out with nobody having it.
 */
import { fork, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import t from 'tap';

const server = fileURLToPath(new URL('../src/peers/ws-broadcast-server.js', import.meta.url));
const watcher = fileURLToPath(new URL('../src/auction-watchers.js', import.meta.url));

t.setTimeout(120_000);

t.test('the bare ws broadcast reaches every watcher, and a missing update is reported missing', async (t) => {
  const peer = spawn(process.execPath, [server, '0'], { stdio: ['ignore', 'pipe', 'inherit'] });
  t.teardown(() => void peer.kill('SIGKILL'));
  const port = await new Promise<number>((resolve, reject) => {
    peer.stdout.on('data', (d: Buffer) => {
      const m = /listening (\d+)/.exec(String(d));
      if (m !== null) resolve(Number(m[1]));
    });
    peer.once('exit', () => reject(new Error('peer exited')));
  });
  const child = fork(watcher, [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  t.teardown(() => void child.kill('SIGKILL'));
  const next = <T>(ev: string): Promise<T> =>
    new Promise((resolve) => {
      const on = (m: { ev?: string }): void => {
        if (m.ev !== ev) return;
        child.off('message', on);
        resolve(m as T);
      };
      child.on('message', on);
    });

  const ready = next<{ connected: number; failed: number }>('ready');
  child.send({
    cmd: 'connect',
    urls: [`ws://127.0.0.1:${port}/ws/auctions/x`],
    count: 300,
    localAddress: '127.0.0.10',
    inflight: 20,
  });
  t.match(await ready, { connected: 300, failed: 0 }, 'every watcher got its snapshot');

  const sent = Date.now();
  const res = await fetch(`http://127.0.0.1:${port}/publish`, {
    method: 'POST',
    body: JSON.stringify({ type: 'bid_update', seq: 1, high_bid: 101 }),
  });
  t.same(await res.json(), { sent: 300 });
  const got = next<{ seq: number; count: number; first: number; last: number; timeout?: boolean }>('got');
  child.send({ cmd: 'expect', seq: 1, timeoutMs: 20_000 });
  const g = await got;
  t.equal(g.count, 300, 'all 300 have seq 1');
  t.notOk(g.timeout);
  t.ok(g.last >= sent - 5 && g.last < Date.now() + 5, 'the last arrival is a wall-clock time after the publish');
  t.ok(g.first <= g.last && g.first >= sent - 5, 'the first arrival is before the last');

  const missing = next<{ seq: number; count: number; timeout?: boolean }>('got');
  child.send({ cmd: 'expect', seq: 2, timeoutMs: 500 });
  t.match(await missing, { seq: 2, count: 0, timeout: true }, 'an update nobody sent is reported missing');

  const wrong = await fetch(`http://127.0.0.1:${port}/other`, { method: 'POST', body: '{}' });
  t.equal(wrong.status, 404);
  t.match(await wrong.json(), { error: { code: 'not_found' } });
  child.send({ cmd: 'close' });
});
