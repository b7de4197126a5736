/**
 * Snapshots and membership on a real 5-member kv cluster that snapshots (and compacts its log) every 50 entries,
 * driven through the `cluster` CLI: a member whose data was wiped is restored by InstallSnapshot; add-node,
 * transfer-leader and remove-node work while clients keep writing, and no acknowledged write is lost.
 */
import { existsSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { freeBases, memberRunning, TestCluster, until } from './helpers/cluster.js';
import { missingWrites, Traffic } from './helpers/traffic.js';

t.setTimeout(150_000);

const SNAPSHOT_EVERY = 50;
const [base] = await freeBases(3, 1);
const cluster = new TestCluster(base!, { nodes: 5, tickMs: 50, snapshotEvery: SNAPSHOT_EVERY });
let traffic: Traffic | null = null;
t.teardown(async () => {
  await traffic?.stop();
  await cluster.teardown();
});
await cluster.up();

/** A counter from a member's /metrics (0 when absent). */
async function metric(id: string, line: RegExp): Promise<number> {
  const m = await cluster.call(id, 'GET', '/metrics');
  return Number(line.exec(m.text)?.[1] ?? 0);
}

t.test('a member whose data was wiped is restored by InstallSnapshot', async (t) => {
  t.equal(cluster.state().snapshotEvery, SNAPSHOT_EVERY, 'up recorded --snapshot-every in cluster.json');
  const { id: leader } = await cluster.leader();
  const wiped = cluster.ids().find((id) => id !== leader)!;
  const before = (await cluster.status(wiped))!;
  t.equal((await cluster.cli('kill', wiped)).code, 0, `kill ${wiped}`);

  // Enough writes that the leader snapshots and compacts past everything the dead member has.
  const writers = new Traffic(
    cluster
      .ids()
      .filter((id) => id !== wiped)
      .map((id) => cluster.url(id)),
    cluster.token,
    'wipe',
    4,
    0,
  );
  await writers.progress(3 * SNAPSHOT_EVERY);
  await writers.stop();
  t.same(writers.errors, [], 'the writes went through');
  const compacted = await until('the leader to compact its log', async () => {
    const s = await cluster.status(leader);
    return s !== null && s.snapshot_index > before.last_log_index + SNAPSHOT_EVERY ? s : null;
  });
  t.ok(
    compacted.snapshot_index > before.last_log_index,
    `the leader's log starts after ${compacted.snapshot_index}, past ${wiped}'s last entry ${before.last_log_index}`,
  );

  const db = join(cluster.dataDir, wiped, 'db');
  t.ok(existsSync(db), `${wiped} has a database to lose`);
  rmSync(db, { recursive: true, force: true });
  const r = await cluster.cli('restart', wiped);
  t.equal(r.code, 0, `cluster restart ${wiped} on an empty data directory`);

  const target = compacted.commit_index;
  const restored = await until(
    `${wiped} to be restored`,
    async () => {
      const s = await cluster.status(wiped);
      return s !== null && s.applied_index >= target ? s : null;
    },
    30_000,
  );
  t.ok(restored.snapshot_index > 0, `it was sent a snapshot (snapshot_index ${restored.snapshot_index})`);
  t.ok(restored.snapshot_index > before.last_log_index, 'one that covers what it had lost');
  t.ok(restored.leader_id !== null && restored.leader_id !== wiped, `it follows the leader (${restored.leader_id})`);
  t.ok((await metric(wiped, /^raft_snapshot_bytes_count (\d+)$/m)) >= 1, 'its /metrics counts the snapshot it saved');
  t.same(
    await missingWrites(cluster, wiped, writers.acked, 'serializable'),
    [],
    `it serves all ${writers.acked.length} writes from local state`,
  );
  t.ok((await metric(leader, /^raft_snapshot_bytes_count (\d+)$/m)) >= 2, 'the leader took snapshots along the way');
});

t.test('add-node, transfer-leader and remove-node under client traffic', async (t) => {
  const first = await cluster.leader();
  traffic = new Traffic(
    cluster.ids().map((id) => cluster.url(id)),
    cluster.token,
    'members',
    2,
  );
  await traffic.progress(20);

  // add-node: n6 starts, joins as a learner, is promoted once caught up.
  let mark = Date.now();
  const added = await cluster.cli('add-node');
  t.equal(added.code, 0, `cluster add-node (stderr: ${added.stderr.trim()})`);
  t.match(added.stdout, new RegExp(`^added n6: http://127\\.0\\.0\\.1:${base! + 106}$`, 'm'));
  t.ok(memberRunning(cluster.pid('n6'), cluster.dataDir), 'n6 runs');
  const withSix = await until('every member to count n6 as a voter', async () => {
    const all = await cluster.statuses();
    return [...all.values()].every((s) => s !== null && s.voters.includes('n6') && s.learners.length === 0)
      ? all
      : null;
  });
  t.same([...withSix.get(first.id)!.voters].sort(), ['n1', 'n2', 'n3', 'n4', 'n5', 'n6'], 'six voters');
  await traffic.progress(20);
  t.ok(traffic.ackedSince(mark) >= 20, 'writes went on while n6 joined');
  const leaderView = (await cluster.status((await cluster.leader()).id))!;
  const six = leaderView.peers.find((p) => p.id === 'n6');
  t.ok(
    six !== undefined && !six.learner && six.match_index > 0,
    `the leader replicates to n6 as a voter (match_index ${six?.match_index})`,
  );
  const joined = await until('n6 to catch up', async () => {
    const s = await cluster.status('n6');
    return s !== null && s.applied_index >= leaderView.commit_index ? s : null;
  });
  t.ok(joined.snapshot_index > 0, 'n6 started from a snapshot (the log was compacted long before it joined)');
  t.same(
    await missingWrites(
      cluster,
      'n6',
      traffic.acked.filter((a) => a.revision <= leaderView.commit_index).slice(0, 200),
      'serializable',
    ),
    [],
    'n6 serves the writes made before and while it joined',
  );

  // transfer-leader: to the newcomer.
  mark = Date.now();
  const moved = await cluster.cli('transfer-leader', '6');
  t.equal(moved.code, 0, `cluster transfer-leader 6 (stderr: ${moved.stderr.trim()})`);
  t.match(moved.stdout, /leader is now n6/);
  const now = await cluster.leader();
  t.equal(now.id, 'n6', 'every member agrees n6 leads');
  t.ok(now.term > first.term, 'in a later term');
  await traffic.progress(20);
  t.ok(traffic.ackedSince(mark) >= 20, 'writes went on through the transfer');
  const again = await cluster.cli('transfer-leader', 'n6');
  t.equal(again.code, 0, 'transfer-leader to the leader is a no-op');
  t.match(again.stdout, /n6 already leads/);

  // remove-node: the old leader, now a follower.
  mark = Date.now();
  const gone = first.id;
  const pid = cluster.pid(gone);
  const removed = await cluster.cli('remove-node', gone);
  t.equal(removed.code, 0, `cluster remove-node ${gone} (stderr: ${removed.stderr.trim()})`);
  t.match(removed.stdout, new RegExp(`removed ${gone}`));
  t.notOk(memberRunning(pid, cluster.dataDir), `${gone} was stopped`);
  const remaining = cluster.ids();
  t.notOk(remaining.includes(gone), 'cluster.json marks it removed');
  const five = await until(`every member to drop ${gone}`, async () => {
    const all = await cluster.statuses(remaining);
    return [...all.values()].every((s) => s !== null && !s.voters.includes(gone)) ? all : null;
  });
  t.same([...five.get('n6')!.voters].sort(), remaining.slice().sort(), 'five voters again');
  t.notOk(
    five.get('n6')!.peers.some((p) => p.id === gone),
    `the leader no longer replicates to ${gone}`,
  );
  await traffic.progress(20);
  t.ok(traffic.ackedSince(mark) >= 20, 'writes went on through the removal');
  const status = await cluster.cli('status', '--json');
  t.same(
    (JSON.parse(status.stdout) as Array<{ id: string }>).map((r) => r.id).sort(),
    remaining.slice().sort(),
    `cluster status no longer lists ${gone}`,
  );
  const restartRemoved = await cluster.cli('restart', gone);
  t.equal(restartRemoved.code, 1, 'restart of a removed member is refused');
  t.match(restartRemoved.stderr, new RegExp(`cluster: ${gone} was removed from the cluster`));

  // remove-node: the current leader itself. It leads until its removal commits (followers must keep answering
  // it), then steps down and the others elect a new leader.
  mark = Date.now();
  const leaderNow = await cluster.leader();
  const removedLeader = await cluster.cli('remove-node', leaderNow.id);
  t.equal(
    removedLeader.code,
    0,
    `cluster remove-node ${leaderNow.id}, the leader (stderr: ${removedLeader.stderr.trim()})`,
  );
  const successor = await cluster.leader();
  t.not(successor.id, leaderNow.id, 'another member leads');
  await traffic.progress(20);
  t.ok(traffic.ackedSince(mark) >= 20, 'writes went on through removing the leader');

  await traffic.stop();
  const { acked, errors } = traffic;
  traffic = null;
  t.ok(acked.length >= 80, `${acked.length} writes acknowledged`);
  t.same(errors, [], 'no write failed (the client retried across members)');
  t.same(
    (await missingWrites(cluster, successor.id, acked)).slice(0, 10),
    [],
    'every acknowledged write is there (linearizable reads on the leader)',
  );
});
