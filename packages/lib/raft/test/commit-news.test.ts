/**
 * A leader whose write is in flight sends its commit news at once (RaftCore.takeCommitNews), as heartbeats of
 * round 0 that followers do not answer. Driven by hand: the leader's Ready stays outstanding (its write "in
 * flight") while the followers' acknowledgements arrive.
 */
import t from 'tap';
import type { Message, NodeId } from '../src/types.js';
import { command, commandsOf, Lockstep } from './helpers/lockstep.js';

const ids = ['a', 'b', 'c', 'd', 'e'];

/** Perform one Ready of `id` entirely (write, send, apply, advance); returns the messages it sent. */
function performReady(c: Lockstep, id: NodeId): Message[] {
  const m = c.get(id);
  const rd = m.core.ready();
  m.applied.push(...rd.committed);
  m.core.advance(rd);
  return rd.messages;
}

t.test('acknowledgements during the leader write commit, and the news leaves before the write ends', async (t) => {
  const c = new Lockstep(ids);
  const leader = c.electLeader();
  const followers = ids.filter((id) => id !== leader);
  const lc = c.get(leader).core;
  lc.propose(command('x'));
  const rd = lc.ready(); // the leader's write of x is now in flight
  t.equal(rd.entries.length, 1);
  const index = rd.entries[0]!.index;
  t.same(lc.takeCommitNews(), [], 'nothing committed yet: no news');
  // Three followers store x and acknowledge; with the leader's own write still in flight that is a majority of 5.
  const acks: Message[] = [];
  for (const f of followers.slice(0, 3)) {
    for (const m of rd.messages.filter((m) => m.to === f)) c.get(f).core.step(m);
    acks.push(...performReady(c, f).filter((m) => m.type === 'appendResp'));
  }
  for (const a of acks) lc.step(a);
  t.equal(lc.status().commit, index, 'committed by three followers while the leader writes');
  const news = lc.takeCommitNews();
  t.same(
    news.map((m) => m.to).sort(),
    followers.slice(0, 3).sort(),
    'news for the followers that hold x, none for the one that does not',
  );
  for (const m of news) {
    t.equal(m.type, 'heartbeat');
    if (m.type !== 'heartbeat') continue;
    t.equal(m.commit, index);
    t.equal(m.round, 0, 'round 0: not a read round');
  }
  t.same(lc.takeCommitNews(), [], 'told once');
  // A follower learns the commit from the news alone and does not answer it.
  const f = followers[0]!;
  c.get(f).core.step(news.find((m) => m.to === f)!);
  const frd = c.get(f).core.ready();
  t.same(commandsOf(frd.committed), ['x'], 'the follower applies x on the news');
  t.same(
    frd.messages.filter((m) => m.type === 'heartbeatResp'),
    [],
    'commit news is not answered',
  );
  c.get(f).applied.push(...frd.committed);
  c.get(f).core.advance(frd);
  lc.advance(rd);
  c.settle();
  c.tick(2);
  for (const id of ids) t.same(commandsOf(c.get(id).applied), ['x'], `applied once on ${id}`);
});

t.test('no news without an outstanding Ready, or from a member that is no longer leader of that term', async (t) => {
  const c = new Lockstep(ids);
  const leader = c.electLeader();
  const lc = c.get(leader).core;
  lc.propose(command('y'));
  c.settle();
  t.equal(lc.takeCommitNews().length, 0, 'no Ready outstanding: the next Ready carries the commit');
  // A Ready outstanding, acknowledgements arrive, but a higher term deposes the leader before it asks.
  lc.propose(command('z'));
  const rd = lc.ready();
  const follower = ids.find((id) => id !== leader)!;
  lc.step({ type: 'heartbeat', from: follower, to: leader, term: lc.status().term + 1, commit: 0, round: 1 });
  t.not(lc.status().role, 'leader');
  t.same(lc.takeCommitNews(), [], 'a deposed leader sends no news');
  lc.advance(rd);
});
