/**
 * The deterministic simulator (sim/): its building blocks, its invariant checker, exact replay of a seed, and a
 * batch of seeds. The big runs are `node dist/sim/run.js --seeds 500` and `node dist/sim/mutations.js`.
 */
import t from 'tap';
import type { CoreStatus } from '../src/core.js';
import type { Entry, HardState, Message, Ready } from '../src/types.js';
import { configFromSeed } from '../sim/config.js';
import { SharedSync, SimDisk } from '../sim/disk.js';
import { Checker, SimFailure } from '../sim/invariants.js';
import { loadHistoryChecker } from '../sim/linearizability.js';
import { SimNetwork } from '../sim/network.js';
import { EventQueue } from '../sim/queue.js';
import { Random } from '../sim/random.js';
import { runSimulation } from '../sim/simulation.js';

t.test('the event queue runs events by time, then in the order they were scheduled', async (t) => {
  const q = new EventQueue();
  const seen: string[] = [];
  q.at(5, () => seen.push('b'));
  q.at(1, () => seen.push('a'));
  q.at(5, () => seen.push('c'));
  q.at(9, () => seen.push('e'));
  q.at(5, () => q.after(0, () => seen.push('d'))); // scheduled later at the same time: runs after b and c
  for (let e = q.pop(); e !== undefined; e = q.pop()) e.run();
  t.same(seen, ['a', 'b', 'c', 'd', 'e']);
  t.equal(q.now, 9);
});

t.test('the PRNG is a pure function of its seed', async (t) => {
  const draw = (seed: number): number[] => {
    const r = new Random(seed);
    return [r.next(), r.int(3, 9), r.below(100), r.fork().next()];
  };
  t.same(draw(42), draw(42));
  t.not(JSON.stringify(draw(42)), JSON.stringify(draw(43)));
  const r = new Random(7);
  const seen = new Set<number>();
  for (let i = 0; i < 1000; i++) seen.add(r.int(3, 5));
  t.same([...seen].sort(), [3, 4, 5], 'int(lo, hi) covers exactly lo..hi');
});

function heartbeat(from: string, to: string): Message {
  return { type: 'heartbeat', from, to, term: 1, commit: 0, round: 0 };
}

t.test('the network cuts links one way or both, and heals partitions independently', async (t) => {
  const q = new EventQueue();
  const got: string[] = [];
  const net = new SimNetwork(q, new Random(1), { drop: 0, duplicate: 0, minDelay: 1, maxDelay: 2 }, 64, (m) =>
    got.push(`${m.from}>${m.to}`),
  );
  const drain = (): void => {
    for (let e = q.pop(); e !== undefined; e = q.pop()) e.run();
  };
  net.cut([['a', 'b']]); // one way
  net.send(heartbeat('a', 'b'));
  net.send(heartbeat('b', 'a'));
  drain();
  t.same(got, ['b>a'], 'a->b is cut, b->a still delivered');
  net.cut([['a', 'b']]); // a second partition over the same link
  net.restore([['a', 'b']]);
  got.length = 0;
  net.send(heartbeat('a', 'b'));
  drain();
  t.same(got, [], 'still cut while the other partition lasts');
  net.restore([['a', 'b']]);
  net.send(heartbeat('a', 'b'));
  drain();
  t.same(got, ['a>b'], 'healed');
  // A message in flight when a partition starts is lost too.
  got.length = 0;
  net.send(heartbeat('a', 'b'));
  net.cut([['a', 'b']]);
  drain();
  t.same(got, []);
});

t.test('snapshots travel in chunks: reassembled intact, or lost entirely when a chunk is lost', async (t) => {
  const data = Uint8Array.from({ length: 1000 }, (_, i) => i % 251);
  const snap: Message = {
    type: 'snapshot',
    from: 'a',
    to: 'b',
    term: 1,
    snapshot: { meta: { index: 5, term: 1, time: 0, config: { voters: ['a', 'b'], learners: [] } }, data },
  };
  const deliver = (drop: number, seed: number): { received: Uint8Array[]; chunks: number } => {
    const q = new EventQueue();
    const received: Uint8Array[] = [];
    const net = new SimNetwork(q, new Random(seed), { drop, duplicate: 0.3, minDelay: 1, maxDelay: 20 }, 64, (m) => {
      if (m.type === 'snapshot') received.push(m.snapshot.data);
    });
    net.send(snap);
    for (let e = q.pop(); e !== undefined; e = q.pop()) e.run();
    return { received, chunks: net.stats.chunksSent };
  };
  const ok = deliver(0, 1);
  t.equal(ok.received.length, 1, 'delivered once even though chunks were duplicated and reordered');
  t.same(ok.received[0], data);
  t.ok(ok.chunks >= 16, 'sent as 16 chunks (plus duplicates)');
  let lost = 0;
  for (let seed = 1; seed <= 20; seed++) lost += deliver(0.05, seed).received.length === 0 ? 1 : 0;
  t.ok(lost > 0, 'with 5% chunk loss some 16-chunk snapshots are lost whole');
});

function entry(index: number, term: number, byte = 0): Entry {
  return { index, term, time: index, kind: 'command', data: Uint8Array.of(byte) };
}

t.test('group commit: the groups of a process share one sync per round', async (t) => {
  const q = new EventQueue();
  const device = new SharedSync(q, new Random(5), 1, 2);
  const disks = [0, 1, 2].map(() => new SimDisk(device, new Random(5), () => {}));
  const done: number[] = [];
  disks.forEach((disk, i) => {
    disk.append([entry(1, 1, i)], null);
    disk.sync(() => done.push(i));
  });
  t.equal(device.rounds, 1, 'three requests at one instant: one sync');
  q.pop()!.run();
  t.same(done, [0, 1, 2], 'one completion makes all three durable');
  t.ok(disks.every((d) => d.durable.entries.length === 1));
  // While a round is in flight, requests wait for the next one, together.
  disks[0]!.append([entry(2, 1)], null);
  disks[0]!.sync(() => done.push(10));
  q.after(0.1, () => {
    disks[1]!.append([entry(2, 1)], null);
    disks[1]!.sync(() => done.push(11));
    disks[2]!.append([entry(2, 1)], null);
    disks[2]!.sync(() => done.push(12));
  });
  for (let e = q.pop(); e !== undefined; e = q.pop()) e.run();
  t.same(done.slice(3), [10, 11, 12]);
  t.equal(device.rounds, 3, 'the two waiting requests shared the third sync');
  t.equal(device.requests, 6);
});

t.test('the disk makes writes durable only at sync; a crash loses what was not synced', async (t) => {
  const q = new EventQueue();
  const changes: Array<[HardState, HardState]> = [];
  const device = new SharedSync(q, new Random(3), 1, 2);
  const disk = new SimDisk(device, new Random(3), (a, b) => changes.push([a, b]));
  disk.append([entry(1, 1), entry(2, 1)], { term: 1, vote: 'a', commit: 0 });
  t.equal(disk.durable.entries.length, 0, 'not durable before the sync');
  let synced = false;
  disk.sync(() => (synced = true));
  for (let e = q.pop(); e !== undefined; e = q.pop()) e.run();
  t.ok(synced);
  t.equal(disk.durable.entries.length, 2);
  t.same(disk.durable.hardState, { term: 1, vote: 'a', commit: 0 });
  t.equal(changes.length, 1);
  // A conflicting append truncates; then a crash before the sync loses it (or keeps a prefix of whole writes).
  disk.append([entry(2, 2), entry(3, 2)], null);
  disk.sync(() => t.fail('a sync scheduled before a crash never completes'));
  device.crash();
  disk.crash();
  for (let e = q.pop(); e !== undefined; e = q.pop()) e.run();
  const terms = disk.durable.entries.map((e) => e.term);
  t.ok(JSON.stringify(terms) === '[1,1]' || JSON.stringify(terms) === '[1,2,2]', `whole writes only: ${terms}`);
  // A snapshot drops the entries it covers, and everything when the log does not match at its index.
  disk.saveSnapshot({
    meta: { index: 1, term: 1, time: 1, config: { voters: ['a'], learners: [] } },
    data: new Uint8Array(),
  });
  disk.sync(() => {});
  for (let e = q.pop(); e !== undefined; e = q.pop()) e.run();
  t.same(
    disk.durable.entries.map((e) => e.index),
    terms.length === 2 ? [2] : [2, 3],
  );
});

function status(id: string, role: CoreStatus['role'], term: number, commit = 0): CoreStatus {
  return {
    id,
    role,
    term,
    vote: null,
    leader: role === 'leader' ? id : null,
    commit,
    applied: 0,
    firstIndex: 1,
    lastIndex: 0,
    snapshotIndex: 0,
    config: { voters: ['a', 'b', 'c'], learners: [] },
    peers: [],
    transferee: null,
    quiesced: false,
  };
}

function ready(entries: Entry[], leaderTerm?: number): Ready {
  return {
    softState: leaderTerm === undefined ? null : { leader: 'x', role: 'leader', term: leaderTerm },
    hardState: null,
    snapshot: null,
    entries,
    messages: [],
    committed: [],
    readStates: [],
    droppedProposals: 0,
  };
}

/** The invariant a SimFailure thrown by `f` names, or null when `f` passes. */
function caught(f: () => void): string | null {
  try {
    f();
    return null;
  } catch (e) {
    if (e instanceof SimFailure) return e.invariant;
    throw e;
  }
}

const empty = { hardState: { term: 0, vote: null, commit: 0 }, snapshot: null, entries: [] };

t.test('the checker catches each kind of violation', async (t) => {
  t.equal(
    caught(() => {
      const c = new Checker();
      c.observe('a', status('a', 'leader', 3));
      c.observe('b', status('b', 'leader', 3));
    }),
    'election-safety',
  );
  t.equal(
    caught(() => {
      const c = new Checker();
      for (const id of ['a', 'b']) c.onStart(id, empty);
      c.onReady('a', ready([entry(1, 1, 7), entry(2, 2, 8)]));
      c.onReady('b', ready([entry(1, 1, 9), entry(2, 2, 8)])); // same (2, 2), different entry before it
    }),
    'log-matching',
  );
  t.equal(
    caught(() => {
      const c = new Checker();
      for (const id of ['a', 'b']) c.onStart(id, empty);
      c.onReady('a', ready([entry(1, 1, 7)]));
      c.onReady('b', ready([entry(1, 2, 7)]));
      c.onApply('a', entry(1, 1, 7), 0, 1, 0);
      c.onApply('b', entry(1, 2, 7), 0, 1, 0);
    }),
    'state-machine-safety',
  );
  t.equal(
    caught(() => {
      const c = new Checker();
      c.onStart('a', empty);
      c.onReady('a', ready([entry(1, 1)]));
      c.onApply('a', entry(1, 1), 0, 0, 0);
    }),
    'apply-uncommitted',
  );
  t.equal(
    caught(() => {
      const c = new Checker();
      for (const id of ['a', 'b']) c.onStart(id, empty);
      c.onReady('a', ready([entry(1, 1, 5), entry(2, 1, 6)]));
      c.observe('a', status('a', 'leader', 1, 2)); // a commits 1..2 in term 1
      c.onReady('b', ready([entry(1, 1, 5)]));
      c.onReady('b', ready([], 2)); // b leads term 2 without entry 2
    }),
    'leader-completeness',
  );
  t.equal(
    caught(() =>
      new Checker().onDurableHardState('a', { term: 2, vote: 'a', commit: 0 }, { term: 2, vote: 'b', commit: 0 }),
    ),
    'durable-vote',
  );
  t.equal(
    caught(() =>
      new Checker().onDurableHardState('a', { term: 2, vote: null, commit: 5 }, { term: 2, vote: null, commit: 4 }),
    ),
    'durable-commit',
  );
  t.equal(
    caught(() => {
      const c = new Checker();
      c.observe('a', status('a', 'follower', 1, 5));
      c.observe('a', status('a', 'follower', 1, 4));
    }),
    'commit-monotonic',
  );
});

t.test('a seed replays exactly', async (t) => {
  for (const seed of [3, 8]) {
    const a = runSimulation(configFromSeed(seed));
    const b = runSimulation(configFromSeed(seed));
    t.equal(a.fingerprint, b.fingerprint, `seed ${seed}: same messages and applied entries`);
    t.same(a.stats, b.stats);
    t.same(a.history, b.history);
  }
  t.not(runSimulation(configFromSeed(3)).fingerprint, runSimulation(configFromSeed(4)).fingerprint);
});

t.test('a batch of seeds keeps every invariant, stays live and linearizable', async (t) => {
  const checker = await loadHistoryChecker();
  for (let seed = 1; seed <= 25; seed++) {
    const r = runSimulation(configFromSeed(seed), { checkHistory: checker });
    t.ok(r.ok, `seed ${seed}`) ||
      t.comment(
        `seed ${seed} broke ${r.failure?.invariant}: ${r.failure?.message}\nreplay: node packages/lib/raft/dist/sim/run.js --seeds 1 --from ${seed} --trace`,
      );
  }
});

t.test(
  'poison commands (the state machine throws) come back as apply_failed, change nothing, and the group goes on',
  async (t) => {
    const { POISON_FROM } = await import('../sim/client.js');
    const checker = await loadHistoryChecker();
    let poisoned = 0;
    // Seeds without quiescence: their clients write often, so there are many poison writes to look at.
    const seeds = [3, 11, 27, 4, 9, 10].filter((seed) => configFromSeed(seed).quiesceTicks === undefined).slice(0, 3);
    for (const seed of seeds) {
      const result = runSimulation({ ...configFromSeed(seed), poisonRate: 0.3 }, { checkHistory: checker });
      t.ok(
        result.ok,
        `seed ${seed} with 30% poison writes: ${result.failure?.invariant ?? 'ok'} ${result.failure?.message ?? ''}`,
      );
      t.equal(
        result.linearizability?.result,
        'ok',
        `seed ${seed}: linearizable, poison writes read as failed compare-and-sets`,
      );
      const answered = result.history.filter(
        (op) => op.input.f === 'cas' && op.input.from === POISON_FROM && op.return !== Infinity,
      );
      t.ok(
        answered.every((op) => op.output?.f === 'cas' && !op.output.ok),
        `seed ${seed}: every answered poison write failed`,
      );
      poisoned += answered.length;
    }
    t.ok(poisoned > 10, `${poisoned} poison writes were answered`);
  },
);

t.test(
  'many groups per process: per-group checks, group commit, coalesced heartbeats; a broken expander is caught',
  async (t) => {
    const checker = await loadHistoryChecker();
    const seeds: number[] = [];
    for (let seed = 1; seeds.length < 4; seed++) if ((configFromSeed(seed).groups ?? 1) >= 3) seeds.push(seed);
    let batches = 0;
    let beats = 0;
    for (const seed of seeds) {
      const config = configFromSeed(seed);
      const r = runSimulation(config, { checkHistory: checker });
      t.ok(r.ok, `seed ${seed} (${config.groups} groups): ${r.failure?.invariant ?? 'ok'} ${r.failure?.message ?? ''}`);
      t.equal(r.stats.groups, config.groups);
      t.ok(
        r.stats.syncRounds < r.stats.syncRequests,
        `seed ${seed}: ${r.stats.syncRequests} sync requests of all groups in ${r.stats.syncRounds} syncs`,
      );
      batches += r.stats.heartbeatBatches;
      beats += r.stats.batchedBeats;
      // Each group has its own clients, and they all got answers.
      const clients = new Set(r.history.map((op) => op.clientId));
      t.ok(clients.size >= 1 && r.stats.ops > 0, `seed ${seed}: ${r.stats.ops} ops`);
    }
    t.ok(beats > batches, `${beats} heartbeats and responses travelled in ${batches} batches`);
    // The deliberate bug: a heartbeat applied to another group. Some multi-group seed of the first 200 catches it
    // (seed 133 since the leader sends appends while its write is in flight; seed 52 before).
    let caught: string | null = null;
    for (let seed = 1; seed <= 200 && caught === null; seed++) {
      const config = configFromSeed(seed);
      if ((config.groups ?? 1) < 2) continue;
      const r = runSimulation({ ...config, simMutations: { brokenCoalescing: true } });
      if (!r.ok) caught = `seed ${seed}: ${r.failure!.invariant}`;
    }
    t.ok(caught !== null, `brokenCoalescing caught (${caught})`);
  },
);
