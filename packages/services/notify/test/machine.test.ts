/**
 * The pure parts without sockets or clocks: the state machine (dedup window by the commands' `now`, caps,
 * delivery_log transitions, bounces, fallback rows, the in-app centre, snapshot/restore), quiet hours across
 * daylight-saving changes, templates, and the router's channel choice.
 */
import t from 'tap';
import {
  chooseChannels,
  defaultPreferences,
  DEDUP_WINDOW_MS,
  inQuietHours,
  localMinutes,
  messageId,
  NotifyMachine,
  render,
  type Preferences,
} from '../src/index.js';
import { mergePreferences } from '../src/input.js';
import { nextInChain, parseChain } from '../src/workers/delivery/delivery.js';
import { parseStateGroup, stateGroup, STATE_GROUPS, STATE_PREFIX } from '../src/placement.js';

const T0 = Date.UTC(2026, 0, 15, 12, 0, 0);

t.test('dedup claims last 24 h by the commands clock, and survive snapshot/restore', async (t) => {
  const m = new NotifyMachine();
  t.match(m.apply({ op: 'claim', key: 'k', notification_id: 'n1', now: T0 }), {
    existing: false,
    notification_id: 'n1',
  });
  m.apply({ op: 'queued', key: 'k', notification_id: 'n1' });
  t.match(m.apply({ op: 'claim', key: 'k', notification_id: 'n2', now: T0 + 1000 }), {
    existing: true,
    queued: true,
    notification_id: 'n1',
  });
  const copy = new NotifyMachine();
  copy.restore(m.snapshot());
  t.match(
    copy.apply({ op: 'claim', key: 'k', notification_id: 'n3', now: T0 + DEDUP_WINDOW_MS - 1 }),
    { existing: true, notification_id: 'n1' },
    'still known after a restore',
  );
  t.match(
    copy.apply({ op: 'claim', key: 'k', notification_id: 'n4', now: T0 + DEDUP_WINDOW_MS }),
    { existing: false, notification_id: 'n4' },
    'forgotten after 24 h',
  );
});

t.test('route: caps per channel per hour, critical never capped, a replay changes nothing', async (t) => {
  const m = new NotifyMachine();
  const prefs: Preferences = { ...defaultPreferences(), frequency_cap: [{ channel: 'email', max_per_hour: 1 }] };
  m.apply({ op: 'putPrefs', user_id: 'u', prefs });
  const route = (n: string, priority: 'normal' | 'critical', now: number) =>
    m.apply({
      op: 'route',
      notification_id: n,
      user_id: 'u',
      priority,
      channels: ['email', 'in_app'],
      suppressed: [],
      now,
    });
  t.match(route('n1', 'normal', T0), { duplicate: false, capped: [] });
  t.match(route('n2', 'normal', T0 + 1000), { duplicate: false, capped: ['email'] });
  t.match(route('n3', 'critical', T0 + 2000), { duplicate: false, capped: [] });
  t.match(route('n4', 'normal', T0 + 3_600_001), { capped: [] }, 'the window slides');
  const again = route('n2', 'normal', T0 + 5000);
  t.match(again, { duplicate: true });
  t.same(again.op === 'route' ? again.rows.map((r) => r.channel) : null, ['in_app'], 'the rows made the first time');
  t.same(m.routesOf('n2')[0]!.suppressed, [{ channel: 'email', reason: 'frequency_cap' }]);
});

t.test('routeMany: the steps apply in order as that many route commands (caps, duplicates)', async (t) => {
  const m = new NotifyMachine();
  const prefs: Preferences = { ...defaultPreferences(), frequency_cap: [{ channel: 'email', max_per_hour: 1 }] };
  m.apply({ op: 'putPrefs', user_id: 'u', prefs });
  const step = (n: string, user: string, now: number) => ({
    notification_id: n,
    user_id: user,
    priority: 'low' as const,
    channels: ['email' as const, 'in_app' as const],
    suppressed: [],
    now,
  });
  const first = m.apply({
    op: 'routeMany',
    routes: [step('n1', 'u', T0), step('n2', 'u', T0 + 1), step('n1', 'v', T0)],
  });
  t.match(first, {
    op: 'routeMany',
    results: [
      { duplicate: false, capped: [] },
      { duplicate: false, capped: ['email'] },
      { duplicate: false, capped: [] },
    ],
  });
  const again = m.apply({ op: 'routeMany', routes: [step('n2', 'u', T0 + 2)] });
  t.same(
    again.op === 'routeMany' ? again.results.map((r) => [r.duplicate, r.rows.map((row) => row.channel)]) : null,
    [[true, ['in_app']]],
    'a step routed before answers the rows made the first time',
  );
});

t.test(
  'delivery_log transitions; bounce disables email; invalid push subscriptions removed; fallback rows',
  async (t) => {
    const m = new NotifyMachine();
    m.apply({
      op: 'putPrefs',
      user_id: 'u',
      prefs: {
        ...defaultPreferences(),
        contact: {
          email: 'a@b.c',
          phone: null,
          push_subscriptions: [
            { endpoint: 'https://p/1', keys: { p256dh: 'x', auth: 'y' } },
            { endpoint: 'https://p/2', keys: { p256dh: 'x', auth: 'y' } },
          ],
        },
      },
    });
    m.apply({
      op: 'route',
      notification_id: 'n',
      user_id: 'u',
      priority: 'critical',
      channels: ['sms', 'email', 'push'],
      suppressed: [],
      now: T0,
    });
    const sms = messageId('n', 'u', 'sms');
    const email = messageId('n', 'u', 'email');
    const push = messageId('n', 'u', 'push');
    m.apply({ op: 'outcomes', outcomes: [{ message_id: sms, kind: 'retry', reason: '503' }], now: T0 + 1 });
    t.match(m.row(sms), { status: 'pending', attempt_count: 1 });
    m.apply({ op: 'outcomes', outcomes: [{ message_id: sms, kind: 'sent', provider_message_id: 'p1' }], now: T0 + 2 });
    m.apply({
      op: 'outcomes',
      outcomes: [{ message_id: sms, kind: 'sent', provider_message_id: 'p-again' }],
      now: T0 + 3,
    });
    t.match(
      m.row(sms),
      { status: 'sent', attempt_count: 2, provider_message_id: 'p1' },
      'a replayed sent changes nothing',
    );
    m.apply({
      op: 'outcomes',
      outcomes: [{ message_id: sms, kind: 'delivered', provider_message_id: 'p1', delivered_at: T0 + 9 }],
      now: T0 + 10,
    });
    m.apply({ op: 'outcomes', outcomes: [{ message_id: sms, kind: 'failed', reason: 'late' }], now: T0 + 11 });
    t.match(m.row(sms), { status: 'delivered', delivered_at: T0 + 9 }, 'terminal rows stay');
    m.apply({ op: 'outcomes', outcomes: [{ message_id: email, kind: 'bounced', reason: '550' }], now: T0 + 12 });
    t.equal(m.row(email)!.status, 'bounced');
    t.equal(m.preferences('u').channels_enabled.email, false, 'hard bounce disables email');
    m.apply({
      op: 'outcomes',
      outcomes: [
        { message_id: push, kind: 'sent', provider_message_id: 'loc', invalid_subscriptions: ['https://p/1'] },
      ],
      now: T0 + 13,
    });
    t.same(
      m.preferences('u').contact.push_subscriptions.map((s) => s.endpoint),
      ['https://p/2'],
    );
    const fb = m.apply({ op: 'fallback', from_message_id: email, channel: 'in_app', now: T0 + 14 });
    t.match(fb, { row: { channel: 'in_app', status: 'pending', fallback_from: 'email' } });
    t.match(
      m.apply({ op: 'fallback', from_message_id: email, channel: 'in_app', now: T0 + 15 }),
      { row: { message_id: messageId('n', 'u', 'in_app') } },
      'once',
    );
    t.equal(m.rowsOf('n').length, 4);
  },
);

t.test('in-app centre: idempotent add, newest first, read/unread', async (t) => {
  const m = new NotifyMachine();
  const seen: string[] = [];
  m.onInboxItem = (i) => seen.push(i.item_id);
  const item = (id: string) => ({
    item_id: id,
    notification_id: 'n',
    user_id: 'u',
    event_type: 'e',
    priority: 'high' as const,
    title: 't',
    body: 'b',
    data: {},
    created_at: T0,
    read: false,
  });
  m.apply({ op: 'inboxAdd', item: item('a') });
  m.apply({ op: 'inboxAdd', item: item('b') });
  t.match(m.apply({ op: 'inboxAdd', item: item('a') }), { added: false });
  t.same(seen, ['a', 'b'], 'pushed once each');
  t.same(
    m.inbox('u', { unreadOnly: false, limit: 10 }).items.map((i) => i.item_id),
    ['b', 'a'],
  );
  t.match(m.apply({ op: 'inboxRead', user_id: 'u', item_ids: ['a'] }), { marked: 1 });
  t.same(
    m.inbox('u', { unreadOnly: true, limit: 10 }).items.map((i) => i.item_id),
    ['b'],
  );
  t.match(m.apply({ op: 'inboxRead', user_id: 'u', item_ids: null }), { marked: 1 });
  t.equal(m.inbox('u', { unreadOnly: false, limit: 10 }).unread, 0);
});

t.test('quiet hours follow the zone, daylight saving included', async (t) => {
  const quiet = { start: '22:00', end: '07:00', timezone: 'Europe/Paris' };
  // 21:30 UTC is 22:30 in Paris in winter (UTC+1) but 23:30 in summer (UTC+2); 20:30 UTC is 21:30 / 22:30.
  t.equal(inQuietHours(quiet, Date.UTC(2026, 0, 15, 20, 30)), false, 'winter 21:30 Paris: not quiet');
  t.equal(inQuietHours(quiet, Date.UTC(2026, 6, 15, 20, 30)), true, 'summer 22:30 Paris: quiet');
  t.equal(inQuietHours(quiet, Date.UTC(2026, 0, 15, 5, 59)), true, 'winter 06:59 Paris: quiet');
  t.equal(inQuietHours(quiet, Date.UTC(2026, 0, 15, 6, 0)), false, 'winter 07:00 Paris: over');
  // The night the clocks go forward (29 March 2026, 02:00 -> 03:00 in Paris): 01:30 UTC is 03:30 local.
  t.equal(localMinutes(Date.UTC(2026, 2, 29, 1, 30), 'Europe/Paris'), 3 * 60 + 30);
  t.equal(localMinutes(Date.UTC(2026, 2, 29, 0, 30), 'Europe/Paris'), 1 * 60 + 30);
  const ny = { start: '09:00', end: '17:00', timezone: 'America/New_York' };
  t.equal(inQuietHours(ny, Date.UTC(2026, 0, 15, 14, 0)), true, '09:00 EST');
  t.equal(inQuietHours(ny, Date.UTC(2026, 0, 15, 13, 59)), false);
  t.equal(inQuietHours(ny, Date.UTC(2026, 6, 15, 13, 0)), true, '09:00 EDT');
  t.equal(inQuietHours(null, T0), false);
});

t.test('templates and the router channel choice', async (t) => {
  t.same(
    render({ title: 'Hi {{name}}', body: '{{a.b}}|{{missing}}|{{n}}' }, 'e', { name: 'Ann', a: { b: 'deep' }, n: 3 }),
    { title: 'Hi Ann', body: 'deep||3', data: { name: 'Ann', a: { b: 'deep' }, n: 3 } },
  );
  t.same(render(null, 'evt', { x: 1 }).title, 'evt');
  const prefs: Preferences = {
    ...defaultPreferences(),
    contact: { email: 'a@b.c', phone: '+15551234567', push_subscriptions: [] },
    quiet_hours: { start: '00:00', end: '23:59', timezone: 'UTC' },
  };
  const at = Date.UTC(2026, 0, 15, 12, 0);
  t.same(chooseChannels(prefs, 'normal', 'u', at), {
    channels: ['in_app'],
    suppressed: [
      { channel: 'sms', reason: 'sms_critical_only' },
      { channel: 'push', reason: 'no_address' },
      { channel: 'email', reason: 'quiet_hours' },
    ],
  });
  t.same(
    chooseChannels(prefs, 'critical', 'u', at).channels,
    ['sms', 'email', 'in_app'],
    'critical bypasses quiet hours, may use sms',
  );
  t.same(parseChain(undefined), ['sms', 'push', 'email', 'in_app']);
  t.equal(nextInChain(['sms', 'push', 'email'], 'push'), 'email');
  t.equal(nextInChain(['sms', 'push', 'email'], 'email'), null);
  t.throws(() => parseChain('sms,fax'));
  t.throws(() => mergePreferences(defaultPreferences(), { frequency_cap: [{ channel: 'email', max_per_hour: -1 }] }));
  t.throws(() => mergePreferences(defaultPreferences(), { colour: 'red' }));
  t.equal(
    mergePreferences(defaultPreferences(), { channels_enabled: { sms: false } }).channels_enabled.email,
    true,
    'a PUT keeps the fields it does not name',
  );
});

t.test('state group names: exact spelling only, within the count', async (t) => {
  t.equal(parseStateGroup(stateGroup(0)), 0);
  t.equal(parseStateGroup(stateGroup(STATE_GROUPS - 1)), STATE_GROUPS - 1);
  t.equal(parseStateGroup(`${STATE_PREFIX}${STATE_GROUPS}`), null, 'past the count');
  t.equal(parseStateGroup(`${STATE_PREFIX}01`), null, 'a leading zero names no group');
  t.equal(parseStateGroup('auction.1'), null, "another service's group");
  t.equal(parseStateGroup(`${STATE_PREFIX}x`), null);
});
