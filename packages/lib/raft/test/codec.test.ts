/** The validators that stand between decoded bytes (disk, network) and the core. */
import t from 'tap';
import { decodeValue, encodeValue } from '../src/codec/msgpack.js';
import { DecodeError, MAX_FORWARDED_RESULTS, parseEntry, parseHardState, parseMessage } from '../src/codec/parse.js';
import type { Entry, Message } from '../src/types.js';

const entries: Entry[] = [
  { index: 1, term: 1, time: 10, kind: 'command', data: Uint8Array.of(1, 2) },
  { index: 2, term: 1, time: 11, kind: 'noop' },
  {
    index: 3,
    term: 2,
    time: 12.5,
    kind: 'config',
    change: { type: 'promote', node: 'n4' },
    config: { voters: ['n1', 'n4'], learners: ['n5'] },
  },
];

/** One message of every type. */
const messages: Message[] = [
  { type: 'vote', from: 'a', to: 'b', term: 2, lastIndex: 5, lastTerm: 1, transfer: false },
  { type: 'prevote', from: 'a', to: 'b', term: 3, lastIndex: 5, lastTerm: 1, transfer: true },
  { type: 'voteResp', from: 'b', to: 'a', term: 2, reject: false },
  { type: 'prevoteResp', from: 'b', to: 'a', term: 3, reject: true },
  { type: 'append', from: 'a', to: 'b', term: 2, prevIndex: 0, prevTerm: 0, entries, commit: 1 },
  { type: 'appendResp', from: 'b', to: 'a', term: 2, index: 3, reject: false, hintIndex: 0, hintTerm: 0 },
  { type: 'heartbeat', from: 'a', to: 'b', term: 2, commit: 3, round: 7 },
  { type: 'heartbeatResp', from: 'b', to: 'a', term: 2, round: 7 },
  {
    type: 'snapshot',
    from: 'a',
    to: 'b',
    term: 2,
    snapshot: {
      meta: { index: 9, term: 2, time: 99, config: { voters: ['a', 'b'], learners: [] } },
      data: Uint8Array.of(9),
    },
  },
  { type: 'timeoutNow', from: 'a', to: 'b', term: 2 },
  { type: 'propose', from: 'b', to: 'a', term: 0, commands: [Uint8Array.of(1), new Uint8Array(0)] },
  { type: 'readIndex', from: 'b', to: 'a', term: 0, context: 'r1' },
  { type: 'readIndexResp', from: 'a', to: 'b', term: 2, context: 'r1', index: -1 },
  {
    type: 'results',
    from: 'a',
    to: 'b',
    term: 0,
    results: [{ key: 'c1:4', index: 12, result: { ok: true, result: { v: [1, 'x'] }, duplicate: false } }],
  },
];
const results = messages[messages.length - 1]!;

const roundTrip = (value: unknown): unknown => decodeValue(encodeValue(value));

t.test('every message type survives encode, decode and validation unchanged', async (t) => {
  for (const message of messages) t.same(parseMessage(roundTrip(message)), message, message.type);
});

t.test('a missing or mistyped field is a DecodeError, for every field of every message', async (t) => {
  let checked = 0;
  for (const message of messages) {
    for (const key of Object.keys(message)) {
      const without: Record<string, unknown> = { ...message };
      delete without[key];
      t.throws(() => parseMessage(roundTrip(without)), DecodeError, `${message.type} without ${key}`);
      t.throws(() => parseMessage(roundTrip({ ...message, [key]: { wrong: true } })), DecodeError);
      checked++;
    }
  }
  t.ok(checked > 50);
});

t.test('nested values are validated too', async (t) => {
  const bad: unknown[] = [
    { ...messages[4], entries: [{ ...entries[0], kind: 'mystery' }] },
    { ...messages[4], entries: [{ ...entries[0], index: 0 }] },
    { ...messages[4], entries: [{ ...entries[0], data: 'not bytes' }] },
    { ...messages[4], entries: [{ ...entries[2], change: { type: 'demote', node: 'x' } }] },
    { ...messages[4], entries: [{ ...entries[2], config: { voters: [''], learners: [] } }] },
    { ...messages[4], term: -1 },
    { ...messages[4], term: 1.5 },
    { ...messages[4], from: '' },
    { ...messages[10], commands: ['x'] },
    { ...messages[8], snapshot: { meta: { index: 1, term: 1, time: 1, config: { voters: [], learners: [] } } } },
    { ...results, results: [{ key: 'c1:4', index: 12, result: 'done' }] },
    { ...results, results: [{ key: 'c1:4', index: 12, result: { value: 1 } }] },
    { ...results, results: [{ key: 'c1:4', index: 0, result: { ok: true } }] },
    { ...results, results: [{ key: 7, index: 12, result: { ok: true } }] },
    {
      ...results,
      results: Array.from({ length: MAX_FORWARDED_RESULTS + 1 }, () => ({ key: 'k', index: 1, result: { ok: true } })),
    },
    null,
    [1, 2],
    Uint8Array.of(1),
  ];
  for (const value of bad) t.throws(() => parseMessage(roundTrip(value)), DecodeError);
});

t.test('validation copies binary data out of the decode buffer and drops unknown fields', async (t) => {
  const bytes = encodeValue({ ...entries[0], extra: 'ignored' });
  const entry = parseEntry(decodeValue(bytes));
  t.same(entry, entries[0]);
  t.notOk('extra' in entry);
  t.ok(entry.kind === 'command' && Object.getPrototypeOf(entry.data) === Uint8Array.prototype);
  bytes.fill(0);
  t.ok(entry.kind === 'command' && entry.data[0] === 1, 'independent of the decoded buffer');
  t.same(parseHardState(roundTrip({ term: 1, vote: null, commit: 0 })), { term: 1, vote: null, commit: 0 });
  t.throws(() => parseHardState(roundTrip({ term: 1, vote: 7, commit: 0 })), DecodeError);
});
