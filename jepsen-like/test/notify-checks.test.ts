import t from 'tap';
import type { HistoryEvent } from '../src/history.js';
import { checkNotify, type Delivery } from '../src/workloads/notify-checks.js';

const MS = 1e6;
const BOUND = { criticalMs: 30_000 };
/** The wall clock (ms) at history time 0. */
const WALL0 = 1_700_000_000_000;

function history() {
  const events: HistoryEvent[] = [];
  let clock = 0;
  let proc = 0;
  const op = (f: string, key: string | undefined, input: unknown, type: 'ok' | 'fail' | 'info', value?: unknown) => {
    const p = proc++;
    events.push({ process: p, type: 'invoke', f, ...(key ? { key } : {}), value: input, time: (clock += 10 * MS) });
    events.push({ process: p, type, f, ...(key ? { key } : {}), value, time: (clock += 10 * MS) });
  };
  const wall = (): number => WALL0 + clock / MS;
  return {
    events,
    wall,
    send(key: string, users: string[], priority: string, nid: string | null): void {
      op(
        'send',
        key,
        { users, priority },
        nid === null ? 'info' : 'ok',
        nid === null ? undefined : { notification_id: nid, duplicate: false, wall: WALL0 + (clock + 10 * MS) / MS },
      );
    },
    kill(targets: string[]): void {
      events.push({
        process: 'nemesis',
        type: 'info',
        f: 'start-kill',
        value: { id: 1, targets, description: `kill ${targets.join(' ')}` },
        time: (clock += 10 * MS),
      });
    },
    heal(): void {
      events.push({ process: 'nemesis', type: 'info', f: 'heal', time: (clock += 10 * MS) });
    },
    wait(ms: number): void {
      clock += ms * MS;
    },
    final(received: Delivery[], inbox: Array<[string, number]>): void {
      op('final-deliveries', undefined, undefined, 'ok', { received, inbox });
    },
  };
}

/** Every owed delivery of notification `nid` to `users`, at wall time `at`. */
function everything(nid: string, users: string[], critical: boolean, at: number) {
  const received: Delivery[] = [];
  const inbox: Array<[string, number]> = [];
  for (const u of users) {
    received.push(['push', `${nid}:${u}:push`, at], ['email', `${nid}:${u}:email`, at]);
    if (critical) received.push(['sms', `${nid}:${u}:sms`, at]);
    inbox.push([`${nid}:${u}:in_app`, at]);
  }
  return { received, inbox };
}

const named = (rs: ReturnType<typeof checkNotify>, name: string) => rs.find((r) => r.name === name)!;

function clean() {
  const h = history();
  h.send('k1', ['u0', 'u1'], 'critical', null);
  h.send('k1', ['u0', 'u1'], 'critical', 'N1');
  h.send('k2', ['u2'], 'low', 'N2');
  const at = h.wall() + 500;
  h.heal();
  const a = everything('N1', ['u0', 'u1'], true, at);
  const b = everything('N2', ['u2'], false, at);
  return { h, received: [...a.received, ...b.received], inbox: [...a.inbox, ...b.inbox] };
}

t.test('every owed delivery once, in time: valid', async (t) => {
  const { h, received, inbox } = clean();
  h.final(received, inbox);
  const rs = checkNotify(h.events, BOUND);
  for (const r of rs) t.equal(r.valid, true, r.name);
  t.equal(named(rs, 'notify-exactly-once').stats?.owed_deliveries, 11);
  t.equal(named(rs, 'notify-critical-bound').stats?.critical_deliveries, 8);
});

t.test('a missing delivery: lost', async (t) => {
  const { h, received, inbox } = clean();
  h.final(
    received.filter(([, m]) => m !== 'N1:u1:sms'),
    inbox,
  );
  const r = named(checkNotify(h.events, BOUND), 'notify-exactly-once');
  t.equal(r.valid, false);
  t.same(
    r.anomalies.map((a) => a.type),
    ['lost'],
  );
  t.match(r.anomalies[0]?.description, /no sms delivery to u1/);
});

t.test(
  'the same message_id again after a delivery worker kill: a resend, counted, not a second delivery',
  async (t) => {
    const { h, received, inbox } = clean();
    h.wait(100);
    h.kill(['n3', 'delivery1']);
    h.wait(5_000);
    h.final([...received, ['email', 'N2:u2:email', h.wall()]], inbox);
    const r = named(checkNotify(h.events, BOUND), 'notify-exactly-once');
    t.equal(r.valid, true);
    t.equal(r.stats?.provider_resends, 1);
    t.equal(r.stats?.resends_after_worker_kill, 1);
    t.equal(r.stats?.duplicates, 0);
  },
);

t.test('the same message_id again with only a router or a member killed, or none: a resend anomaly', async (t) => {
  for (const targets of [[], ['n2', 'router2'], ['n1']]) {
    const { h, received, inbox } = clean();
    h.wait(100);
    if (targets.length > 0) h.kill(targets);
    h.wait(5_000);
    h.final([...received, ['email', 'N2:u2:email', h.wall()], ['push', 'N1:u0:push', h.wall()]], inbox);
    const r = named(checkNotify(h.events, BOUND), 'notify-exactly-once');
    t.equal(r.valid, false, targets.join(' ') || 'no fault');
    t.same(
      r.anomalies.map((a) => a.type),
      ['resend', 'resend'],
    );
    t.match(r.anomalies[0]?.description, /N1:u0:push to u0 received again \d+ ms after/);
    t.equal(r.stats?.provider_resends, 2);
    t.equal(r.stats?.resends_after_worker_kill, 0);
  }
});

t.test('a delivery worker killed before the first receipt explains no resend', async (t) => {
  const h = history();
  h.send('k2', ['u2'], 'low', 'N2');
  h.kill(['delivery1']);
  h.wait(5_000);
  h.heal();
  const b = everything('N2', ['u2'], false, h.wall());
  h.final([...b.received, ['email', 'N2:u2:email', h.wall() + 10]], b.inbox);
  const r = named(checkNotify(h.events, BOUND), 'notify-exactly-once');
  t.equal(r.valid, false);
  t.same(
    r.anomalies.map((a) => a.type),
    ['resend'],
  );
});

t.test('one key accepted as two notifications, each delivered: two-notifications and duplicates', async (t) => {
  const h = history();
  h.send('k1', ['u0'], 'high', 'N1');
  h.send('k1', ['u0'], 'high', 'N9');
  h.heal();
  const a = everything('N1', ['u0'], false, h.wall());
  const b = everything('N9', ['u0'], false, h.wall());
  h.final([...a.received, ...b.received], [...a.inbox, ...b.inbox]);
  const r = named(checkNotify(h.events, BOUND), 'notify-exactly-once');
  t.equal(r.valid, false);
  t.same(new Set(r.anomalies.map((a) => a.type)), new Set(['two-notifications', 'duplicate']));
});

t.test('a user not named, SMS for a non-critical key, a delivery of nothing accepted', async (t) => {
  const { h, received, inbox } = clean();
  h.final(
    [...received, ['email', 'N2:u5:email', h.wall()], ['sms', 'N2:u2:sms', h.wall()], ['push', 'NX:u0:push', h.wall()]],
    inbox,
  );
  const r = named(checkNotify(h.events, BOUND), 'notify-exactly-once');
  t.same(
    r.anomalies.map((a) => a.type),
    ['wrong-user', 'unowed-channel', 'phantom'],
  );
});

t.test('a critical delivery past the bound after the heal: late-critical; a late low one is not', async (t) => {
  const h = history();
  h.send('k1', ['u0'], 'critical', 'N1');
  h.send('k2', ['u0'], 'low', 'N2');
  h.heal();
  const healWall = h.wall();
  const a = everything('N1', ['u0'], true, healWall + 10_000);
  a.received[2]![2] = healWall + 31_000;
  const b = everything('N2', ['u0'], false, healWall + 60_000);
  h.final([...a.received, ...b.received], [...a.inbox, ...b.inbox]);
  const rs = checkNotify(h.events, BOUND);
  t.equal(named(rs, 'notify-exactly-once').valid, true);
  const r = named(rs, 'notify-critical-bound');
  t.equal(r.valid, false);
  t.equal(r.anomalies.length, 1);
  t.match(r.anomalies[0]?.description, /sms to u0 delivered 31\.0 s after/);
});

t.test('without the final deliveries the verdict is unknown', async (t) => {
  const h = history();
  h.send('k1', ['u0'], 'critical', 'N1');
  for (const r of checkNotify(h.events, BOUND)) t.equal(r.valid, 'unknown', r.name);
});
