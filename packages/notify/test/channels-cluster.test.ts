/**
 * The real channels through the whole service on real processes: `cluster up --service notify` (3 members, router,
 * delivery worker, and the stand-in SMTP, push and SMS providers), one cluster for every case. What the core does
 * with each provider's feedback: a hard bounce disables email for the user, a push subscription the push service
 * calls gone is removed from the user's contact, a delayed SMS receipt moves the row from sent to delivered, and a
 * provider's 5xx is retried with backoff until it goes through (sent once). Waits are generous; nothing asserts speed.
 */
import { randomUUID } from 'node:crypto';
import t from 'tap';
import { call, startCluster, until } from '@raftkit/testkit';
import { createSubscriberKeys, NotifyClient, type StatusAnswer } from '../src/index.js';

const cluster = await startCluster('notify', { nodes: 3, settings: { sms_receipt_delay_ms: '1500', retry_base_ms: '100' } });
t.teardown(() => cluster.down());
const token = cluster.token;
const client = new NotifyClient({ endpoints: cluster.members, token, timeoutMs: 60_000 });
t.teardown(() => client.close());
const smtp = cluster.role('smtp-provider')[0]!.url;
const push = cluster.role('push-provider')[0]!.url;
const sms = cluster.role('sms-provider')[0]!.url;
const key = (): string => `k-${randomUUID()}`;

type Row = StatusAnswer['channels'][number] & { user_id?: string; attempt_count?: number; provider_message_id?: string | null };
async function rowWhen(id: string, channel: string, what: string, ok: (row: Row) => boolean): Promise<Row> {
  return until(what, async () => {
    const s = await client.status(id);
    const row = (s.channels as Row[]).find((r) => r.channel === channel);
    return row !== undefined && ok(row) ? row : null;
  }, 90_000, 200);
}
async function received(base: string, query: string): Promise<Array<Record<string, unknown>>> {
  const a = await call(base, 'GET', `/admin/received?${query}`, { token });
  if (a.status !== 200) throw new Error(`received: ${a.status}`);
  return a.body.messages as Array<Record<string, unknown>>;
}
async function subscription(): Promise<{ id: string; sub: { endpoint: string; keys: { p256dh: string; auth: string } } }> {
  const keys = createSubscriberKeys();
  const a = await call(push, 'POST', '/admin/subscriptions', { token, body: { p256dh: keys.p256dh, auth: keys.auth, private_key: keys.privateKey } });
  if (a.status !== 201) throw new Error(`subscribe: ${a.status}`);
  return { id: a.body.id as string, sub: { endpoint: a.body.endpoint as string, keys: { p256dh: keys.p256dh, auth: keys.auth } } };
}
const only = (channel: string): Record<string, boolean> => ({ push: channel === 'push', email: channel === 'email', sms: channel === 'sms', in_app: false });

await until('the service accepts notifications', async () => (await client.call('POST', '/v1/notifications', { event_type: 'warmup', user_ids: ['warm'], priority: 'low', idempotency_key: key(), data: {} })).status === 202, 120_000, 500);

t.test('email: sent over SMTP and parsed by the mail server; a hard bounce disables email for the user', async (t) => {
  await client.setPreferences('mia', { channels_enabled: only('email'), contact: { email: 'mia@example.test' } });
  await client.setPreferences('ned', { channels_enabled: only('email'), contact: { email: 'ned@bounce.test' } });
  await client.call('PUT', '/v1/templates/welcome/email', { title: 'Welcome, {{name}}', body: 'Your plan: {{plan}}' });
  const { notification_id: id } = await client.send({ event_type: 'welcome', user_ids: ['mia', 'ned'], data: { name: 'Mia', plan: 'pro' }, priority: 'normal', idempotency_key: key() });
  await until('both email rows settled', async () => {
    const s = await client.status(id);
    const rows = (s.channels as Row[]).filter((r) => r.channel === 'email');
    return rows.length === 2 && rows.every((r) => r.status !== 'pending') ? rows : null;
  }, 90_000, 200);
  const rows = ((await client.status(id)).channels as Row[]).filter((r) => r.channel === 'email');
  t.match(rows.find((r) => r.user_id === 'mia'), { status: 'sent', provider_message_id: /^[0-9a-f-]{36}$/ });
  t.match(rows.find((r) => r.user_id === 'ned'), { status: 'bounced' });
  const mail = await received(smtp, `message_id=${encodeURIComponent(`${id}:mia:email`)}`);
  t.equal(mail.length, 1, 'the mail server has it once');
  t.match(mail[0], { to: 'mia@example.test', subject: 'Welcome, Mia', text: 'Your plan: pro', notification_id: id });
  t.equal((await client.preferences('ned')).channels_enabled.email, false, 'email disabled after the hard bounce');
  t.equal((await client.preferences('mia')).channels_enabled.email, true);
});

t.test('push: encrypted to the live device (decrypted by the push service); the expired subscription is removed', async (t) => {
  const live = await subscription();
  const gone = await subscription();
  await call(push, 'DELETE', `/admin/subscriptions/${gone.id}`, { token });
  await client.setPreferences('pia', { channels_enabled: only('push'), contact: { push_subscriptions: [gone.sub, live.sub] } });
  const { notification_id: id } = await client.send({ event_type: 'login', user_ids: ['pia'], data: { city: 'Porto' }, priority: 'high', idempotency_key: key() });
  await rowWhen(id, 'push', 'the push row sent', (r) => r.status === 'sent' || r.status === 'delivered');
  const got = await received(push, `message_id=${encodeURIComponent(`${id}:pia:push`)}`);
  t.equal(got.length, 1);
  t.match(JSON.parse(got[0]!.payload as string), { notification_id: id, data: { city: 'Porto' } }, 'the stand-in decrypted the payload');
  t.equal(got[0]!.subscription_id, live.id);
  const prefs = await until('the gone subscription removed', async () => {
    const p = await client.preferences('pia');
    return p.contact.push_subscriptions.length === 1 ? p : null;
  }, 60_000, 200);
  t.equal(prefs.contact.push_subscriptions[0]!.endpoint, live.sub.endpoint, 'only the live one is left');
});

t.test('sms: critical only; the delayed receipt moves the row from sent to delivered', async (t) => {
  await client.setPreferences('sam', { channels_enabled: only('sms'), contact: { phone: '+15550001111' } });
  const { notification_id: id } = await client.send({ event_type: 'otp', user_ids: ['sam'], data: { code: '777' }, priority: 'critical', idempotency_key: key() });
  const sent = await rowWhen(id, 'sms', 'the sms row sent', (r) => r.status === 'sent' || r.status === 'delivered');
  const kept = await received(sms, `message_id=${encodeURIComponent(`${id}:sam:sms`)}`);
  t.equal(kept.length, 1);
  t.equal(sent.provider_message_id ?? kept[0]!.id, kept[0]!.id, "the row holds the provider's id");
  const delivered = await rowWhen(id, 'sms', 'the receipt applied', (r) => r.status === 'delivered');
  t.ok(delivered.delivered_at !== null, 'delivered_at from the receipt');
  t.equal((await received(sms, `message_id=${encodeURIComponent(`${id}:sam:sms`)}`))[0]!.receipt, 'delivered');
});

t.test('a provider 5xx is retried with backoff until it goes through, and sent once', async (t) => {
  const live = await subscription();
  await client.setPreferences('rex', { channels_enabled: only('push'), contact: { push_subscriptions: [live.sub] } });
  t.equal((await call(push, 'POST', '/admin/faults', { token, body: { fail_next: 2, status: 503 } })).status, 200);
  const { notification_id: id } = await client.send({ event_type: 'alert', user_ids: ['rex'], data: {}, priority: 'normal', idempotency_key: key() });
  const row = await rowWhen(id, 'push', 'the push row sent after the failures', (r) => r.status === 'sent' || r.status === 'delivered');
  t.ok((row.attempt_count ?? 0) >= 3, `three attempts or more (${String(row.attempt_count)})`);
  t.equal((await call(push, 'GET', '/admin/faults', { token })).body.failed as number >= 2, true, 'the two failures were served');
  t.equal((await received(push, `message_id=${encodeURIComponent(`${id}:rex:push`)}`)).length, 1, 'received once');
});
