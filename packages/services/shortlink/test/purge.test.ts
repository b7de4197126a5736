/** The leader's purge scan (pure) and the member's purge options. */
import t from 'tap';
import { codeForId } from '../src/codes.js';
import { LinkMachine } from '../src/machine.js';
import { PURGE_DEFAULTS, PurgeScanner, purgeOptions } from '../src/members/purge.js';

const DAY = 24 * 60 * 60 * 1000;
let index = 0;

/** A machine with `n` generated links; link i expires on day i + 1; every fifth is deleted at day 0.5. */
function store(n: number): LinkMachine {
  const m = new LinkMachine();
  const ctx = (time: number) => ({ index: ++index, term: 1, time });
  for (let i = 0; i * 1000 < n; i++) m.apply({ op: 'lease', server: 'a' }, ctx(0));
  for (let i = 0; i < n; i++) {
    m.apply(
      {
        op: 'create',
        code: codeForId(i)!,
        long_url: `https://example.com/${i}`,
        created_at: 0,
        expires_at: (i + 1) * DAY,
        created_by: 'ann',
        alias: false,
      },
      ctx(0),
    );
    if (i % 5 === 0) m.apply({ op: 'delete', code: codeForId(i)!, by: null }, ctx(DAY / 2));
  }
  return m;
}

t.test('the scan picks exactly the links dead at or before the cutoff, resuming where it stopped', async (t) => {
  const m = store(100);
  const scanner = new PurgeScanner(() => m.entries());
  const before = 10 * DAY;
  const found: string[] = [];
  const steps: boolean[] = [];
  for (;;) {
    const { codes, seen, done } = scanner.next(before, 30, 1000);
    t.ok(seen <= 30, 'never more than the budget');
    found.push(...codes);
    steps.push(done);
    if (done) break;
  }
  t.same(steps, [false, false, false, true], '100 links in walks of 30: 4 calls');
  // Expired by day 10: links 0..9; deleted at day 0.5: every fifth.
  const expected = Array.from({ length: 100 }, (_, i) => i)
    .filter((i) => i < 10 || i % 5 === 0)
    .map((i) => codeForId(i)!);
  t.same(found, expected);
  t.same(
    scanner.next(before, 5, 1000).codes,
    [codeForId(0), codeForId(1), codeForId(2), codeForId(3), codeForId(4)],
    'a finished walk starts over',
  );
});

t.test('the scan stops at `max` codes and reports how many links it examined', async (t) => {
  const m = store(50);
  const scanner = new PurgeScanner(() => m.entries());
  const first = scanner.next(100 * DAY, 1000, 7);
  t.same(first, { codes: Array.from({ length: 7 }, (_, i) => codeForId(i)!), seen: 7, done: false });
  t.equal(scanner.next(100 * DAY, 1000, 7).codes[0], codeForId(7), 'resumes after the last code it gave');
});

t.test('a scan across applies: purged entries are skipped, and what it proposes the machine purges', async (t) => {
  const m = store(40);
  const scanner = new PurgeScanner(() => m.entries());
  const before = 20 * DAY;
  const first = scanner.next(before, 10, 1000);
  m.apply({ op: 'purge', before, codes: first.codes }, { index: ++index, term: 1, time: 30 * DAY });
  // Purge what the rest of the walk finds, while the walk goes on over the same map.
  for (let step = scanner.next(before, 10, 1000); ; step = scanner.next(before, 10, 1000)) {
    const r = m.apply({ op: 'purge', before, codes: step.codes }, { index: ++index, term: 1, time: 30 * DAY });
    t.same(r, { ok: true, op: 'purge', purged: step.codes.length }, 'every proposed code is purged');
    if (step.done) break;
  }
  // Left: links 20..39 that are not deleted (every fifth is).
  t.equal(m.size, 16);
  t.same(scanner.next(before, 1000, 1000).codes, [], 'a new walk finds nothing more');
});

t.test(
  'purge options: defaults of one day and one minute; the environment overrides; bad values refused',
  async (t) => {
    t.same(purgeOptions({}), PURGE_DEFAULTS);
    t.equal(PURGE_DEFAULTS.graceMs, DAY);
    t.match(purgeOptions({ SHORTLINK_PURGE_GRACE_MS: '1500', SHORTLINK_PURGE_EVERY_MS: '200' }), {
      graceMs: 1500,
      everyMs: 200,
    });
    t.throws(() => purgeOptions({ SHORTLINK_PURGE_GRACE_MS: '-1' }), /SHORTLINK_PURGE_GRACE_MS/);
    t.throws(() => purgeOptions({ SHORTLINK_PURGE_EVERY_MS: 'soon' }), /SHORTLINK_PURGE_EVERY_MS/);
    t.throws(() => purgeOptions({ SHORTLINK_PURGE_EVERY_MS: '1' }), /SHORTLINK_PURGE_EVERY_MS/);
  },
);
