/**
 * Idle connections cannot disable a member: more idle TCP connections to one member's HTTP port than its file
 * limit allows (held by child processes, each under its own limit), while 200 values of 200 KB are written
 * through another member. Without a connection cap the member ran out of descriptors, LevelDB failed with "Too many
 * open files" and the member stayed behind; with it, the member keeps up, and once the connections are gone its
 * applied index reaches the leader's commit index, it answers a linearizable read, a write and /healthz.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { call, startCluster, until } from '@raftkit/testkit';

t.setTimeout(180_000);

const WRITES = 200;
const VALUE_BYTES = 200 * 1024;
/** Sockets one child holds: well under a test process's own file limit. */
const PER_CHILD = 8_000;

/** A child that opens `count` idle connections (at most 256 connecting at once), reports, and holds them. */
const HOLDER = `
const net = require('node:net');
const [host, port, count] = [process.argv[1], Number(process.argv[2]), Number(process.argv[3])];
const sockets = [];
let started = 0, pending = 0, opened = 0, open = 0, failed = 0, closedByServer = 0;
const next = () => {
  while (pending < 256 && started < count) {
    started++; pending++;
    const s = net.connect({ host, port });
    let connected = false;
    s.on('connect', () => { connected = true; pending--; opened++; open++; next(); });
    s.on('error', () => {});
    s.on('close', () => { if (connected) { open--; closedByServer++; } else { pending--; failed++; next(); } });
    sockets.push(s);
  }
};
const report = () => process.stdout.write(JSON.stringify({ started, pending, opened, open, failed, closedByServer }) + '\\n');
setInterval(report, 250);
next();
const stop = () => { for (const s of sockets) s.destroy(); report(); process.exit(0); };
process.stdin.on('end', stop);
process.stdin.resume();
setTimeout(stop, 150000);
`;

interface Progress {
  started: number;
  pending: number;
  opened: number;
  open: number;
  failed: number;
  closedByServer: number;
}

function holder(host: string, port: number, count: number): { child: ChildProcess; progress: () => Progress } {
  const child = spawn(process.execPath, ['-e', HOLDER, host, String(port), String(count)], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  let last: Progress = { started: 0, pending: 0, opened: 0, open: 0, failed: 0, closedByServer: 0 };
  let buffered = '';
  child.stdout!.on('data', (chunk: Buffer) => {
    buffered += chunk.toString('utf8');
    const lines = buffered.split('\n');
    buffered = lines.pop()!;
    for (const line of lines) if (line.length > 0) last = JSON.parse(line) as Progress;
  });
  return { child, progress: () => last };
}

/** The soft limit on open files of process `pid`. */
function fileLimitOf(pid: number): number {
  const m = /^Max open files\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/limits`, 'utf8'));
  if (m === null) throw new Error(`no file limit for pid ${pid}`);
  return Number(m[1]);
}

type Status = { leader_id: string | null; commit_index: number; applied_index: number };

t.test('a member holding more idle connections than its file limit keeps up and serves', async (t) => {
  const cluster = await startCluster('kv', { nodes: 3 });
  t.teardown(() => cluster.down());
  const status = async (url: string): Promise<Status | null> => {
    const a = await call(url, 'GET', '/v1/cluster/status', { token: cluster.token, timeoutMs: 5_000 }).catch(
      () => null,
    );
    return a?.status === 200 ? (a.body as unknown as Status) : null;
  };
  const leader = await until('a leader', async () => (await status(cluster.members[0]!))?.leader_id ?? null);
  const ids = ['n1', 'n2', 'n3'];
  const leaderUrl = cluster.members[ids.indexOf(leader)]!;
  const victimIndex = ids.findIndex((id) => id !== leader);
  const victim = ids[victimIndex]!;
  const victimUrl = cluster.members[victimIndex]!;
  const state = JSON.parse(readFileSync(join(cluster.dataDir, 'cluster.json'), 'utf8')) as {
    members: Array<{ id: string; pid: number }>;
  };
  const limit = fileLimitOf(state.members.find((m) => m.id === victim)!.pid);
  t.ok(limit <= 65_536, `the member's file limit (${limit}) is one a few children can exceed`);
  const total = limit + 1_000;

  const url = new URL(victimUrl);
  const holders = Array.from({ length: Math.ceil(total / PER_CHILD) }, (_, i) =>
    holder(url.hostname, Number(url.port), Math.min(PER_CHILD, total - i * PER_CHILD)),
  );
  const stopHolders = async (): Promise<void> => {
    await Promise.all(
      holders.map(
        ({ child }) =>
          new Promise<void>((resolve) => {
            if (child.exitCode !== null || child.signalCode !== null) return resolve();
            child.once('exit', () => resolve());
            child.stdin!.end();
            setTimeout(() => child.kill('SIGKILL'), 5_000).unref();
          }),
      ),
    );
  };
  t.teardown(stopHolders);
  const sum = (): Progress =>
    holders
      .map((h) => h.progress())
      .reduce((a, b) => ({
        started: a.started + b.started,
        pending: a.pending + b.pending,
        opened: a.opened + b.opened,
        open: a.open + b.open,
        failed: a.failed + b.failed,
        closedByServer: a.closedByServer + b.closedByServer,
      }));
  // Every connection attempted, and the ones still connecting given up on after a while (a full backlog).
  await until(
    'the idle connections are opened',
    () => {
      const p = sum();
      return p.started === total && p.pending < 300;
    },
    40_000,
    250,
  ).catch(() => undefined);
  const attack = sum();
  t.comment(`idle connections to ${victim}: ${JSON.stringify(attack)} (file limit ${limit})`);
  t.ok(
    attack.opened + attack.failed >= limit,
    `more connections attempted than the member's file limit (${attack.opened + attack.failed} of ${total})`,
  );

  // 200 values of 200 KB through the leader while the idle connections are held.
  const value = 'v'.repeat(VALUE_BYTES);
  let written = 0;
  const writer = async (first: number): Promise<void> => {
    for (let i = first; i < WRITES; i += 8) {
      const a = await until(
        `write ${i}`,
        async () => {
          const r = await call(leaderUrl, 'PUT', `/v1/kv/big-${i}`, {
            token: cluster.token,
            raw: value,
            headers: { 'content-type': 'text/plain' },
            timeoutMs: 10_000,
          });
          return r.status === 200 ? r : null;
        },
        30_000,
      );
      if (a.status === 200) written++;
    }
  };
  await Promise.all(Array.from({ length: 8 }, (_, i) => writer(i)));
  t.equal(written, WRITES, `${WRITES} values of ${VALUE_BYTES} bytes written through the leader`);
  t.comment(`after the writes: ${JSON.stringify(sum())}`);

  await stopHolders();
  const target = (await status(leaderUrl))!.commit_index;
  await until(
    `${victim} applies up to the leader's commit index ${target}`,
    async () => {
      const s = await status(victimUrl);
      return s !== null && s.applied_index >= target;
    },
    30_000,
  );
  t.pass(`${victim} caught up to index ${target}`);
  const read = await call(victimUrl, 'GET', `/v1/kv/big-${WRITES - 1}`, { token: cluster.token, timeoutMs: 10_000 });
  t.equal(read.status, 200, `${victim} answers a linearizable read`);
  t.equal((read.body.value as string | undefined)?.length, VALUE_BYTES, 'with the whole value');
  const write = await call(victimUrl, 'PUT', '/v1/kv/after-attack', {
    token: cluster.token,
    raw: 'ok',
    headers: { 'content-type': 'text/plain' },
    timeoutMs: 10_000,
  });
  t.equal(write.status, 200, `${victim} takes a write`);
  const health = await call(victimUrl, 'GET', '/healthz', { timeoutMs: 5_000 });
  t.equal(health.status, 200, `${victim} /healthz answers`);
  t.equal(health.body.status, 'ok', `${victim} is healthy`);
});
