/**
 * A member whose storage fails never lingers broken. A follower's file limit is lowered under its use while large
 * values are written, so LevelDB fails to open its next file with "Too many open files" (the failure the idle
 * connection attack caused). The member must say so (log, /healthz 503 while it is out), stop taking part, and
 * start again from its durable state in the same process once descriptors are back, then catch up with the leader.
 * Before, it stayed behind for good, answered 500, and /healthz said ok.
 */
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { call, startCluster, until } from '@raftkit/testkit';

t.setTimeout(240_000);

const cluster = await startCluster('kv', { nodes: 3, tickMs: 100 });
t.teardown(() => cluster.down());
const state = (): { members: Array<{ id: string; pid: number }> } =>
  JSON.parse(readFileSync(join(cluster.dataDir, 'cluster.json'), 'utf8')) as {
    members: Array<{ id: string; pid: number }>;
  };
const status = async (
  i: number,
): Promise<{ leader_id: string | null; commit_index: number; applied_index: number } | null> => {
  const a = await call(cluster.members[i]!, 'GET', '/v1/cluster/status', {
    token: cluster.token,
    timeoutMs: 2_000,
  }).catch(() => null);
  return a !== null && a.status === 200
    ? (a.body as { leader_id: string | null; commit_index: number; applied_index: number })
    : null;
};

const leaderId = await until('a leader', async () => (await status(0))?.leader_id ?? null);
const leaderIndex = Number(leaderId.slice(1)) - 1;
const followerIndex = leaderIndex === 0 ? 1 : 0;
const follower = state().members[followerIndex]!;
const memberLog = join(cluster.dataDir, follower.id, 'member.log');

t.test(
  'a follower out of file descriptors fails, says so, restarts from its durable state and catches up',
  async (t) => {
    // The limit is the lowest free descriptor number, so no new file can be opened at all (descriptors above it that
    // are already open stay usable): LevelDB's next log or table file fails.
    const open = new Set(readdirSync(`/proc/${follower.pid}/fd`).map(Number));
    let lowestFree = 0;
    while (open.has(lowestFree)) lowestFree++;
    execFileSync('prlimit', ['--pid', String(follower.pid), `--nofile=${lowestFree}:20000`]);
    const value = 'v'.repeat(200 * 1024);
    let written = 0;
    const writer = (async () => {
      for (let i = 0; i < 400 && !readFileSync(memberLog, 'utf8').includes('storage failed'); i++) {
        const a = await call(cluster.members[leaderIndex]!, 'PUT', `/v1/kv/big-${i % 50}`, {
          token: cluster.token,
          raw: value,
          headers: { 'content-type': 'text/plain' },
        }).catch(() => null);
        if (a?.status === 200) written++;
      }
    })();
    await until(
      'the follower reports its storage failure',
      () => readFileSync(memberLog, 'utf8').includes('storage failed'),
      120_000,
      200,
    );
    t.pass(`the follower reported "storage failed" after ${written} writes`);
    const failing = await call(`${cluster.members[followerIndex]!}`, 'GET', '/healthz', { timeoutMs: 2_000 }).catch(
      () => null,
    );
    // The member may already be restarting (its HTTP side closed); either way it must not say ok.
    t.ok(
      failing === null || failing.status === 503,
      `its /healthz does not say ok while it is out (${failing?.status ?? 'closed'})`,
    );

    // Descriptors are back (the attacker's connections are gone).
    execFileSync('prlimit', ['--pid', String(follower.pid), '--nofile=20000:20000']);
    await writer;
    const after = await call(cluster.members[leaderIndex]!, 'PUT', '/v1/kv/after', {
      token: cluster.token,
      raw: 'done',
      headers: { 'content-type': 'text/plain' },
    });
    t.equal(after.status, 200, 'the cluster takes writes');
    const leaderCommit = (await status(leaderIndex))!.commit_index;
    const caught = await until(
      'the follower catches up',
      async () => {
        const s = await status(followerIndex);
        return s !== null && s.applied_index >= leaderCommit ? s : null;
      },
      90_000,
      250,
    );
    t.ok(
      caught.applied_index >= leaderCommit,
      `applied ${caught.applied_index} >= the leader's commit ${leaderCommit}`,
    );
    t.equal(state().members[followerIndex]!.pid, follower.pid, 'in the same process (the CLI still reaches it by pid)');
    const health = await call(cluster.members[followerIndex]!, 'GET', '/healthz');
    t.equal(health.status, 200, '/healthz is ok again');
    const read = await call(cluster.members[followerIndex]!, 'GET', '/v1/kv/after', { token: cluster.token });
    t.equal(read.status, 200, 'a linearizable read through it answers');
    t.equal((read.body as { value?: string }).value, 'done');
    t.match(readFileSync(memberLog, 'utf8'), /member restarted from its durable state/, 'the restart is in its log');
    const ps = execFileSync('ps', ['-o', 'pid=', '-p', String(follower.pid)])
      .toString()
      .trim();
    t.equal(Number(ps), follower.pid, 'the process is alive');
  },
);
