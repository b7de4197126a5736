/**
 * The link store machine: leases, creates one by one and in batches (first writer wins, idempotent retries),
 * deletes, purges, snapshot/restore.
 */
import fc from 'fast-check';
import { Packr } from 'msgpackr';
import t from 'tap';

/** A property as one assertion that prints the counterexample when it fails. */
const holds = <T>(
  test: { same(a: unknown, b: unknown, m: string): void },
  property: fc.IProperty<T>,
  params?: fc.Parameters<T>,
) => test.same(fc.check(property, params).counterexample, null, 'property holds');
import { codeForId } from '../src/codes.js';
import {
  LEASE_SIZE,
  LinkMachine,
  type CreateSpec,
  type LinkChange,
  type LinkCommand,
  type LinkResult,
} from '../src/machine.js';

let index = 0;
const run = (m: LinkMachine, command: LinkCommand, time = 1_000): LinkResult =>
  m.apply(command, { index: ++index, term: 1, time });
const create = (m: LinkMachine, code: string, over: Partial<Extract<LinkCommand, { op: 'create' }>> = {}) =>
  run(m, {
    op: 'create',
    code,
    long_url: 'https://example.com/',
    created_at: 10,
    expires_at: 1e12,
    created_by: 'ann',
    alias: code.length > 7,
    ...over,
  });

t.test('leases: batches of 1,000 from a counter that only grows', async (t) => {
  const m = new LinkMachine();
  t.same(run(m, { op: 'lease', server: 'app1' }), { ok: true, op: 'lease', start: 0, end: LEASE_SIZE });
  t.same(run(m, { op: 'lease', server: 'app2' }), { ok: true, op: 'lease', start: 1000, end: 2000 });
  t.same(
    run(m, { op: 'lease', server: 'app1' }),
    { ok: true, op: 'lease', start: 2000, end: 3000 },
    'a restarted server never gets its old batch',
  );
  const copy = new LinkMachine();
  copy.restore(m.snapshot());
  t.same(
    run(copy, { op: 'lease', server: 'app3' }),
    { ok: true, op: 'lease', start: 3000, end: 4000 },
    'the counter survives snapshot and restore',
  );
});

t.test('leases never overlap (property: any interleaving of servers)', async (t) => {
  holds(
    t,
    fc.property(fc.array(fc.constantFrom('a', 'b', 'c'), { maxLength: 200 }), (servers) => {
      const m = new LinkMachine();
      const seen: Array<[number, number]> = [];
      for (const server of servers) {
        const r = run(m, { op: 'lease', server });
        if (!r.ok || r.op !== 'lease') return false;
        if (r.end - r.start !== LEASE_SIZE || seen.some(([s, e]) => r.start < e && s < r.end)) return false;
        seen.push([r.start, r.end]);
      }
      return true;
    }),
  );
});

t.test(
  'create: a generated code needs a leased id; the first writer of an alias wins; an identical retry succeeds',
  async (t) => {
    const m = new LinkMachine();
    const code = codeForId(5)!;
    t.same(create(m, code), { ok: false, error: 'not_leased' }, 'no lease yet');
    run(m, { op: 'lease', server: 'app1' });
    const first = create(m, code);
    t.match(first, {
      ok: true,
      op: 'create',
      retried: false,
      link: { long_url: 'https://example.com/', created_by: 'ann', alias: false, deleted_at: null },
    });
    t.match(create(m, code), { ok: true, retried: true }, 'the same create again is a retry');
    t.same(create(m, code, { long_url: 'https://other.example/' }), { ok: false, error: 'taken' });
    t.same(create(m, codeForId(LEASE_SIZE)!), { ok: false, error: 'not_leased' }, 'an id past the leases');
    t.same(
      create(m, 'abcdefg', { alias: true }),
      { ok: false, error: 'not_leased' },
      'an alias of 7 characters cannot enter the generated space',
    );
  },
);

t.test('aliases: first writer wins, everyone else is refused, even the same user with another create', async (t) => {
  const m = new LinkMachine();
  t.match(create(m, 'my-alias', { created_by: 'ann' }), { ok: true, retried: false });
  t.same(create(m, 'my-alias', { created_by: 'bob' }), { ok: false, error: 'taken' });
  t.same(
    create(m, 'my-alias', { created_by: 'ann', created_at: 11 }),
    { ok: false, error: 'taken' },
    'a second create by the creator is not a retry',
  );
  t.equal(m.get('my-alias')!.created_by, 'ann');
});

t.test(
  'delete: the creator or the cluster; not_found; forbidden; a repeated delete still succeeds; the code stays taken',
  async (t) => {
    const m = new LinkMachine();
    const changes: LinkChange[] = [];
    m.onChange = (c) => changes.push(c);
    create(m, 'alias-one', { created_by: 'ann' });
    create(m, 'alias-two', { created_by: 'ann' });
    t.same(run(m, { op: 'delete', code: 'nothing-here', by: 'ann' }), { ok: false, error: 'not_found' });
    t.same(run(m, { op: 'delete', code: 'alias-one', by: 'bob' }), { ok: false, error: 'forbidden' });
    t.match(run(m, { op: 'delete', code: 'alias-one', by: 'ann' }, 5_000), {
      ok: true,
      op: 'delete',
      link: { deleted_at: 5_000 },
    });
    t.match(
      run(m, { op: 'delete', code: 'alias-one', by: 'ann' }, 6_000),
      { ok: true, link: { deleted_at: 5_000 } },
      'retry',
    );
    t.match(run(m, { op: 'delete', code: 'alias-two', by: null }), { ok: true }, 'the cluster deletes anything');
    t.same(
      changes,
      [
        { kind: 'deleted', code: 'alias-one' },
        { kind: 'deleted', code: 'alias-two' },
      ],
      'one change per delete',
    );
    t.same(
      create(m, 'alias-one', { created_by: 'ann' }),
      { ok: false, error: 'taken' },
      'a deleted code is never reissued',
    );
  },
);

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
    fc.record({
      op: fc.constant('create' as const),
      code: fc.oneof(
        fc.integer({ min: 0, max: 3000 }).map((i) => codeForId(i) ?? '0000000'),
        fc.constantFrom('alias-aaa', 'alias-bbb'),
      ),
      long_url: fc.constantFrom('https://a.example/', 'https://b.example/'),
      created_at: fc.constant(1),
      expires_at: fc.integer({ min: 2, max: 80 }),
      created_by: fc.constantFrom('ann', 'bob'),
      alias: fc.boolean(),
    }),
    fc.record({
      op: fc.constant('delete' as const),
      code: fc.constantFrom('alias-aaa', 'alias-bbb'),
      by: fc.constantFrom('ann', 'bob', null),
    }),
    fc.record({
      op: fc.constant('purge' as const),
      before: fc.integer({ min: 0, max: 80 }),
      codes: fc.array(
        fc.oneof(
          fc.integer({ min: 0, max: 3000 }).map((i) => codeForId(i) ?? '0000000'),
          fc.constantFrom('alias-aaa', 'alias-bbb'),
        ),
        { maxLength: 5 },
      ),
    }),
  );
  holds(
    t,
    fc.property(fc.array(command, { maxLength: 60 }), (commands) => {
      const a = new LinkMachine();
      const b = new LinkMachine();
      for (const [i, c] of commands.entries()) {
        const ctx = { index: i + 1, term: 1, time: i };
        if (JSON.stringify(a.apply(c as LinkCommand, ctx)) !== JSON.stringify(b.apply(c as LinkCommand, ctx)))
          return false;
      }
      return Buffer.from(a.snapshot()).equals(Buffer.from(b.snapshot()));
    }),
    { numRuns: 300 },
  );
});

const spec = (code: string, over: Partial<CreateSpec> = {}): CreateSpec => ({
  code,
  long_url: 'https://example.com/',
  created_at: 10,
  expires_at: 1e12,
  created_by: 'ann',
  alias: code.length > 7,
  ...over,
});

t.test('create_many: one entry, a result per link in order; the first claim of a code in the batch wins', async (t) => {
  const m = new LinkMachine();
  run(m, { op: 'lease', server: 'app1' });
  create(m, 'old-alias', { created_by: 'bob' });
  const r = run(m, {
    op: 'create_many',
    links: [
      spec(codeForId(1)!),
      spec('new-alias', { created_by: 'ann', long_url: 'https://a.example/' }),
      spec('new-alias', { created_by: 'bob', long_url: 'https://b.example/' }),
      spec('new-alias', { created_by: 'ann', long_url: 'https://a.example/' }),
      spec('old-alias', { created_by: 'ann' }),
      spec(codeForId(LEASE_SIZE + 5)!),
      spec('old-alias', { created_by: 'bob' }),
    ],
  });
  t.match(r, { ok: true, op: 'create_many' });
  const statuses = (r as Extract<LinkResult, { op: 'create_many' }>).results.map((x) => x.status);
  t.same(
    statuses,
    ['created', 'created', 'taken', 'taken', 'taken', 'not_leased', 'retried'],
    'generated code created; alias: first claim wins, a later identical claim in the same batch is not a retry; a code already taken; an id never leased; an identical re-create of an older link is a retry',
  );
  t.equal(m.get('new-alias')!.long_url, 'https://a.example/');
  t.equal(m.size, 3);
});

t.test(
  'create_many: re-sending a whole batch (a retry after a lost answer) gives every link the same answer',
  async (t) => {
    const m = new LinkMachine();
    run(m, { op: 'lease', server: 'app1' });
    create(m, 'someone-elses', { created_by: 'bob' });
    const links = [
      spec(codeForId(7)!),
      spec('contested', { created_by: 'ann' }),
      spec('contested', { created_by: 'bob' }),
      spec('someone-elses'),
    ];
    const first = run(m, { op: 'create_many', links }) as Extract<LinkResult, { op: 'create_many' }>;
    const again = run(m, { op: 'create_many', links }) as Extract<LinkResult, { op: 'create_many' }>;
    const won = (r: typeof first) => r.results.map((x) => x.status === 'created' || x.status === 'retried');
    t.same(
      first.results.map((x) => x.status),
      ['created', 'created', 'taken', 'taken'],
    );
    t.same(
      again.results.map((x) => x.status),
      ['retried', 'retried', 'taken', 'taken'],
    );
    t.same(won(again), won(first), 'the same links succeed');
  },
);

t.test(
  'create_many equals the same creates one entry each (property), apart from identical claims within one batch',
  async (t) => {
    const link = fc
      .record({
        code: fc.oneof(
          fc.integer({ min: 0, max: 1500 }).map((i) => codeForId(i) ?? '0000000'),
          fc.constantFrom('alias-aaa', 'alias-bbb', 'alias-ccc'),
        ),
        long_url: fc.constantFrom('https://a.example/', 'https://b.example/'),
        created_at: fc.constant(1),
        expires_at: fc.constant(9e12),
        created_by: fc.constantFrom('ann', 'bob'),
      })
      .map((l) => ({ ...l, alias: l.code.length > 7 }));
    holds(
      t,
      fc.property(fc.array(link, { maxLength: 40 }), (links) => {
        const single = new LinkMachine();
        const batched = new LinkMachine();
        run(single, { op: 'lease', server: 'a' });
        run(batched, { op: 'lease', server: 'a' });
        const one = links.map((l) => run(single, { op: 'create', ...l }));
        const many = (run(batched, { op: 'create_many', links }) as Extract<LinkResult, { op: 'create_many' }>).results;
        const seen = new Set<string>();
        for (const [i, l] of links.entries()) {
          const a = one[i]!;
          const b = many[i]!;
          const expected = !a.ok
            ? a.error
            : a.op === 'create' && a.retried
              ? seen.has(l.code)
                ? 'taken'
                : 'retried'
              : 'created';
          if (b.status !== expected) return false;
          if (a.ok) seen.add(l.code);
        }
        return Buffer.from(single.snapshot()).equals(Buffer.from(batched.snapshot()));
      }),
      { numRuns: 300 },
    );
  },
);

const DAY = 24 * 60 * 60 * 1000;

t.test('purge: drops links dead at or before the cutoff and before the entry time; live links stay', async (t) => {
  const m = new LinkMachine();
  run(m, { op: 'lease', server: 'a' });
  const expired = codeForId(1)!;
  const deleted = codeForId(2)!;
  const live = codeForId(3)!;
  const laterExpiry = codeForId(4)!;
  create(m, expired, { expires_at: 5 * DAY });
  create(m, deleted, { expires_at: 100 * DAY });
  create(m, live, { expires_at: 100 * DAY });
  create(m, laterExpiry, { expires_at: 7 * DAY });
  run(m, { op: 'delete', code: deleted, by: null }, 6 * DAY);
  const all = [expired, deleted, live, laterExpiry, 'never-existed'];
  t.same(
    run(m, { op: 'purge', before: 5 * DAY - 1, codes: all }, 10 * DAY),
    { ok: true, op: 'purge', purged: 0 },
    'nothing died before the cutoff',
  );
  t.same(
    run(m, { op: 'purge', before: 9 * DAY, codes: all }, 4 * DAY),
    { ok: true, op: 'purge', purged: 0 },
    'a cutoff ahead of the entry time is clamped to it',
  );
  t.same(run(m, { op: 'purge', before: 6 * DAY, codes: all }, 30 * DAY), { ok: true, op: 'purge', purged: 2 });
  t.equal(m.get(expired), null, 'expired at the cutoff: purged');
  t.equal(m.get(deleted), null, 'deleted at the cutoff: purged');
  t.not(m.get(live), null, 'live: kept');
  t.not(m.get(laterExpiry), null, 'expires after the cutoff: kept');
  t.equal(m.size, 2);
  t.same(
    run(m, { op: 'purge', before: 6 * DAY, codes: all }, 30 * DAY),
    { ok: true, op: 'purge', purged: 0 },
    'a repeated purge is a no-op',
  );
});

t.test(
  'purge: a purged alias stays taken (also after snapshot/restore); a purged generated code is never leased again',
  async (t) => {
    const m = new LinkMachine();
    run(m, { op: 'lease', server: 'a' });
    create(m, 'gone-alias', { expires_at: 2 * DAY });
    create(m, codeForId(9)!, { expires_at: 2 * DAY });
    run(m, { op: 'purge', before: 3 * DAY, codes: ['gone-alias', codeForId(9)!] }, 4 * DAY);
    t.equal(m.size, 0);
    t.equal(m.retiredCount, 1, 'only the alias leaves a trace');
    t.same(create(m, 'gone-alias', { created_by: 'bob', expires_at: 90 * DAY }), { ok: false, error: 'taken' });
    const copy = new LinkMachine();
    copy.restore(m.snapshot());
    t.same(
      create(copy, 'gone-alias', { created_by: 'bob', expires_at: 90 * DAY }),
      { ok: false, error: 'taken' },
      'after restore too',
    );
    t.same(
      (
        run(copy, { op: 'create_many', links: [spec('gone-alias', { created_by: 'bob' })] }) as Extract<
          LinkResult,
          { op: 'create_many' }
        >
      ).results,
      [{ status: 'taken' }],
    );
    t.same(
      run(copy, { op: 'lease', server: 'a' }),
      { ok: true, op: 'lease', start: LEASE_SIZE, end: 2 * LEASE_SIZE },
      'the id counter never goes back',
    );
  },
);

t.test(
  'purge: deterministic on every member, and a snapshot of an older format (no retired aliases) still restores',
  async (t) => {
    const a = new LinkMachine();
    const b = new LinkMachine();
    for (const m of [a, b]) {
      run(m, { op: 'lease', server: 'a' }, 1);
      for (let i = 0; i < 20; i++) create(m, codeForId(i)!, { expires_at: (i + 1) * DAY });
      create(m, 'old-alias-x', { expires_at: DAY });
      run(
        m,
        {
          op: 'purge',
          before: 10 * DAY,
          codes: [...Array.from({ length: 20 }, (_, i) => codeForId(i)!), 'old-alias-x'],
        },
        12 * DAY,
      );
    }
    t.equal(a.size, 10);
    t.ok(Buffer.from(a.snapshot()).equals(Buffer.from(b.snapshot())), 'same snapshot');
    const legacy = new Packr({ useRecords: false }).pack({
      nextId: 1000,
      links: [['alias-legacy', 'https://x.example/', 1, 9e12, 'ann', true, null]],
    });
    const c = new LinkMachine();
    c.restore(legacy);
    t.equal(c.size, 1);
    t.equal(c.retiredCount, 0);
  },
);
