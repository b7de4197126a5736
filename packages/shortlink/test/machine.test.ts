/** The link store machine: leases, creates (first writer wins, idempotent retries), deletes, snapshot/restore. */
import fc from 'fast-check';
import t from 'tap';

/** A property as one assertion that prints the counterexample when it fails. */
const holds = <T>(test: { same(a: unknown, b: unknown, m: string): void }, property: fc.IProperty<T>, params?: fc.Parameters<T>) =>
  test.same(fc.check(property, params).counterexample, null, 'property holds');
import { codeForId } from '../src/codes.js';
import { LEASE_SIZE, LinkMachine, type LinkChange, type LinkCommand, type LinkResult } from '../src/machine.js';

let index = 0;
const run = (m: LinkMachine, command: LinkCommand, time = 1_000): LinkResult => m.apply(command, { index: ++index, term: 1, time });
const create = (m: LinkMachine, code: string, over: Partial<Extract<LinkCommand, { op: 'create' }>> = {}) =>
  run(m, { op: 'create', code, long_url: 'https://example.com/', created_at: 10, expires_at: 1e12, created_by: 'ann', alias: code.length > 7, ...over });

t.test('leases: batches of 1,000 from a counter that only grows', async (t) => {
  const m = new LinkMachine();
  t.same(run(m, { op: 'lease', server: 'app1' }), { ok: true, op: 'lease', start: 0, end: LEASE_SIZE });
  t.same(run(m, { op: 'lease', server: 'app2' }), { ok: true, op: 'lease', start: 1000, end: 2000 });
  t.same(run(m, { op: 'lease', server: 'app1' }), { ok: true, op: 'lease', start: 2000, end: 3000 }, 'a restarted server never gets its old batch');
  const copy = new LinkMachine();
  copy.restore(m.snapshot());
  t.same(run(copy, { op: 'lease', server: 'app3' }), { ok: true, op: 'lease', start: 3000, end: 4000 }, 'the counter survives snapshot and restore');
});

t.test('leases never overlap (property: any interleaving of servers)', async (t) => {
  holds(t, fc.property(fc.array(fc.constantFrom('a', 'b', 'c'), { maxLength: 200 }), (servers) => {
    const m = new LinkMachine();
    const seen: Array<[number, number]> = [];
    for (const server of servers) {
      const r = run(m, { op: 'lease', server });
      if (!r.ok || r.op !== 'lease') return false;
      if (r.end - r.start !== LEASE_SIZE || seen.some(([s, e]) => r.start < e && s < r.end)) return false;
      seen.push([r.start, r.end]);
    }
    return true;
  }));
});

t.test('create: a generated code needs a leased id; the first writer of an alias wins; an identical retry succeeds', async (t) => {
  const m = new LinkMachine();
  const code = codeForId(5)!;
  t.same(create(m, code), { ok: false, error: 'not_leased' }, 'no lease yet');
  run(m, { op: 'lease', server: 'app1' });
  const first = create(m, code);
  t.match(first, { ok: true, op: 'create', retried: false, link: { long_url: 'https://example.com/', created_by: 'ann', alias: false, deleted_at: null } });
  t.match(create(m, code), { ok: true, retried: true }, 'the same create again is a retry');
  t.same(create(m, code, { long_url: 'https://other.example/' }), { ok: false, error: 'taken' });
  t.same(create(m, codeForId(LEASE_SIZE)!), { ok: false, error: 'not_leased' }, 'an id past the leases');
  t.same(create(m, 'abcdefg', { alias: true }), { ok: false, error: 'not_leased' }, 'an alias of 7 characters cannot enter the generated space');
});

t.test('aliases: first writer wins, everyone else is refused, even the same user with another create', async (t) => {
  const m = new LinkMachine();
  t.match(create(m, 'my-alias', { created_by: 'ann' }), { ok: true, retried: false });
  t.same(create(m, 'my-alias', { created_by: 'bob' }), { ok: false, error: 'taken' });
  t.same(create(m, 'my-alias', { created_by: 'ann', created_at: 11 }), { ok: false, error: 'taken' }, 'a second create by the creator is not a retry');
  t.equal(m.get('my-alias')!.created_by, 'ann');
});

t.test('delete: the creator or the cluster; not_found; forbidden; a repeated delete still succeeds; the code stays taken', async (t) => {
  const m = new LinkMachine();
  const changes: LinkChange[] = [];
  m.onChange = (c) => changes.push(c);
  create(m, 'alias-one', { created_by: 'ann' });
  create(m, 'alias-two', { created_by: 'ann' });
  t.same(run(m, { op: 'delete', code: 'nothing-here', by: 'ann' }), { ok: false, error: 'not_found' });
  t.same(run(m, { op: 'delete', code: 'alias-one', by: 'bob' }), { ok: false, error: 'forbidden' });
  t.match(run(m, { op: 'delete', code: 'alias-one', by: 'ann' }, 5_000), { ok: true, op: 'delete', link: { deleted_at: 5_000 } });
  t.match(run(m, { op: 'delete', code: 'alias-one', by: 'ann' }, 6_000), { ok: true, link: { deleted_at: 5_000 } }, 'retry');
  t.match(run(m, { op: 'delete', code: 'alias-two', by: null }), { ok: true }, 'the cluster deletes anything');
  t.same(changes, [{ kind: 'deleted', code: 'alias-one' }, { kind: 'deleted', code: 'alias-two' }], 'one change per delete');
  t.same(create(m, 'alias-one', { created_by: 'ann' }), { ok: false, error: 'taken' }, 'a deleted code is never reissued');
});

t.test('snapshot/restore: same links, same answers; restore tells the cache to drop everything', async (t) => {
  const m = new LinkMachine();
  run(m, { op: 'lease', server: 'a' });
  for (let i = 0; i < 50; i++) create(m, codeForId(i)!, { long_url: `https://example.com/${i}` });
  create(m, 'deleted-alias');
  run(m, { op: 'delete', code: 'deleted-alias', by: null }, 7);
  const copy = new LinkMachine();
  const changes: LinkChange[] = [];
  copy.onChange = (c) => changes.push(c);
  copy.restore(m.snapshot());
  t.same(changes, [{ kind: 'restored' }]);
  t.equal(copy.size, 51);
  t.same(copy.get(codeForId(7)!), m.get(codeForId(7)!));
  t.equal(copy.get('deleted-alias')!.deleted_at, 7);
  t.same(copy.snapshot(), m.snapshot(), 'a restored machine snapshots identically');
  t.same(create(copy, codeForId(3)!, { long_url: 'https://example.com/other' }), { ok: false, error: 'taken' });
});

t.test('determinism: the same commands give the same results and the same snapshot (property)', async (t) => {
  const command = fc.oneof(
    fc.record({ op: fc.constant('lease' as const), server: fc.constantFrom('a', 'b') }),
    fc.record({ op: fc.constant('create' as const), code: fc.oneof(fc.integer({ min: 0, max: 3000 }).map((i) => codeForId(i) ?? '0000000'), fc.constantFrom('alias-aaa', 'alias-bbb')), long_url: fc.constantFrom('https://a.example/', 'https://b.example/'), created_at: fc.constant(1), expires_at: fc.constant(9e12), created_by: fc.constantFrom('ann', 'bob'), alias: fc.boolean() }),
    fc.record({ op: fc.constant('delete' as const), code: fc.constantFrom('alias-aaa', 'alias-bbb'), by: fc.constantFrom('ann', 'bob', null) }),
  );
  holds(t, fc.property(fc.array(command, { maxLength: 60 }), (commands) => {
    const a = new LinkMachine();
    const b = new LinkMachine();
    for (const [i, c] of commands.entries()) {
      const ctx = { index: i + 1, term: 1, time: i };
      if (JSON.stringify(a.apply(c as LinkCommand, ctx)) !== JSON.stringify(b.apply(c as LinkCommand, ctx))) return false;
    }
    return Buffer.from(a.snapshot()).equals(Buffer.from(b.snapshot()));
  }), { numRuns: 300 });
});
