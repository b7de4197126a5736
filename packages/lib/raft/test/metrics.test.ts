/**
 * RaftMetrics on a real three-member group (in-process network, in-memory storage): counters, histograms and
 * gauges in the Prometheus text format move as the group elects, takes proposals, applies, fails on a command
 * and snapshots; combineObservers feeds metrics and a user's own hooks at once.
 */
import t from 'tap';
import { ApplyError, RaftNode } from '../src/node.js';
import { combineObservers, RaftMetrics } from '../src/node-metrics.js';
import { MemoryStorage } from '../src/storage/memory.js';
import { LocalNetwork } from '../src/transport/local.js';
import type { StateMachine } from '../src/types.js';

class Counter implements StateMachine<number, number> {
  total = 0;
  apply(by: number): number {
    if (by < 0) throw new RangeError('only up');
    this.total += by;
    return this.total;
  }
  snapshot(): Uint8Array {
    return new TextEncoder().encode(String(this.total));
  }
  restore(data: Uint8Array): void {
    this.total = Number(new TextDecoder().decode(data));
  }
}

/** The value of one series in a Prometheus text rendering (NaN when absent). */
function sample(text: string, series: string): number {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? Number.NaN : Number(line.slice(series.length + 1));
}

t.test('the metrics of each member follow its group', async (t) => {
  const net = new LocalNetwork();
  const ids = ['a', 'b', 'c'];
  const bootstrap = Object.fromEntries(ids.map((id) => [id, `local:${id}`]));
  const metrics = new Map(ids.map((id) => [id, new RaftMetrics()]));
  const seen: string[] = [];
  const nodes = await Promise.all(
    ids.map((id) =>
      RaftNode.start<number, number>({
        id,
        bootstrap,
        storage: new MemoryStorage(),
        transport: net.transport(id),
        stateMachine: new Counter(),
        tickMs: 10,
        snapshotEvery: 5,
        observer: combineObservers(metrics.get(id)!.observer, { applyFailed: (_e, message) => seen.push(message) }),
      }),
    ),
  );
  t.teardown(() => Promise.all(nodes.map((n) => n.stop())));
  nodes.forEach((n, i) => metrics.get(ids[i]!)!.track(n));
  const deadline = Date.now() + 10_000;
  while (!nodes.some((n) => n.isLeader) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
  const leader = nodes.find((n) => n.isLeader)!;
  const follower = nodes.find((n) => !n.isLeader)!;
  for (let i = 0; i < 8; i++) await leader.propose(1);
  await follower.propose(2);
  await t.rejects(leader.propose(-1), ApplyError);
  await follower.readBarrier();

  const text = metrics.get(leader.id)!.render();
  t.equal(sample(text, 'raft_is_leader'), 1, 'the leader says so');
  t.equal(sample(text, 'raft_term'), leader.status().term);
  t.equal(sample(text, 'raft_commit_index'), leader.status().commit);
  t.ok(sample(text, 'raft_applied_entries_total') >= 10, 'applied entries counted');
  t.ok(sample(text, 'raft_proposals_total{outcome="accepted"}') >= 9, 'proposals counted by outcome');
  t.equal(sample(text, 'raft_apply_errors_total'), 1, 'the throwing command counted');
  t.ok(sample(text, 'raft_fsync_seconds_count') > 0, 'fsync latency observed');
  t.ok(sample(text, 'raft_apply_seconds_count') >= 10, 'apply latency observed');
  t.ok(sample(text, 'raft_snapshot_bytes_count') >= 1, 'snapshots observed');
  t.equal(sample(text, 'raft_storage_failed'), 0);
  t.match(text, /# TYPE raft_fsync_seconds histogram/);
  const followerText = metrics.get(follower.id)!.render();
  t.equal(sample(followerText, 'raft_is_leader'), 0);
  t.ok(sample(followerText, 'raft_forwarded_proposals_total') >= 1, 'the follower counted its forwarded proposal');
  t.ok(seen.length >= 1 && seen.every((m) => /only up/.test(m)), 'the user hook saw the apply error too');
  const elections = ids.reduce((sum, id) => sum + sample(metrics.get(id)!.render(), 'raft_elections_total'), 0);
  t.ok(elections >= 1, `elections counted (${elections})`);
});
