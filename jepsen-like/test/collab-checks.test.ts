// The collab workload's checks on hand-made histories: each anomaly is caught, a clean history passes.
import t from 'tap';
import type { HistoryEvent } from '../src/history.js';
import { checkCollabHistory } from '../src/workloads/collab.js';

let time = 0;
const ev = (process: number, type: HistoryEvent['type'], f: string, key?: string, value?: unknown): HistoryEvent => ({
  process,
  type,
  f,
  time: time++,
  ...(key !== undefined ? { key } : {}),
  ...(value !== undefined ? { value } : {}),
});
const typed = (p: number, tok: string, outcome: 'ok' | 'info'): HistoryEvent[] => [
  ev(p, 'invoke', 'type', tok, { token: tok }),
  ev(p, outcome, 'type', tok),
];
const deleted = (p: number, tok: string, outcome: 'ok' | 'info'): HistoryEvent[] => [
  ev(p, 'invoke', 'delete', tok, { token: tok }),
  ev(p, outcome, 'delete', tok),
];
const read = (client: string, text: string, spans: unknown = [{ text, attrs: {} }]): HistoryEvent[] => [
  ev(100, 'invoke', 'read', client, { client }),
  ev(100, 'ok', 'read', client, { client, text, spans }),
];
const verdict = (events: HistoryEvent[]): Record<string, boolean | 'unknown'> =>
  Object.fromEntries(checkCollabHistory(events).map((c) => [c.name, c.valid]));

const base = [
  ...typed(0, '[c0.0]', 'ok'),
  ...typed(1, '[c1.0]', 'ok'),
  ...typed(1, '[c1.1]', 'info'),
  ...typed(0, '[c0.1]', 'ok'),
  ...deleted(0, '[c0.1]', 'ok'),
];

t.same(
  verdict([...base, ...read('c0', '[c1.0][c0.0]'), ...read('c1', '[c1.0][c0.0]')]),
  { converged: true, 'acked-present': true, 'acked-deletes': true, 'whole-tokens': true },
  'a clean history passes (an unacknowledged token may be missing)',
);
t.same(
  verdict([...base, ...read('c0', '[c1.0][c0.0][c1.1]'), ...read('c1', '[c1.0][c0.0][c1.1]')]).converged,
  true,
  'an unacknowledged token may also be there',
);
t.equal(
  verdict([...base, ...read('c0', '[c1.0]'), ...read('c1', '[c1.0]')])['acked-present'],
  false,
  'a lost acknowledged token is caught',
);
t.equal(
  verdict([...base, ...read('c0', '[c1.0][c0.0]'), ...read('c1', '[c0.0][c1.0]')]).converged,
  false,
  'diverged texts are caught',
);
t.equal(
  verdict([
    ...base,
    ...read('c0', '[c1.0][c0.0]'),
    ...read('c1', '[c1.0][c0.0]', [{ text: '[c1.0][c0.0]', attrs: { bold: true } }]),
  ]).converged,
  false,
  'diverged formatting is caught',
);
t.equal(
  verdict([...base, ...read('c0', '[c1.0][c0.0][c0.1]')])['acked-deletes'],
  false,
  'a resurrected deleted token is caught',
);
t.equal(
  verdict([...base, ...read('c0', '[c1.0][c0.0][c1.0]')])['whole-tokens'],
  false,
  'a token applied twice is caught',
);
t.equal(
  verdict([...base, ...read('c0', '[c1.0][c0.[c0.0]0]')])['whole-tokens'],
  false,
  'a token split by another is caught',
);
t.equal(
  verdict([...base, ...read('c0', '[c1.0][c0.0][c9.9]')])['whole-tokens'],
  false,
  'a token nobody typed is caught',
);
t.equal(verdict(base).converged, false, 'no final read is a failure, not a pass');
