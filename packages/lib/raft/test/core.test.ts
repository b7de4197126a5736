import t from 'tap';
import { ConfigChangeError } from '../src/core.js';
import { command, commandsOf, Lockstep } from './helpers/lockstep.js';

const ids = ['a', 'b', 'c'];

t.test('a three-member group elects exactly one leader and replicates proposals to all', async (t) => {
  const c = new Lockstep(ids);
  const leader = c.electLeader();
  t.same(c.leaders(), [leader]);
  for (let i = 0; i < 5; i++) c.get(leader).core.propose(command(`x${i}`));
  c.settle();
  c.tick(2);
  for (const id of ids) t.same(commandsOf(c.get(id).applied), ['x0', 'x1', 'x2', 'x3', 'x4'], `applied on ${id}`);
});

t.test('a follower forwards proposals to the leader', async (t) => {
  const c = new Lockstep(ids);
  const leader = c.electLeader();
  const follower = ids.find((id) => id !== leader)!;
  t.equal(c.get(follower).core.propose(command('via-follower')), 'forwarded');
  c.settle();
  c.tick(2);
  for (const id of ids) t.same(commandsOf(c.get(id).applied), ['via-follower']);
});

t.test('a forwarded proposal is accepted only from a voter or learner of the configuration in force', async (t) => {
  const c = new Lockstep(ids);
  const leader = c.electLeader();
  const follower = ids.find((id) => id !== leader)!;
  const core = c.get(leader).core;
  core.step({ type: 'propose', from: 'evil', to: leader, term: 0, commands: [command('from-a-stranger')] });
  core.step({ type: 'propose', from: follower, to: leader, term: 0, commands: [command('from-a-member')] });
  c.settle();
  c.tick(2);
  for (const id of ids) t.same(commandsOf(c.get(id).applied), ['from-a-member'], `applied on ${id}`);
});

t.test('a proposal with no leader known is dropped, not guessed', async (t) => {
  const c = new Lockstep(ids);
  t.equal(c.get('a').core.propose(command('early')), 'dropped');
});

t.test('an isolated leader steps down (check-quorum) and the majority elects another', async (t) => {
  const c = new Lockstep(ids);
  const first = c.electLeader();
  c.isolate(first);
  c.tick(60);
  t.not(c.get(first).core.status().role, 'leader', 'the isolated leader stepped down');
  const others = ids.filter((id) => id !== first);
  const second = c.leaders().find((id) => others.includes(id));
  t.ok(second, 'the majority has a leader');
  c.get(second!).core.propose(command('after'));
  c.settle();
  c.tick(2);
  for (const id of others) t.ok(commandsOf(c.get(id).applied).includes('after'));
  c.heal();
  c.tick(30);
  t.ok(commandsOf(c.get(first).applied).includes('after'), 'the old leader catches up after healing');
});

t.test('pre-vote keeps a partitioned member from raising the term', async (t) => {
  const c = new Lockstep(ids);
  const leader = c.electLeader();
  const follower = ids.find((id) => id !== leader)!;
  const termBefore = c.get(leader).core.status().term;
  c.isolate(follower);
  c.tick(100);
  t.equal(c.get(follower).core.status().term, termBefore, 'the isolated member did not bump its term');
  c.heal();
  c.tick(20);
  t.equal(c.leaders().length, 1);
  t.equal(c.get(leader).core.status().role, 'leader', 'rejoining did not disrupt the leader');
});

t.test('linearizable reads: ReadIndex on the leader and through a follower', async (t) => {
  const c = new Lockstep(ids);
  const leader = c.electLeader();
  c.get(leader).core.propose(command('w'));
  c.settle();
  c.tick(2);
  c.get(leader).core.readIndex('r1');
  const follower = ids.find((id) => id !== leader)!;
  c.get(follower).core.readIndex('r2');
  c.settle();
  c.tick(1);
  const r1 = c.get(leader).reads.find((r) => r.context === 'r1');
  const r2 = c.get(follower).reads.find((r) => r.context === 'r2');
  t.ok(r1 && r1.index >= 2, 'leader read index covers the write');
  t.ok(r2 && r2.index >= 2, 'follower read index covers the write');
});

t.test('a read on an isolated leader is never answered with a valid index', async (t) => {
  const c = new Lockstep(ids);
  const leader = c.electLeader();
  c.isolate(leader);
  c.get(leader).core.readIndex('stale');
  c.tick(40);
  const answers = c.get(leader).reads.filter((r) => r.context === 'stale');
  t.ok(
    answers.every((r) => r.index === -1),
    'only refusals',
  );
  t.equal(answers.length, 1, 'the read was refused when leadership was lost');
});

t.test('membership: add a learner, promote it, remove a voter', async (t) => {
  const c = new Lockstep(ids);
  const leader = c.electLeader();
  c.tick(2);
  c.add('d', { voters: [], learners: [] });
  c.get(leader).core.proposeConfigChange({ type: 'addLearner', node: 'd' });
  t.throws(
    () => c.get(leader).core.proposeConfigChange({ type: 'promote', node: 'd' }),
    ConfigChangeError,
    'a second change waits for the first to commit',
  );
  c.settle();
  c.tick(3);
  t.same(c.get('d').core.status().config.learners, ['d']);
  c.get(leader).core.proposeConfigChange({ type: 'promote', node: 'd' });
  c.settle();
  c.tick(3);
  t.same(c.get(leader).core.status().config.voters.sort(), ['a', 'b', 'c', 'd']);
  const victim = ids.find((id) => id !== leader)!;
  c.get(leader).core.proposeConfigChange({ type: 'remove', node: victim });
  c.settle();
  c.tick(3);
  t.notOk(c.get(leader).core.status().config.voters.includes(victim));
  t.throws(() => c.get(leader).core.proposeConfigChange({ type: 'remove', node: 'zz' }), ConfigChangeError);
});

t.test('a leader that removes itself steps down once the change commits', async (t) => {
  const c = new Lockstep(ids);
  const leader = c.electLeader();
  c.tick(2);
  c.get(leader).core.proposeConfigChange({ type: 'remove', node: leader });
  c.settle();
  c.tick(3);
  t.not(c.get(leader).core.status().role, 'leader');
  c.members.delete(leader);
  const next = c.electLeader();
  t.not(next, leader);
});

t.test('leadership transfer hands over to the named voter', async (t) => {
  const c = new Lockstep(ids);
  const leader = c.electLeader();
  const target = ids.find((id) => id !== leader)!;
  c.get(leader).core.transferLeadership(target);
  c.settle();
  c.tick(3);
  t.same(c.leaders(), [target]);
});

t.test('a follower too far behind is caught up by a snapshot', async (t) => {
  const c = new Lockstep(ids);
  const leader = c.electLeader();
  const lagging = ids.find((id) => id !== leader)!;
  c.isolate(lagging);
  for (let i = 0; i < 20; i++) c.get(leader).core.propose(command(`v${i}`));
  c.settle();
  c.tick(2);
  c.snapshotAndCompact(leader);
  t.ok(c.get(leader).core.status().firstIndex > 5, 'the leader compacted its log');
  c.heal();
  c.tick(20);
  const st = c.get(lagging).core.status();
  t.ok(st.snapshotIndex > 0, 'the follower installed a snapshot');
  t.equal(st.applied, c.get(leader).core.status().applied, 'and is caught up');
});

t.test('lease reads require check-quorum', async (t) => {
  t.throws(() => new Lockstep(ids, { leaseReads: true, checkQuorum: false }));
  const c = new Lockstep(ids, { leaseReads: true });
  const leader = c.electLeader();
  c.tick(2);
  c.get(leader).core.readIndex('lease');
  c.settle();
  t.ok(
    c.get(leader).reads.some((r) => r.context === 'lease' && r.index > 0),
    'served without a heartbeat round',
  );
});

t.test('restart from durable state keeps term, vote and log', async (t) => {
  const c = new Lockstep(ids);
  const leader = c.electLeader();
  c.get(leader).core.propose(command('durable'));
  c.settle();
  c.tick(2);
  const follower = ids.find((id) => id !== leader)!;
  const before = c.get(follower).core.status();
  const d = c.get(follower).durable;
  const { RaftCore } = await import('../src/core.js');
  const revived = new RaftCore(
    { id: follower },
    {
      hardState: { term: d.term, vote: d.vote, commit: d.commit },
      snapshot: null,
      entries: d.entries,
      initialConfig: { voters: ids, learners: [] },
    },
  );
  const after = revived.status();
  t.equal(after.term, before.term);
  t.equal(after.lastIndex, before.lastIndex);
  t.equal(after.commit, before.commit);
});

t.test(
  'regression (sim seed 60): a snapshot stepped while a Ready is outstanding does not break advance()',
  async (t) => {
    const { RaftCore } = await import('../src/core.js');
    const follower = new RaftCore(
      { id: 'b' },
      {
        hardState: { term: 0, vote: null, commit: 0 },
        snapshot: null,
        entries: [],
        initialConfig: { voters: ['a', 'b', 'c'], learners: [] },
      },
    );
    const entries = [1, 2, 3].map((index) => ({ index, term: 1, time: 0, kind: 'noop' as const }));
    follower.step({ type: 'append', from: 'a', to: 'b', term: 1, prevIndex: 0, prevTerm: 0, entries, commit: 3 });
    const outstanding = follower.ready();
    t.equal(outstanding.committed.length, 3, 'the batch carries committed entries');
    const meta = { index: 10, term: 1, time: 0, config: { voters: ['a', 'b', 'c'], learners: [] } };
    follower.step({ type: 'snapshot', from: 'a', to: 'b', term: 1, snapshot: { meta, data: new Uint8Array([1]) } });
    t.doesNotThrow(() => follower.advance(outstanding));
    const next = follower.ready();
    t.equal(next.snapshot?.meta.index, 10, 'the snapshot is installed next');
    t.same(next.committed, [], 'nothing below the snapshot is applied again');
    follower.advance(next);
    t.equal(follower.status().applied, 10);
  },
);

t.test(
  'a follower restarted with its storage lost (same id, empty disk) is replicated again from the start',
  async (t) => {
    const c = new Lockstep(ids);
    const leader = c.electLeader();
    for (let i = 0; i < 5; i++) c.get(leader).core.propose(command(`x${i}`));
    c.settle();
    c.tick(2);
    const wiped = ids.find((id) => id !== leader)!;
    t.ok(
      c
        .get(leader)
        .core.status()
        .peers.find((p) => p.id === wiped)!.match >= 5,
      'the leader saw it acknowledge',
    );
    c.members.delete(wiped);
    c.add(wiped, { voters: ids, learners: [] });
    c.get(leader).core.propose(command('after'));
    c.settle();
    c.tick(10);
    t.same(
      commandsOf(c.get(wiped).applied),
      ['x0', 'x1', 'x2', 'x3', 'x4', 'after'],
      'everything again on the wiped member',
    );
    const pr = c
      .get(leader)
      .core.status()
      .peers.find((p) => p.id === wiped)!;
    t.equal(pr.match, c.get(leader).core.status().lastIndex, "its match is the leader's last index again");
  },
);

t.test(
  'one refusal hinting below match is taken for a stale duplicate; the second in a row resets match',
  async (t) => {
    const { Progress } = await import('../src/progress.js');
    const pr = new Progress(11, false, 256, 1 << 20);
    pr.maybeUpdate(10);
    pr.becomeReplicate();
    t.notOk(pr.maybeDecreaseTo(10, 3), 'a refusal at match with a hint below it: ignored once');
    t.equal(pr.match, 10);
    t.ok(pr.maybeDecreaseTo(10, 3), 'the same refusal again: the follower lost what it acknowledged');
    t.equal(pr.match, 3);
    t.equal(pr.next, 4, 'sent again from just past what it still holds');
    pr.maybeUpdate(10);
    t.notOk(pr.maybeDecreaseTo(10, 3), 'an acknowledgement in between starts the count again');
    t.equal(pr.match, 10);
  },
);

t.test('a follower wiped while its group is quiesced is refilled with no new write', async (t) => {
  const c = new Lockstep(ids, { quiesceTicks: 5 });
  const leader = c.electLeader();
  for (let i = 0; i < 3; i++) c.get(leader).core.propose(command(`q${i}`));
  c.settle();
  c.tick(30);
  t.ok(c.get(leader).core.status().quiesced, 'the group went quiet');
  const wiped = ids.find((id) => id !== leader)!;
  c.members.delete(wiped);
  c.add(wiped, { voters: ids, learners: [] });
  c.tick(200);
  t.same(commandsOf(c.get(wiped).applied), ['q0', 'q1', 'q2'], 'everything again on the wiped member, no write needed');
});

t.test('regression (sim seeds 1, 3, 6, 12, 19): a full in-flight window whose appends were lost drains', async (t) => {
  const c = new Lockstep(ids, { maxInflightMessages: 1 });
  const leader = c.electLeader();
  c.tick(2);
  const follower = ids.find((id) => id !== leader)!;
  c.isolate(follower);
  c.get(leader).core.propose(command('lost-once'));
  c.settle();
  c.heal();
  c.tick(5);
  t.ok(commandsOf(c.get(follower).applied).includes('lost-once'), 'the follower got the entry after the loss');
});

t.test('quiescence: an idle group stops ticking and heartbeating; a proposal wakes it and it commits', async (t) => {
  const c = new Lockstep(ids, { quiesceTicks: 3 });
  const leader = c.electLeader();
  c.get(leader).core.propose(command('before'));
  c.settle();
  c.tick(10);
  for (const id of ids) t.ok(c.get(id).core.isQuiesced(), `${id} quiesced`);
  const term = c.get(leader).core.status().term;
  c.tick(200); // far more than an election timeout: nobody campaigns, nothing is sent
  for (const id of ids) t.ok(c.get(id).core.isQuiesced(), `${id} still quiesced after 200 ticks`);
  t.equal(c.maxTerm(), term, 'no election while quiesced');
  const follower = ids.find((id) => id !== leader)!;
  c.get(follower).core.propose(command('after'));
  c.settle();
  c.tick(2);
  for (const id of ids) t.same(commandsOf(c.get(id).applied), ['before', 'after'], `applied on ${id}`);
});

t.test('quiescence: a quiesced leader serves no lease read, before or right after waking', async (t) => {
  const c = new Lockstep(ids, { quiesceTicks: 3, leaseReads: true });
  const leader = c.electLeader();
  c.tick(10);
  t.ok(c.get(leader).core.isQuiesced(), 'the leader quiesced');
  c.tick(100);
  // Its followers are cut off: a lease from the rounds acknowledged before quiescing must not count.
  c.isolate(leader);
  c.get(leader).core.readIndex('after-quiet');
  c.settle();
  t.notOk(
    c.get(leader).reads.some((r) => r.context === 'after-quiet'),
    'no read answered without a fresh quorum round',
  );
  c.heal();
  c.tick(2);
  t.ok(
    c.get(leader).reads.some((r) => r.context === 'after-quiet' && r.index > 0),
    'answered once a quorum acknowledged a new round',
  );
});

t.test('quiescence: a quiesced follower whose leader is gone campaigns once woken by its driver', async (t) => {
  const c = new Lockstep(ids, { quiesceTicks: 3 });
  const leader = c.electLeader();
  c.tick(10);
  c.isolate(leader); // the leader's process is gone
  c.tick(100);
  t.same(c.leaders(), [leader], 'left alone, the quiesced followers never notice');
  for (const id of ids.filter((x) => x !== leader)) c.get(id).core.wake(100);
  c.tick(40);
  t.ok(
    c.leaders().some((id) => id !== leader),
    'woken with the silence, the others elect a new leader',
  );
});
