/**
 * RaftNode writes the hard state only when its term or vote is new (and, unsynced, when it stops): a newer commit
 * index alone stays in memory. Written with every append, the hard state's key sat beside the log's in every
 * LevelDB table, so that the tables of an append-only log overlapped and compactions kept rewriting it.
 * Three RaftNodes on real LevelDB directories, each storage recording every append.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { LevelStorage } from '../src/storage/leveldb.js';
import { leaderOf } from './helpers/leader.js';
import { RECORDED_IDS, startRecorded } from './helpers/recording-storage.js';

t.test('a commit index alone is not written; a new term or vote is, and the commit index at a clean stop', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'raft-hard-state-writes-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const { nodes, storages } = await startRecorded(dir, { requestTimeoutMs: 10_000 });
  let stopped = false;
  t.teardown(async () => {
    if (!stopped) for (const n of nodes.values()) await n.stop();
  });
  const leader = await leaderOf(nodes);
  let settled = new Map<string, number>();
  for (let i = 1; i <= 30; i++) {
    t.equal(await leader.propose({ key: `k${i % 3}`, value: i }), i);
    if (i === 10) settled = new Map(RECORDED_IDS.map((id) => [id, nodes.get(id)!.status().commit]));
  }
  // A linearizable read on each member: it has taken every write above in a Ready of its own by then.
  for (const node of nodes.values()) await node.read(() => null);

  for (const id of RECORDED_IDS) {
    const calls = storages.get(id)!.calls;
    const withEntries = calls.filter((c) => c.entries > 0);
    t.ok(withEntries.length >= 10, `${id} wrote its log (${withEntries.length} writes)`);
    // Each written hard state has a term or vote the one before it did not have.
    let previous: { term: number; vote: string | null } = { term: 0, vote: null };
    let repeated = 0;
    for (const c of calls) {
      if (c.hardState === null) continue;
      if (c.hardState.term === previous.term && c.hardState.vote === previous.vote) repeated++;
      previous = c.hardState;
    }
    t.equal(repeated, 0, `${id}: every hard state written carried a new term or vote`);
    t.ok(withEntries.filter((c) => c.hardState !== null).length <= 2, `${id}: the writes of steady work carried no hard state`);
  }

  for (const n of nodes.values()) await n.stop();
  stopped = true;
  for (const id of RECORDED_IDS) {
    const storage = new LevelStorage(join(dir, id));
    const { hardState } = await storage.load();
    await storage.close();
    // No term or vote changed after the election, so only the stop can have written a commit index this far on.
    t.ok(hardState.commit >= settled.get(id)! && settled.get(id)! > 3, `${id}: a clean stop wrote the commit index it knew (${hardState.commit} >= ${settled.get(id)})`);
  }
});
