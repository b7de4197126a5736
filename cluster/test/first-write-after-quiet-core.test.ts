/**
 * An idle service answers its first write like any other (kv, lock, ratelimit, shortlink; the services on many
 * groups are in first-write-after-quiet-groups.test.ts). Each cluster runs with a 2-s client-session timeout
 * (RAFTKIT_SESSION_TIMEOUT_MS), every public write path is used once through every member or worker that takes
 * it, the cluster is left alone for more than twice the timeout, and then each path's first write must succeed:
 * the members' own sessions (used for every proposal they make) lapsed in the log while nobody wrote, and a member
 * must renew its session rather than answer 410 unknown_session (or a worker turn that into a 502). KvClient's
 * own client session lapses too: its next write opens a new one.
 */
import { randomUUID } from 'node:crypto';
import t from 'tap';
import { KvClient } from '@raftkit/kv';
import { call, inPool, startCluster, type Answer, type TestCluster } from '@raftkit/testkit';

const SESSION_TIMEOUT_MS = 2_000;
/** Longer than twice the timeout: every session unused since the warm-up round has lapsed in the log. */
const QUIET_MS = 5_000;

interface WriteStep {
  name: string;
  send(): Promise<Answer>;
}

interface Case {
  service: string;
  workers?: string;
  /** The service's public write paths, through every process that takes them, each a fresh write per call. */
  steps(c: TestCluster, round: string): Promise<WriteStep[]>;
}

const cases: Case[] = [
  {
    service: 'kv',
    steps: async (c, round) =>
      c.members.flatMap((m, i) => [
        { name: `${m} PUT`, send: () => call(m, 'PUT', `/v1/kv/${round}-${i}`, { token: c.token, raw: 'v' }) },
        {
          name: `${m} CAS`,
          send: () => call(m, 'POST', `/v1/kv/${round}-${i}/cas`, { token: c.token, body: { from: 'v', to: 'w' } }),
        },
        { name: `${m} DELETE`, send: () => call(m, 'DELETE', `/v1/kv/${round}-${i}`, { token: c.token }) },
        { name: `${m} client session`, send: () => call(m, 'POST', '/v1/client-sessions', { token: c.token }) },
      ]),
  },
  {
    service: 'lock',
    steps: async (c, round) => {
      const steps: WriteStep[] = [];
      for (const [i, m] of c.members.entries()) {
        let session = '';
        let token = 0;
        steps.push(
          {
            name: `${m} open session`,
            send: async () => {
              const a = await call(m, 'POST', '/v1/sessions', { token: c.token, body: { timeout_ms: 60_000 } });
              session = String(a.body.session_id);
              return a;
            },
          },
          {
            name: `${m} heartbeat`,
            send: () => call(m, 'POST', `/v1/sessions/${session}/heartbeat`, { token: c.token }),
          },
          {
            name: `${m} acquire`,
            send: async () => {
              const a = await call(m, 'POST', `/v1/locks/${round}-${i}/acquire`, {
                token: c.token,
                body: { session_id: session, wait: false },
              });
              token = Number(a.body.fencing_token);
              return a;
            },
          },
          {
            name: `${m} release`,
            send: () =>
              call(m, 'POST', `/v1/locks/${round}-${i}/release`, {
                token: c.token,
                body: { session_id: session, fencing_token: token },
              }),
          },
          { name: `${m} close session`, send: () => call(m, 'DELETE', `/v1/sessions/${session}`, { token: c.token }) },
        );
      }
      return steps;
    },
  },
  {
    service: 'ratelimit',
    workers: 'store=1,check=1',
    steps: async (c, round) => {
      const check = c.role('check')[0]!.url;
      return [...c.members, check].flatMap((base, i) => {
        const tenant = `quiet-${round}-${i}`;
        const ruleId = randomUUID();
        const rule = { service_id: tenant, dimension: 'ip', endpoint_pattern: '*', capacity: 5, refill_rate: 1 };
        return [
          {
            name: `${base} tenant`,
            send: () => call(base, 'PUT', `/v1/tenants/${tenant}`, { token: c.token, body: {} }),
          },
          {
            name: `${base} rule`,
            send: () => call(base, 'PUT', `/v1/rules/${ruleId}`, { token: c.token, body: rule }),
          },
          { name: `${base} rule delete`, send: () => call(base, 'DELETE', `/v1/rules/${ruleId}`, { token: c.token }) },
        ];
      });
    },
  },
  {
    service: 'shortlink',
    workers: 'analytics=1,app=1',
    steps: async (c, round) => {
      const app = c.role('app')[0]!.url;
      let code = '';
      return [
        {
          name: 'api key',
          send: () => call(app, 'POST', '/api/keys', { token: c.token, body: { user: `user-${round}` } }),
        },
        {
          name: 'create',
          send: async () => {
            const a = await call(app, 'POST', '/api/urls', {
              token: c.token,
              body: { long_url: `https://example.com/${round}` },
            });
            code = String(a.body.short_code);
            return a;
          },
        },
        {
          name: 'custom alias',
          send: () =>
            call(app, 'POST', '/api/urls', {
              token: c.token,
              body: { long_url: 'https://example.com/alias', custom_alias: `alias-${round}` },
            }),
        },
        { name: 'delete', send: () => call(app, 'DELETE', `/api/urls/${code}`, { token: c.token }) },
      ];
    },
  },
];

t.setTimeout(300_000);

interface Running {
  sc: Case;
  cluster: TestCluster;
  kv: KvClient | null;
}

// Every cluster warms up, then one quiet spell for all of them, then every first write.
const running: Running[] = await inPool(cases, 2, async (sc) => {
  const cluster = await startCluster(sc.service, {
    nodes: 3,
    tickMs: 100,
    ...(sc.workers !== undefined ? { workers: sc.workers } : {}),
    env: { RAFTKIT_SESSION_TIMEOUT_MS: String(SESSION_TIMEOUT_MS) },
  });
  t.teardown(() => cluster.down());
  const kv = sc.service === 'kv' ? new KvClient({ endpoints: cluster.members, token: cluster.token }) : null;
  if (kv !== null) t.teardown(() => kv.close());
  return { sc, cluster, kv };
});

await t.test('warm-up: every write path once, so every member has used its own session', async (t) => {
  for (const { sc, cluster, kv } of running) {
    for (const step of await sc.steps(cluster, 'warm')) {
      const a = await step.send();
      t.ok(a.status < 300, `${sc.service} ${step.name}: ${a.status}`, { body: a.body });
    }
    if (kv !== null) t.ok((await kv.put('client-key', 'warm')).revision > 0, 'KvClient writes');
  }
});

await t.test(`quiet: ${QUIET_MS} ms without a request`, async (t) => {
  await sleep(QUIET_MS);
  t.pass('nobody wrote');
});

for (const { sc, cluster, kv } of running) {
  await t.test(
    `${sc.service}: each first write after ${QUIET_MS} ms of quiet (session timeout ${SESSION_TIMEOUT_MS} ms) succeeds`,
    async (t) => {
      for (const step of await sc.steps(cluster, 'quiet')) {
        const a = await step.send();
        t.ok(a.status < 300, `${step.name}: ${a.status}${a.status < 300 ? '' : ` ${JSON.stringify(a.body)}`}`);
      }
      if (kv !== null)
        t.ok((await kv.put('client-key', 'after quiet')).revision > 0, 'KvClient writes after its own session lapsed');
    },
  );
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
