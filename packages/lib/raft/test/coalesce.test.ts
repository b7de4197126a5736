/**
 * The heartbeat coalescer (src/transport/coalesce.ts), pure: one batch per destination for every group's heartbeats
 * and responses, and a batch expands back into exactly the messages that went in, each to its own group. Also the
 * wire form (tuples in a 'beats' frame) and its validation.
 */
import fc from 'fast-check';
import t from 'tap';
import { HeartbeatCoalescer, expandBatch, isBeat, type Beat } from '../src/transport/coalesce.js';
import type { Message } from '../src/types.js';
import { DecodeError } from '../src/codec/parse.js';
import { beatsToTuples, parseWireFrame, tuplesToBatch } from '../src/transport/wire.js';

const beat = (group: string, to: string, term: number, round: number): { group: string; message: Beat } => ({
  group,
  message: { type: 'heartbeat', from: 'h1', to, term, commit: round, round },
});

t.test('one batch per destination, beats in order, other messages refused by isBeat', (t) => {
  const c = new HeartbeatCoalescer();
  const sent = [beat('a', 'h2', 1, 1), beat('b', 'h3', 2, 0), beat('c', 'h2', 3, 4)];
  for (const { group, message } of sent) c.add(group, message);
  c.add('d', { type: 'heartbeatResp', from: 'h1', to: 'h3', term: 5, round: 7 });
  t.equal(c.size, 4);
  const batches = c.drain();
  t.equal(c.size, 0, 'drain empties it');
  t.same(
    batches.map((b) => [b.to, b.beats.map((x) => x.group)]),
    [
      ['h2', ['a', 'c']],
      ['h3', ['b', 'd']],
    ],
  );
  t.same(c.drain(), [], 'nothing twice');
  const append: Message = {
    type: 'append',
    from: 'h1',
    to: 'h2',
    term: 1,
    prevIndex: 0,
    prevTerm: 0,
    entries: [],
    commit: 0,
  };
  t.notOk(isBeat(append), 'appends are never coalesced');
  t.ok(isBeat(sent[0]!.message));
  c.add('x', sent[0]!.message);
  c.forget('h2');
  t.equal(c.size, 0, 'forget drops a blocked peer');
  t.end();
});

const groupName = fc.stringMatching(/^[A-Za-z0-9._-]{1,12}$/);
const peer = fc.constantFrom('h2', 'h3', 'h4');
const nat = fc.nat({ max: 1_000_000 });
const beatArb: fc.Arbitrary<{ group: string; message: Beat }> = fc.oneof(
  fc
    .record({ group: groupName, to: peer, term: nat, commit: nat, round: nat, quiesce: fc.boolean() })
    .map(({ group, to, term, commit, round, quiesce }) => {
      const message: Beat = quiesce
        ? { type: 'heartbeat', from: 'h1', to, term, commit, round, quiesce: true }
        : { type: 'heartbeat', from: 'h1', to, term, commit, round };
      return { group, message };
    }),
  fc.record({ group: groupName, to: peer, term: nat, round: nat }).map(({ group, to, term, round }) => ({
    group,
    message: { type: 'heartbeatResp', from: 'h1', to, term, round } as Beat,
  })),
);

/** Per group and destination, the messages in order (a batch per destination keeps each one's order). */
function byGroup(list: Array<{ group: string; message: Beat }>): Map<string, Beat[]> {
  const out = new Map<string, Beat[]>();
  for (const { group, message } of list) {
    const key = `${group}>${message.to}`;
    out.set(key, [...(out.get(key) ?? []), message]);
  }
  return new Map([...out].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}

t.test('round trip: expand(batch(msgs)) == msgs per group, directly and through the wire frame', (t) => {
  fc.assert(
    fc.property(fc.array(beatArb, { maxLength: 60 }), (sent) => {
      const c = new HeartbeatCoalescer();
      for (const { group, message } of sent) c.add(group, message);
      const direct: Array<{ group: string; message: Beat }> = [];
      const wire: Array<{ group: string; message: Beat }> = [];
      for (const batch of c.drain()) {
        direct.push(...expandBatch(batch));
        const frame = parseWireFrame({ kind: 'beats', beats: beatsToTuples(batch.beats) });
        if (frame.kind !== 'beats') return false;
        wire.push(...expandBatch(tuplesToBatch(batch.from, batch.to, frame.beats)));
      }
      t.same(byGroup(direct), byGroup(sent));
      t.same(byGroup(wire), byGroup(sent));
      return direct.length === sent.length;
    }),
    { numRuns: 300 },
  );
  t.end();
});

t.test('the mutation (misroute) hands a heartbeat to another group', (t) => {
  const c = new HeartbeatCoalescer();
  c.add('a', beat('a', 'h2', 1, 1).message);
  c.add('b', beat('b', 'h2', 2, 2).message);
  const [batch] = c.drain();
  t.same(
    expandBatch(batch!, { misroute: true }).map((x) => [x.group, x.message.term]),
    [
      ['b', 1],
      ['a', 2],
    ],
  );
  t.end();
});

t.test('malformed beats frames are refused', (t) => {
  const bad: unknown[] = [
    { kind: 'beats' },
    { kind: 'beats', beats: [['g', 0, 1, 1, 1]] },
    { kind: 'beats', beats: [['', 0, 1, 1, 1, 0]] },
    { kind: 'beats', beats: [['g', 2, 1, 1, 1, 0]] },
    { kind: 'beats', beats: [['g', 0, -1, 1, 1, 0]] },
    { kind: 'beats', beats: [['g', 0, 1.5, 1, 1, 0]] },
    { kind: 'beats', beats: [['x'.repeat(129), 0, 1, 1, 1, 0]] },
  ];
  for (const frame of bad) t.throws(() => parseWireFrame(frame), DecodeError, JSON.stringify(frame).slice(0, 60));
  t.end();
});
