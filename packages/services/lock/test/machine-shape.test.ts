/**
 * The lock machine refuses a command of the wrong shape (a bug or a forged entry) with CommandShapeError before it
 * changes anything, so the session layer answers ApplyError on every member alike; valid commands still apply.
 */
import t from 'tap';
import { checkCommandShapes } from '@raftkit/testkit';
import { LockMachine } from '../src/machine.js';

const S = '11111111-1111-4111-8111-111111111111';
const ctx = { index: 3, term: 1, time: 1_000 };
function machine(): LockMachine {
  const m = new LockMachine();
  m.apply({ op: 'openSession', id: S, timeoutMs: 10_000, owner: 'o' }, ctx);
  m.apply({ op: 'acquire', name: 'l', session: S, owner: 'o', wait: false }, { ...ctx, index: 4 });
  return m;
}

t.test('malformed commands are refused without a change; valid ones apply', async (t) => {
  const outcome = checkCommandShapes({
    make: machine,
    valid: [
      { op: 'openSession', id: 'x', timeoutMs: 5_000, owner: 'o' },
      { op: 'heartbeat', id: S, owner: 'o' },
      { op: 'closeSession', id: S, owner: 'o' },
      { op: 'expire', ids: [S] },
      { op: 'acquire', name: 'm', session: S, owner: 'o', wait: true },
      { op: 'release', name: 'l', session: S, owner: 'o', token: 1 },
      {
        op: 'batch',
        commands: [
          { op: 'acquire', name: 'n', session: S, owner: 'o', wait: false },
          { op: 'release', name: 'l', session: S, owner: 'o', token: 1 },
        ],
      },
    ],
    malformed: [
      { op: 'batch', commands: [] },
      { op: 'batch', commands: [{ op: 'heartbeat', id: S, owner: 'o' }] },
      null,
      { op: 'openSession', id: 'x', timeoutMs: Number.NaN, owner: 'o' },
      { op: 'openSession', id: 'x', timeoutMs: -5, owner: 'o' },
      { op: 'openSession', id: null, timeoutMs: 5_000, owner: 'o' },
      { op: 'expire', ids: null },
      { op: 'expire', ids: [5] },
      { op: 'acquire', name: 'l', session: S, owner: 'o' },
      { op: 'release', name: 'l', session: S, owner: 'o', token: '1' },
      { op: 'release', name: 'l', session: S, owner: 'o', token: 0.5 },
    ],
  });
  t.equal(outcome.violation, null, 'no other throw, no change before a refusal');
  t.ok(outcome.refused > 100, `${outcome.refused} refused`);
  const m = machine();
  t.match(m.apply({ op: 'release', name: 'l', session: S, owner: 'o', token: 1 }, { ...ctx, index: 5 }), {
    ok: true,
    released: true,
  });
  t.match(m.apply({ op: 'extendAll' }, { ...ctx, index: 6 }), { ok: true, sessions: 1 });
});
