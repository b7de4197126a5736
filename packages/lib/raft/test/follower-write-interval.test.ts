/**
 * followerWriteIntervalMs (and leaderWriteIntervalMs, the same for the leader): a follower starts a log write no
 * sooner than the interval after its previous one, so appends that arrive meanwhile share a write; nothing is lost
 * or reordered, and what commits meanwhile applies.
 * Three RaftNodes on real LevelDB directories, each storage recording when every append was asked for.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { leaderOf } from './helpers/leader.js';
import { RECORDED_IDS, startRecorded, type Register } from './helpers/recording-storage.js';

const ids = RECORDED_IDS;
const INTERVAL_MS = 40;

for (const role of ['follower', 'leader'] as const) {
  t.test(`${role}s write at most once an interval; every write applies everywhere, in order`, async (t) => {
    const dir = await mkdtemp(join(tmpdir(), 'raft-follower-interval-'));
    t.teardown(() => rm(dir, { recursive: true, force: true }));
    const { nodes, storages } = await startRecorded(dir, {
      requestTimeoutMs: 10_000,
      ...(role === 'follower' ? { followerWriteIntervalMs: INTERVAL_MS } : { leaderWriteIntervalMs: INTERVAL_MS }),
    });
    t.teardown(async () => {
      for (const n of nodes.values()) await n.stop();
    });
    const leader = await leaderOf(nodes);
    t.equal(await leader.propose({ key: 'warm', value: 0 }), 0);
    const followers = ids.filter((id) => nodes.get(id) !== leader);
    const held = role === 'follower' ? followers : ids.filter((id) => nodes.get(id) === leader);
    const from = new Map(held.map((id) => [id, storages.get(id)!.calls.length]));

    // 60 writes, a few at a time, each batch on its own turn: without the interval a follower would write about
    // once per batch.
    const writes = 60;
    const answers: Array<Promise<number>> = [];
    for (let i = 1; i <= writes; i++) {
      answers.push(leader.propose({ key: `k${i % 5}`, value: i }));
      if (i % 3 === 0) await new Promise((r) => setImmediate(r));
    }
    t.same(
      await Promise.all(answers),
      Array.from({ length: writes }, (_, i) => i + 1),
      'every write answered with its own result',
    );

    // Read on each follower first: linearizable, so it reflects every write above, and a follower applies only
    // entries it has begun to write, so its storage has seen them all by then.
    for (const id of followers) {
      const values = await nodes.get(id)!.read((m) => [...(m as Register).values.entries()].sort());
      t.same(
        values,
        [
          ['k0', 60],
          ['k1', 56],
          ['k2', 57],
          ['k3', 58],
          ['k4', 59],
          ['warm', 0],
        ],
        `${id} holds the last value of every key`,
      );
    }
    for (const id of held) {
      const calls = storages
        .get(id)!
        .calls.slice(from.get(id))
        .filter((c) => c.entries > 0);
      t.ok(calls.length > 0, `${id} wrote entries`);
      let tooSoon = 0;
      for (let i = 1; i < calls.length; i++) if (calls[i]!.at - calls[i - 1]!.at < INTERVAL_MS - 1) tooSoon++;
      t.equal(
        tooSoon,
        0,
        `${id}: no write started within ${INTERVAL_MS} ms of the previous one (${calls.length} writes)`,
      );
      t.ok(
        calls.length < writes / 3,
        `${id}: appends shared writes (${calls.length} writes for ${writes / 3} batches)`,
      );
    }
    if (role === 'leader') {
      const leaderId = held[0]!;
      t.ok(
        followers.every((id) => storages.get(id)!.calls.filter((c) => c.entries > 0).length >= 1),
        `followers of ${leaderId} wrote`,
      );
    }
  });
}
