/** The deal and reservation tables of the spec, row by row, on the inventory shard machine. */
import t from 'tap';
import {
  dealState,
  FlashMachine,
  GO_LIVE_LEAD_MS,
  RESERVATION_WINDOW_MS,
  type FlashCommand,
  type FlashResult,
} from '../src/machine.js';

const T0 = 1_700_000_000_000;
const END = T0 + 3_600_000;
let index = 0;
function run(m: FlashMachine, command: FlashCommand, time: number): FlashResult {
  return m.apply(command, { index: ++index, term: 1, time });
}
function deal(counts = [2, 1], startAt = T0, endAt = END): FlashMachine {
  const m = new FlashMachine();
  const r = run(
    m,
    {
      op: 'createDeal',
      dealId: 'd',
      skuId: 'sku',
      totalInventory: counts.reduce((a, b) => a + b, 0),
      startAt,
      endAt,
      shardCount: counts.length,
      shards: counts.map((count, shard) => ({ shard, count })),
    },
    startAt - 120_000,
  );
  if (!r.ok) throw new Error(r.error);
  return m;
}
const reserve = (
  m: FlashMachine,
  user: string,
  key: string,
  shard: number,
  time: number,
  reservationId = `r-${user}-${key}`,
) => run(m, { op: 'reserve', dealId: 'd', shard, userId: user, key, reservationId }, time);

t.test('deal states: upcoming, live, sold_out, ended', async (t) => {
  const d = { startAt: T0, endAt: END, liveAt: null };
  t.equal(dealState(d, T0 - 1, 2), 'upcoming');
  t.equal(dealState(d, T0, 2), 'live', 'start_at reached');
  t.equal(dealState({ ...d, liveAt: T0 - 10 }, T0 - 5, 2), 'live', 'the go-live broadcast is trusted over start_at');
  t.equal(dealState(d, T0 + 1, 0), 'sold_out', 'alive-shards bitmap empty');
  t.equal(dealState(d, END, 2), 'ended');
  t.equal(dealState(d, END, 0), 'ended', 'ended wins over sold_out');
});

t.test('attempts before go-live are refused and not remembered; the broadcast opens the deal', async (t) => {
  const m = deal();
  t.same(reserve(m, 'u', 'k', 0, T0 - 10_000), { ok: false, error: 'not_live' });
  t.same(run(m, { op: 'goLive', dealId: 'd' }, T0 - GO_LIVE_LEAD_MS - 1), { ok: false, error: 'too_early' });
  t.same(run(m, { op: 'goLive', dealId: 'd' }, T0 - 1_000), {
    ok: true,
    op: 'goLive',
    dealId: 'd',
    liveAt: T0 - 1_000,
  });
  t.same(
    run(m, { op: 'goLive', dealId: 'd' }, T0 + 1_000),
    { ok: true, op: 'goLive', dealId: 'd', liveAt: T0 - 1_000 },
    'a repeated broadcast changes nothing',
  );
  t.equal(m.stateOf('d', T0 - 500), 'live');
  t.match(reserve(m, 'u', 'k', 0, T0 - 500), { ok: true, outcome: 'won' }, 'the same key wins once live');
});

t.test('winning: a unit decremented, reserved with expires_at 10 minutes ahead', async (t) => {
  const m = deal();
  const r = reserve(m, 'u1', 'k', 0, T0 + 5, 'res1');
  t.same(r, {
    ok: true,
    op: 'reserve',
    outcome: 'won',
    reservation: {
      reservationId: 'res1',
      dealId: 'd',
      skuId: 'sku',
      userId: 'u1',
      shard: 0,
      reservedAt: T0 + 5,
      expiresAt: T0 + 5 + RESERVATION_WINDOW_MS,
      status: 'reserved',
      paymentId: null,
    },
  });
  t.equal(m.getDeal('d')!.remaining, 2);
  t.match(
    reserve(m, 'u1', 'other-key', 1, T0 + 6, 'res2'),
    { ok: true, outcome: 'won', reservation: { reservationId: 'res1' } },
    'a new key of the same user answers the original reservation',
  );
  t.equal(m.getDeal('d')!.remaining, 2, 'and takes no second unit');
  t.equal(m.getReservation('res2'), null);
});

t.test('a shard sells out; the deal sells out when every shard is empty', async (t) => {
  const m = deal([1, 1]);
  t.match(reserve(m, 'a', 'k', 0, T0), { outcome: 'won' });
  t.same(reserve(m, 'b', 'k', 0, T0), {
    ok: true,
    op: 'reserve',
    outcome: 'lost',
    shard: 0,
    shardEmpty: true,
    reroute: null,
  });
  t.same(m.getDeal('d')!.alive, [1]);
  t.equal(m.stateOf('d', T0), 'live');
  t.match(reserve(m, 'b', 'k2', 1, T0), { outcome: 'won' });
  t.same(m.getDeal('d')!.alive, []);
  t.equal(m.stateOf('d', T0), 'sold_out');
  t.same(
    reserve(m, 'b', 'k', 0, T0 + 1),
    { ok: true, op: 'reserve', outcome: 'lost', shard: 0, shardEmpty: true, reroute: null },
    'a lost key retried answers lost',
  );
});

t.test(
  'reserved -> expired by the expiry job at expires_at; the unit goes back; the user keeps their one reservation',
  async (t) => {
    const m = deal([1]);
    reserve(m, 'a', 'k', 0, T0, 'ra');
    t.same(m.dueReservations(T0 + RESERVATION_WINDOW_MS - 1), []);
    t.same(
      run(m, { op: 'expire', reservationIds: ['ra'] }, T0 + RESERVATION_WINDOW_MS - 1),
      { ok: true, op: 'expire', expired: [] },
      'not before expires_at by the entry time',
    );
    t.same(m.dueReservations(T0 + RESERVATION_WINDOW_MS), ['ra']);
    t.same(run(m, { op: 'expire', reservationIds: ['ra', 'nope'] }, T0 + RESERVATION_WINDOW_MS), {
      ok: true,
      op: 'expire',
      expired: ['ra'],
    });
    t.equal(m.getReservation('ra')!.status, 'expired');
    t.equal(m.getDeal('d')!.remaining, 1);
    t.equal(
      m.stateOf('d', T0 + RESERVATION_WINDOW_MS),
      'live',
      'sold_out is derived: the returned unit is on sale again',
    );
    t.match(
      reserve(m, 'a', 'k2', 0, T0 + RESERVATION_WINDOW_MS + 1),
      { outcome: 'won', reservation: { reservationId: 'ra', status: 'expired' } },
      'at most one reservation per account per deal',
    );
    t.match(reserve(m, 'b', 'k', 0, T0 + RESERVATION_WINDOW_MS + 1, 'rb'), {
      outcome: 'won',
      reservation: { reservationId: 'rb', status: 'reserved' },
    });
    t.same(run(m, { op: 'pay', reservationId: 'ra', userId: 'a', paymentId: 'p' }, T0 + RESERVATION_WINDOW_MS + 2), {
      ok: false,
      error: 'reservation_expired',
    });
  },
);

t.test('reserved -> paid before expires_at; paid is final', async (t) => {
  const m = deal([1]);
  reserve(m, 'a', 'k', 0, T0, 'ra');
  t.same(
    run(m, { op: 'pay', reservationId: 'ra', userId: 'b', paymentId: 'p' }, T0 + 1),
    { ok: false, error: 'not_owner' },
    'a reservation_id cannot be transferred',
  );
  t.same(run(m, { op: 'pay', reservationId: 'zz', userId: 'a', paymentId: 'p' }, T0 + 1), {
    ok: false,
    error: 'unknown_reservation',
  });
  t.match(run(m, { op: 'pay', reservationId: 'ra', userId: 'a', paymentId: 'p1' }, T0 + 1), {
    ok: true,
    reservation: { status: 'paid', paymentId: 'p1' },
  });
  t.match(
    run(m, { op: 'pay', reservationId: 'ra', userId: 'a', paymentId: 'p2' }, T0 + 2),
    { ok: true, reservation: { status: 'paid', paymentId: 'p1' } },
    'a repeated pay answers the first',
  );
  t.same(run(m, { op: 'cancel', reservationId: 'ra', userId: 'a' }, T0 + 3), { ok: false, error: 'already_paid' });
  t.same(
    run(m, { op: 'expire', reservationIds: ['ra'] }, T0 + RESERVATION_WINDOW_MS),
    { ok: true, op: 'expire', expired: [] },
    'a paid reservation never expires',
  );
  t.equal(m.getDeal('d')!.remaining, 0);
  const late = deal([1]);
  reserve(late, 'a', 'k', 0, T0, 'ra');
  t.same(
    run(late, { op: 'pay', reservationId: 'ra', userId: 'a', paymentId: 'p' }, T0 + RESERVATION_WINDOW_MS),
    { ok: false, error: 'reservation_expired' },
    'not at or after expires_at, even before the job ran',
  );
});

t.test('reserved -> cancelled by its user gives the unit back', async (t) => {
  const m = deal([1]);
  reserve(m, 'a', 'k', 0, T0, 'ra');
  t.match(run(m, { op: 'cancel', reservationId: 'ra', userId: 'a' }, T0 + 1), {
    ok: true,
    reservation: { status: 'cancelled' },
  });
  t.match(
    run(m, { op: 'cancel', reservationId: 'ra', userId: 'a' }, T0 + 2),
    { ok: true, reservation: { status: 'cancelled' } },
    'a repeated cancel answers the same',
  );
  t.equal(m.getDeal('d')!.remaining, 1);
  t.same(run(m, { op: 'pay', reservationId: 'ra', userId: 'a', paymentId: 'p' }, T0 + 3), {
    ok: false,
    error: 'reservation_cancelled',
  });
});

t.test('deal end: attempts refused, the deal is dropped only after every window is over', async (t) => {
  const m = deal([2]);
  reserve(m, 'a', 'k', 0, END - 1, 'ra');
  t.same(reserve(m, 'b', 'k', 0, END), { ok: false, error: 'deal_ended' });
  t.same(run(m, { op: 'goLive', dealId: 'd' }, END), { ok: false, error: 'deal_ended' });
  t.equal(m.stateOf('d', END), 'ended');
  t.match(
    run(m, { op: 'pay', reservationId: 'ra', userId: 'a', paymentId: 'p' }, END + 1_000),
    { ok: true },
    'a reservation made before the end can still be paid in its window',
  );
  t.same(run(m, { op: 'dropDeal', dealId: 'd' }, END + RESERVATION_WINDOW_MS - 1), { ok: false, error: 'deal_in_use' });
  t.same(run(m, { op: 'dropDeal', dealId: 'd' }, END + RESERVATION_WINDOW_MS), {
    ok: true,
    op: 'dropDeal',
    dealId: 'd',
  });
  t.equal(m.getDeal('d'), null);
  t.equal(m.getReservation('ra'), null);
});

t.test(
  'deal records: a retried create is ok, another record under the id is refused; unknown deal and shard',
  async (t) => {
    const m = deal([2, 1]);
    t.same(
      run(
        m,
        {
          op: 'createDeal',
          dealId: 'd',
          skuId: 'sku',
          totalInventory: 3,
          startAt: T0,
          endAt: END,
          shardCount: 2,
          shards: [
            { shard: 1, count: 1 },
            { shard: 0, count: 2 },
          ],
        },
        T0,
      ),
      { ok: true, op: 'createDeal', dealId: 'd' },
    );
    t.same(
      run(
        m,
        {
          op: 'createDeal',
          dealId: 'd',
          skuId: 'sku',
          totalInventory: 3,
          startAt: T0,
          endAt: END,
          shardCount: 2,
          shards: [{ shard: 0, count: 3 }],
        },
        T0,
      ),
      { ok: false, error: 'deal_exists' },
    );
    t.same(reserve(m, 'u', 'k', 0, T0).ok, true);
    t.same(run(m, { op: 'reserve', dealId: 'x', shard: 0, userId: 'u', key: 'k', reservationId: 'r' }, T0), {
      ok: false,
      error: 'unknown_deal',
    });
    const part = new FlashMachine();
    run(
      part,
      {
        op: 'createDeal',
        dealId: 'd',
        skuId: 'sku',
        totalInventory: 100,
        startAt: T0,
        endAt: END,
        shardCount: 20,
        shards: [{ shard: 3, count: 5 }],
      },
      T0,
    );
    t.same(run(part, { op: 'reserve', dealId: 'd', shard: 4, userId: 'u', key: 'k', reservationId: 'r' }, T0), {
      ok: false,
      error: 'unknown_shard',
    });
    t.same(
      run(part, { op: 'reserve', dealId: 'd', shard: 0, userId: 'u', key: 'k', reservationId: 'r-u-k' }, T0).ok,
      false,
    );
    t.match(
      reserve(m, 'v', 'k', 1, T0, 'r-u-k'),
      { ok: false, error: 'reservation_exists' },
      'a reused reservation id is refused, not overwritten',
    );
  },
);

t.test('remembered lost answers are capped per deal (bounded memory); wins are always remembered', async (t) => {
  const m = deal([0, 1]);
  const cap = 1_024; // MIN_KEYS: 1 unit x KEYS_PER_UNIT is below it
  for (let i = 0; i < cap + 10; i++) reserve(m, `u${i}`, 'k', 0, T0);
  const before = m.snapshot().length;
  for (let i = cap + 10; i < cap + 500; i++) reserve(m, `u${i}`, 'k', 0, T0);
  t.equal(m.snapshot().length, before, 'lost answers past the cap add nothing');
  t.match(reserve(m, 'late', 'k', 1, T0), { outcome: 'won' }, 'a win past the cap is still taken and remembered');
  t.match(reserve(m, 'late', 'k', 1, T0 + 1), { outcome: 'won', reservation: { reservationId: 'r-late-k' } });
});

t.test('the re-route carries the attempt key to another shard, which decides it; each answer is kept', async (t) => {
  const m = deal([0, 1]);
  t.same(
    reserve(m, 'u', 'k', 0, T0),
    { ok: true, op: 'reserve', outcome: 'lost', shard: 0, shardEmpty: true, reroute: null },
    'home shard empty',
  );
  t.match(
    reserve(m, 'u', 'k', 1, T0, 'r-u-k'),
    { outcome: 'won', reservation: { reservationId: 'r-u-k', shard: 1 } },
    're-routed with the same key: won',
  );
  t.match(
    reserve(m, 'u', 'k', 0, T0 + 1, 'other'),
    { outcome: 'won', reservation: { reservationId: 'r-u-k' } },
    'a retry through the home shard answers the win',
  );
  t.equal(m.getDeal('d')!.remaining, 0);
});

t.test(
  'pins: an empty home shard pins the user to the drawn re-route; every later attempt goes there, never a third shard',
  async (t) => {
    const m = deal([1, 1, 1]);
    t.match(reserve(m, 'x', 'k', 0, T0), { outcome: 'won' }, 'shard 0 sold');
    const first = run(
      m,
      { op: 'reserve', dealId: 'd', shard: 0, userId: 'u', key: 'k1', reservationId: 'a1', reroute: 2 },
      T0,
    );
    t.same(first, { ok: true, op: 'reserve', outcome: 'lost', shard: 0, shardEmpty: true, reroute: 2 });
    t.same(
      run(m, { op: 'reserve', dealId: 'd', shard: 0, userId: 'u', key: 'k2', reservationId: 'a2', reroute: 1 }, T0),
      { ok: true, op: 'reserve', outcome: 'lost', shard: 0, shardEmpty: true, reroute: 2 },
      'a new key draws another shard: the pin wins',
    );
    t.match(
      run(m, { op: 'reserve', dealId: 'd', shard: 1, userId: 'u', key: 'k3', reservationId: 'a3' }, T0),
      { outcome: 'lost', shard: 1, shardEmpty: false, reroute: 2 },
      'a third shard with stock refuses the pinned user',
    );
    t.match(
      run(m, { op: 'reserve', dealId: 'd', shard: 2, userId: 'u', key: 'k1', reservationId: 'a1' }, T0),
      { outcome: 'won', reservation: { reservationId: 'a1', shard: 2 } },
      'the pinned shard decides',
    );
    t.equal(m.getDeal('d')!.remaining, 1, 'shard 1 keeps its unit');
    // The pinned shard empty: lost, and no second re-route.
    const n = deal([0, 0, 1]);
    t.same(
      run(n, { op: 'reserve', dealId: 'd', shard: 0, userId: 'u', key: 'k', reservationId: 'b1', reroute: 1 }, T0),
      { ok: true, op: 'reserve', outcome: 'lost', shard: 0, shardEmpty: true, reroute: 1 },
    );
    t.same(
      run(n, { op: 'reserve', dealId: 'd', shard: 1, userId: 'u', key: 'k', reservationId: 'b1', reroute: 2 }, T0),
      { ok: true, op: 'reserve', outcome: 'lost', shard: 1, shardEmpty: true, reroute: null },
    );
    t.same(
      run(n, { op: 'reserve', dealId: 'd', shard: 0, userId: 'u', key: 'k9', reservationId: 'b9', reroute: 2 }, T0),
      { ok: true, op: 'reserve', outcome: 'lost', shard: 0, shardEmpty: true, reroute: 1 },
    );
    t.same(
      run(n, { op: 'reserve', dealId: 'd', shard: 0, userId: 'v', key: 'k', reservationId: 'c', reroute: 0 }, T0),
      { ok: true, op: 'reserve', outcome: 'lost', shard: 0, shardEmpty: true, reroute: null },
      'a re-route to the same shard pins nothing',
    );
    t.same(
      run(n, { op: 'reserve', dealId: 'd', shard: 0, userId: 'w', key: 'k', reservationId: 'c', reroute: 7 }, T0),
      { ok: true, op: 'reserve', outcome: 'lost', shard: 0, shardEmpty: true, reroute: null },
      'nor one past the shard count',
    );
  },
);
