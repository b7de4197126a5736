/**
 * The kv machine refuses a command of the wrong shape (a bug or a forged entry) with CommandShapeError before it
 * changes anything, so the session layer answers ApplyError on every member alike; valid commands still apply.
 */
import t from 'tap';
import { checkCommandShapes } from '@raftkit/testkit';
import { KvMachine, type KvCommand } from '../src/machine.js';

const ctx = { index: 7, term: 1, time: 1 };
function machine(): KvMachine {
  const m = new KvMachine();
  m.apply({ op: 'put', key: 'a', value: 'one' }, ctx);
  m.apply({ op: 'put', key: 'b', value: 'two' }, ctx);
  return m;
}

t.test('malformed commands are refused without a change; valid ones apply', async (t) => {
  const outcome = checkCommandShapes({
    make: machine,
    valid: [
      { op: 'put', key: 'k', value: 'v' },
      { op: 'delete', key: 'a' },
      { op: 'cas', key: 'a', from: 'one', to: null },
    ],
    malformed: [
      null,
      5,
      'put',
      [],
      {},
      { op: 'get', key: 'a' },
      { op: 'put', key: null, value: 'v' },
      { op: 'put', key: 5, value: 'v' },
      { op: 'put', key: '', value: 'v' },
      { op: 'put', key: 'k' },
      { op: 'cas', key: 'a', from: 1, to: 'x' },
      { op: 'delete' },
    ],
  });
  t.equal(outcome.violation, null, 'no other throw, no change before a refusal');
  t.ok(outcome.refused > 100, `${outcome.refused} refused`);
  const m = machine();
  t.same(m.apply({ op: 'cas', key: 'a', from: 'one', to: 'uno' } satisfies KvCommand, { ...ctx, index: 8 }), {
    op: 'cas',
    ok: true,
    revision: 8,
  });
  t.equal(m.get('a')?.value, 'uno');
});
