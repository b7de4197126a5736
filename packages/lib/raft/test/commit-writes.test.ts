/**
 * What a member fsyncs: entries, snapshots, a new term or vote; a Ready that only moves the commit index is not
 * written at all (src/ready-order.ts, readyMustSync) until the next write or a clean stop. Three RaftNodes on real LevelDB directories; each storage is wrapped to
 * record how every append was asked for.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { LevelStorage } from '../src/storage/leveldb.js';
import type { HardState } from '../src/types.js';
import { leaderOf } from './helpers/leader.js';
import { RECORDED_IDS, type Register, startRecorded } from './helpers/recording-storage.js';

const ids = RECORDED_IDS;
const start = (dir: string) => startRecorded(dir, { requestTimeoutMs: 5_000 });

t.test(
  'a commit index alone is never written while running, everything else is synced; a clean stop writes it',
  async (t) => {
    const dir = await mkdtemp(join(tmpdir(), 'raft-commit-writes-'));
    t.teardown(() => rm(dir, { recursive: true, force: true }));
    const first = await start(dir);
    const leader = await leaderOf(first.nodes);
    const writes = 40;
    for (let i = 1; i <= writes; i++) t.equal(await leader.propose({ key: `k${i % 7}`, value: i }), i);
    // Let the last commit index reach the followers (next heartbeat).
    await new Promise((r) => setTimeout(r, 200));

    const callsWhileRunning = new Map([...first.storages].map(([id, storage]) => [id, storage.calls.length]));
    for (const n of first.nodes.values()) await n.stop();

    for (const [id, storage] of first.storages) {
      let durable: HardState = { term: 0, vote: null, commit: 0 };
      let wrong = 0;
      let commitOnly = 0;
      const running = callsWhileRunning.get(id)!;
      storage.calls.forEach((call, i) => {
        const hs = call.hardState;
        const newTermOrVote = hs !== null && (hs.term !== durable.term || hs.vote !== durable.vote);
        const mustSync = call.entries > 0 || newTermOrVote;
        if (call.sync !== mustSync) wrong++;
        if (!mustSync && i < running) commitOnly++;
        if (call.sync && hs !== null) durable = hs;
      });
      t.equal(
        wrong,
        0,
        `${id}: every append with entries or a new term/vote is synced, no other (${storage.calls.length} appends)`,
      );
      t.equal(commitOnly, 0, `${id}: no write of a commit index alone while running (it rides with the next write)`);
      t.ok(storage.calls.length - running <= 1, `${id}: at most one unsynced write at the stop, of the commit index`);
      const synced = storage.calls.filter((c) => c.sync).length;
      t.ok(
        synced <= writes + 10,
        `${id}: about one fsync per sequential write, not two (${synced} synced appends for ${writes} writes)`,
      );
      const reopened = new LevelStorage(join(dir, id));
      const stored = (await reopened.load()).hardState;
      await reopened.close();
      t.ok(stored.commit >= writes, `${id}: the stop wrote the commit index it knew (${stored.commit})`);
    }

    // Every member restarts from its directory, and the state machines agree.
    const second = await start(dir);
    t.teardown(async () => {
      for (const n of second.nodes.values()) await n.stop();
    });
    const leader2 = await leaderOf(second.nodes);
    t.equal(await leader2.propose({ key: 'after', value: 1 }), 1);
    for (const id of ids) {
      const value = await second.nodes.get(id)!.read((m) => (m as Register).values.get(`k${writes % 7}`));
      t.equal(value, writes, `${id} holds the last write after the restart`);
    }
  },
);
