/** The rule store's state machine: tenants, rules, isolation, revisions, snapshots. */
import t from 'tap';
import { MAX_RULES_PER_TENANT, RuleMachine, type RuleCommand } from '../src/machine.js';
import { parseRule } from '../src/rules.js';

const A = '11111111-1111-4111-8111-111111111111';
const B = '22222222-2222-4222-8222-222222222222';
let index = 0;
const apply = (m: RuleMachine, c: RuleCommand) => m.apply(c, { index: ++index, term: 1, time: 1000 + index });
const rule = (id: string, serviceId: string, limit = 10) =>
  parseRule(id, { service_id: serviceId, dimension: 'ip', endpoint_pattern: '*', limit, window_sec: 1 });

t.test('a rule needs a registered tenant; registering twice is harmless', async (t) => {
  const m = new RuleMachine();
  t.same(apply(m, { op: 'putRule', rule: rule(A, 'shop') }), { ok: false, error: 'unknown_service' });
  t.same(apply(m, { op: 'registerTenant', serviceId: 'shop' }), { ok: true, op: 'registerTenant', created: true });
  t.same(apply(m, { op: 'registerTenant', serviceId: 'shop' }), { ok: true, op: 'registerTenant', created: false });
  t.match(apply(m, { op: 'putRule', rule: rule(A, 'shop') }), { ok: true, op: 'putRule', created: true });
  t.match(apply(m, { op: 'putRule', rule: rule(A, 'shop', 20) }), { ok: true, op: 'putRule', created: false });
  t.equal(m.getRule(A)?.capacity, 20);
});

t.test("a tenant can neither take over nor delete another tenant's rule", async (t) => {
  const m = new RuleMachine();
  apply(m, { op: 'registerTenant', serviceId: 'a' });
  apply(m, { op: 'registerTenant', serviceId: 'b' });
  apply(m, { op: 'putRule', rule: rule(A, 'a') });
  t.same(apply(m, { op: 'putRule', rule: rule(A, 'b') }), { ok: false, error: 'rule_id_taken' });
  t.same(apply(m, { op: 'deleteRule', ruleId: A, serviceId: 'b' }), { ok: false, error: 'not_found' });
  t.equal(m.getRule(A)?.serviceId, 'a');
  t.same(m.rulesOf('b'), []);
  t.match(
    apply(m, { op: 'deleteRule', ruleId: A, serviceId: null }),
    { ok: true, op: 'deleteRule' },
    'the cluster token deletes any rule',
  );
  t.equal(m.getRule(A), null);
});

t.test('revision moves on every change only; snapshot and restore keep everything', async (t) => {
  const m = new RuleMachine();
  apply(m, { op: 'registerTenant', serviceId: 'a' });
  const r1 = m.revision;
  apply(m, { op: 'registerTenant', serviceId: 'a' });
  t.equal(m.revision, r1, 'no change, same revision');
  apply(m, { op: 'putRule', rule: rule(A, 'a') });
  apply(m, { op: 'putRule', rule: rule(B, 'a') });
  t.ok(m.revision > r1);
  apply(m, { op: 'putRule', rule: rule(B, 'zzz') });
  const r2 = m.revision;
  const copy = new RuleMachine();
  copy.restore(m.snapshot());
  t.same(copy.ruleSet(), m.ruleSet());
  t.equal(copy.revision, r2);
  t.same(
    copy.rulesOf('a').map((r) => r.ruleId),
    [A, B],
  );
});

t.test(
  "a tenant holds at most MAX_RULES_PER_TENANT rules (one check's ops fit one store take); replacing one is fine",
  async (t) => {
    const m = new RuleMachine();
    apply(m, { op: 'registerTenant', serviceId: 'big' });
    apply(m, { op: 'registerTenant', serviceId: 'small' });
    const ids = Array.from(
      { length: MAX_RULES_PER_TENANT + 1 },
      (_, i) => `33333333-3333-4333-8333-${String(i).padStart(12, '0')}`,
    );
    for (const ruleId of ids.slice(0, -1)) apply(m, { op: 'putRule', rule: rule(ruleId, 'big') });
    t.same(apply(m, { op: 'putRule', rule: rule(ids.at(-1)!, 'big') }), { ok: false, error: 'too_many_rules' });
    t.match(
      apply(m, { op: 'putRule', rule: rule(ids[0]!, 'big', 99) }),
      { ok: true, created: false },
      'replacing an existing rule',
    );
    t.match(
      apply(m, { op: 'putRule', rule: rule(ids.at(-1)!, 'small') }),
      { ok: true },
      'other tenants are not affected',
    );
    const copy = new RuleMachine();
    copy.restore(m.snapshot());
    t.same(
      apply(copy, { op: 'putRule', rule: rule(uuidLike(1), 'big') }),
      { ok: false, error: 'too_many_rules' },
      'the count survives a restore',
    );
    apply(copy, { op: 'deleteRule', ruleId: ids[0]!, serviceId: 'big' });
    t.match(
      apply(copy, { op: 'putRule', rule: rule(uuidLike(1), 'big') }),
      { ok: true, created: true },
      'a deletion frees a place',
    );
  },
);

function uuidLike(n: number): string {
  return `44444444-4444-4444-8444-${String(n).padStart(12, '0')}`;
}
