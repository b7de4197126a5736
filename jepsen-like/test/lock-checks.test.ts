import t from 'tap';
import { checkLockHistory, FencedStorage, type HistoryEvent } from '../src/index.js';

let clock = 0;
function op(
  process: number,
  f: string,
  key: string,
  invokeValue: unknown,
  type: 'ok' | 'fail' | 'info',
  value?: unknown,
  error?: string,
): HistoryEvent[] {
  const call = (clock += 10);
  const ret = (clock += 10);
  return [
    { process, type: 'invoke', f, key, value: invokeValue, time: call },
    {
      process,
      type,
      f,
      key,
      ...(value !== undefined ? { value } : {}),
      ...(error !== undefined ? { error } : {}),
      time: ret,
    },
  ];
}
const grant = (p: number, s: string, token: number, lock = 'L'): HistoryEvent[] =>
  op(p, 'acquire', lock, { session: s }, 'ok', { session: s, granted: true, token });
const write = (p: number, s: string, token: number, accepted: boolean, lock = 'L'): HistoryEvent[] =>
  op(
    p,
    'write',
    lock,
    { session: s, token, data: 1 },
    accepted ? 'ok' : 'fail',
    undefined,
    accepted ? undefined : 'fenced',
  );
const byName = (events: HistoryEvent[]) => Object.fromEntries(checkLockHistory(events).map((c) => [c.name, c]));

t.test('a clean history passes every check', async (t) => {
  const h = [
    ...grant(0, 'a', 1),
    ...write(0, 'a', 1, true),
    ...op(0, 'release', 'L', { session: 'a', token: 1 }, 'ok'),
    ...grant(1, 'b', 2),
    ...write(1, 'b', 2, true),
    ...write(0, 'a', 1, false),
  ];
  const c = byName(h);
  t.equal(c['unique-tokens']!.valid, true);
  t.equal(c['token-order']!.valid, true);
  t.equal(c.fencing!.valid, true);
  t.same(c.fencing!.stats, { accepted: 2, refused: 1, releases: 1, releasesRefused: 0 });
});

t.test('a token granted to two sessions', async (t) => {
  const c = byName([...grant(0, 'a', 1), ...grant(1, 'b', 1)]);
  t.equal(c['unique-tokens']!.valid, false);
  t.match(c['unique-tokens']!.anomalies[0]!.description, /L token 1 was granted to 2 sessions/);
});

t.test('tokens going backwards in real-time grant order', async (t) => {
  const c = byName([...grant(0, 'a', 5), ...grant(1, 'b', 4)]);
  t.equal(c['token-order']!.valid, false);
  t.equal(
    byName([...grant(0, 'a', 5), ...grant(0, 'a', 5)])['token-order']!.valid,
    true,
    'the same grant returned again is fine',
  );
});

t.test('fencing: stale writes accepted, tokens never granted, refusals without cause', async (t) => {
  t.equal(
    byName([...grant(0, 'a', 1), ...grant(1, 'b', 2), ...write(1, 'b', 2, true), ...write(0, 'a', 1, true)]).fencing!
      .anomalies[0]!.type,
    'stale-write-accepted',
  );
  t.equal(byName([...write(0, 'z', 9, true)]).fencing!.anomalies[0]!.type, 'ungranted-token');
  t.equal(
    byName([...grant(0, 'a', 1), ...write(0, 'a', 1, false)]).fencing!.anomalies[0]!.type,
    'write-refused-wrongly',
  );
});

t.test('the fenced storage keeps the highest token and refuses lower ones', async (t) => {
  const s = new FencedStorage();
  t.ok(s.write('L', 1, 'a'));
  t.ok(s.write('L', 1, 'a'), 'the same token again');
  t.ok(s.write('L', 3, 'b'));
  t.notOk(s.write('L', 2, 'a'), 'lower: refused');
  t.ok(s.write('M', 1, 'c'), 'per lock');
  const open = new FencedStorage(false);
  t.ok(open.write('L', 3, 'b') && open.write('L', 1, 'a'), 'unfenced: accepts anything');
});

t.test('waiters-granted: a waiter still queued at the heal must be granted after it', async (t) => {
  const grantedAfterHeal = [
    ...op(1, 'wait', 'queue-0', { session: 'w1' }, 'info', { session: 'w1' }, 'still-queued'),
    ...op(2, 'wait-after-heal', 'queue-0', { session: 'w1' }, 'ok', { session: 'w1', granted: true, token: 4 }),
  ];
  t.equal(byName(grantedAfterHeal)['waiters-granted']!.valid, true);
  const lostSession = op(3, 'wait-after-heal', 'queue-0', { session: 'w2' }, 'fail', { session: 'w2' }, 'session_lost');
  t.equal(byName(lostSession)['waiters-granted']!.valid, true, 'a waiter whose session expired is not owed a grant');
  const forgotten = op(
    4,
    'wait-after-heal',
    'queue-0',
    { session: 'w3' },
    'info',
    { session: 'w3' },
    'not-granted-in-time',
  );
  const result = byName(forgotten)['waiters-granted']!;
  t.equal(result.valid, false, 'a live waiter left waiting is an anomaly');
  t.match(result.anomalies[0], { type: 'waiter-not-granted' });
  t.equal(byName(grantedAfterHeal)['unique-tokens']!.valid, true, 'queue grants go through the token checks too');
});
