/**
 * The notification service on real processes: `cluster up --service notify` (3 members hosting the log's topics
 * and the state groups, the router, the delivery worker), one cluster for every case, real sockets, real LevelDB,
 * a real WebSocket client. Waits are generous; nothing asserts speed.
 */
import { randomUUID } from 'node:crypto';
import t from 'tap';
import WebSocket from 'ws';
import { call, startCluster, until } from '@raftkit/testkit';
import { localMinutes, NotifyClient, type InAppItem, type StatusAnswer } from '../src/index.js';

const cluster = await startCluster('notify', { nodes: 3 });
t.teardown(() => cluster.down());
const token = cluster.token;
const members = cluster.members;
const delivery = cluster.role('delivery')[0]!.url;
const client = new NotifyClient({ endpoints: members, token, timeoutMs: 60_000 });
t.teardown(() => client.close());

const userTokens = new Map<string, string>();
async function userToken(user: string): Promise<string> {
  let tk = userTokens.get(user);
  if (tk === undefined) {
    const answer = await call(delivery, 'POST', `/v1/users/${user}/token`, { token });
    if (answer.status !== 200) throw new Error(`token: ${answer.status} ${JSON.stringify(answer.body)}`);
    userTokens.set(user, (tk = (answer.body as { token: string }).token));
  }
  return tk;
}
const post = (body: Record<string, unknown>, tk = token, base = members[0]!) => call(base, 'POST', '/v1/notifications', { token: tk, body });
const key = (): string => `k-${randomUUID()}`;
async function statusWhen(id: string, what: string, ok: (s: StatusAnswer) => boolean): Promise<StatusAnswer> {
  return until(what, async () => {
    const s = await client.status(id);
    return ok(s) ? s : null;
  }, 90_000, 200);
}

// The router creates the state groups and topics when it starts; the first accepted POST proves them ready.
await until('the service accepts notifications', async () => (await post({ event_type: 'warmup', user_ids: ['warm'], priority: 'low', idempotency_key: key() })).status === 202, 120_000, 500);

t.test('bad input: 4xx JSON errors naming the field; internal callers only', async (t) => {
  const base = { event_type: 'otp', user_ids: ['u1'], priority: 'critical', idempotency_key: 'x', data: {} };
  const cases: Array<[Record<string, unknown>, string]> = [
    [{ ...base, idempotency_key: undefined }, 'idempotency_key'],
    [{ ...base, priority: 'urgent' }, 'priority'],
    [{ ...base, priority: undefined }, 'priority'],
    [{ ...base, segment_id: 'seg' }, 'segment_id'],
    [{ ...base, user_ids: [] }, 'user_ids'],
    [{ ...base, user_ids: ['bad id!'] }, 'user_ids'],
    [{ ...base, event_type: '' }, 'event_type'],
    [{ ...base, data: [1, 2] }, 'data'],
    [{ ...base, data: { big: 'x'.repeat(20_000) } }, 'data'],
  ];
  for (const [body, field] of cases) {
    const answer = await post(body);
    t.equal(answer.status, 400, `400 for ${field}`);
    t.equal((answer.body as { error: { field: string } }).error.field, field);
  }
  const many = await post({ ...base, user_ids: Array.from({ length: 10_001 }, (_, i) => `u${i}`) });
  t.equal(many.status, 400);
  t.equal((many.body as { error: { code: string } }).error.code, 'too_many_users');
  t.equal((await call(members[0]!, 'POST', '/v1/notifications', { body: base })).status, 401, 'no token: 401');
  t.equal((await post(base, await userToken('u1'))).status, 403, 'a user token cannot send');
  t.equal((await post({ ...base, user_ids: undefined, segment_id: 'no-such-segment' })).status, 404, 'unknown segment: 404');
  const prefs = await call(members[0]!, 'PUT', '/v1/users/u1/preferences', { token, body: { quiet_hours: { start: '22:00', end: '07:00', timezone: 'Mars/Olympus' } } });
  t.equal(prefs.status, 400);
  t.equal((prefs.body as { error: { field: string } }).error.field, 'quiet_hours.timezone');
  t.equal((await call(members[0]!, 'GET', '/v1/notifications/not-a-uuid/status', { token })).status, 400);
});

t.test('in-app: template, WebSocket push in real time, inbox, read/unread, users read only their own', async (t) => {
  const user = `ia-${randomUUID().slice(0, 8)}`;
  await client.putTemplate('login_code', 'in_app', { title: 'Your code', body: 'Code {{code}} for {{user.name}}' });
  const tk = await userToken(user);
  const ws = new WebSocket(`${delivery.replace('http', 'ws')}/v1/users/${user}/inbox/ws?token=${encodeURIComponent(tk)}`);
  const received: InAppItem[] = [];
  ws.on('message', (data) => {
    const m = JSON.parse(String(data)) as { type: string; item?: InAppItem };
    if (m.type === 'notification') received.push(m.item!);
  });
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
  });
  t.teardown(() => ws.close());
  const other = await userToken('someone-else');
  const refused = await new Promise<number>((resolve) => {
    const bad = new WebSocket(`${delivery.replace('http', 'ws')}/v1/users/${user}/inbox/ws?token=${encodeURIComponent(other)}`);
    bad.on('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
    bad.on('open', () => resolve(101));
    bad.on('error', () => undefined);
  });
  t.equal(refused, 403, "another user's token cannot open this inbox");

  const sent = await client.send({ event_type: 'login_code', user_ids: [user], priority: 'critical', idempotency_key: key(), data: { code: '123456', user: { name: 'Ann' } } });
  t.equal(sent.status, 'accepted');
  await until('the item reaches the WebSocket', () => received.length > 0, 90_000, 100);
  t.equal(received[0]!.title, 'Your code');
  t.equal(received[0]!.body, 'Code 123456 for Ann');
  t.equal(received[0]!.notification_id, sent.notification_id);
  const status = await statusWhen(sent.notification_id, 'in_app delivered', (s) => s.channels.some((c) => c.channel === 'in_app' && c.status === 'delivered'));
  const row = status.channels.find((c) => c.channel === 'in_app')!;
  t.ok(typeof row.delivered_at === 'number' && row.delivered_at > 0, 'delivered_at set');
  t.equal(row.user_id, user);

  const inbox = await client.inbox(user, { token: tk });
  t.equal(inbox.unread, 1);
  t.equal(inbox.items[0]!.item_id, received[0]!.item_id);
  t.equal(await client.markRead(user, [inbox.items[0]!.item_id], tk), 1);
  t.equal((await client.inbox(user, { token: tk })).unread, 0);
  t.equal((await client.inbox(user, { token: tk, unread: true })).items.length, 0);
  const foreign = await call(members[1]!, 'GET', `/v1/users/${user}/inbox`, { token: other });
  t.equal(foreign.status, 403, "a user cannot read another's inbox");
  t.equal((await call(members[1]!, 'GET', `/v1/notifications/${sent.notification_id}/status`, { token: tk })).status, 403, 'status is for internal callers');
});

const dedupUser = `dd-${randomUUID().slice(0, 8)}`;
const dedupKey = key();
let dedupId = '';

t.test('dedup: the same idempotency_key within 24 h is accepted once and delivered once', async (t) => {
  const first = await post({ event_type: 'welcome', user_ids: [dedupUser], priority: 'high', idempotency_key: dedupKey });
  t.equal(first.status, 202);
  dedupId = (first.body as { notification_id: string }).notification_id;
  const again = await post({ event_type: 'welcome', user_ids: [dedupUser], priority: 'high', idempotency_key: dedupKey }, token, members[2]!);
  t.equal(again.status, 200);
  t.equal((again.body as { notification_id: string }).notification_id, dedupId, 'the same notification_id');
  t.equal((again.body as { duplicate: boolean }).duplicate, true);
  await statusWhen(dedupId, 'delivered', (s) => s.channels.some((c) => c.status === 'delivered'));
  await new Promise((r) => setTimeout(r, 1500));
  t.equal((await client.inbox(dedupUser)).items.length, 1, 'one item');
});

t.test('router: opt-out, sms only for critical, no address, segments', async (t) => {
  const a = `rt-${randomUUID().slice(0, 8)}`;
  const b = `rt-${randomUUID().slice(0, 8)}`;
  await client.setPreferences(a, { contact: { phone: '+15550001111', email: 'a@example.test' }, channels_enabled: { email: false } });
  const normal = await client.send({ event_type: 'news', user_ids: [a], priority: 'normal', idempotency_key: key() });
  const s = await statusWhen(normal.notification_id, 'routed', (x) => x.users_routed === 1 && x.channels.some((c) => c.status === 'delivered'));
  const reasons = Object.fromEntries(s.suppressed.map((x) => [x.channel, x.reason]));
  t.same(reasons, { sms: 'sms_critical_only', push: 'no_address', email: 'opted_out' });
  t.same(s.channels.map((c) => c.channel).sort(), ['in_app']);
  const critical = await client.send({ event_type: 'alert', user_ids: [a], priority: 'critical', idempotency_key: key() });
  const c = await statusWhen(critical.notification_id, 'routed', (x) => x.users_routed === 1);
  t.ok(c.channels.some((r) => r.channel === 'sms'), 'critical goes to sms');

  await client.putSegment('beta-testers', [a, b]);
  const seg = await client.send({ event_type: 'beta', segment_id: 'beta-testers', priority: 'low', idempotency_key: key(), data: { v: 2 } });
  const ss = await statusWhen(seg.notification_id, 'both delivered', (x) => x.channels.filter((r) => r.channel === 'in_app' && r.status === 'delivered').length === 2);
  t.same(ss.channels.filter((r) => r.channel === 'in_app').map((r) => r.user_id).sort(), [a, b].sort());
  const item = (await client.inbox(b)).items.find((i) => i.notification_id === seg.notification_id)!;
  t.equal(item.title, 'beta', 'no template: the event type is the title');
  t.equal(item.body, '{"v":2}');
});

t.test('quiet hours in the user time zone, across a time-zone change; critical bypasses them', async (t) => {
  const user = `qh-${randomUUID().slice(0, 8)}`;
  // A window around the current local time in Tokyo (UTC+9, no DST): quiet there, not in London (8-9 h away).
  const now = localMinutes(Date.now(), 'Asia/Tokyo');
  const hhmm = (m: number): string => `${String(Math.floor((((m % 1440) + 1440) % 1440) / 60)).padStart(2, '0')}:${String((((m % 1440) + 1440) % 1440) % 60).padStart(2, '0')}`;
  const window = { start: hhmm(now - 60), end: hhmm(now + 60) };
  await client.setPreferences(user, { contact: { email: 'q@example.test' }, quiet_hours: { ...window, timezone: 'Asia/Tokyo' } });
  const quiet = await client.send({ event_type: 'digest', user_ids: [user], priority: 'normal', idempotency_key: key() });
  const q = await statusWhen(quiet.notification_id, 'routed', (x) => x.users_routed === 1);
  t.same(q.suppressed.filter((x) => x.channel === 'email').map((x) => x.reason), ['quiet_hours'], 'email held back in Tokyo quiet hours');
  t.ok(q.channels.some((r) => r.channel === 'in_app'), 'in-app (silent) is still stored');
  const urgent = await client.send({ event_type: 'security', user_ids: [user], priority: 'critical', idempotency_key: key() });
  const u = await statusWhen(urgent.notification_id, 'routed', (x) => x.users_routed === 1);
  t.ok(u.channels.some((r) => r.channel === 'email'), 'critical bypasses quiet hours');

  await client.setPreferences(user, { quiet_hours: { ...window, timezone: 'Europe/London' } });
  const later = await client.send({ event_type: 'digest', user_ids: [user], priority: 'normal', idempotency_key: key() });
  const l = await statusWhen(later.notification_id, 'routed', (x) => x.users_routed === 1);
  t.equal(l.suppressed.filter((x) => x.channel === 'email').length, 0, 'same hours in London: not quiet now');
  t.ok(l.channels.some((r) => r.channel === 'email'), 'email routed');
});

t.test('frequency caps per channel per hour; critical is never capped', async (t) => {
  const user = `fc-${randomUUID().slice(0, 8)}`;
  await client.setPreferences(user, { frequency_cap: [{ channel: 'in_app', max_per_hour: 2 }] });
  const ids: string[] = [];
  for (let i = 0; i < 3; i++) ids.push((await client.send({ event_type: 'promo', user_ids: [user], priority: 'normal', idempotency_key: key() })).notification_id);
  const statuses = [];
  for (const id of ids) statuses.push(await statusWhen(id, 'routed', (x) => x.users_routed === 1));
  t.same(statuses.map((s) => s.channels.filter((c) => c.channel === 'in_app').length), [1, 1, 0], 'in order: two pass, the third is capped');
  t.same(statuses[2]!.suppressed.filter((s) => s.channel === 'in_app').map((s) => s.reason), ['frequency_cap']);
  const critical = await client.send({ event_type: 'otp', user_ids: [user], priority: 'critical', idempotency_key: key() });
  const c = await statusWhen(critical.notification_id, 'routed', (x) => x.users_routed === 1);
  t.equal(c.channels.filter((r) => r.channel === 'in_app').length, 1, 'critical passes the cap');
});

// Last: the whole cluster stops and starts again on its data; the dedup key is still known.
t.test('dedup survives a restart of every process', async (t) => {
  const down = await cluster.run('down');
  t.equal(down.code, 0, down.stderr);
  const up = await cluster.up();
  t.equal(up.code, 0, up.stderr + up.stdout);
  const again = await until('a member answers after the restart', async () => {
    const a = await post({ event_type: 'welcome', user_ids: [dedupUser], priority: 'high', idempotency_key: dedupKey });
    return a.status === 503 || a.status === 0 ? null : a;
  }, 120_000, 500);
  t.equal(again.status, 200);
  t.equal((again.body as { notification_id: string }).notification_id, dedupId);
  const fresh = await until('accepting again', async () => {
    const a = await post({ event_type: 'welcome', user_ids: [dedupUser], priority: 'high', idempotency_key: key() });
    return a.status === 202 ? a : null;
  }, 120_000, 500);
  t.equal(fresh.status, 202);
  await statusWhen((fresh.body as { notification_id: string }).notification_id, 'delivered after restart', (s) => s.channels.some((c) => c.status === 'delivered'));
  t.equal((await client.inbox(dedupUser)).items.length, 2, 'the duplicate never added an item; the new one did');
});
