/**
 * Each real channel end to end against its stand-in provider, all on real loopback sockets: SMTP (nodemailer ->
 * smtp-server, parsed), Web Push (web-push's VAPID + aes128gcm -> the stand-in verifies the JWT and decrypts with
 * the subscriber's private key), SMS (JSON API, receipts POSTed later to a real callback server). One set of
 * stand-ins for the whole file, started through their worker roles as `cluster up` starts them.
 */
import { createServer, type IncomingMessage } from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import type { RunningWorker, WorkerOptions, WorkerRole } from '@raftkit/http';
import { call, reservePorts, until } from '@raftkit/testkit';
import type {
  Address,
  OutboundMessage,
  Priority,
  PushSubscription,
  SenderContext,
} from '../src/workers/delivery/channels/channel.js';
import { providerSenderFactories } from '../src/workers/delivery/channels/senders.js';
import { EmailSender } from '../src/workers/delivery/channels/email.js';
import { loadOrCreateVapidKeys, PushSender, PUSH_BATCH } from '../src/workers/delivery/channels/push.js';
import { SmsSender } from '../src/workers/delivery/channels/sms.js';
import {
  pushProviderRole,
  smsProviderRole,
  smtpProviderRole,
  createSubscriberKeys,
} from '../src/workers/providers/index.js';

const TOKEN = 'channels-test-token';
const ports = await reservePorts();
const dir = mkdtempSync(join(tmpdir(), 'notify-channels-'));
// Errors only: a handler failure shows in the test output.
const silent = {
  log: (level: string, m: string, f?: Record<string, unknown>) =>
    void (level === 'error' && process.stderr.write(`${m} ${JSON.stringify(f)}\n`)),
};
const workers: RunningWorker[] = [];

async function startRole(
  role: WorkerRole,
  k: number,
  settings: Record<string, string> = {},
): Promise<{ http: string; tcp: string }> {
  const http = `127.0.0.1:${ports.base + 40 + k}`;
  const tcp = `127.0.0.1:${ports.base + 160 + k}`;
  const options: WorkerOptions = {
    id: `${role.role}1`,
    role: role.role,
    index: 1,
    dataDir: join(dir, role.role),
    httpAddress: http,
    tcpAddress: tcp,
    members: [],
    workers: [],
    tokens: [TOKEN],
    settings,
    logger: silent,
  };
  workers.push(await role.start(options));
  return { http: `http://${http}`, tcp };
}

// The receipt endpoint the SMS provider calls back (in the service: the notify API's receipt route).
const receipts: Array<{ body: Record<string, unknown>; auth: string | undefined; at: number }> = [];
let refuseReceipts = 0;
const sink = createServer((req: IncomingMessage, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    if (refuseReceipts > 0) {
      refuseReceipts--;
      res.writeHead(503).end();
      return;
    }
    receipts.push({
      body: JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>,
      auth: req.headers.authorization,
      at: Date.now(),
    });
    res.writeHead(204).end();
  });
});
const sinkPort = ports.base + 50;
await new Promise<void>((r) => sink.listen(sinkPort, '127.0.0.1', r));

const smtp = await startRole(smtpProviderRole, 1);
const push = await startRole(pushProviderRole, 2);
const sms = await startRole(smsProviderRole, 3, { sms_receipt_delay_ms: '1500' });

t.teardown(async () => {
  for (const w of workers) await w.stop();
  await new Promise<void>((r) => sink.close(() => r()));
  rmSync(dir, { recursive: true, force: true });
  ports.release();
});

const msg = (
  notificationId: string,
  address: Address,
  over: {
    title?: string;
    body?: string;
    data?: Record<string, unknown>;
    priority?: Priority;
    receipt_url?: string;
  } = {},
): OutboundMessage => ({
  message_id: `${notificationId}:u1:${address.channel}`,
  notification_id: notificationId,
  user_id: 'u1',
  event_type: 'otp',
  priority: over.priority ?? 'critical',
  channel: address.channel,
  address,
  content: { title: over.title ?? 'Sign-in code', body: over.body ?? 'Your code is 424242', data: over.data ?? {} },
  attempt: 1,
  accepted_at: Date.now(),
  ...(over.receipt_url !== undefined ? { receipt_url: over.receipt_url } : {}),
});
const email = (e: string): Address => ({ channel: 'email', email: e });
const phone = (p: string): Address => ({ channel: 'sms', phone: p });
const pushTo = (...subscriptions: PushSubscription[]): Address => ({ channel: 'push', subscriptions });

async function received(base: string, query: string): Promise<Array<Record<string, unknown>>> {
  const a = await call(base, 'GET', `/admin/received?${query}`, { token: TOKEN });
  if (a.status !== 200) throw new Error(`received: ${a.status}`);
  return a.body.messages as Array<Record<string, unknown>>;
}

t.test(
  'email: delivered over SMTP and parsed by the stand-in; a hard bounce; a transient 4xx is a retry',
  async (t) => {
    const [host, port] = smtp.tcp.split(':');
    const sender = new EmailSender({ host: host!, port: Number(port), from: 'notify@raftkit.test' });
    t.teardown(() => sender.close());
    const [ok, bounce] = await sender.send([
      msg('n-email-1', email('alice@example.test'), { body: 'Your code is 424242\nIt expires in 10 minutes.' }),
      msg('n-email-2', email('bob@bounce.test')),
    ]);
    t.equal(ok!.kind, 'sent');
    t.match(ok, { provider_message_id: /^[0-9a-f-]{36}$/ }, "the stand-in's queue id");
    t.equal(bounce!.kind, 'bounced', '550 at RCPT TO is a hard bounce');
    t.match(bounce, { reason: /550/ });
    const got = await received(smtp.http, 'notification_id=n-email-1');
    t.equal(got.length, 1);
    t.match(got[0], {
      to: 'alice@example.test',
      from: 'notify@raftkit.test',
      subject: 'Sign-in code',
      text: 'Your code is 424242\nIt expires in 10 minutes.',
      message_id: 'n-email-1:u1:email',
      rfc822_message_id: '<n-email-1.u1.email@notify.raftkit>',
    });
    t.equal(
      got[0]!.id,
      (ok as { provider_message_id: string }).provider_message_id,
      'the provider id is the id the server gave',
    );
    t.same(await received(smtp.http, 'to=bob@bounce.test'), [], 'nothing kept for the bounced address');

    const fault = await call(smtp.http, 'POST', '/admin/faults', { token: TOKEN, body: { fail_next: 1 } });
    t.match(fault.body, { fail_next: 1, status: 451 });
    const [first] = await sender.send([msg('n-email-3', email('carol@example.test'))]);
    t.equal(first!.kind, 'retry', 'a 451 is transient');
    const [second] = await sender.send([msg('n-email-3', email('carol@example.test'))]);
    t.equal(second!.kind, 'sent', 'the retry goes through');
    t.equal((await received(smtp.http, 'notification_id=n-email-3')).length, 1, 'kept once');
    t.match(
      (await sender.send([msg('n-email-4', phone('+15551234567'))]))[0],
      { kind: 'invalid_address' },
      'not an email address',
    );
  },
);

t.test('email: an unreachable SMTP server is a retry, not a bounce', async (t) => {
  const sender = new EmailSender({
    host: '127.0.0.1',
    port: ports.base + 59,
    from: 'notify@raftkit.test',
    timeoutMs: 3_000,
  });
  t.teardown(() => sender.close());
  const [o] = await sender.send([msg('n-email-x', email('dave@example.test'))]);
  t.equal(o!.kind, 'retry');
});

t.test('push: VAPID-signed, encrypted, decrypted by the push service; 410 and 404 are invalid addresses', async (t) => {
  const vapid = loadOrCreateVapidKeys(join(dir, 'vapid.json'));
  t.same(loadOrCreateVapidKeys(join(dir, 'vapid.json')), vapid, 'generated once, read back after');
  const sender = new PushSender({ vapid, subject: 'mailto:ops@raftkit.test' });
  t.teardown(() => sender.close());
  const subscribe = async (
    applicationServerKey = vapid.publicKey,
  ): Promise<{ id: string; sub: { endpoint: string; keys: { p256dh: string; auth: string } } }> => {
    const keys = createSubscriberKeys();
    const a = await call(push.http, 'POST', '/admin/subscriptions', {
      token: TOKEN,
      body: {
        p256dh: keys.p256dh,
        auth: keys.auth,
        private_key: keys.privateKey,
        application_server_key: applicationServerKey,
      },
    });
    t.equal(a.status, 201);
    return {
      id: a.body.id as string,
      sub: { endpoint: a.body.endpoint as string, keys: { p256dh: keys.p256dh, auth: keys.auth } },
    };
  };
  const live = await subscribe();
  const expired = await subscribe();
  t.equal((await call(push.http, 'DELETE', `/admin/subscriptions/${expired.id}`, { token: TOKEN })).status, 200);
  const unknown = { ...live.sub, endpoint: `${push.http}/push/00000000-0000-0000-0000-000000000000` };
  const otherServer = await subscribe(createSubscriberKeys().p256dh);

  const outcomes = await sender.send([
    msg('n-push-1', pushTo(live.sub, expired.sub), {
      title: 'New sign-in',
      body: 'From Lisbon',
      data: { device: 'phone' },
    }),
    msg('n-push-2', pushTo(expired.sub)),
    msg('n-push-3', pushTo(unknown, expired.sub)),
    msg('n-push-4', pushTo(otherServer.sub)),
    msg('n-push-5', pushTo()),
    msg('n-push-6', email('x@example.test')),
  ]);
  t.equal(outcomes[0]!.kind, 'sent', JSON.stringify(outcomes[0]));
  t.match(outcomes[0], { provider_message_id: new RegExp(`^${push.http}/messages/`) }, 'the Location header');
  t.same(
    (outcomes[0] as { invalid_subscriptions?: string[] }).invalid_subscriptions,
    [expired.sub.endpoint],
    'sent to the live device, the expired one reported',
  );
  t.match(outcomes[1], { kind: 'invalid_address', reason: /410/, invalid_subscriptions: [expired.sub.endpoint] });
  t.match(outcomes[2], { kind: 'invalid_address', reason: /404.*410/s });
  t.same(
    (outcomes[2] as { invalid_subscriptions?: string[] }).invalid_subscriptions,
    [unknown.endpoint, expired.sub.endpoint],
    'both gone subscriptions listed',
  );
  t.match(
    outcomes[3],
    { kind: 'invalid_address', reason: /403/, invalid_subscriptions: [otherServer.sub.endpoint] },
    'a JWT signed by another application server key is refused',
  );
  t.match(outcomes[4], { kind: 'invalid_address', reason: 'no push subscription' });
  t.match(outcomes[5], { kind: 'invalid_address' });
  const got = await received(push.http, 'notification_id=n-push-1');
  t.equal(got.length, 1);
  t.same(
    JSON.parse(got[0]!.payload as string),
    {
      notification_id: 'n-push-1',
      message_id: 'n-push-1:u1:push',
      title: 'New sign-in',
      body: 'From Lisbon',
      data: { device: 'phone' },
    },
    'decrypted by the stand-in',
  );
  t.match(got[0], { urgency: 'high', vapid_sub: 'mailto:ops@raftkit.test', subscription_id: live.id });
  t.equal(
    (await call(push.http, 'GET', '/admin/counts', { token: TOKEN })).body.total,
    1,
    'only the one valid push was taken',
  );
});

t.test('push: a push service that cannot decrypt refuses the message (the crypto is really checked)', async (t) => {
  const vapid = loadOrCreateVapidKeys(join(dir, 'vapid.json'));
  const sender = new PushSender({ vapid, subject: 'mailto:ops@raftkit.test' });
  t.teardown(() => sender.close());
  const keys = createSubscriberKeys();
  const a = await call(push.http, 'POST', '/admin/subscriptions', {
    token: TOKEN,
    body: { p256dh: keys.p256dh, auth: keys.auth, private_key: keys.privateKey },
  });
  // The sender encrypts for a different auth secret than the one the subscriber holds.
  const wrongAuth = createSubscriberKeys().auth;
  const [o] = await sender.send([
    msg('n-push-bad', pushTo({ endpoint: a.body.endpoint as string, keys: { p256dh: keys.p256dh, auth: wrongAuth } })),
  ]);
  t.match(o, { kind: 'invalid_address', reason: /400.*undecryptable/s });
});

t.test('push: a batch of 500 goes out at once on the keep-alive pool, one outcome each; 503 is a retry', async (t) => {
  const vapid = loadOrCreateVapidKeys(join(dir, 'vapid.json'));
  const sender = new PushSender({ vapid, subject: 'mailto:ops@raftkit.test', connections: 16 });
  t.teardown(() => sender.close());
  const subs = await Promise.all(
    Array.from({ length: 20 }, async () => {
      const keys = createSubscriberKeys();
      const a = await call(push.http, 'POST', '/admin/subscriptions', {
        token: TOKEN,
        body: {
          p256dh: keys.p256dh,
          auth: keys.auth,
          private_key: keys.privateKey,
          application_server_key: vapid.publicKey,
        },
      });
      return { endpoint: a.body.endpoint as string, keys: { p256dh: keys.p256dh, auth: keys.auth } };
    }),
  );
  const before = (await call(push.http, 'GET', '/admin/counts', { token: TOKEN })).body.total as number;
  const batch = Array.from({ length: PUSH_BATCH }, (_, i) =>
    msg(`n-batch-${i}`, pushTo(subs[i % subs.length]!), { priority: 'low', body: `bulk ${i}` }),
  );
  await call(push.http, 'POST', '/admin/faults', { token: TOKEN, body: { fail_next: 3, status: 503 } });
  const outcomes = await sender.send(batch);
  t.equal(outcomes.length, PUSH_BATCH);
  t.equal(outcomes.filter((o) => o.kind === 'retry').length, 3, 'the three failed requests are retries');
  t.equal(outcomes.filter((o) => o.kind === 'sent').length, PUSH_BATCH - 3);
  const counts = await call(push.http, 'GET', '/admin/counts', { token: TOKEN });
  t.equal((counts.body.total as number) - before, PUSH_BATCH - 3, 'each sent message arrived once');
  t.equal(counts.body.duplicated, 0);
  const low = await received(push.http, 'notification_id=n-batch-7');
  t.match(JSON.parse(low[0]!.payload as string), { body: 'bulk 7' });
  t.equal(low[0]!.urgency, 'low');
});

t.test('sms: 202 now, the receipt later at the callback (delivered / failed), retried when refused', async (t) => {
  const sender = new SmsSender({ baseUrl: sms.http, token: TOKEN });
  const receipt_url = `http://127.0.0.1:${sinkPort}/v1/receipts`;
  t.teardown(() => sender.close());
  refuseReceipts = 1;
  const sentAt = Date.now();
  const [ok, unreachable, bad] = await sender.send([
    msg('n-sms-1', phone('+15551234567'), { body: 'Code 111222', receipt_url }),
    msg('n-sms-2', phone('+999123456789'), { body: 'Code 333444', receipt_url }),
    msg('n-sms-3', phone('12345'), { receipt_url }),
  ]);
  t.equal(ok!.kind, 'sent');
  t.equal(unreachable!.kind, 'sent', 'accepted by the provider; the handset is what fails');
  t.match(bad, { kind: 'invalid_address', reason: /400.*invalid_number/s });
  t.equal(receipts.length, 0, 'no receipt at accept time');
  await until('both receipts', () => receipts.length >= 2 || null, 30_000);
  const byRef = new Map(receipts.map((r) => [r.body.message_id, r]));
  t.match(byRef.get('n-sms-1:u1:sms')?.body, {
    provider_message_id: (ok as { provider_message_id: string }).provider_message_id,
    status: 'delivered',
    to: '+15551234567',
    at: Number,
  });
  t.match(byRef.get('n-sms-2:u1:sms')?.body, { status: 'failed', reason: /unreachable/ });
  t.equal(byRef.get('n-sms-1:u1:sms')?.auth, `Bearer ${TOKEN}`, 'the callback carries the bearer token');
  t.ok(Math.min(...receipts.map((r) => r.at)) - sentAt >= 1_400, 'receipts come after the configured delay');
  const kept = await received(sms.http, 'notification_id=n-sms-1');
  await until('the refused callback to be retried and acknowledged', async () => {
    const all = [
      ...(await received(sms.http, 'notification_id=n-sms-1')),
      ...(await received(sms.http, 'notification_id=n-sms-2')),
    ];
    return all.every((m) => m.receipt_acknowledged_at !== null) && all.some((m) => (m.callback_attempts as number) >= 2)
      ? true
      : null;
  });
  t.match(kept[0], { to: '+15551234567', body: 'Code 111222' });
  receipts.length = 0;
});

t.test(
  'sms: a provider 5xx is a retry; admin endpoints want the cluster token; bad input is a 4xx JSON error',
  async (t) => {
    const sender = new SmsSender({ baseUrl: sms.http, token: TOKEN });
    t.teardown(() => sender.close());
    await call(sms.http, 'POST', '/admin/faults', { token: TOKEN, body: { fail_next: 2, status: 502 } });
    const outcomes = await sender.send([
      msg('a', phone('+15550000001')),
      msg('b', phone('+15550000002')),
      msg('c', phone('+15550000003')),
    ]);
    t.same(outcomes.map((o) => o.kind).sort(), ['retry', 'retry', 'sent']);
    t.equal(
      (await call(sms.http, 'POST', '/messages', { body: { to: '+15550000001', body: 'x' } })).status,
      401,
      'the provider API wants its token',
    );
    for (const base of [smtp.http, push.http, sms.http]) {
      t.equal((await call(base, 'GET', '/admin/received')).status, 401);
      const bad = await call(base, 'POST', '/admin/faults', { token: TOKEN, body: { fail_next: -1 } });
      t.equal(bad.status, 400);
      t.match(bad.body, { error: { code: 'invalid_field', field: 'fail_next' } });
      t.equal((await call(base, 'POST', '/admin/faults', { token: TOKEN, raw: '{' })).status, 400);
      t.equal((await call(base, 'GET', '/admin/received?since=x', { token: TOKEN })).status, 400);
    }
    t.equal(
      (
        await call(sms.http, 'POST', '/messages', {
          token: TOKEN,
          body: { to: '+15550000001', body: 'x'.repeat(1601) },
        })
      ).status,
      400,
    );
    t.equal((await call(push.http, 'POST', '/push/whatever', { raw: 'x' })).status, 404, 'unknown subscription');
    const sub = createSubscriberKeys();
    const a = await call(push.http, 'POST', '/admin/subscriptions', {
      token: TOKEN,
      body: { p256dh: sub.p256dh, auth: sub.auth, private_key: sub.privateKey },
    });
    const noAuth = await call(push.http, 'POST', new URL(a.body.endpoint as string).pathname, {
      raw: 'xxxx',
      headers: { ttl: '60', 'content-encoding': 'aes128gcm' },
    });
    t.equal(noAuth.status, 403, 'no VAPID header');
    t.equal(
      (
        await call(push.http, 'POST', '/admin/subscriptions', {
          token: TOKEN,
          body: { p256dh: 'short', auth: sub.auth, private_key: sub.privateKey },
        })
      ).status,
      400,
    );
  },
);

t.test(
  'the sender factories find the stand-ins among the cluster workers (as the channel workers call them)',
  async (t) => {
    const context: SenderContext = {
      settings: {},
      workers: [
        { id: 'smtp-provider1', role: 'smtp-provider', httpAddress: smtp.http.slice(7), tcpAddress: smtp.tcp },
        { id: 'push-provider1', role: 'push-provider', httpAddress: push.http.slice(7) },
        { id: 'sms-provider1', role: 'sms-provider', httpAddress: sms.http.slice(7) },
      ],
      members: [],
      token: TOKEN,
      dataDir: join(dir, 'worker-push1'),
      logger: silent,
    };
    const emailSender = await providerSenderFactories.email(context);
    const pushSender = await providerSenderFactories.push(context);
    const smsSender = await providerSenderFactories.sms(context);
    t.teardown(async () => {
      await emailSender.close?.();
      await pushSender.close?.();
      await smsSender.close?.();
    });
    t.same([emailSender.channel, pushSender.channel, smsSender.channel], ['email', 'push', 'sms']);
    t.equal(pushSender.maxBatch, 500);
    t.match(await emailSender.send([msg('n-f-1', email('f@example.test'))]), [{ kind: 'sent' }]);
    t.match(await smsSender.send([msg('n-f-2', phone('+15557654321'))]), [{ kind: 'sent' }]);
    const keys = createSubscriberKeys();
    const vapid = loadOrCreateVapidKeys(join(dir, 'vapid.json'));
    const a = await call(push.http, 'POST', '/admin/subscriptions', {
      token: TOKEN,
      body: {
        p256dh: keys.p256dh,
        auth: keys.auth,
        private_key: keys.privateKey,
        application_server_key: vapid.publicKey,
      },
    });
    t.match(
      await pushSender.send([
        msg('n-f-3', pushTo({ endpoint: a.body.endpoint as string, keys: { p256dh: keys.p256dh, auth: keys.auth } })),
      ]),
      [{ kind: 'sent' }],
      'the VAPID keys come from the shared file beside the data folders',
    );
    await t.rejects(providerSenderFactories.sms({ ...context, workers: [] }), /no sms-provider worker/);
  },
);
