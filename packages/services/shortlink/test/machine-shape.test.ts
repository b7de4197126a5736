/**
 * The link store machine refuses a command of the wrong shape (a bug or a forged entry) with CommandShapeError
 * before it changes anything: above all a long_url that could not be a Location header (CR/LF once crashed an app
 * server on redirect), which would otherwise have been stored for good. Valid commands still apply.
 */
import t from 'tap';
import { checkCommandShapes } from '@raftkit/testkit';
import { codeForId } from '../src/codes.js';
import { LinkMachine } from '../src/machine.js';

const ctx = { index: 3, term: 1, time: 1_000 };
const code = codeForId(5)!;
const spec = {
  code,
  long_url: 'https://example.com/a',
  created_at: 10,
  expires_at: 1e12,
  created_by: 'ann',
  alias: false,
};
function machine(): LinkMachine {
  const m = new LinkMachine();
  m.apply({ op: 'lease', server: 'app1' }, ctx);
  m.apply({ op: 'create', ...spec }, { ...ctx, index: 4 });
  return m;
}

t.test('malformed commands are refused without a change; valid ones apply', async (t) => {
  const outcome = checkCommandShapes({
    make: machine,
    valid: [
      { op: 'lease', server: 'app2' },
      { op: 'create', ...spec, code: codeForId(6)! },
      { op: 'create_many', links: [{ ...spec, code: codeForId(7)! }] },
      { op: 'delete', code, by: 'ann' },
      { op: 'purge', before: 5, codes: [code] },
    ],
    malformed: [
      { op: 'create', ...spec, code: codeForId(8)!, long_url: 'https://example.com/\r\nSet-Cookie: x=1' },
      { op: 'create', ...spec, code: codeForId(8)!, long_url: 'https://example.com/é' },
      { op: 'create', ...spec, code: codeForId(8)!, long_url: null },
      { op: 'create', ...spec, code: codeForId(8)!, long_url: 'javascript:alert(1)' },
      { op: 'create', ...spec, code: codeForId(8)!, expires_at: 5 },
      { op: 'create', ...spec, code: codeForId(8)!, created_by: 'a b' },
      {
        op: 'create_many',
        links: [
          { ...spec, code: codeForId(8)! },
          { ...spec, code: codeForId(9)!, long_url: 'x\ny' },
        ],
      },
      { op: 'create_many', links: [null] },
      { op: 'delete', code: null, by: null },
      { op: 'purge', before: Number.NaN, codes: [] },
      { op: 'lease' },
    ],
  });
  t.equal(outcome.violation, null, 'no other throw, no change before a refusal');
  t.ok(outcome.refused > 100, `${outcome.refused} refused`);
  const m = machine();
  t.match(m.apply({ op: 'create', ...spec, code: codeForId(6)! }, { ...ctx, index: 5 }), { ok: true, op: 'create' });
  t.equal(m.get(codeForId(6)!)?.long_url, 'https://example.com/a');
});
