/**
 * The dashboard on a grouped service (a 3-member log cluster): a member that stops answering (SIGSTOP) keeps its
 * place in every group row, from its last answered list with that list's age, instead of the rows emptying and
 * refilling between polls; once it answers again the rows are fresh (age 0).
 */
import { join } from 'node:path';
import t from 'tap';
import { reservePorts } from '@raftkit/testkit';
import { startDashboard } from '../src/dashboard/server.js';
import { sleep, TestCluster, until } from './helpers/cluster.js';

t.setTimeout(120_000);

const ports = await reservePorts();
const cluster = new TestCluster(ports.base, { service: 'log', nodes: 3 });
let stopped: number | null = null;
t.teardown(async () => {
  if (stopped !== null) {
    try {
      process.kill(stopped, 'SIGCONT');
    } catch {
      // gone
    }
  }
  await cluster.teardown();
  ports.release();
});
await cluster.up();

interface Group {
  name: string;
  leader: string | null;
  ageMs: number;
  members: Array<{ id: string }>;
}

t.test('a silent member keeps its place in the group rows, aged; the rows never empty', async (t) => {
  const d = await startDashboard({
    dataRoot: cluster.root,
    jepsenDir: join(cluster.root, 'none'),
    token: cluster.token,
    port: ports.base + 16,
  });
  t.teardown(() => d.close());
  const groups = async (): Promise<{ members: Array<{ id: string; state: string }>; groups: Group[] }> => {
    const res = await fetch(`http://127.0.0.1:${d.port}/api/overview`, {
      headers: { authorization: `Bearer ${cluster.token}` },
      signal: AbortSignal.timeout(15_000),
    });
    return (
      (await res.json()) as { clusters: Array<{ members: Array<{ id: string; state: string }>; groups: Group[] }> }
    ).clusters[0]!;
  };
  const before = await until(
    'every group with a leader and its replicas',
    async () => {
      const v = await groups();
      return v.groups.length > 0 && v.groups.every((g) => g.leader !== null && g.members.length === 3 && g.ageMs === 0)
        ? v.groups
        : null;
    },
    30_000,
  );
  const quiet = 'n3';
  stopped = cluster.pid(quiet)!;
  process.kill(stopped, 'SIGSTOP');
  await until(
    `${quiet} paused`,
    async () => (await groups()).members.find((m) => m.id === quiet)?.state === 'paused',
    10_000,
  );
  let aged = 0;
  for (let i = 0; i < 5; i++) {
    const v = await groups();
    t.same(
      v.groups.map((g) => g.name),
      before.map((g) => g.name),
      `poll ${i + 1}: the same groups`,
    );
    t.ok(
      v.groups.every((g) => g.members.some((m) => m.id === quiet)),
      `poll ${i + 1}: ${quiet} still in every row`,
    );
    aged = Math.max(aged, ...v.groups.map((g) => g.ageMs));
    await sleep(1_000);
  }
  t.ok(aged >= 1_000, `the rows say how old ${quiet}'s list is (${aged} ms)`);
  process.kill(stopped, 'SIGCONT');
  stopped = null;
  await until('fresh rows once it answers', async () => (await groups()).groups.every((g) => g.ageMs === 0), 15_000);
});
