/**
 * The pure parts the service added around the machine: the signed tokens (challenge, anti-bot, user), where shards
 * live, the machine's reads for the gateways (a key's outcome, winners from an offset), a deal's own payment
 * window, the gateway settings and the paced smoke runner.
 */
import t from 'tap';
import { FlashMachine, RESERVATION_WINDOW_MS, type FlashCommand, type FlashResult } from '../src/machine.js';
import {
  checkBotToken,
  checkChallenge,
  checkUserToken,
  eligible,
  makeBotToken,
  makeChallenge,
  makeUserToken,
  MIN_ACCOUNT_AGE_MS,
  solveChallenge,
  workBits,
} from '../src/workers/gateway/tokens.js';
import { groupOfShard, groupsOfDeal, INVENTORY_GROUPS, parseInventoryGroup, shardCounts } from '../src/placement.js';
import { shardOfReservation, snapshotState, type DealSnapshot } from '../src/inventory.js';
import { gatewaySettings } from '../src/workers/gateway/gateway.js';
import { runSmoke, type SmokeReport } from '../src/workers/gateway/smoke.js';

const SECRET = 'cluster-token';
const NOW = 1_700_000_000_000;

t.test('challenge: bound to deal, user and time; the work is leading zero bits of SHA-256', async (t) => {
  const c = makeChallenge(SECRET, 'd1', 'u1', NOW);
  t.equal(checkChallenge(SECRET, c, 'd1', 'u1', NOW + 1_000), 'ok');
  t.equal(checkChallenge(SECRET, c, 'd1', 'u2', NOW), 'invalid', 'another user');
  t.equal(checkChallenge(SECRET, c, 'd2', 'u1', NOW), 'invalid', 'another deal');
  t.equal(checkChallenge('other-secret', c, 'd1', 'u1', NOW), 'invalid', 'another cluster');
  t.equal(checkChallenge(SECRET, c, 'd1', 'u1', NOW + 10 * 60_000 + 1), 'expired');
  t.equal(
    checkChallenge(SECRET, c.replace(/\.\d+\./, `.${NOW + 5}.`), 'd1', 'u1', NOW),
    'invalid',
    'a changed time breaks the MAC',
  );
  t.equal(checkChallenge(SECRET, 'garbage', 'd1', 'u1', NOW), 'invalid');
  for (const bits of [0, 4, 8, 12]) {
    const nonce = solveChallenge(c, bits);
    t.match(nonce, /^\d+$/, 'a decimal nonce');
    t.ok(workBits(c, nonce) >= bits, `${bits} bits solved`);
  }
  // workBits counts exactly: compare with a direct reading of the digest.
  const { createHash } = await import('node:crypto');
  for (let n = 0; n < 200; n++) {
    const d = createHash('sha256').update(`${c}:${n}`).digest();
    let expected = 0;
    for (const byte of d) {
      if (byte === 0) {
        expected += 8;
        continue;
      }
      expected += Math.clz32(byte) - 24;
      break;
    }
    if (workBits(c, String(n)) !== expected) t.fail(`nonce ${n}`);
  }
});

t.test('anti-bot token: for one user and deal, until it expires', async (t) => {
  const b = makeBotToken(SECRET, 'd1', 'u1', NOW + 60_000);
  t.ok(checkBotToken(SECRET, b, 'd1', 'u1', NOW));
  t.notOk(checkBotToken(SECRET, b, 'd1', 'u2', NOW), 'another user');
  t.notOk(checkBotToken(SECRET, b, 'd2', 'u1', NOW), 'another deal');
  t.notOk(checkBotToken(SECRET, b, 'd1', 'u1', NOW + 60_000), 'expired');
  t.notOk(
    checkBotToken(SECRET, b.replace(`${NOW + 60_000}`, `${NOW + 600_000}`), 'd1', 'u1', NOW),
    'a longer expiry breaks the MAC',
  );
  t.notOk(checkBotToken(SECRET, '', 'd1', 'u1', NOW));
});

t.test('user token: carries the account; the account-farm rule', async (t) => {
  const account = { userId: 'u1', createdAt: NOW - MIN_ACCOUNT_AGE_MS, paymentVerified: true };
  const token = makeUserToken(SECRET, account);
  t.same(checkUserToken(SECRET, token), account);
  t.equal(checkUserToken('other', token), null, 'another cluster');
  const [, payload, mac] = token.split('.');
  const forged = Buffer.from(JSON.stringify(['u1', 0, true])).toString('base64url');
  t.equal(checkUserToken(SECRET, `u1.${forged}.${mac}`), null, 'a changed account breaks the MAC');
  t.equal(checkUserToken(SECRET, `u1.${payload}`), null);
  t.ok(eligible(account, NOW), 'exactly 30 days old, verified');
  t.notOk(eligible(account, NOW - 1), 'a millisecond younger');
  t.notOk(eligible({ ...account, paymentVerified: false }, NOW), 'no verified payment method');
});

t.test('where shards live', async (t) => {
  t.same(shardCounts(1000, 20), Array(20).fill(50), '20 shards of 50');
  t.same(shardCounts(10, 4), [3, 3, 2, 2], 'the remainder to the first');
  t.equal(
    shardCounts(7, 3).reduce((a, b) => a + b, 0),
    7,
  );
  t.equal(groupOfShard(0), 'flash.inv.0');
  t.equal(groupOfShard(INVENTORY_GROUPS + 1), 'flash.inv.1');
  t.same(groupsOfDeal(2), [0, 1]);
  t.equal(groupsOfDeal(20).length, INVENTORY_GROUPS);
  t.equal(parseInventoryGroup('flash.inv.3'), 3);
  t.equal(parseInventoryGroup(`flash.inv.${INVENTORY_GROUPS}`), null);
  t.equal(parseInventoryGroup('log.x.0'), null);
  t.equal(shardOfReservation('12-abcDEF_-'), 12);
  t.equal(shardOfReservation('x-abc'), null);
  t.equal(shardOfReservation('1-'), null);
});

t.test('snapshot state: live only by the recorded broadcast, never the gateway clock', async (t) => {
  const d: DealSnapshot = {
    dealId: 'd',
    skuId: 's',
    totalInventory: 2,
    startAt: NOW,
    endAt: NOW + 1_000,
    shards: 2,
    liveAt: null,
    alive: [0, 1],
    remaining: 2,
    winners: [],
  };
  t.equal(snapshotState(d, NOW + 500), 'upcoming', 'start_at passed by this clock, no broadcast yet');
  t.equal(snapshotState({ ...d, liveAt: NOW - 2_000 }, NOW - 1_000), 'live', 'the broadcast before start_at');
  t.equal(snapshotState({ ...d, liveAt: NOW, alive: [] }, NOW + 1), 'sold_out');
  t.equal(snapshotState({ ...d, liveAt: NOW }, NOW + 1_000), 'ended');
});

let index = 0;
const run = (m: FlashMachine, c: FlashCommand, time: number): FlashResult =>
  m.apply(c, { index: ++index, term: 1, time });

t.test('machine reads for the gateways: attemptOf, winnersFrom; a deal window', async (t) => {
  const m = new FlashMachine();
  t.match(
    run(
      m,
      {
        op: 'createDeal',
        dealId: 'd',
        skuId: 's',
        totalInventory: 2,
        startAt: NOW,
        endAt: NOW + 3_600_000,
        shardCount: 2,
        shards: [
          { shard: 0, count: 1 },
          { shard: 1, count: 1 },
        ],
        windowMs: 5_000,
      },
      NOW - 1,
    ),
    { ok: true },
  );
  t.same(
    run(
      m,
      {
        op: 'createDeal',
        dealId: 'd',
        skuId: 's',
        totalInventory: 2,
        startAt: NOW,
        endAt: NOW + 3_600_000,
        shardCount: 2,
        shards: [
          { shard: 0, count: 1 },
          { shard: 1, count: 1 },
        ],
      },
      NOW,
    ),
    { ok: false, error: 'deal_exists' },
    'another window is another record',
  );
  t.equal(m.attemptOf('nope', 'a', 'k'), null);
  t.same(m.attemptOf('d', 'a', 'k'), { status: 'unknown' });
  const won = run(m, { op: 'reserve', dealId: 'd', shard: 0, userId: 'a', key: 'k', reservationId: '0-a' }, NOW + 10);
  t.match(won, { ok: true, outcome: 'won', reservation: { expiresAt: NOW + 10 + 5_000 } }, "the deal's own window");
  t.match(
    m.attemptOf('d', 'a', 'other-key'),
    { status: 'won', reservation: { reservationId: '0-a' } },
    'any key of a winner reads the win',
  );
  // b: home shard 0 empty, re-routed to 1 (pinned): not decided for good at home.
  t.match(
    run(m, { op: 'reserve', dealId: 'd', shard: 0, userId: 'b', key: 'k', reservationId: '0-b', reroute: 1 }, NOW + 20),
    { outcome: 'lost', reroute: 1 },
  );
  t.same(m.attemptOf('d', 'b', 'k'), { status: 'unknown' }, 'lost at home with a re-route pending: unknown');
  t.match(run(m, { op: 'reserve', dealId: 'd', shard: 1, userId: 'b', key: 'k', reservationId: '1-b' }, NOW + 30), {
    outcome: 'won',
  });
  // c: both shards empty now; lost at home with no re-route left.
  t.match(run(m, { op: 'reserve', dealId: 'd', shard: 0, userId: 'c', key: 'k', reservationId: '0-c' }, NOW + 40), {
    outcome: 'lost',
    reroute: null,
  });
  t.same(m.attemptOf('d', 'c', 'k'), { status: 'lost' });
  t.same(m.winnersFrom('d', 0), {
    total: 2,
    winners: [
      ['a', '0-a', NOW + 5_010],
      ['b', '1-b', NOW + 5_030],
    ],
  });
  t.same(m.winnersFrom('d', 1), { total: 2, winners: [['b', '1-b', NOW + 5_030]] }, 'from an offset');
  t.same(m.winnersFrom('d', 2), { total: 2, winners: [] });
  t.equal(m.winnersFrom('nope', 0), null);
  // The window survives a snapshot; a deal of the default window snapshots as before.
  const copy = new FlashMachine();
  copy.restore(m.snapshot());
  t.same(copy.snapshot(), m.snapshot());
  t.match(
    run(copy, { op: 'expire', reservationIds: ['0-a'] }, NOW + 5_010),
    { ok: true, expired: ['0-a'] },
    'expired at its own window',
  );
  t.equal(RESERVATION_WINDOW_MS, 600_000);
  t.throws(
    () =>
      run(
        new FlashMachine(),
        {
          op: 'createDeal',
          dealId: 'e',
          skuId: 's',
          totalInventory: 1,
          startAt: NOW,
          endAt: NOW + 1,
          shardCount: 1,
          shards: [{ shard: 0, count: 1 }],
          windowMs: 10,
        },
        NOW,
      ),
    /windowMs/,
  );
});

t.test('gateway settings', async (t) => {
  const d = gatewaySettings({});
  t.same([d.challengeBits, d.ipRate, d.userRate, d.trustProxy, d.reservationWindowMs], [16, 50, 2, false, null]);
  t.equal(gatewaySettings({ challenge_bits: '8' }).challengeBits, 8);
  t.throws(() => gatewaySettings({ challenge_bits: '40' }), /challenge_bits/);
  t.throws(() => gatewaySettings({ ip_rate: 'lots' }), /ip_rate/);
  t.equal(gatewaySettings({ trust_proxy: '1' }).trustProxy, true);
});

t.test('the smoke runner paces attempts and counts outcomes', async (t) => {
  const report: SmokeReport = {
    started_at: '',
    seconds: 0.5,
    rps: 40,
    sent: 0,
    answered: 0,
    refused: 0,
    errors: 0,
    done: false,
  };
  await runSmoke(
    report,
    500,
    40,
    () => false,
    async (n) => {
      if (n % 5 === 1) throw Object.assign(new Error('limited'), { status: 429 });
      if (n % 5 === 2) throw new Error('down');
    },
  );
  t.ok(report.done);
  t.ok(report.sent >= 15 && report.sent <= 30, `about 20 sent in 0.5 s at 40/s (${report.sent})`);
  t.equal(report.answered + report.refused + report.errors, report.sent);
  t.ok(report.refused > 0 && report.errors > 0);
});
