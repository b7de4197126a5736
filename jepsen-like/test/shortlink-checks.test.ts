import t from 'tap';
import { checkAckedLinks, checkCodes, checkLeases } from '../src/workloads/shortlink.js';
import type { HistoryEvent } from '../src/history.js';

let clock = 0;
function op(
  process: number,
  f: string,
  key: string | undefined,
  invokeValue: unknown,
  type: 'ok' | 'fail' | 'info',
  value?: unknown,
  error?: string,
  node = 'n1',
): HistoryEvent[] {
  const k = key === undefined ? {} : { key };
  return [
    {
      process,
      type: 'invoke',
      f,
      ...k,
      ...(invokeValue !== undefined ? { value: invokeValue } : {}),
      time: (clock += 10),
      node,
    },
    {
      process,
      type,
      f,
      ...k,
      ...(value !== undefined ? { value } : {}),
      ...(error !== undefined ? { error } : {}),
      time: (clock += 10),
      node,
    },
  ];
}
const lease = (p: number, start: number, end: number): HistoryEvent[] =>
  op(p, 'lease', undefined, undefined, 'ok', [start, end]);
const create = (
  p: number,
  code: string,
  url: string,
  type: 'ok' | 'fail' | 'info' = 'ok',
  error?: string,
): HistoryEvent[] => op(p, 'write', code, url, type, url, error);
const finalRead = (p: number, code: string, url: string | null): HistoryEvent[] =>
  op(p, 'read', code, undefined, 'ok', url, undefined, 'final');

t.test('disjoint leases pass; an id handed out twice fails', async (t) => {
  t.equal(checkLeases([...lease(0, 0, 1000), ...lease(1, 1000, 2000), ...lease(0, 3000, 4000)]).valid, true);
  const overlap = checkLeases([...lease(0, 0, 1000), ...lease(1, 999, 1999)]);
  t.equal(overlap.valid, false);
  t.match(overlap.anomalies[0]!.description, /\[999, 1999\) and \[0, 1000\) were both handed out/);
  t.same(overlap.stats, { leases: 2, ids: 2000 });
});

t.test('a generated code found taken is an anomaly', async (t) => {
  t.equal(checkCodes([...create(0, 'abcdefg', 'https://x/1')]).valid, true);
  const taken = checkCodes([
    ...create(0, 'abcdefg', 'https://x/1'),
    ...create(1, 'abcdefg', 'https://x/2', 'fail', 'code_taken'),
  ]);
  t.equal(taken.valid, false);
  t.match(taken.anomalies[0]!.description, /abcdefg was already taken/);
});

t.test('every acknowledged link must be read back with its URL', async (t) => {
  const good = [
    ...create(0, 'aaaaaaa', 'https://x/a'),
    ...create(1, 'bbbbbbb', 'https://x/b', 'info'),
    ...finalRead(2, 'aaaaaaa', 'https://x/a'),
  ];
  t.equal(checkAckedLinks(good).valid, true, 'an unknown (info) create need not exist');
  const lost = checkAckedLinks([...create(0, 'aaaaaaa', 'https://x/a'), ...finalRead(2, 'aaaaaaa', null)]);
  t.equal(lost.valid, false);
  t.match(lost.anomalies[0]!.description, /aaaaaaa -> https:\/\/x\/a read back as null/);
  const unread = checkAckedLinks([...create(0, 'aaaaaaa', 'https://x/a')]);
  t.equal(unread.valid, false);
  t.equal(unread.anomalies[0]!.type, 'unread');
});
