/**
 * forwardedResults: a write proposed on a follower is answered with the result the leader sends back once the
 * entry applies there, not only after the follower's own apply; ownWritesApplied() then waits for that apply.
 * Three RaftNodes on real LevelDB directories. The proposing follower is kept in the middle of a slow write (its
 * disk waits SLOW_MS before each append): an entry that arrives meanwhile waits for the next write to be handed
 * out, and so does its apply there, long after the leader and the other follower have committed and applied it.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import type { RaftNode } from '../src/node.js';
import type { AppendOptions, Entry, HardState } from '../src/types.js';
import { leaderOf } from './helpers/leader.js';
import {
  RECORDED_IDS,
  type RecordingStorage,
  startRecorded,
  type Cmd,
  type Register,
} from './helpers/recording-storage.js';

const SLOW_MS = 1_500;

/** A RecordingStorage whose appends wait `delayMs` before they start (a slow disk), once `delayMs` is set. */
function slowAppends(storage: RecordingStorage): { delayMs: number; slowWrites: number } {
  const knob = { delayMs: 0, slowWrites: 0 };
  const append = storage.append.bind(storage);
  storage.append = async (entries: Entry[], hardState: HardState | null, options?: AppendOptions): Promise<void> => {
    if (knob.delayMs > 0 && entries.length > 0) {
      knob.slowWrites++;
      await new Promise((r) => setTimeout(r, knob.delayMs));
    }
    return append(entries, hardState, options);
  };
  return knob;
}

/** Slow the follower's disk and start a write there (a write through the leader), so that it is busy writing. */
async function busyWriting(
  leader: RaftNode<Cmd, number>,
  knob: { delayMs: number; slowWrites: number },
): Promise<void> {
  knob.delayMs = SLOW_MS;
  void leader.propose({ key: 'x', value: 1 });
  const deadline = Date.now() + 5_000;
  while (knob.slowWrites === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
}

async function cluster(t: Test, forwardedResults: boolean) {
  const dir = await mkdtemp(join(tmpdir(), 'raft-forwarded-results-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  let answeredFromLeader = 0;
  const { nodes, storages, machines } = await startRecorded(dir, {
    forwardedResults,
    requestTimeoutMs: 10_000,
    observer: { answeredFromLeader: () => answeredFromLeader++ },
  });
  t.teardown(async () => {
    for (const n of nodes.values()) await n.stop();
  });
  const leader = await leaderOf(nodes);
  t.equal(await leader.propose({ key: 'warm', value: 0 }), 0);
  const followerId = RECORDED_IDS.find((id) => nodes.get(id) !== leader)!;
  const follower = nodes.get(followerId)! as RaftNode<Cmd, number>;
  // The follower's own session is registered before its disk slows down.
  t.equal(await follower.propose({ key: 'warm', value: 1 }), 1);
  const knob = slowAppends(storages.get(followerId)!);
  return { leader, follower, machine: machines.get(followerId)! as Register, knob, answered: () => answeredFromLeader };
}

t.test('with forwardedResults a follower answers from the leader, before its own apply', async (t) => {
  const { leader, follower, machine, knob, answered } = await cluster(t, true);
  await busyWriting(leader, knob);
  t.equal(knob.slowWrites, 1, 'the follower is in the middle of a slow write');
  const before = answered();
  t.equal(await follower.propose({ key: 'k', value: 42 }), 42, 'the answer is the state machine result of the write');
  t.equal(answered() - before, 1, 'answered from the leader result');
  t.equal(machine.values.get('k'), undefined, 'the follower had not applied it yet (its disk is slow)');
  await follower.ownWritesApplied();
  t.equal(machine.values.get('k'), 42, 'ownWritesApplied waited for the follower to apply its answered write');
  t.equal(await follower.read((m) => (m as Register).values.get('k')), 42, 'a linearizable read there sees it too');
});

t.test('without it the follower answers only once it has applied the write itself', async (t) => {
  const { leader, follower, machine, knob, answered } = await cluster(t, false);
  await busyWriting(leader, knob);
  t.equal(knob.slowWrites, 1, 'the follower is in the middle of a slow write');
  t.equal(await follower.propose({ key: 'k', value: 7 }), 7);
  t.equal(machine.values.get('k'), 7, 'applied on the follower by the time it answered');
  t.equal(answered(), 0, 'nothing answered from a leader result');
});
