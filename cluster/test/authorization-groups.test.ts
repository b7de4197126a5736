/**
 * Who may call what on the services on Raft groups (log, collab, flash, auction; feed and notify in authorization-feed-notify.test.ts, run beside this file), on real clusters of 3 members and
 * one worker of each role: every listed route of every process with every kind of credential, the service's own
 * among them (a collab user token, a flash user token, an auction bidder token, notify user tokens), and the open routes that check a
 * credential of their own (a flash user's poll, an auction bid) with each of them (helpers/authorization.ts).
 */
import t, { type Test } from 'tap';
import { solveChallenge } from '@raftkit/flash';
import { deriveServiceToken } from '@raftkit/http';
import { call, until, type Answer, type TestCluster } from '@raftkit/testkit';
import {
  checkUpgrade,
  describe,
  GROUPED_MEMBER_CLUSTER_ROUTES,
  issued,
  testService,
  upgradeStatus,
  type Credential,
} from './helpers/authorization.js';

t.setTimeout(600_000);

/** Only the credential named `passes` gets past the route's own check; every other one is 401. */
async function onlyPasses(
  t: Test,
  what: string,
  passes: string,
  credentials: Record<string, Credential>,
  request: (c: Credential) => Promise<Answer>,
): Promise<void> {
  for (const [kind, credential] of Object.entries(credentials)) {
    const a = await request(credential);
    const with_ = `${what} with ${kind === 'none' ? 'no credential' : `a ${kind}`}`;
    t.ok(a.status < 500, `${with_}: no 5xx (${describe(a)})`);
    if (kind === passes) t.ok(a.status !== 401 && a.status !== 403, `${with_}: accepted (${describe(a)})`);
    else t.equal(a.status, 401, `${with_}: 401 (${describe(a)})`);
  }
}

testService(t, {
  service: 'log',
  clusterOnly: { member: [...GROUPED_MEMBER_CLUSTER_ROUTES, 'DELETE /v1/topics/:topic'] },
  // Made by the operator, or by the hosting service's own workers (their queues; service.log on the log's own cluster).
  serviceOnly: { member: ['POST /v1/topics'] },
});

testService(t, {
  service: 'collab',
  workers: 'worker=1',
  clusterOnly: {
    member: [
      ...GROUPED_MEMBER_CLUSTER_ROUTES,
      'POST /v1/collab/setup',
      'POST /v1/collab/groups/:group/commands',
      'GET /v1/collab/groups/:group/docs/:doc',
      'GET /v1/collab/groups/:group/docs',
    ],
    worker: [
      'POST /api/collab/users',
      'POST /internal/collab/docs/:doc/poke',
      'POST /internal/collab/docs/:doc/deleted',
      'GET /v1/routes',
    ],
  },
  credentials: async (cluster: TestCluster) => ({
    // A user token is a client token named after the user: it acts as that user on /api/docs*.
    'collab user token': {
      token: await issued(
        'POST /api/collab/users',
        call(cluster.role('worker')[0]!.url, 'POST', '/api/collab/users', {
          token: cluster.token,
          body: { user_id: 'authz-user' },
        }),
        'user_token',
      ),
      standing: 'client',
    },
  }),
  // The editor's socket takes any client or cluster token of the cluster (the join then names the user the token is
  // for); a service token names no user, the collab workers' own included.
  selfChecked: async (t, cluster, credentials) => {
    const worker = cluster.role('worker')[0]!.url;
    await checkUpgrade(t, worker, '/ws/docs/authzdoc', 'authenticated', credentials);
    for (const service of ['collab', 'notify']) {
      t.equal(
        await upgradeStatus(worker, '/ws/docs/authzdoc', deriveServiceToken(cluster.token, service)),
        403,
        `the editor socket with service.${service}: 403`,
      );
    }
  },
});

testService(t, {
  service: 'flash',
  workers: 'gateway=1',
  clusterOnly: {
    member: [
      ...GROUPED_MEMBER_CLUSTER_ROUTES,
      'POST /v1/flash/inventory-groups',
      'POST /v1/flash/groups/:group/commands',
      'GET /v1/flash/groups/:group/deals',
      'GET /v1/flash/groups/:group/deals/:deal',
      'GET /v1/flash/groups/:group/deals/:deal/attempts',
      'GET /v1/flash/groups/:group/reservations/:id',
    ],
    gateway: [
      'POST /api/flash/deals',
      'PUT /api/flash/accounts/:user_id',
      'POST /api/flash/:deal_id/go-live',
      'POST /api/flash/:deal_id/prewarm',
      'GET /api/flash/:deal_id/prewarm',
      'POST /internal/flash/winners',
      'POST /internal/flash/admitted',
      'GET /v1/routes',
    ],
  },
  credentials: async (cluster: TestCluster) => ({
    // Not a bearer token of the cluster: the gateway's open routes check it themselves.
    'flash user token': {
      token: await issued(
        'PUT /api/flash/accounts',
        call(cluster.role('gateway')[0]!.url, 'PUT', '/api/flash/accounts/authz-user', {
          token: cluster.token,
          body: { created_at: 0, payment_verified: true },
        }),
        'user_token',
      ),
      standing: 'foreign',
    },
  }),
  selfChecked: async (t, cluster, credentials) => {
    const gateway = cluster.role('gateway')[0]!.url;
    const now = Date.now();
    const dealId = await issued(
      'POST /api/flash/deals',
      call(gateway, 'POST', '/api/flash/deals', {
        token: cluster.token,
        body: { sku_id: 'authz', total_inventory: 10, start_at: now + 3_600_000, end_at: now + 7_200_000, shards: 1 },
      }),
      'deal_id',
    );
    // A queued user's poll of its own attempt: that user's token only.
    await onlyPasses(t, `${gateway} GET /api/flash/{deal}/state?user_id`, 'flash user token', credentials, (c) =>
      call(gateway, 'GET', `/api/flash/${dealId}/state?user_id=authz-user&idempotency_key=authz-key`, {
        token: c.token,
        timeoutMs: 20_000,
      }),
    );
    // A synthetic (smoke-test) attempt skips the user gates: the cluster token only, every other credential 403.
    for (const [kind, { token, standing }] of Object.entries(credentials)) {
      const a = await call(gateway, 'POST', `/api/flash/${dealId}/attempt`, {
        token,
        headers: { 'x-flash-synthetic': '1' },
        body: { user_id: 'authz-user', idempotency_key: `authz-synthetic-${kind.replace(/\W/g, '-')}` },
        timeoutMs: 20_000,
      });
      const with_ = `${gateway} a synthetic attempt with ${kind === 'none' ? 'no token' : `a ${kind}`}`;
      t.ok(a.status < 500, `${with_}: no 5xx (${describe(a)})`);
      if (standing === 'cluster') t.ok(a.status !== 401 && a.status !== 403, `${with_}: accepted (${describe(a)})`);
      else t.equal(a.status, 403, `${with_}: 403 (${describe(a)})`);
    }
    // Nobody can use up a user's rate limit: anyone may get a bot token in any user's name (the challenge is open),
    // but an attempt without that user's token is refused before the user's bucket is charged.
    const start = Date.now() + 1_000;
    const live = await issued(
      'POST /api/flash/deals',
      call(gateway, 'POST', '/api/flash/deals', {
        token: cluster.token,
        body: { sku_id: 'authz-live', total_inventory: 10, start_at: start, end_at: start + 3_600_000, shards: 1 },
      }),
      'deal_id',
    );
    const victim = await issued(
      'PUT /api/flash/accounts',
      call(gateway, 'PUT', '/api/flash/accounts/authz-victim', {
        token: cluster.token,
        body: { created_at: 0, payment_verified: true },
      }),
      'user_token',
    );
    const challenge = await call(gateway, 'POST', `/api/flash/${live}/challenge`, {
      body: { user_id: 'authz-victim' },
    });
    const nonce = solveChallenge(challenge.body.challenge as string, challenge.body.difficulty as number);
    const bot = await issued(
      'the challenge answer',
      call(gateway, 'POST', `/api/flash/${live}/challenge/answer`, {
        body: { user_id: 'authz-victim', challenge: challenge.body.challenge, nonce },
      }),
      'anti_bot_token',
    );
    await until(
      'the deal is live at the gateway',
      async () => (await call(gateway, 'GET', `/api/flash/${live}/state`)).body.state === 'live',
    );
    const stranger = credentials['flash user token']!.token;
    for (let i = 0; i < 10; i++) {
      const a = await call(gateway, 'POST', `/api/flash/${live}/attempt`, {
        token: stranger,
        body: { user_id: 'authz-victim', idempotency_key: `stranger-${i}`, anti_bot_token: bot },
      });
      t.equal(
        a.status,
        403,
        `an attempt in authz-victim's name with another user's token: 403, not counted (${describe(a)})`,
      );
    }
    const own = await call(gateway, 'POST', `/api/flash/${live}/attempt`, {
      token: victim,
      body: { user_id: 'authz-victim', idempotency_key: 'victim-1', anti_bot_token: bot },
    });
    t.ok(
      own.status === 200 || own.status === 202,
      `authz-victim's own attempt afterwards is decided, not rate-limited (${describe(own)})`,
    );
  },
});

testService(t, {
  service: 'auction',
  workers: 'gateway=1,checkout=1',
  clusterOnly: {
    member: [
      ...GROUPED_MEMBER_CLUSTER_ROUTES,
      'POST /internal/auctions',
      'POST /internal/auctions/:id/bids',
      'POST /internal/auctions/:id/watch',
      'GET /internal/auctions/:id',
      'GET /internal/auctions/:id/log',
      'GET /internal/groups/:group/auctions',
      'GET /internal/groups/:group/handoffs',
      'POST /internal/groups/:group/handoffs/:id/ack',
      'POST /internal/groups/:group/block',
      'POST /internal/auction/watchers',
    ],
    gateway: [
      'POST /api/bidders',
      'POST /api/bidders/:id/block',
      'POST /api/auctions',
      'GET /api/auctions/:id/log',
      'GET /v1/routes',
    ],
    checkout: ['GET /checkout/orders', 'GET /checkout/orders/:id', 'GET /v1/routes'],
  },
  // The members' pushes to a gateway carry the secret that gateway registered with them (with the cluster token).
  ownSecret: { gateway: ['POST /internal/auction/updates'] },
  credentials: async (cluster: TestCluster) => ({
    // Sent in a bid's body, never as a bearer token: the router refuses it like any stranger's.
    'auction bidder token': {
      token: await issued(
        'POST /api/bidders',
        call(cluster.role('gateway')[0]!.url, 'POST', '/api/bidders', {
          token: cluster.token,
          body: { bidder_id: 'authz-bidder' },
        }),
        'bidder_token',
      ),
      standing: 'foreign',
    },
  }),
  selfChecked: async (t, cluster, credentials) => {
    const gateway = cluster.role('gateway')[0]!.url;
    // Watching an auction is open to anyone.
    await checkUpgrade(t, gateway, '/ws/auctions/authz-no-auction', 'open', credentials);
    // A bid carries its bidder's token in the body: that bidder's token only (no such auction: nothing is bid).
    await onlyPasses(t, `${gateway} POST /api/auctions/{id}/bids`, 'auction bidder token', credentials, (c) =>
      call(gateway, 'POST', '/api/auctions/authz-no-auction/bids', {
        body: { bidder_id: 'authz-bidder', bidder_token: c.token ?? 'none', amount: 100, idempotency_key: 'authz-key' },
        timeoutMs: 20_000,
      }),
    );
  },
});
