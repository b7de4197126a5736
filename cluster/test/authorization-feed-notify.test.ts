/**
 * Who may call what on the feed and the notification service (services on Raft groups whose members also host the
 * event log's partitions), as authorization-groups.test.ts does for log, collab, flash and auction: every listed route
 * of every process with every kind of credential, and notify's user tokens on their own and other users' data. A
 * file of its own so tap runs it beside the other one (each service starts its own cluster).
 */
import t from 'tap';
import { call, until, type TestCluster } from '@raftkit/testkit';
import {
  describe,
  GROUPED_MEMBER_CLUSTER_ROUTES,
  issued,
  testService,
  upgradeStatus,
} from './helpers/authorization.js';

t.setTimeout(600_000);

// The log's topic routes are hosted by feed's and notify's members too (combineServices): their workers make
// their topics with their own service token.
const LOG_TOPIC_ROUTES = ['DELETE /v1/topics/:topic'];
const LOG_SERVICE_ROUTES = ['POST /v1/topics'];

testService(t, {
  service: 'feed',
  clusterOnly: {
    member: [
      ...GROUPED_MEMBER_CLUSTER_ROUTES,
      ...LOG_TOPIC_ROUTES,
      'POST /internal/feed/posts',
      'POST /internal/feed/posts/:id/delete',
      'POST /internal/feed/posts/:id/like',
      'POST /internal/feed/posts/:id/count',
      'GET /internal/feed/posts/:id',
      'POST /internal/feed/groups/:group/get',
    ],
    app: ['GET /api/admin/threshold', 'PUT /api/admin/threshold', 'GET /v1/routes'],
    store: ['POST /internal/store/call', 'GET /internal/store/copy', 'GET /v1/routes'],
  },
  serviceOnly: { member: LOG_SERVICE_ROUTES },
});

/** A notify user token: the client token of `user.<id>`, issued by a delivery worker to the cluster token. */
async function notifyUserToken(cluster: TestCluster, user: string): Promise<string> {
  return issued(
    `POST /v1/users/${user}/token`,
    call(cluster.role('delivery')[0]!.url, 'POST', `/v1/users/${user}/token`, { token: cluster.token }),
    'token',
  );
}

testService(t, {
  service: 'notify',
  clusterOnly: {
    member: [...GROUPED_MEMBER_CLUSTER_ROUTES, ...LOG_TOPIC_ROUTES],
    delivery: ['POST /v1/users/:id/token', 'POST /internal/in-app/push', 'GET /v1/routes'],
    'smtp-provider': [
      'GET /admin/received',
      'GET /admin/counts',
      'POST /admin/faults',
      'GET /admin/faults',
      'POST /admin/bounces',
      'GET /v1/routes',
    ],
    'push-provider': [
      'POST /admin/subscriptions',
      'DELETE /admin/subscriptions/:id',
      'POST /admin/faults',
      'GET /admin/faults',
      'GET /admin/received',
      'GET /admin/counts',
      'GET /v1/routes',
    ],
    'sms-provider': [
      'POST /messages',
      'POST /admin/faults',
      'GET /admin/faults',
      'POST /admin/config',
      'GET /admin/received',
      'GET /admin/counts',
      'GET /v1/routes',
    ],
  },
  // notify's internal endpoints: the cluster token or service.notify (its router and delivery workers), no client token.
  serviceOnly: {
    member: [
      ...LOG_SERVICE_ROUTES,
      'POST /v1/notify/setup',
      'POST /v1/notifications',
      'GET /v1/notifications/:nid/status',
      'PUT /v1/segments/:sid',
      'GET /v1/segments/:sid',
      'PUT /v1/templates/:event/:channel',
      'DELETE /v1/templates/:event/:channel',
      'POST /v1/receipts',
    ],
  },
  credentials: async (cluster: TestCluster) => {
    // The router creates the state groups and topics when it starts: until then the API answers 503, so the routes
    // are called once a notification is accepted.
    await until(
      'notify accepts notifications',
      async () => {
        const a = await call(cluster.members[0]!, 'POST', '/v1/notifications', {
          token: cluster.token,
          body: { event_type: 'warmup', user_ids: ['authz-warm'], priority: 'low', idempotency_key: 'authz-warmup' },
        });
        return a.status === 202 || a.status === 200;
      },
      180_000,
      500,
    );
    // A client token like any other to the router; the service itself keeps it to that user's own data.
    return {
      'notify user token': { token: await notifyUserToken(cluster, 'authz-user'), standing: 'client' as const },
    };
  },
  selfChecked: async (t, cluster, credentials) => {
    const member = cluster.members[0]!;
    const mine = credentials['notify user token']!.token!;
    const theirs = await notifyUserToken(cluster, 'authz-other');
    // A user reads and changes only its own centre and preferences; internal endpoints are not for users.
    const own: Array<[string, string, unknown]> = [
      ['GET', '/v1/users/authz-user/preferences', undefined],
      ['PUT', '/v1/users/authz-user/preferences', { channels_enabled: { email: false } }],
      ['GET', '/v1/users/authz-user/inbox', undefined],
      ['POST', '/v1/users/authz-user/inbox/read', { all: true }],
    ];
    for (const [method, path, body] of own) {
      const a = await call(member, method, path, { token: mine, body, timeoutMs: 20_000 });
      t.equal(a.status, 200, `${method} ${path} with its own user's token: 200 (${describe(a)})`);
      const b = await call(member, method, path, { token: theirs, body, timeoutMs: 20_000 });
      t.equal(b.status, 403, `${method} ${path} with another user's token: 403 (${describe(b)})`);
      t.equal(
        (b.body.error as { code?: string } | undefined)?.code,
        'forbidden',
        `${method} ${path} with another user's token: code forbidden`,
      );
    }
    const internal: Array<[string, string, unknown]> = [
      [
        'POST',
        '/v1/notifications',
        { event_type: 'x', user_ids: ['authz-user'], priority: 'low', idempotency_key: 'authz' },
      ],
      ['GET', '/v1/notifications/00000000-0000-4000-8000-000000000000/status', undefined],
      ['PUT', '/v1/segments/authz-seg', { user_ids: ['authz-user'] }],
      ['PUT', '/v1/templates/x/email', { title: 't', body: 'b' }],
      ['POST', '/v1/receipts', { message_id: 'authz', status: 'delivered', at: 0 }],
    ];
    for (const [method, path, body] of internal) {
      const a = await call(member, method, path, { token: mine, body, timeoutMs: 20_000 });
      t.equal(a.status, 403, `${method} ${path} with a user token: 403, internal callers only (${describe(a)})`);
    }
    // A state group's own endpoints, on a member that holds the group (the others answer 421): another user's inbox
    // can be neither read nor marked read with this user's token.
    const raw: Array<[string, unknown]> = [
      ['commands', { op: 'inboxRead', user_id: 'authz-other', item_ids: null }],
      ['query', { q: 'inbox', user_id: 'authz-other', unread_only: false, limit: 10 }],
    ];
    for (const [kind, body] of raw) {
      const answers = await Promise.all(
        cluster.members.map((m) =>
          call(m, 'POST', `/v1/notify/groups/notify.state.0/${kind}`, { token: mine, body, timeoutMs: 20_000 }),
        ),
      );
      const held = answers.filter((a) => a.status !== 421);
      t.ok(held.length > 0, `some member holds notify.state.0 (${answers.map(describe).join('; ')})`);
      for (const a of held)
        t.equal(
          a.status,
          403,
          `POST /v1/notify/groups/{group}/${kind} for another user's inbox with a user token: 403 (${describe(a)})`,
        );
    }
    // The in-app WebSocket: the user's own token or an internal one; another user's token is refused.
    const delivery = cluster.role('delivery')[0]!.url;
    const ws = '/v1/users/authz-user/inbox/ws';
    t.equal(await upgradeStatus(delivery, ws, mine), 101, 'the in-app socket with its own user token');
    t.equal(await upgradeStatus(delivery, ws, theirs), 403, "the in-app socket with another user's token: 403");
    t.equal(await upgradeStatus(delivery, ws, null), 401, 'the in-app socket without a token: 401');
    t.equal(
      await upgradeStatus(delivery, ws, credentials.wrong!.token),
      401,
      "the in-app socket with another cluster's token: 401",
    );
  },
});
