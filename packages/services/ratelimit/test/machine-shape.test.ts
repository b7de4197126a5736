/**
 * The rule store machine refuses a command of the wrong shape (a bug or a forged entry) with CommandShapeError
 * before it changes anything, so no check instance ever receives a rule it cannot evaluate (a NaN capacity, a
 * denormal refill rate); valid commands still apply.
 */
import t from 'tap';
import { checkCommandShapes } from '@raftkit/testkit';
import { RuleMachine } from '../src/machine.js';
import { parseRule } from '../src/rules.js';

const A = '11111111-1111-4111-8111-111111111111';
const ctx = { index: 3, term: 1, time: 1_000 };
const rule = parseRule(A, {
  service_id: 'shop',
  dimension: 'ip',
  endpoint_pattern: '/v1/*',
  limit: 10,
  window_sec: 1,
  hot_key: { qps_threshold: 100 },
});
function machine(): RuleMachine {
  const m = new RuleMachine();
  m.apply({ op: 'registerTenant', serviceId: 'shop' }, ctx);
  m.apply({ op: 'putRule', rule }, { ...ctx, index: 4 });
  return m;
}

t.test('malformed commands are refused without a change; valid ones apply', async (t) => {
  const outcome = checkCommandShapes({
    make: machine,
    valid: [
      { op: 'registerTenant', serviceId: 'other' },
      { op: 'putRule', rule: { ...rule } },
      { op: 'deleteRule', ruleId: A, serviceId: 'shop' },
      ...Object.keys(rule).map((k) => ({
        op: 'putRule',
        rule: { ...rule, [k]: (rule as unknown as Record<string, unknown>)[k] },
      })),
    ],
    malformed: [
      { op: 'putRule', rule: { ...rule, capacity: Number.NaN } },
      { op: 'putRule', rule: { ...rule, refillRate: 5e-324 } },
      { op: 'putRule', rule: { ...rule, dimension: 'planet' } },
      { op: 'putRule', rule: { ...rule, endpointPattern: 'no-slash' } },
      { op: 'putRule', rule: { ...rule, hotKey: { qpsThreshold: 'fast' } } },
      { op: 'putRule', rule: null },
      { op: 'registerTenant', serviceId: 'a:b' },
      { op: 'deleteRule', ruleId: 'x', serviceId: null },
    ],
  });
  t.equal(outcome.violation, null, 'no other throw, no change before a refusal');
  t.ok(outcome.refused > 100, `${outcome.refused} refused`);
  const m = machine();
  t.match(m.apply({ op: 'deleteRule', ruleId: A, serviceId: null }, { ...ctx, index: 5 }), {
    ok: true,
    op: 'deleteRule',
  });
});

t.test('a drawn rule with one field replaced is refused or is still a rule parseRule accepts', async (t) => {
  // The machine's check and the API's parser agree on the fields a rule must have.
  const m = machine();
  t.match(
    m.apply({ op: 'putRule', rule: { ...rule, limit: 20, capacity: 20, refillRate: 20 } }, { ...ctx, index: 6 }),
    { ok: true, created: false },
  );
});
