/**
 * The flash-deal checks must be able to fail: a clean history passes, and an oversell, a user with two
 * reservations, a lost acknowledged win, a key answered two ways and a key left without an answer are each caught.
 */
import t from 'tap';
import { checkFlashHistory, type CheckResult, type HistoryEvent } from '../src/index.js';

let clock = 0;
let nextProcess = 0;
function op(
  f: string,
  input: Record<string, unknown>,
  type: 'ok' | 'fail' | 'info',
  output?: Record<string, unknown>,
  error?: string,
): HistoryEvent[] {
  const process = nextProcess++;
  const call = (clock += 10);
  const ret = (clock += 10);
  return [
    { process, type: 'invoke', f, value: input, time: call },
    {
      process,
      type,
      f,
      ...(output !== undefined ? { value: output } : {}),
      ...(error !== undefined ? { error } : {}),
      time: ret,
    },
  ];
}
const deal = (total: number): HistoryEvent[] =>
  op('setup-deal', { total_inventory: total }, 'ok', { deal_id: 'd1', total_inventory: total, shards: 2 });
const attempt = (
  user: string,
  key: string,
  answer: Record<string, unknown> | 'info' | 'fail',
  f = 'attempt',
): HistoryEvent[] =>
  answer === 'info'
    ? op(f, { user, key, gateway: 'g1' }, 'info', undefined, 'timeout')
    : answer === 'fail'
      ? op(f, { user, key, gateway: 'g1' }, 'fail', undefined, 'busy')
      : op(f, { user, key, gateway: 'g1' }, 'ok', answer);
const win = (user: string, key: string, rid: string): HistoryEvent[] =>
  attempt(user, key, { status: 'won', reservation_id: rid, expires_at: '2030-01-01T00:00:00Z' });
const lost = (user: string, key: string, reason?: string): HistoryEvent[] =>
  attempt(user, key, { status: 'lost', ...(reason !== undefined ? { reason } : {}) });
const read = (user: string, rid: string, status: string | null, owner = user): HistoryEvent[] =>
  status === null
    ? op('read-reservation', { user, reservation_id: rid }, 'fail', undefined, 'not_found')
    : op('read-reservation', { user, reservation_id: rid }, 'ok', { reservation_id: rid, user_id: owner, status });
const state = (remaining: number): HistoryEvent[] =>
  op('read-state', {}, 'ok', { state: remaining === 0 ? 'sold_out' : 'live', remaining });
const byName = (events: HistoryEvent[]): Record<string, CheckResult> =>
  Object.fromEntries(checkFlashHistory(events).map((c) => [c.name, c]));

/** Two units, three users: u1 and u2 win (u2 after a timeout, retried with the same key), u3 loses. */
const clean = (): HistoryEvent[] => [
  ...deal(2),
  ...win('u1', 'k1', 'r1'),
  ...attempt('u2', 'k2', 'info'),
  ...win('u2', 'k2', 'r2'),
  ...win('u2', 'k2', 'r2'),
  ...lost('u3', 'k3'),
  ...lost('u3', 'k3'),
  ...win('u1', 'k1b', 'r1'),
  ...read('u1', 'r1', 'reserved'),
  ...read('u2', 'r2', 'paid'),
  ...state(0),
];

t.test('a clean history passes every check', async (t) => {
  const c = byName(clean());
  for (const name of ['no-oversell', 'one-per-user', 'acked-wins-present', 'one-answer-per-key'])
    t.equal(c[name]!.valid, true, name);
  t.same(c['no-oversell']!.stats, { total_inventory: 2, reservations_won: 2, remaining_after_heal: 0 });
  t.same(c['acked-wins-present']!.stats, { acknowledged: 2, present: 2 });
  t.match(c['one-answer-per-key']!.stats, { keys: 4, attempts_ok: 6, attempts_info: 1 });
});

t.test('oversell: more distinct wins than units, and units created', async (t) => {
  const h = [...clean(), ...win('u4', 'k4', 'r3'), ...read('u4', 'r3', 'reserved')];
  const c = byName(h);
  t.equal(c['no-oversell']!.valid, false);
  t.match(
    c['no-oversell']!.anomalies.map((a) => a.type),
    ['oversold', 'units-created'],
  );
  t.match(
    c['no-oversell']!.anomalies[0]!.description,
    /3 distinct reservations were won, more than the total inventory of 2/,
  );
  // An oversell seen only in the final state: one win, but remaining says both units are still there.
  const created = byName([...deal(2), ...win('u1', 'k1', 'r1'), ...read('u1', 'r1', 'reserved'), ...state(2)]);
  t.equal(created['no-oversell']!.valid, false);
  t.equal(created['no-oversell']!.anomalies[0]!.type, 'units-created');
  t.equal(byName([...deal(2), ...state(-1)])['no-oversell']!.anomalies[0]!.type, 'negative-remaining');
  t.equal(byName(win('u1', 'k1', 'r1'))['no-oversell']!.valid, 'unknown', 'without the deal the bound is unknown');
});

t.test('an oversell found only in the reservations read back (a win answered to nobody)', async (t) => {
  const c = byName([
    ...deal(1),
    ...win('u1', 'k1', 'r1'),
    ...read('u1', 'r1', 'reserved'),
    ...read('u2', 'r9', 'reserved'),
  ]);
  t.equal(c['no-oversell']!.valid, false);
});

t.test('one user with two reservations, and one reservation answered to two users', async (t) => {
  const two = byName([
    ...deal(5),
    ...win('u1', 'k1', 'r1'),
    ...win('u1', 'k2', 'r2'),
    ...read('u1', 'r1', 'reserved'),
    ...read('u1', 'r2', 'reserved'),
  ]);
  t.equal(two['one-per-user']!.valid, false);
  t.match(two['one-per-user']!.anomalies[0]!.description, /u1 holds 2 reservations: r1, r2/);
  const shared = byName([...deal(5), ...win('u1', 'k1', 'r1'), ...win('u2', 'k2', 'r1')]);
  t.equal(shared['one-per-user']!.valid, false);
  t.equal(shared['one-per-user']!.anomalies[0]!.type, 'shared-reservation');
});

t.test("an acknowledged win missing, another user's, or released after the heal", async (t) => {
  const missing = byName([...deal(2), ...win('u1', 'k1', 'r1'), ...read('u1', 'r1', null)]);
  t.equal(missing['acked-wins-present']!.valid, false);
  t.equal(missing['acked-wins-present']!.anomalies[0]!.type, 'lost-win');
  t.equal(
    byName([...deal(2), ...win('u1', 'k1', 'r1'), ...read('u1', 'r1', 'reserved', 'u2')])['acked-wins-present']!
      .anomalies[0]!.type,
    'wrong-owner',
  );
  t.equal(
    byName([...deal(2), ...win('u1', 'k1', 'r1'), ...read('u1', 'r1', 'expired')])['acked-wins-present']!.anomalies[0]!
      .type,
    'not-holding',
  );
  const unread = byName([...deal(2), ...win('u1', 'k1', 'r1')]);
  t.equal(unread['acked-wins-present']!.valid, 'unknown', 'a win never read back is unknown, not valid');
});

t.test('a key answered two ways', async (t) => {
  const twoWins = byName([...deal(5), ...win('u1', 'k1', 'r1'), ...win('u1', 'k1', 'r2')]);
  t.equal(twoWins['one-answer-per-key']!.valid, false);
  t.equal(twoWins['one-answer-per-key']!.anomalies[0]!.type, 'different-wins');
  const wonThenLost = byName([...deal(5), ...win('u1', 'k1', 'r1'), ...lost('u1', 'k1')]);
  t.equal(wonThenLost['one-answer-per-key']!.anomalies[0]!.type, 'won-then-lost');
  const lostThenWon = byName([...deal(5), ...lost('u1', 'k1'), ...win('u1', 'k1', 'r1')]);
  t.equal(lostThenWon['one-answer-per-key']!.anomalies[0]!.type, 'lost-then-won');
  // The gateway's local sold-out answer decides nothing: the same key may win later (a unit came back).
  const localThenWon = byName([
    ...deal(5),
    ...lost('u1', 'k1', 'sold_out'),
    ...win('u1', 'k1', 'r1'),
    ...read('u1', 'r1', 'reserved'),
  ]);
  t.equal(localThenWon['one-answer-per-key']!.valid, true);
});

t.test('a unit taken from the inventory but answered to nobody', async (t) => {
  const hidden = byName([
    ...deal(3),
    ...win('u1', 'k1', 'r1'),
    ...attempt('u2', 'k2', 'info'),
    ...lost('u2', 'k2', 'sold_out'),
    ...read('u1', 'r1', 'reserved'),
    ...state(1),
  ]);
  t.equal(hidden['one-answer-per-key']!.valid, false);
  t.equal(hidden['one-answer-per-key']!.anomalies[0]!.type, 'hidden-wins');
  t.match(hidden['one-answer-per-key']!.anomalies[0]!.description, /1 unit\(s\) left the inventory/);
  t.equal(
    byName([...deal(3), ...win('u1', 'k1', 'r1'), ...read('u1', 'r1', 'reserved'), ...state(2)])['one-answer-per-key']!
      .valid,
    true,
  );
});

t.test('every key whose outcome was unknown must get an answer after the heal', async (t) => {
  const unanswered = byName([
    ...deal(2),
    ...attempt('u1', 'k1', 'info'),
    ...attempt('u1', 'k1', 'info', 'final-attempt'),
  ]);
  t.equal(unanswered['one-answer-per-key']!.valid, false);
  t.equal(unanswered['one-answer-per-key']!.anomalies[0]!.type, 'never-answered');
  const queued = byName([...deal(2), ...attempt('u1', 'k1', { status: 'queued' })]);
  t.equal(queued['one-answer-per-key']!.anomalies[0]!.type, 'never-answered', 'queued is not an answer');
  const resolved = byName([
    ...deal(2),
    ...attempt('u1', 'k1', { status: 'queued' }),
    ...attempt('u1', 'k1', { status: 'lost' }, 'final-attempt'),
  ]);
  t.equal(resolved['one-answer-per-key']!.valid, true);
  const refused = byName([...deal(2), ...attempt('u1', 'k1', 'fail')]);
  t.equal(refused['one-answer-per-key']!.valid, true, 'a refused attempt (4xx) decided nothing and is owed nothing');
});

t.test('the workload solves the bot check as the service checks it', async (t) => {
  const { createHash } = await import('node:crypto');
  const { solveChallenge } = await import('../src/workloads/flash.js');
  for (const bits of [0, 4, 9]) {
    const nonce = solveChallenge('c-123', bits);
    t.match(nonce, /^\d+$/, 'a decimal string');
    const digest = createHash('sha256').update(`c-123:${nonce}`).digest();
    const zeros = digest.readUInt32BE(0) === 0 ? 32 : Math.clz32(digest.readUInt32BE(0));
    t.ok(zeros >= bits, `${bits} leading zero bits (got ${zeros})`);
  }
});
