/**
 * The notification service on real processes: `cluster up --service notify` (3 members hosting the log's topics
 * and the state groups, the routers, two delivery workers, the stand-in SMTP server, Web Push service and SMS
 * API), one cluster for every case, real sockets, real LevelDB, a real WebSocket client. Waits are generous; nothing
 * asserts speed. Covered: validation, every router step, in-app WebSocket and inbox, critical fallback chains, hard
 * bounces, invalid push subscriptions, SMS receipts, the preference store unreachable (critical sent, others held),
 * a delivery worker SIGKILLed mid-flood (the other takes its channels), and dedup across a restart of every process
 * (last).
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import WebSocket from 'ws';
import { deriveClientToken, deriveServiceToken } from '@raftkit/http';
import { call, startCluster, topicAccess, until } from '@raftkit/testkit';
import { LogClient, partitionOf, type DeadLetter } from '@raftkit/log';
import {
  DEAD_LETTER_TOPIC,
  fill,
  groupOf,
  ingestTopic,
  INGEST_PARTITIONS,
  localMinutes,
  NotifyClient,
  ROUTER_GROUP,
  type InAppItem,
  type IngestRecord,
  type QueuedMessage,
  type StatusAnswer,
} from '../src/index.js';
import { createSubscriberKeys } from '../src/workers/providers/index.js';
import { StateClient } from '../src/state-client.js';
import { preferenceStore } from './preference-fault.js';

// The preference-store fault lives in this folder (preference-fault.ts), loaded into the cluster's workers.
const faultDir = mkdtempSync(join(tmpdir(), 'notify-test-fault-'));
const preferenceFlag = join(faultDir, 'preference-store-down');
const cluster = await startCluster('notify', {
  nodes: 3,
  // Two delivery workers: one consumer group of the log over the channels (the kill test below).
  workers: 'delivery=2',
  settings: {
    campaign_rate_per_minute: '60',
    critical_attempts: '2',
    retry_base_ms: '100',
    email_rate_per_second: '10',
    sms_receipt_delay_ms: '1500',
  },
  env: {
    NODE_OPTIONS:
      `${process.env.NODE_OPTIONS ?? ''} --import=${new URL('./preference-fault.js', import.meta.url).href}`.trim(),
    NOTIFY_PREFERENCE_FAULT: preferenceFlag,
  },
});
t.teardown(async () => {
  await cluster.down();
  rmSync(faultDir, { recursive: true, force: true });
});
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
const post = (body: Record<string, unknown>, tk = token, base = members[0]!) =>
  call(base, 'POST', '/v1/notifications', { token: tk, body });
const key = (): string => `k-${randomUUID()}`;
async function statusWhen(
  id: string,
  what: string,
  ok: (s: StatusAnswer) => boolean,
  ms = 90_000,
): Promise<StatusAnswer> {
  return until(
    what,
    async () => {
      const s = await client.status(id);
      return ok(s) ? s : null;
    },
    ms,
    200,
  );
}

// The router creates the state groups and topics when it starts; the first accepted POST proves them ready.
await until(
  'the service accepts notifications',
  async () =>
    (await post({ event_type: 'warmup', user_ids: ['warm'], priority: 'low', idempotency_key: key() })).status === 202,
  120_000,
  500,
);

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
  t.equal(
    (await post({ ...base, user_ids: undefined, segment_id: 'no-such-segment' })).status,
    404,
    'unknown segment: 404',
  );
  const prefs = await call(members[0]!, 'PUT', '/v1/users/u1/preferences', {
    token,
    body: { quiet_hours: { start: '22:00', end: '07:00', timezone: 'Mars/Olympus' } },
  });
  t.equal(prefs.status, 400);
  t.equal((prefs.body as { error: { field: string } }).error.field, 'quiet_hours.timezone');
  t.equal((await call(members[0]!, 'GET', '/v1/notifications/not-a-uuid/status', { token })).status, 400);
});

t.test('in-app: template, WebSocket push in real time, inbox, read/unread, users read only their own', async (t) => {
  const user = `ia-${randomUUID().slice(0, 8)}`;
  await client.putTemplate('login_code', 'in_app', { title: 'Your code', body: 'Code {{code}} for {{user.name}}' });
  const tk = await userToken(user);
  const ws = new WebSocket(
    `${delivery.replace('http', 'ws')}/v1/users/${user}/inbox/ws?token=${encodeURIComponent(tk)}`,
  );
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
  // The same user on the other delivery worker: whichever worker owns the in_app channel, both sockets get the item
  // (the owner relays it to its peers' clients).
  const ws2 = new WebSocket(
    `${cluster.role('delivery')[1]!.url.replace('http', 'ws')}/v1/users/${user}/inbox/ws?token=${encodeURIComponent(tk)}`,
  );
  const received2: InAppItem[] = [];
  ws2.on('message', (data) => {
    const m = JSON.parse(String(data)) as { type: string; item?: InAppItem };
    if (m.type === 'notification') received2.push(m.item!);
  });
  await new Promise<void>((resolve, reject) => {
    ws2.once('open', () => resolve());
    ws2.once('error', reject);
  });
  t.teardown(() => ws2.close());
  const other = await userToken('someone-else');
  const refused = await new Promise<number>((resolve) => {
    const bad = new WebSocket(
      `${delivery.replace('http', 'ws')}/v1/users/${user}/inbox/ws?token=${encodeURIComponent(other)}`,
    );
    bad.on('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
    bad.on('open', () => resolve(101));
    bad.on('error', () => undefined);
  });
  t.equal(refused, 403, "another user's token cannot open this inbox");

  const sent = await client.send({
    event_type: 'login_code',
    user_ids: [user],
    priority: 'critical',
    idempotency_key: key(),
    data: { code: '123456', user: { name: 'Ann' } },
  });
  t.equal(sent.status, 'accepted');
  await until('the item reaches the WebSocket', () => received.length > 0, 90_000, 100);
  await until("the item reaches the other delivery worker's WebSocket too", () => received2.length > 0, 10_000, 100);
  t.equal(received2[0]!.notification_id, sent.notification_id, 'both delivery workers pushed it');
  t.equal(received[0]!.title, 'Your code');
  t.equal(received[0]!.body, 'Code 123456 for Ann');
  t.equal(received[0]!.notification_id, sent.notification_id);
  const status = await statusWhen(sent.notification_id, 'in_app delivered', (s) =>
    s.channels.some((c) => c.channel === 'in_app' && c.status === 'delivered'),
  );
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
  t.equal(
    (await call(members[1]!, 'GET', `/v1/notifications/${sent.notification_id}/status`, { token: tk })).status,
    403,
    'status is for internal callers',
  );
});

t.test(
  "hostile callers: the log's topics are notify's own; only the cluster token and service.notify are internal",
  async (t) => {
    const victim = `hv-${randomUUID().slice(0, 8)}`;
    const attacker = await userToken(`ha-${randomUUID().slice(0, 8)}`);
    const issued = await call(members[0]!, 'POST', '/v1/tokens', { token, body: { client: 'x' } });
    t.equal(issued.status, 201);
    const named = await call(members[0]!, 'POST', '/v1/tokens', { token, body: { client: 'service.notify' } });
    // Tokens that are not notify's internal callers, each of a kind that was taken as one before.
    const outsiders: Array<[string, string]> = [
      ['a notify user token', attacker],
      ['a client token (client.x)', issued.body.token as string],
      ['a client token named service.notify', named.body.token as string],
      [
        'a user token of another service from the same secret (feed, short links, editor: client.<user>)',
        deriveClientToken(token, victim),
      ],
      ["another service's worker token (service.feed)", deriveServiceToken(token, 'feed')],
    ];
    // The read and the forgery of issue 40: a user's one-time codes in the critical ingestion topic, a forged
    // critical notification appended to it; and the channel topic the delivery worker reads.
    for (const topic of [ingestTopic('critical'), 'notify-critical-in_app']) {
      for (const [what, tk] of outsiders.slice(0, 2)) {
        const report = await topicAccess(members, token, tk, topic);
        for (const a of report.attempts)
          t.equal(a.status, 403, `${what}: ${a.call} on ${topic} at ${a.member}: 403 (${a.code})`);
        t.notOk(report.listed, `${what}: ${topic} is not in its topic list`);
        t.equal(report.endAfter, report.endBefore, `${what}: nothing was appended to ${topic}`);
      }
    }
    const internalRoutes: Array<[string, string, unknown]> = [
      [
        'POST',
        '/v1/notifications',
        {
          event_type: 'otp',
          user_ids: [victim],
          priority: 'critical',
          idempotency_key: key(),
          data: { code: '000000' },
        },
      ],
      ['GET', `/v1/notifications/${randomUUID()}/status`, undefined],
      ['PUT', '/v1/templates/otp/in_app', { title: 'forged', body: 'forged {{code}}' }],
      ['DELETE', '/v1/templates/otp/in_app', undefined],
      ['PUT', '/v1/segments/everyone', { user_ids: [victim] }],
      ['GET', '/v1/segments/everyone', undefined],
      // A forged provider receipt: a hard bounce would turn the victim's email channel off.
      ['POST', '/v1/receipts', { message_id: `${randomUUID()}:${victim}:email`, status: 'bounced', reason: 'forged' }],
      ['GET', `/v1/users/${victim}/inbox`, undefined],
      ['PUT', `/v1/users/${victim}/preferences`, { channels_enabled: { email: false } }],
      ['POST', '/v1/notify/groups/notify.state.0/commands', { op: 'prune', now: Date.now() }],
      ['POST', '/v1/notify/groups/notify.state.0/query', { q: 'routeContext', user_id: victim, event_type: 'otp' }],
    ];
    for (const [what, tk] of outsiders) {
      for (const [method, path, body] of internalRoutes) {
        const a = await call(members[1]!, method, path, { token: tk, ...(body !== undefined ? { body } : {}) });
        t.equal(a.status, 403, `${what}: ${method} ${path}: 403 (${JSON.stringify(a.body).slice(0, 160)})`);
      }
    }
    t.same((await client.inbox(victim)).items, [], "nothing reached the victim's inbox");
    t.equal((await client.preferences(victim)).channels_enabled.email, true, "the victim's email channel is on");
    // notify's own workers' token is an internal caller (the router and delivery workers call with it).
    const own = await call(members[2]!, 'POST', '/v1/notifications', {
      token: deriveServiceToken(token, 'notify'),
      body: { event_type: 'svc', user_ids: [victim], priority: 'low', idempotency_key: key(), data: {} },
    });
    t.equal(own.status, 202, `service.notify sends (${JSON.stringify(own.body)})`);
  },
);

t.test(
  'templates: placeholders naming inherited properties are refused; event types named like them are plain names',
  async (t) => {
    for (const text of [
      '{{constructor}}',
      '{{__proto__}}',
      '{{ user.constructor.name }}',
      '{{__proto__.polluted}}',
      '{{a.prototype}}',
    ]) {
      const a = await call(members[0]!, 'PUT', '/v1/templates/welcome/in_app', {
        token,
        body: { title: 'hi', body: text },
      });
      t.equal(a.status, 400, `${text}: 400`);
      t.equal((a.body.error as { field?: string }).field, 'body');
    }
    t.equal(
      fill('[{{constructor}}][{{toString}}][{{a.__proto__}}][{{a.b}}]', { a: { b: 1 } }),
      '[][][][1]',
      'a stored template renders inherited names empty',
    );
    for (const event of ['constructor', '__proto__', 'hasOwnProperty']) {
      const put = await call(members[0]!, 'PUT', `/v1/templates/${event}/in_app`, {
        token,
        body: { title: `t-${event}`, body: 'b {{x}}' },
      });
      t.equal(put.status, 200, `a template for event type ${event}: stored as any other`);
      const del = await call(members[0]!, 'DELETE', `/v1/templates/${event}/in_app`, { token });
      t.equal(del.status, 200, `and deleted`);
    }
    const user = `tp-${randomUUID().slice(0, 8)}`;
    const sent = await client.send({
      event_type: 'constructor',
      user_ids: [user],
      priority: 'high',
      idempotency_key: key(),
      data: { x: 1 },
    });
    await until(
      'the constructor event reaches the inbox',
      async () => (await client.inbox(user)).items.length === 1,
      90_000,
      200,
    );
    const [item] = (await client.inbox(user)).items;
    t.equal(item!.title, 'constructor', 'no template: the event type is the title');
    t.equal(item!.notification_id, sent.notification_id);
  },
);

const dedupUser = `dd-${randomUUID().slice(0, 8)}`;
const dedupKey = key();
let dedupId = '';

t.test('dedup: the same idempotency_key within 24 h is accepted once and delivered once', async (t) => {
  const first = await post({
    event_type: 'welcome',
    user_ids: [dedupUser],
    priority: 'high',
    idempotency_key: dedupKey,
  });
  t.equal(first.status, 202);
  dedupId = (first.body as { notification_id: string }).notification_id;
  const again = await post(
    { event_type: 'welcome', user_ids: [dedupUser], priority: 'high', idempotency_key: dedupKey },
    token,
    members[2]!,
  );
  t.equal(again.status, 200);
  t.equal((again.body as { notification_id: string }).notification_id, dedupId, 'the same notification_id');
  t.equal((again.body as { duplicate: boolean }).duplicate, true);
  await statusWhen(dedupId, 'delivered', (s) => s.channels.some((c) => c.status === 'delivered'));
  await new Promise((r) => setTimeout(r, 1500));
  t.equal((await client.inbox(dedupUser)).items.length, 1, 'one item');
});

t.test('poison records: dead-lettered with their reason; the valid records beside them are notified', async (t) => {
  const log = new LogClient({ endpoints: members, token, timeoutMs: 30_000 });
  t.teardown(() => log.close());
  const letters = async (): Promise<DeadLetter[]> => {
    const answer = await log.fetch(DEAD_LETTER_TOPIC, 0, 0, { maxRecords: 10_000 });
    return answer.records.map((r) => JSON.parse(r.value) as DeadLetter);
  };
  // The router: a non-JSON record and a record of the wrong shape, then a valid one, in one append (one batch).
  const user = `pz-${randomUUID().slice(0, 8)}`;
  const topic = ingestTopic('high');
  const partition = await log.partitionFor(topic, user);
  const victim: IngestRecord = {
    notification_id: randomUUID(),
    user_id: user,
    event_type: 'poison_neighbour',
    priority: 'high',
    data: {},
    accepted_at: Date.now(),
    campaign_id: null,
  };
  const appended = await log.append(topic, partition, [
    { key: user, value: '{not json' },
    { key: user, value: JSON.stringify({ user_id: 5 }) },
    { key: user, value: JSON.stringify(victim) },
  ]);
  await until(
    'the victim is notified',
    async () => (await client.inbox(user)).items.some((i) => i.notification_id === victim.notification_id),
    90_000,
    200,
  );
  const dead = await until(
    'both poison records in the dead-letter topic',
    async () => {
      const mine = (await letters()).filter(
        (l) =>
          l.topic === topic &&
          l.partition === partition &&
          l.offset >= appended.base_offset &&
          l.offset < appended.base_offset + 3,
      );
      return mine.length >= 2 ? mine : null;
    },
    60_000,
    200,
  );
  t.match(
    dead.find((l) => l.offset === appended.base_offset),
    { value: '{not json', reason: 'not JSON', key: user },
    'the non-JSON record, with its reason',
  );
  t.match(
    dead.find((l) => l.offset === appended.base_offset + 1),
    { reason: /notification_id/ },
    'the wrong shape, with its reason',
  );
  t.notOk(
    dead.some((l) => l.offset === appended.base_offset + 2),
    'the valid record is not dead-lettered',
  );
  await until(
    'the router committed past all three',
    async () => ((await log.committed(topic, partition, ROUTER_GROUP)) ?? 0) >= appended.base_offset + 3,
    30_000,
    200,
  );

  // The low (bulk) loop, which commits by itself up to its oldest record not routed: the same.
  const lowTopic = ingestTopic('low');
  const lowPartition = await log.partitionFor(lowTopic, user);
  const lowVictim: IngestRecord = {
    ...victim,
    notification_id: randomUUID(),
    priority: 'low',
    campaign_id: `poison-${randomUUID().slice(0, 8)}`,
  };
  const lowAppended = await log.append(lowTopic, lowPartition, [
    { key: user, value: '' },
    { key: user, value: JSON.stringify(lowVictim) },
    { key: user, value: JSON.stringify({ ...lowVictim, priority: 'urgent' }) },
  ]);
  await until(
    'the low victim is notified',
    async () => (await client.inbox(user)).items.some((i) => i.notification_id === lowVictim.notification_id),
    90_000,
    200,
  );
  const lowDead = await until(
    'both low poison records dead-lettered',
    async () => {
      const mine = (await letters()).filter(
        (l) =>
          l.topic === lowTopic &&
          l.partition === lowPartition &&
          l.offset >= lowAppended.base_offset &&
          l.offset < lowAppended.base_offset + 3,
      );
      return mine.length >= 2 ? mine : null;
    },
    60_000,
    200,
  );
  t.same(
    lowDead.map((l) => l.offset).sort((x, y) => x - y),
    [lowAppended.base_offset, lowAppended.base_offset + 2],
    'the empty record and the unknown priority, not the valid one',
  );
  await until(
    'the low loop committed past all three',
    async () => ((await log.committed(lowTopic, lowPartition, ROUTER_GROUP)) ?? 0) >= lowAppended.base_offset + 3,
    30_000,
    200,
  );

  // The delivery worker: a poison record in a channel topic, then a real notification on that topic.
  const channelTopic = 'notify-high-in_app';
  const poisoned = await log.append(channelTopic, 0, [{ key: user, value: '[1, 2, 3]' }]);
  const sent = await client.send({
    event_type: 'after_poison',
    user_ids: [user],
    priority: 'high',
    idempotency_key: key(),
  });
  await until(
    'the next message on that topic is delivered',
    async () => (await client.inbox(user)).items.some((i) => i.notification_id === sent.notification_id),
    90_000,
    200,
  );
  const letter = await until(
    'dead-lettered by the delivery worker',
    async () => (await letters()).find((l) => l.topic === channelTopic && l.offset === poisoned.base_offset) ?? null,
    60_000,
    200,
  );
  t.equal(letter.reason, 'not a JSON object');
});

t.test('router: opt-out, sms only for critical, no address, segments', async (t) => {
  const a = `rt-${randomUUID().slice(0, 8)}`;
  const b = `rt-${randomUUID().slice(0, 8)}`;
  await client.setPreferences(a, {
    contact: { phone: '+15550001111', email: 'a@example.test' },
    channels_enabled: { email: false },
  });
  const normal = await client.send({ event_type: 'news', user_ids: [a], priority: 'normal', idempotency_key: key() });
  const s = await statusWhen(
    normal.notification_id,
    'routed',
    (x) => x.users_routed === 1 && x.channels.some((c) => c.status === 'delivered'),
  );
  const reasons = Object.fromEntries(s.suppressed.map((x) => [x.channel, x.reason]));
  t.same(reasons, { sms: 'sms_critical_only', push: 'no_address', email: 'opted_out' });
  t.same(s.channels.map((c) => c.channel).sort(), ['in_app']);
  const critical = await client.send({
    event_type: 'alert',
    user_ids: [a],
    priority: 'critical',
    idempotency_key: key(),
  });
  const c = await statusWhen(critical.notification_id, 'routed', (x) => x.users_routed === 1);
  t.ok(
    c.channels.some((r) => r.channel === 'sms'),
    'critical goes to sms',
  );

  await client.putSegment('beta-testers', [a, b]);
  const seg = await client.send({
    event_type: 'beta',
    segment_id: 'beta-testers',
    priority: 'low',
    idempotency_key: key(),
    data: { v: 2 },
  });
  const ss = await statusWhen(
    seg.notification_id,
    'both delivered',
    (x) => x.channels.filter((r) => r.channel === 'in_app' && r.status === 'delivered').length === 2,
  );
  t.same(
    ss.channels
      .filter((r) => r.channel === 'in_app')
      .map((r) => r.user_id)
      .sort(),
    [a, b].sort(),
  );
  const item = (await client.inbox(b)).items.find((i) => i.notification_id === seg.notification_id)!;
  t.equal(item.title, 'beta', 'no template: the event type is the title');
  t.equal(item.body, '{"v":2}');
});

t.test('quiet hours in the user time zone, across a time-zone change; critical bypasses them', async (t) => {
  const user = `qh-${randomUUID().slice(0, 8)}`;
  // A window around the current local time in Tokyo (UTC+9, no DST): quiet there, not in London (8-9 h away).
  const now = localMinutes(Date.now(), 'Asia/Tokyo');
  const hhmm = (m: number): string =>
    `${String(Math.floor((((m % 1440) + 1440) % 1440) / 60)).padStart(2, '0')}:${String((((m % 1440) + 1440) % 1440) % 60).padStart(2, '0')}`;
  const window = { start: hhmm(now - 60), end: hhmm(now + 60) };
  await client.setPreferences(user, {
    contact: { email: 'q@example.test' },
    quiet_hours: { ...window, timezone: 'Asia/Tokyo' },
  });
  const quiet = await client.send({
    event_type: 'digest',
    user_ids: [user],
    priority: 'normal',
    idempotency_key: key(),
  });
  const q = await statusWhen(quiet.notification_id, 'routed', (x) => x.users_routed === 1);
  t.same(
    q.suppressed.filter((x) => x.channel === 'email').map((x) => x.reason),
    ['quiet_hours'],
    'email held back in Tokyo quiet hours',
  );
  t.ok(
    q.channels.some((r) => r.channel === 'in_app'),
    'in-app (silent) is still stored',
  );
  const urgent = await client.send({
    event_type: 'security',
    user_ids: [user],
    priority: 'critical',
    idempotency_key: key(),
  });
  const u = await statusWhen(urgent.notification_id, 'routed', (x) => x.users_routed === 1);
  t.ok(
    u.channels.some((r) => r.channel === 'email'),
    'critical bypasses quiet hours',
  );

  await client.setPreferences(user, { quiet_hours: { ...window, timezone: 'Europe/London' } });
  const later = await client.send({
    event_type: 'digest',
    user_ids: [user],
    priority: 'normal',
    idempotency_key: key(),
  });
  const l = await statusWhen(later.notification_id, 'routed', (x) => x.users_routed === 1);
  t.equal(l.suppressed.filter((x) => x.channel === 'email').length, 0, 'same hours in London: not quiet now');
  t.ok(
    l.channels.some((r) => r.channel === 'email'),
    'email routed',
  );
});

t.test('frequency caps per channel per hour; critical is never capped', async (t) => {
  const user = `fc-${randomUUID().slice(0, 8)}`;
  await client.setPreferences(user, { frequency_cap: [{ channel: 'in_app', max_per_hour: 2 }] });
  const ids: string[] = [];
  for (let i = 0; i < 3; i++)
    ids.push(
      (await client.send({ event_type: 'promo', user_ids: [user], priority: 'normal', idempotency_key: key() }))
        .notification_id,
    );
  const statuses = [];
  for (const id of ids) statuses.push(await statusWhen(id, 'routed', (x) => x.users_routed === 1));
  t.same(
    statuses.map((s) => s.channels.filter((c) => c.channel === 'in_app').length),
    [1, 1, 0],
    'in order: two pass, the third is capped',
  );
  t.same(
    statuses[2]!.suppressed.filter((s) => s.channel === 'in_app').map((s) => s.reason),
    ['frequency_cap'],
  );
  const critical = await client.send({
    event_type: 'otp',
    user_ids: [user],
    priority: 'critical',
    idempotency_key: key(),
  });
  const c = await statusWhen(critical.notification_id, 'routed', (x) => x.users_routed === 1);
  t.equal(c.channels.filter((r) => r.channel === 'in_app').length, 1, 'critical passes the cap');
});

const one = (role: string): string => cluster.role(role)[0]!.url;
const smtp = one('smtp-provider');
const push = one('push-provider');
const uid = (p: string): string => `${p}-${randomUUID().slice(0, 8)}`;
async function received(base: string, query: string): Promise<Array<Record<string, unknown>>> {
  const a = await call(base, 'GET', `/admin/received?${query}`, { token });
  if (a.status !== 200) throw new Error(`received: ${a.status}`);
  return (a.body as { messages: Array<Record<string, unknown>> }).messages;
}
const rowOf = (s: StatusAnswer, channel: string): StatusAnswer['channels'][number] | undefined =>
  s.channels.find((c) => c.channel === channel);
async function faults(role: string, body: Record<string, unknown>): Promise<void> {
  const a = await call(one(role), 'POST', '/admin/faults', { token, body });
  if (a.status !== 200) throw new Error(`faults ${role}: ${a.status} ${JSON.stringify(a.body)}`);
}

t.test('one message queued twice in one batch of a channel topic (a router replay): sent once', async (t) => {
  const log = new LogClient({ endpoints: members, token, timeoutMs: 30_000 });
  const state = new StateClient({ endpoints: members, token: deriveServiceToken(token, 'notify'), timeoutMs: 30_000 });
  t.teardown(async () => {
    await log.close();
    await state.close();
  });
  const user = uid('twice');
  await client.setPreferences(user, { contact: { email: `${user}@example.test` } });
  // The pending row the router makes, then its message appended twice in one append, as a router that queued it,
  // died before its commit and was replayed leaves it (with the delivery worker behind, both in one batch).
  const notificationId = randomUUID();
  const routed = await state.command(groupOf('user', user), {
    op: 'route',
    notification_id: notificationId,
    user_id: user,
    priority: 'high',
    channels: ['email'],
    suppressed: [],
    now: Date.now(),
  });
  t.equal(routed.op === 'route' && routed.rows.length, 1, 'one pending row');
  const message: QueuedMessage = {
    message_id: `${notificationId}:${user}:email`,
    notification_id: notificationId,
    user_id: user,
    event_type: 'twice',
    priority: 'high',
    channel: 'email',
    content: { title: 'twice', body: 'once', data: {} },
    accepted_at: Date.now(),
    address: { channel: 'email', email: `${user}@example.test` },
  };
  const value = JSON.stringify(message);
  await log.append('notify-high-email', 0, [
    { key: user, value },
    { key: user, value },
  ]);
  await statusWhen(notificationId, 'sent', (s) => rowOf(s, 'email')?.status === 'sent');
  await new Promise((r) => setTimeout(r, 1000));
  t.equal((await received(smtp, `message_id=${message.message_id}`)).length, 1, 'the provider received it once');
});

t.test('critical fallback chain: sms fails (provider 503s), push has no subscription, email takes it', async (t) => {
  const user = uid('fb');
  await client.setPreferences(user, {
    contact: { phone: '+15550002222', email: `${user}@example.test` },
    channels_enabled: { in_app: false },
  });
  await faults('sms-provider', { fail_next: 2, status: 503 });
  const sent = await client.send({
    event_type: 'otp',
    user_ids: [user],
    priority: 'critical',
    idempotency_key: key(),
    data: { code: '777' },
  });
  // The router routes critical to sms and email directly (both addressed); the chain adds push after sms, then
  // email again is the same row (already there): no second email.
  const s = await statusWhen(
    sent.notification_id,
    'sms failed, push fallback failed, email sent',
    (x) =>
      rowOf(x, 'sms')?.status === 'failed' &&
      rowOf(x, 'push')?.status === 'failed' &&
      ['sent', 'delivered'].includes(rowOf(x, 'email')?.status ?? ''),
  );
  t.equal(rowOf(s, 'sms')!.attempt_count, 2, 'two tries on sms (critical_attempts=2), with backoff');
  t.equal(rowOf(s, 'push')!.fallback_from, 'sms', 'push stood in for sms');
  t.equal(rowOf(s, 'push')!.reason, 'no_address');
  const mails = await received(smtp, `notification_id=${sent.notification_id}`);
  t.equal(mails.length, 1, 'one email');
});

t.test('critical fallback to a channel the router did not pick: sms fails, push takes it', async (t) => {
  const user = uid('fp');
  const keys = createSubscriberKeys();
  const sub = await call(push, 'POST', '/admin/subscriptions', {
    token,
    body: { p256dh: keys.p256dh, auth: keys.auth, private_key: keys.privateKey },
  });
  t.equal(sub.status, 201);
  const subscription = {
    endpoint: (sub.body as { endpoint: string }).endpoint,
    keys: { p256dh: keys.p256dh, auth: keys.auth },
  };
  await client.setPreferences(user, {
    contact: { phone: '+15550003333', push_subscriptions: [subscription] },
    channels_enabled: { push: false, in_app: false },
  });
  await faults('sms-provider', { fail_next: 2, status: 500 });
  const sent = await client.send({ event_type: 'otp', user_ids: [user], priority: 'critical', idempotency_key: key() });
  // push is opted out: the router skips it, and the fallback row is failed at send time (opted out), so the chain
  // goes on to email, which has no address: nothing more (the user chose so).
  const s = await statusWhen(
    sent.notification_id,
    'the chain ends',
    (x) => rowOf(x, 'sms')?.status === 'failed' && rowOf(x, 'push')?.status === 'failed',
  );
  t.equal(
    rowOf(s, 'push')!.reason,
    'opted_out_at_send_time',
    'preferences are checked again at send time, fallbacks included',
  );
  t.equal((await received(push, `notification_id=${sent.notification_id}`)).length, 0);
  // Now with push enabled: sms fails, push takes it.
  await client.setPreferences(user, { channels_enabled: { push: true } });
  await faults('sms-provider', { fail_next: 2, status: 500 });
  const again = await client.send({
    event_type: 'otp',
    user_ids: [user],
    priority: 'critical',
    idempotency_key: key(),
  });
  await statusWhen(again.notification_id, 'push sent', (x) =>
    ['sent', 'delivered'].includes(rowOf(x, 'push')?.status ?? ''),
  );
  t.equal(
    (await received(push, `notification_id=${again.notification_id}`)).length,
    1,
    'the push service received it once',
  );
});

t.test('email hard bounce: row bounced, email disabled for the user', async (t) => {
  const user = uid('bo');
  await client.setPreferences(user, { contact: { email: `${user}@bounce.test` } });
  const sent = await client.send({
    event_type: 'newsletter',
    user_ids: [user],
    priority: 'normal',
    idempotency_key: key(),
  });
  const s = await statusWhen(sent.notification_id, 'bounced', (x) => rowOf(x, 'email')?.status === 'bounced');
  t.ok(rowOf(s, 'email')!.reason, 'the reason is kept');
  t.equal((await client.preferences(user)).channels_enabled.email, false, 'email disabled');
  const next = await client.send({
    event_type: 'newsletter',
    user_ids: [user],
    priority: 'normal',
    idempotency_key: key(),
  });
  const n = await statusWhen(next.notification_id, 'routed', (x) => x.users_routed === 1);
  t.same(
    n.suppressed.filter((x) => x.channel === 'email').map((x) => x.reason),
    ['opted_out'],
    'no more email',
  );
});

t.test('push: an expired subscription is removed on the push service feedback', async (t) => {
  const user = uid('ps');
  const subs = [];
  for (let i = 0; i < 2; i++) {
    const keys = createSubscriberKeys();
    const a = await call(push, 'POST', '/admin/subscriptions', {
      token,
      body: { p256dh: keys.p256dh, auth: keys.auth, private_key: keys.privateKey },
    });
    subs.push({
      id: (a.body as { id: string }).id,
      sub: { endpoint: (a.body as { endpoint: string }).endpoint, keys: { p256dh: keys.p256dh, auth: keys.auth } },
    });
  }
  await client.setPreferences(user, { contact: { push_subscriptions: subs.map((s) => s.sub) } });
  t.equal((await call(push, 'DELETE', `/admin/subscriptions/${subs[0]!.id}`, { token })).status, 200);
  const sent = await client.send({ event_type: 'reply', user_ids: [user], priority: 'high', idempotency_key: key() });
  await statusWhen(sent.notification_id, 'push sent', (x) =>
    ['sent', 'delivered'].includes(rowOf(x, 'push')?.status ?? ''),
  );
  const prefs = await until(
    'the gone subscription removed',
    async () => {
      const p = await client.preferences(user);
      return p.contact.push_subscriptions.length === 1 ? p : null;
    },
    30_000,
    250,
  );
  t.equal(prefs.contact.push_subscriptions[0]!.endpoint, subs[1]!.sub.endpoint, 'the live one stays');
});

t.test('sms: sent, then delivered by the provider receipt seconds later', async (t) => {
  const user = uid('sm');
  await client.setPreferences(user, { contact: { phone: '+15550004444' } });
  const sent = await client.send({ event_type: 'otp', user_ids: [user], priority: 'critical', idempotency_key: key() });
  const s1 = await statusWhen(sent.notification_id, 'sms sent or delivered', (x) =>
    ['sent', 'delivered'].includes(rowOf(x, 'sms')?.status ?? ''),
  );
  t.ok(rowOf(s1, 'sms')!.provider_message_id, 'provider id recorded');
  const s2 = await statusWhen(sent.notification_id, 'sms delivered', (x) => rowOf(x, 'sms')?.status === 'delivered');
  t.ok((rowOf(s2, 'sms')!.delivered_at ?? 0) > 0, 'delivered_at from the receipt');
});

t.test('preference store unreachable: critical is sent (fail open), the rest is held until it is back', async (t) => {
  const user = uid('pd');
  await client.setPreferences(user, { contact: { email: `${user}@example.test` } });
  // Seen once, so the router knows the user's contact when the store goes away.
  const first = await client.send({
    event_type: 'hello',
    user_ids: [user],
    priority: 'normal',
    idempotency_key: key(),
  });
  await statusWhen(first.notification_id, 'first email sent', (x) =>
    ['sent', 'delivered'].includes(rowOf(x, 'email')?.status ?? ''),
  );
  // The router and the delivery worker both lose the store.
  preferenceStore(preferenceFlag, 'down');
  t.teardown(() => preferenceStore(preferenceFlag, 'up'));
  const normal = await client.send({
    event_type: 'digest',
    user_ids: [user],
    priority: 'normal',
    idempotency_key: key(),
  });
  const critical = await client.send({
    event_type: 'security_alert',
    user_ids: [user],
    priority: 'critical',
    idempotency_key: key(),
  });
  await until(
    'the critical email arrives',
    async () => (await received(smtp, `notification_id=${critical.notification_id}`)).length === 1,
    60_000,
    250,
  );
  await new Promise((r) => setTimeout(r, 3000));
  t.equal((await client.status(normal.notification_id)).users_routed, 0, 'the normal one is held, not routed');
  t.equal((await received(smtp, `notification_id=${normal.notification_id}`)).length, 0, 'and not sent');
  preferenceStore(preferenceFlag, 'up');
  await statusWhen(normal.notification_id, 'the held one goes once the store is back', (x) =>
    ['sent', 'delivered'].includes(rowOf(x, 'email')?.status ?? ''),
  );
  t.equal((await received(smtp, `notification_id=${normal.notification_id}`)).length, 1);
  t.equal(
    (await received(smtp, `notification_id=${critical.notification_id}`)).length,
    1,
    'the critical one was not sent again',
  );
});

t.test('priority isolation: a critical email overtakes a normal flood on the same channel', async (t) => {
  const flood = Array.from({ length: 60 }, () => uid('fl'));
  for (const u of flood)
    await client.setPreferences(u, { contact: { email: `${u}@example.test` }, channels_enabled: { in_app: false } });
  const vip = uid('vip');
  await client.setPreferences(vip, { contact: { email: `${vip}@example.test` }, channels_enabled: { in_app: false } });
  const bulk = await client.send({ event_type: 'promo', user_ids: flood, priority: 'normal', idempotency_key: key() });
  // The flood is routed and waiting for the provider's tokens (10 emails/s: 6 s of backlog) when the code comes.
  await statusWhen(bulk.notification_id, 'the flood is routed', (x) => x.channels.length === flood.length);
  const code = await client.send({ event_type: 'otp', user_ids: [vip], priority: 'critical', idempotency_key: key() });
  await statusWhen(code.notification_id, 'the critical email sent', (x) =>
    ['sent', 'delivered'].includes(rowOf(x, 'email')?.status ?? ''),
  );
  const pending = (await client.status(bulk.notification_id)).channels.filter((c) => c.status === 'pending').length;
  t.ok(pending > 0, `sent while ${pending} of the flood still wait`);
  await statusWhen(
    bulk.notification_id,
    'the flood drains',
    (x) => x.channels.every((c) => c.status === 'sent'),
    120_000,
  );
});

// campaign_rate_per_minute=60: a campaign's bucket holds 60 tokens and refills one a second.
t.test('bulk (low) sends are rate limited per campaign; other campaigns and critical are not held by it', async (t) => {
  const limit = 60;
  const blast = Array.from({ length: 150 }, () => uid('ca'));
  const t0 = Date.now();
  const a = await client.send({
    event_type: 'promo',
    user_ids: blast,
    priority: 'low',
    idempotency_key: key(),
    campaign_id: 'camp-a',
  });
  // Only the LIMIT is asserted: however fast the router is, by a time T at most limit + (T - t0) s of campaign A
  // are routed (the bucket starts full when the router first sees the campaign, after t0).
  const bound = (): number => limit + Math.ceil((Date.now() - t0) / 1000) + 1;
  await statusWhen(a.notification_id, "campaign A's burst is routed", (x) => x.users_routed >= limit);
  const other = Array.from({ length: 5 }, () => uid('cb'));
  const b = await client.send({
    event_type: 'promo',
    user_ids: other,
    priority: 'low',
    idempotency_key: key(),
    campaign_id: 'camp-b',
  });
  const vip = uid('cv');
  const code = await client.send({ event_type: 'otp', user_ids: [vip], priority: 'critical', idempotency_key: key() });
  await statusWhen(code.notification_id, 'the critical one delivered', (x) =>
    x.channels.some((c) => c.channel === 'in_app' && c.status === 'delivered'),
  );
  await statusWhen(
    b.notification_id,
    'campaign B routed and delivered',
    (x) => x.channels.filter((c) => c.status === 'delivered').length === other.length,
  );
  const routedA = (await client.status(a.notification_id)).users_routed;
  const max = bound();
  t.ok(routedA <= max, `campaign A within its limit: ${routedA} routed <= ${max}`);
  t.ok(
    routedA < blast.length,
    `campaign B and the critical one went while campaign A still waited (${routedA} of ${blast.length} routed)`,
  );
  // A few seconds later A has moved on, still within the limit.
  await new Promise((r) => setTimeout(r, 4000));
  const later = (await client.status(a.notification_id)).users_routed;
  const maxLater = bound();
  t.ok(later <= maxLater, `still within the limit: ${later} <= ${maxLater}`);
  t.ok(later >= routedA, 'campaign A goes on at its rate');
});

// The delivery workers are one consumer group of the log whose unit is a channel: the one sending the emails is
// SIGKILLed mid-flood and not restarted; the other takes the email channel once the lease lapses (4 s) and sends the
// rest from the committed offset, skipping what the dead one recorded; restarted, the dead one gets its channels back.
t.test(
  'delivery worker SIGKILLed mid-flood for good: the other takes its channels; nothing lost, nothing recorded as sent is sent again',
  async (t) => {
    type Health = { held_channels: string[] };
    const health = async (id: string): Promise<Health> =>
      (await call(cluster.workers.find((w) => w.id === id)!.url, 'GET', '/healthz')).body as unknown as Health;
    const both = await until(
      'both delivery workers hold their half of the 4 channels',
      async () => {
        const [one, two] = await Promise.all([health('delivery1'), health('delivery2')]);
        return one.held_channels.length === 2 && two.held_channels.length === 2 ? { one, two } : null;
      },
      30_000,
      200,
    );
    t.ok(both.one.held_channels.includes('in_app'), 'in_app runs on delivery1 (the WebSocket clients connect there)');
    const victim = both.one.held_channels.includes('email') ? 'delivery1' : 'delivery2';
    const survivor = victim === 'delivery1' ? 'delivery2' : 'delivery1';
    const victimChannels = (victim === 'delivery1' ? both.one : both.two).held_channels.sort();
    const users = Array.from({ length: 100 }, () => uid('k'));
    for (const u of users)
      await client.setPreferences(u, { contact: { email: `${u}@example.test` }, channels_enabled: { in_app: false } });
    const sent = await client.send({
      event_type: 'flood',
      user_ids: users,
      priority: 'normal',
      idempotency_key: key(),
    });
    const id = sent.notification_id;
    // email_rate_per_second=10: the 100 take 10 s in batches of 50, so the kill lands after the first batch was
    // recorded and before the last: some sent, some polled and waiting for tokens, some still queued. SIGKILL from
    // here (the worker's pid from cluster.json): the CLI's start-up is too slow on a loaded machine to land in time.
    const before = await statusWhen(
      id,
      'some emails sent',
      (x) => x.channels.filter((c) => c.status === 'sent').length >= 1,
      120_000,
    );
    const pid = (
      JSON.parse(readFileSync(join(cluster.dataDir, 'cluster.json'), 'utf8')) as {
        workers: Array<{ id: string; pid: number }>;
      }
    ).workers.find((w) => w.id === victim)!.pid;
    process.kill(pid, 'SIGKILL');
    const killed = Date.now();
    // Read after the kill: everything recorded as sent by the dead worker.
    const recorded = new Set(
      (await client.status(id)).channels.filter((c) => c.status === 'sent').map((c) => `${id}:${c.user_id}:email`),
    );
    t.ok(recorded.size >= before.channels.filter((c) => c.status === 'sent').length);
    t.ok(recorded.size < users.length, `killed mid-flood (${recorded.size} of ${users.length} recorded)`);
    await statusWhen(
      id,
      `every email sent by ${survivor}, ${victim} staying dead`,
      (x) => x.channels.filter((c) => c.status === 'sent').length === users.length,
      180_000,
    );
    t.comment(`every email sent ${Date.now() - killed} ms after the kill`);
    t.same((await health(survivor)).held_channels.sort(), ['email', 'in_app', 'push', 'sms'], `${survivor} holds all`);
    const mails = await received(smtp, `notification_id=${id}&limit=10000`);
    const count = new Map<string, number>();
    for (const m of mails) count.set(String(m.message_id), (count.get(String(m.message_id)) ?? 0) + 1);
    t.equal(count.size, users.length, 'every user got the email: nothing lost');
    const resentAfterRecord = [...recorded].filter((m) => (count.get(m) ?? 0) > 1);
    t.same(resentAfterRecord, [], 'no email recorded as sent before the kill was sent again');
    const duplicates = [...count.values()].filter((n) => n > 1).length;
    // Only a message the provider took in the instant between its answer and our record can go twice; at most the
    // batch that was in flight (50).
    t.ok(duplicates <= 50, `duplicates only from the batch in flight at the kill (${duplicates})`);
    const restart = await cluster.run('restart', victim);
    t.equal(restart.code, 0, restart.stderr);
    await until(
      `${victim} holds its channels again and ${survivor} let them go`,
      async () => {
        const back = await health(victim).catch(() => null);
        return back !== null && back.held_channels.sort().join() === victimChannels.join()
          ? (await health(survivor)).held_channels.length === 2
          : false;
      },
      30_000,
      200,
    );
    t.pass(`${victim} is back with the same channels`);
  },
);

// The routers are one consumer group of the log: router2 SIGKILLed and not restarted, router1 takes its ingestion
// partitions once router2's lease lapses (4 s), and notifications to users on them are routed and delivered.
t.test('a router SIGKILLed for good: the other takes its partitions within seconds, and gives them back', async (t) => {
  type Health = { members: string[]; partitions: string[] };
  const urlOf = (id: string): string => cluster.workers.find((w) => w.id === id)!.url;
  const health = async (id: string): Promise<Health> =>
    (await call(urlOf(id), 'GET', '/healthz')).body as unknown as Health;
  await until(
    'both routers hold their half of the 8 ingestion partitions',
    async () => (await health('router1')).partitions.length === 4 && (await health('router2')).partitions.length === 4,
    30_000,
    200,
  );
  const before = (await health('router2')).partitions.sort();
  // Users on both partitions of the critical topic, so some are router2's.
  const users: string[] = [];
  while (![0, 1].every((p) => users.some((u) => partitionOf(u, INGEST_PARTITIONS) === p))) users.push(uid('rk'));
  const pid = (
    JSON.parse(readFileSync(join(cluster.dataDir, 'cluster.json'), 'utf8')) as {
      workers: Array<{ id: string; pid: number }>;
    }
  ).workers.find((w) => w.id === 'router2')!.pid;
  process.kill(pid, 'SIGKILL');
  const killed = Date.now();
  await until(
    'router2 is dead',
    () =>
      call(urlOf('router2'), 'GET', '/healthz', { timeoutMs: 1_000 }).then(
        () => false,
        () => true,
      ),
    30_000,
    50,
  );
  const sent = await client.send({ event_type: 'otp', user_ids: users, priority: 'critical', idempotency_key: key() });
  await statusWhen(
    sent.notification_id,
    'every user has the code in-app',
    (x) => x.channels.filter((c) => c.channel === 'in_app' && c.status === 'delivered').length === users.length,
    Math.max(1, 15_000 - (Date.now() - killed)),
  );
  const took = Date.now() - killed;
  t.comment(`delivered ${took} ms after the kill`);
  t.ok(took <= 15_000, `every user's code delivered ${took} ms after the kill`);
  t.equal((await health('router1')).partitions.length, 8, 'router1 holds every ingestion partition');
  const restart = await cluster.run('restart', 'router2');
  t.equal(restart.code, 0, restart.stderr);
  await until(
    'router2 holds its partitions again and router1 let them go',
    async () => {
      const two = await health('router2').catch(() => null);
      return (
        two !== null &&
        two.partitions.sort().join() === before.join() &&
        (await health('router1')).partitions.length === 4
      );
    },
    30_000,
    200,
  );
  t.pass('router2 is back with the same partitions');
});

// The ingestion queue made unavailable for real: two of the three members SIGSTOPped, so no partition or state
// group has a quorum. The API answers 503 with a JSON error (it does not buffer); after SIGCONT the caller's retry
// with the same idempotency_key is accepted once and delivered once.
t.test('ingestion queue without a quorum: 503 JSON error, then the retry is accepted and delivered once', async (t) => {
  const user = uid('q5');
  const idem = key();
  const body = {
    event_type: 'otp',
    user_ids: [user],
    priority: 'critical',
    idempotency_key: idem,
    data: { code: '424242' },
  };
  const state = JSON.parse(readFileSync(join(cluster.dataDir, 'cluster.json'), 'utf8')) as {
    members: Array<{ id: string; pid: number | null }>;
  };
  const stopped = state.members.slice(1).map((m) => m.pid!);
  for (const pid of stopped) process.kill(pid, 'SIGSTOP');
  let resumed = false;
  const resume = (): void => {
    if (resumed) return;
    resumed = true;
    for (const pid of stopped) process.kill(pid, 'SIGCONT');
  };
  t.teardown(resume);
  // The member that still runs may believe it leads a group for an election timeout or two: the first answers can
  // take that long. Every answer must be a 503 JSON error (never a 202 nor a 5xx without a body).
  const answers: number[] = [];
  const refused = await until(
    'a 503 from the member left',
    async () => {
      const a = await call(members[0]!, 'POST', '/v1/notifications', { token, body, timeoutMs: 60_000 });
      answers.push(a.status);
      return a.status === 503 ? a : null;
    },
    120_000,
    500,
  );
  t.same([...new Set(answers)], [503], `every answer while two members are stopped is 503 (${answers.join(',')})`);
  const error = (refused.body as { error?: { code?: string; message?: string } }).error;
  t.equal(error?.code, 'unavailable', 'a JSON error {error: {code, message}}');
  t.ok(typeof error?.message === 'string' && error.message.length > 0, `with a message (${error?.message})`);
  t.ok(refused.headers['retry-after'] !== undefined, 'with Retry-After');
  resume();
  const retried = await until(
    'the retry is accepted after SIGCONT',
    async () => {
      const a = await call(members[0]!, 'POST', '/v1/notifications', { token, body, timeoutMs: 60_000 });
      if (a.status === 503) return null;
      return a;
    },
    180_000,
    1000,
  );
  t.ok(retried.status === 202 || retried.status === 200, `accepted (${retried.status})`);
  const id = (retried.body as { notification_id: string }).notification_id;
  const again = await post(body, token, members[1]!);
  t.equal(again.status, 200, 'a second retry is a duplicate');
  t.equal((again.body as { notification_id: string }).notification_id, id, 'of the same notification');
  await statusWhen(
    id,
    'delivered in-app',
    (x) => x.channels.some((c) => c.channel === 'in_app' && c.status === 'delivered'),
    180_000,
  );
  await new Promise((r) => setTimeout(r, 2000));
  const inbox = await client.inbox(user);
  t.equal(inbox.items.length, 1, 'one item in the centre: delivered once');
  t.equal(inbox.items[0]!.notification_id, id);
  t.equal((await client.status(id)).channels.filter((c) => c.channel === 'in_app').length, 1, 'one delivery_log row');
});

// Last: every member is killed (all at once: no copy of the state stays in memory) and restarted on its data;
// the dedup key is still known. The workers stay up and reconnect.
t.test('dedup survives a restart of every member', async (t) => {
  const state = JSON.parse(readFileSync(join(cluster.dataDir, 'cluster.json'), 'utf8')) as {
    members: Array<{ id: string; pid: number | null }>;
  };
  for (const m of state.members) if (m.pid !== null) process.kill(m.pid, 'SIGKILL');
  // Restarted side by side (the CLI records each pid on its own), so the three start-ups overlap.
  const restarts = await Promise.all(state.members.map((m) => cluster.run('restart', m.id)));
  for (const r of restarts) t.equal(r.code, 0, r.stderr);
  const again = await until(
    'a member answers after the restart',
    async () => {
      const a = await post({
        event_type: 'welcome',
        user_ids: [dedupUser],
        priority: 'high',
        idempotency_key: dedupKey,
      });
      return a.status === 503 || a.status === 0 ? null : a;
    },
    120_000,
    500,
  );
  t.equal(again.status, 200);
  t.equal((again.body as { notification_id: string }).notification_id, dedupId);
  const fresh = await until(
    'accepting again',
    async () => {
      const a = await post({ event_type: 'welcome', user_ids: [dedupUser], priority: 'high', idempotency_key: key() });
      return a.status === 202 ? a : null;
    },
    120_000,
    500,
  );
  t.equal(fresh.status, 202);
  await statusWhen((fresh.body as { notification_id: string }).notification_id, 'delivered after restart', (s) =>
    s.channels.some((c) => c.status === 'delivered'),
  );
  t.equal((await client.inbox(dedupUser)).items.length, 2, 'the duplicate never added an item; the new one did');
});
