/**
 * Lock watchers that never read cannot grow a member's memory. Before, every event was buffered for every stream
 * (1,000 streams, 5,000 lock changes: 68 MB to 1.1 GB). Now a stream holding more than 64 KiB unsent is dropped
 * (told to watch again from its last revision) and the member stays small; a watcher that reads still gets every
 * change, and the member takes new watches.
 *
 * The kernel takes about 4 MB of a paused loopback connection before anything stays in the member's memory, so
 * each slow stream must be sent more than that: waves of 2,000 one-second sessions queue on the watched lock (one
 * event each) and then expire together (the leader expires up to 1,000 sessions an entry: one event each), about
 * 4,000 events of ~400 bytes a wave. Only 100 slow streams, so the kernel's share stays near 400 MB machine-wide.
 */
import { connect, type Socket } from 'node:net';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { call, startCluster, until } from '@raftkit/testkit';

t.setTimeout(600_000);

const cluster = await startCluster('lock', { nodes: 3, tickMs: 100 });
t.teardown(() => cluster.down());
const members = (
  JSON.parse(readFileSync(join(cluster.dataDir, 'cluster.json'), 'utf8')) as {
    members: Array<{ id: string; pid: number }>;
  }
).members;
const MB = 1024 * 1024;
const SLOW_STREAMS = 100;
const SESSIONS_PER_WAVE = 2_000;
/** Bytes of one event (lock name of 244 characters) and events a wave sends to each stream. */
const EVENT_BYTES = 400;
const EVENTS_PER_WAVE = 2 * SESSIONS_PER_WAVE;
/**
 * Enough waves that each slow stream is sent well past what the kernel holds for a paused connection (the
 * largest send buffer, tcp_wmem's maximum, plus the receiver's initial window) and past the member's 1 MiB limit:
 * 4 waves with Linux's defaults (4 MiB + 128 KiB).
 */
const WAVES = (() => {
  const max = (file: string, field: number, fallback: number): number => {
    try {
      return Number(readFileSync(file, 'utf8').trim().split(/\s+/)[field]) || fallback;
    } catch {
      return fallback;
    }
  };
  const kernel = max('/proc/sys/net/ipv4/tcp_wmem', 2, 4 << 20) + max('/proc/sys/net/ipv4/tcp_rmem', 1, 128 << 10);
  return Math.min(12, Math.ceil((kernel + (2 << 20)) / (EVENTS_PER_WAVE * EVENT_BYTES)));
})();
const rss = (pid: number): number =>
  Number(/^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? Number.NaN) * 1024;
// A long name makes every event about 400 bytes.
const NAME = `slow-watchers/${'x'.repeat(230)}`;
const path = `/v1/locks/${encodeURIComponent(NAME)}`;
const target = new URL(cluster.members[0]!);
const member = cluster.members[0]!;
const sample = async (series: string): Promise<number> => {
  const a = await call(member, 'GET', '/metrics');
  const line = String((a.body as { text?: string }).text)
    .split('\n')
    .find((l) => l.startsWith(`${series} `));
  return line === undefined ? Number.NaN : Number(line.split(' ')[1]);
};
const watchRequest = `GET ${path}/watch?stream=true HTTP/1.1\r\nHost: ${target.host}\r\nAuthorization: Bearer ${cluster.token}\r\nAccept: text/event-stream\r\n\r\n`;

/** Runs `task` for 0..count-1, `parallel` at a time. */
async function inParallel(count: number, parallel: number, task: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: parallel }, async () => {
      while (next < count) await task(next++);
    }),
  );
}

t.test(
  'streams that do not read are dropped; the member stays small and keeps serving watchers that read',
  async (t) => {
    t.comment(`${WAVES} waves of ${SESSIONS_PER_WAVE} sessions`);
    const slow: Socket[] = [];
    t.teardown(() => slow.forEach((s) => s.destroy()));
    for (let i = 0; i < SLOW_STREAMS; i++) {
      const socket = connect(Number(target.port), target.hostname);
      socket.on('error', () => {});
      socket.write(watchRequest);
      socket.pause();
      slow.push(socket);
    }
    let received = '';
    const count = (event: string): number => received.split(`event: ${event}\n`).length - 1;
    const reader = connect(Number(target.port), target.hostname);
    t.teardown(() => reader.destroy());
    reader.setEncoding('utf8');
    reader.on('data', (chunk: string) => {
      received += chunk;
    });
    reader.write(watchRequest);
    await until(
      'every stream open',
      async () => {
        const open = await sample('lock_watchers');
        // (A member without the gauge gets a moment instead, so the comparison below still says what it did.)
        return open >= SLOW_STREAMS + 1 || (Number.isNaN(open) && received.includes('event: state')) ? true : null;
      },
      60_000,
      200,
    );
    await new Promise((r) => setTimeout(r, 1_000));
    const before = rss(members[0]!.pid);

    let queued = 0;
    for (let wave = 0; wave < WAVES; wave++) {
      await inParallel(SESSIONS_PER_WAVE, 64, async () => {
        const session = await call(member, 'POST', '/v1/sessions', {
          token: cluster.token,
          body: { timeout_ms: 1_000 },
        });
        const id = (session.body as { session_id?: string }).session_id;
        if (id === undefined) return;
        const acquired = await call(member, 'POST', `${path}/acquire`, {
          token: cluster.token,
          body: { session_id: id, wait: true },
        });
        if (acquired.status === 200) queued++;
      });
      await until(
        `wave ${wave + 1}: every session expired`,
        async () => {
          const lock = (await call(member, 'GET', path, { token: cluster.token })).body as {
            holder_session?: string | null;
            queue_length?: number;
          };
          return lock.holder_session === null && lock.queue_length === 0 ? true : null;
        },
        120_000,
        250,
      );
    }
    t.ok(queued >= WAVES * SESSIONS_PER_WAVE * 0.95, `${queued} sessions queued on the lock, then expired`);
    const after = rss(members[0]!.pid);
    const dropped = await sample('lock_watchers_dropped_total');
    t.ok(dropped >= SLOW_STREAMS * 0.9, `${dropped} of the ${SLOW_STREAMS} streams that did not read were dropped`);
    // RSS also holds the 8,000 sessions' state and what the allocator keeps after freeing, so it is a loose bound; the
    // drops above and the open-watch count below are the precise measures.
    t.ok(
      after < 600 * MB,
      `the member's RSS went from ${(before / MB).toFixed(0)} MB to ${(after / MB).toFixed(0)} MB (< 600 MB)`,
    );
    t.equal(await sample('lock_watchers'), 1, 'only the watcher that reads is still open');

    const lock = (await call(member, 'GET', path, { token: cluster.token })).body as { revision: number };
    const lastRevision = (): number => {
      const data = [...received.matchAll(/event: change\ndata: (.*)\n/g)].pop()?.[1];
      return data === undefined ? 0 : (JSON.parse(data) as { lock: { revision: number } }).lock.revision;
    };
    await until(
      'the reading watcher saw the last change',
      () => (lastRevision() >= lock.revision ? true : null),
      30_000,
      100,
    ).catch(() => null);
    t.equal(lastRevision(), lock.revision, `the watcher that reads saw the last change (${count('change')} changes)`);
    t.equal(count('dropped'), 0, 'and was not dropped');
    t.equal(
      (await call(member, 'GET', `${path}/watch?timeout_ms=0`, { token: cluster.token })).status,
      200,
      'the member takes new watches',
    );
    for (const url of cluster.members) t.equal((await call(url, 'GET', '/healthz')).status, 200, `${url} is healthy`);
  },
);
