/**
 * An idle service answers its first write (issue 39 part 1), for the services on Raft groups (log, collab, flash,
 * auction, feed, notify) and video; first-write-after-quiet-core.test.ts has kv, lock, ratelimit and shortlink.
 * Each service runs on its own small real cluster whose members forget a client session after 2 s unused
 * (RAFTKIT_SESSION_TIMEOUT_MS): one write through each public write path uses every group's sessions, the service
 * then stays idle for three timeouts, and the same paths are written again, all at once, so each meets the lapsed
 * sessions itself. Each of those writes must answer its documented success, not 410 `unknown_session` or a 5xx.
 */
import { createHash } from 'node:crypto';
import t, { type Test } from 'tap';
import { CollabClient } from '@raftkit/collab';
import { FlashClient } from '@raftkit/flash';
import { deriveClientToken } from '@raftkit/http';
import { call, inPool, startCluster, until, type Answer, type TestCluster } from '@raftkit/testkit';

t.setTimeout(600_000);

const SESSION_TIMEOUT_MS = 2_000;
const QUIET_MS = 3 * SESSION_TIMEOUT_MS;

interface Write {
  what: string;
  run: () => Promise<Answer>;
  /** The documented success, when more than a 2xx. */
  ok?: (a: Answer) => boolean;
}
/** The writes of one round ("b" before the quiet, "a" after), each through one public path; made ready before the quiet. */
type Round = (round: 'b' | 'a') => Promise<Write[]>;
interface Case {
  service: string;
  workers?: string;
  settings?: Record<string, string>;
  /** Readies the cluster and what the writes act on; `cleanups` run once the case is over. */
  prepare: (c: TestCluster, cleanups: Array<() => unknown>) => Promise<Round>;
}

const is2xx = (a: Answer): boolean => a.status >= 200 && a.status < 300;
const describe = (a: Answer): string => `${a.status} ${JSON.stringify(a.body).slice(0, 200)}`;
async function must(what: string, answer: Promise<Answer>, field?: string): Promise<Answer & { value: string }> {
  const a = await answer;
  if (!is2xx(a)) throw new Error(`${what}: ${describe(a)}`);
  return { ...a, value: field === undefined ? '' : String(a.body[field]) };
}
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const sha = (b: Buffer): string => createHash('sha256').update(b).digest('hex');
/** The same path through every member (services whose public API is on the members). */
const onEach = (c: TestCluster, what: string, run: (m: string, i: number) => Promise<Answer>): Write[] =>
  c.members.map((m, i) => ({ what: `${what} via n${i + 1}`, run: () => run(m, i) }));

const log: Case = {
  service: 'log',
  prepare: async (c) => {
    // Topics are placed on the hosts registered when they are created: all three, so every member holds them.
    await until(
      'three hosts registered',
      async () =>
        (
          (await call(c.members[0]!, 'GET', '/v1/cluster/hosts', { token: c.token })).body.hosts as
            | unknown[]
            | undefined
        )?.length === 3,
      60_000,
    );
    await must(
      'create topic quiet',
      call(c.members[0]!, 'POST', '/v1/topics', { token: c.token, body: { name: 'quiet', partitions: 2 } }),
    );
    for (const p of [0, 1])
      await until(
        `partition ${p} has a leader`,
        async () =>
          is2xx(
            await call(c.members[0]!, 'POST', `/v1/topics/quiet/partitions/${p}/records`, {
              token: c.token,
              body: { records: [{ value: 'w' }] },
            }),
          ),
        60_000,
        200,
      );
    return async (r) => {
      for (let i = 0; i < 3; i++)
        await must(
          'create a topic to delete',
          call(c.members[0]!, 'POST', '/v1/topics', { token: c.token, body: { name: `gone-${r}-${i}` } }),
        );
      return [
        ...onEach(c, 'topic create', (m, i) =>
          call(m, 'POST', '/v1/topics', { token: c.token, body: { name: `t-${r}-${i}` } }),
        ),
        ...[0, 1].flatMap((p) =>
          onEach(c, `append to partition ${p}`, (m) =>
            call(m, 'POST', `/v1/topics/quiet/partitions/${p}/records`, {
              token: c.token,
              body: { records: [{ key: r, value: 'v' }] },
            }),
          ),
        ),
        ...onEach(c, 'offset commit', (m, i) =>
          call(m, 'POST', `/v1/topics/quiet/partitions/${i % 2}/offsets/g-${r}-${i}`, {
            token: c.token,
            body: { offset: 1 },
          }),
        ),
        ...onEach(c, 'topic delete', (m, i) => call(m, 'DELETE', `/v1/topics/gone-${r}-${i}`, { token: c.token })),
      ];
    };
  },
};

const collab: Case = {
  service: 'collab',
  workers: 'worker=1',
  // Owners let go of idle documents after a second, so the op after the quiet finds its group idle too.
  settings: { idle_release_ms: '1000' },
  prepare: async (c) => {
    const w = c.role('worker')[0]!.url;
    const alice = (
      await must(
        'alice',
        call(w, 'POST', '/api/collab/users', { token: c.token, body: { user_id: 'alice' } }),
        'user_token',
      )
    ).value;
    const doc = (
      await must(
        'doc',
        call(w, 'POST', '/api/docs', {
          token: alice,
          body: { title: 'd', owner_id: 'alice', template: 'hello world' },
          timeoutMs: 60_000,
        }),
        'doc_id',
      )
    ).value;
    const editor = await CollabClient.connect({
      url: w,
      docId: doc,
      userId: 'alice',
      token: alice,
      connectTimeoutMs: 60_000,
    });
    const anchor = editor.anchor(0, 5);
    editor.close();
    const docs = `/api/docs/${doc}`;
    const snapshot = (
      await must(
        'snapshot',
        call(w, 'POST', `${docs}/snapshots`, { token: alice, body: { name: 'v1' } }),
        'snapshot_id',
      )
    ).value;
    /** An edit over the WebSocket, acknowledged once committed: 200 when acknowledged, 0 with the reason otherwise. */
    const op = async (text: string): Promise<Answer> => {
      const client = await CollabClient.connect({
        url: w,
        docId: doc,
        userId: 'alice',
        token: alice,
        connectTimeoutMs: 30_000,
      });
      try {
        client.insert(0, text);
        await client.synced(30_000);
        return { status: 200, body: {}, headers: {} };
      } finally {
        client.close();
      }
    };
    return async (r) => {
      const comment = (
        await must(
          'comment',
          call(w, 'POST', `${docs}/comments`, { token: alice, body: { ...anchor, body: 'to delete' } }),
          'comment_id',
        )
      ).value;
      return [
        {
          what: 'doc create',
          run: () => call(w, 'POST', '/api/docs', { token: alice, body: { title: r, owner_id: 'alice' } }),
        },
        { what: 'an op over the WebSocket', run: () => op(r) },
        {
          what: 'comment',
          run: () => call(w, 'POST', `${docs}/comments`, { token: alice, body: { ...anchor, body: r } }),
        },
        { what: 'comment delete', run: () => call(w, 'DELETE', `${docs}/comments/${comment}`, { token: alice }) },
        {
          what: 'permission',
          run: () => call(w, 'PUT', `${docs}/permissions/bob-${r}`, { token: alice, body: { role: 'viewer' } }),
        },
        { what: 'named version', run: () => call(w, 'POST', `${docs}/snapshots`, { token: alice, body: { name: r } }) },
        { what: 'restore', run: () => call(w, 'POST', `${docs}/snapshots/${snapshot}/restore`, { token: alice }) },
      ];
    };
  },
};

const flash: Case = {
  service: 'flash',
  workers: 'gateway=1',
  settings: { challenge_bits: '8' },
  prepare: async (c, cleanups) => {
    const client = new FlashClient({ gateways: [c.role('gateway')[0]!.url], token: c.token, timeoutMs: 30_000 });
    const now = Date.now();
    // Four shards: one in each inventory group.
    const deal = await client.createDeal({
      sku_id: 'quiet',
      total_inventory: 1_000,
      start_at: now,
      end_at: now + 600_000,
      shards: 4,
    });
    await until('the deal is live', async () => (await client.state(deal)).body.state === 'live', 60_000);
    const asAnswer = (
      p: Promise<{ status: number; body: Record<string, unknown>; headers: Answer['headers'] }>,
    ): Promise<Answer> => p;
    /** A registered user who passed the bot check: its token. */
    const user = async (id: string): Promise<string> => {
      const token = await client.register(id, now - 40 * 86_400_000, true);
      await client.solve(deal, id);
      return token;
    };
    const won = async (id: string): Promise<{ token: string; reservation: string }> => {
      const token = await user(id);
      const a = await client.attempt(deal, id, `${id}-k`, token);
      if (a.body.status !== 'won') throw new Error(`${id} attempt: ${describe(a)}`);
      return { token, reservation: a.body.reservation_id as string };
    };
    cleanups.push(() => client.close());
    return async (r) => {
      const attempter = await user(`att-${r}`);
      const payer = await won(`pay-${r}`);
      const canceller = await won(`can-${r}`);
      const later = Date.now() + 3_600_000;
      return [
        {
          what: 'deal create',
          run: () =>
            asAnswer(
              client.call(
                'POST',
                '/api/flash/deals',
                { sku_id: r, total_inventory: 10, start_at: later, end_at: later + 600_000, shards: 4 },
                { bearer: c.token },
              ),
            ),
        },
        {
          what: 'account',
          run: () =>
            asAnswer(
              client.call(
                'PUT',
                `/api/flash/accounts/acct-${r}`,
                { created_at: 0, payment_verified: true },
                { bearer: c.token },
              ),
            ),
        },
        // An attempt answers `queued` when its shard does not answer: only `won` is a write that succeeded.
        {
          what: 'attempt',
          run: () => asAnswer(client.attempt(deal, `att-${r}`, `att-${r}-k`, attempter)),
          ok: (a) => a.status === 200 && a.body.status === 'won',
        },
        {
          what: 'checkout',
          run: () => asAnswer(client.checkout(deal, payer.reservation, `pay-${r}-co`, payer.token)),
          ok: (a) => a.status === 200 && a.body.status === 'paid',
        },
        {
          what: 'cancel',
          run: () =>
            asAnswer(
              client.call('POST', `/api/flash/${deal}/reservations/${canceller.reservation}/cancel`, undefined, {
                bearer: canceller.token,
              }),
            ),
        },
      ];
    };
  },
};

const auction: Case = {
  service: 'auction',
  workers: 'gateway=1,checkout=1',
  prepare: async (c) => {
    const g = c.role('gateway')[0]!.url;
    const now = Date.now();
    const create = (item: string): Promise<Answer> =>
      call(g, 'POST', '/api/auctions', {
        token: c.token,
        body: {
          item_id: item,
          seller_id: 's1',
          start_price: 100,
          start_at: now,
          end_at: now + 600_000,
          anti_snipe_window_s: 60,
        },
      });
    const id = (await must('auction', create('quiet'), 'auction_id')).value;
    return async (r) => {
      const bidder = (
        await must(
          'bidder',
          call(g, 'POST', '/api/bidders', { token: c.token, body: { bidder_id: `bd-${r}` } }),
          'bidder_token',
        )
      ).value;
      return [
        {
          what: 'bidder create',
          run: () => call(g, 'POST', '/api/bidders', { token: c.token, body: { bidder_id: `new-${r}` } }),
        },
        { what: 'auction create', run: () => create(`item-${r}`) },
        // Blocking is logged in every auction group.
        {
          what: 'bidder block',
          run: () => call(g, 'POST', `/api/bidders/blk-${r}/block`, { token: c.token, body: { blocked: true } }),
        },
        {
          what: 'bid',
          run: () =>
            call(g, 'POST', `/api/auctions/${id}/bids`, {
              body: {
                bidder_id: `bd-${r}`,
                bidder_token: bidder,
                amount: r === 'b' ? 200 : 300,
                idempotency_key: `bid-${r}`,
              },
            }),
          ok: (a) => a.status === 200 && a.body.status === 'accepted',
        },
      ];
    };
  },
};

const feed: Case = {
  service: 'feed',
  // No ranker (reads fall back to time order) and no fan-out: the writes need neither.
  workers: 'store=1,fanout=0,ranker=0',
  prepare: async (c) => {
    const app = c.role('app')[0]!.url;
    const as = (user: string): string => deriveClientToken(c.token, user);
    const post = async (user: string): Promise<string> =>
      (await must('post', call(app, 'POST', '/api/posts', { token: as(user), body: { text: 'p' } }), 'post_id')).value;
    return async (r) => {
      const target = await post('ann');
      const doomed = await post('ann');
      await must('like to take back', call(app, 'POST', `/api/posts/${target}/like`, { token: as(`unlike-${r}`) }));
      return [
        { what: 'post', run: () => call(app, 'POST', '/api/posts', { token: as('ann'), body: { text: r } }) },
        {
          what: 'comment',
          run: () => call(app, 'POST', '/api/posts', { token: as('bob'), body: { text: r, parent_post_id: target } }),
        },
        { what: 'like', run: () => call(app, 'POST', `/api/posts/${target}/like`, { token: as(`like-${r}`) }) },
        { what: 'unlike', run: () => call(app, 'DELETE', `/api/posts/${target}/like`, { token: as(`unlike-${r}`) }) },
        { what: 'repost', run: () => call(app, 'POST', `/api/posts/${target}/repost`, { token: as(`rp-${r}`) }) },
        { what: 'post delete', run: () => call(app, 'DELETE', `/api/posts/${doomed}`, { token: as('ann') }) },
        {
          what: 'follow',
          run: () => call(app, 'POST', '/api/follow', { token: as(`f-${r}`), body: { followee_id: 'ann' } }),
        },
      ];
    };
  },
};

const notify: Case = {
  service: 'notify',
  prepare: async (c) => {
    const send = (m: string, r: string, i: number): Promise<Answer> =>
      call(m, 'POST', '/v1/notifications', {
        token: c.token,
        body: { event_type: 'quiet', user_ids: [`u${i}`], priority: 'normal', idempotency_key: `k-${r}-${i}` },
      });
    // The router creates the state groups and the topics when it starts; until then the API answers 503.
    await until('notify accepts notifications', async () => is2xx(await send(c.members[0]!, 'warm', 0)), 180_000, 500);
    return async (r) => [
      ...onEach(c, 'notification', (m, i) => send(m, r, i)),
      ...onEach(c, 'preferences', (m, i) =>
        call(m, 'PUT', `/v1/users/u${i}/preferences`, {
          token: deriveClientToken(c.token, `user.u${i}`),
          body: { channels_enabled: { sms: r === 'b' } },
        }),
      ),
      ...onEach(c, 'inbox read', (m, i) =>
        call(m, 'POST', `/v1/users/u${i}/inbox/read`, {
          token: deriveClientToken(c.token, `user.u${i}`),
          body: { all: true },
        }),
      ),
      ...onEach(c, 'segment', (m, i) =>
        call(m, 'PUT', `/v1/segments/s-${r}-${i}`, { token: c.token, body: { user_ids: [`u${i}`] } }),
      ),
      // A template is copied to every state group.
      ...onEach(c, 'template', (m, i) =>
        call(m, 'PUT', `/v1/templates/quiet-${r}-${i}/email`, { token: c.token, body: { title: 't', body: 'b' } }),
      ),
    ];
  },
};

const video: Case = {
  service: 'video',
  // No delivery tiers or pipeline: the uploads stay `transcoding`, which is all the writes need.
  workers: 'regional=0,edge=0,app=1,pipeline=0,transcoder=0',
  prepare: async (c) => {
    const app = c.role('app')[0]!.url;
    const ann = deriveClientToken(c.token, 'ann');
    await until(
      'the metadata group has a leader',
      async () => (await call(c.members[0]!, 'GET', '/internal/video/status', { token: c.token })).status === 200,
      60_000,
      250,
    );
    const bytes = Buffer.from('a small video that is not one');
    const upload = (key: string): Promise<Answer> =>
      call(app, 'POST', '/api/videos/upload', {
        token: ann,
        body: { user_id: 'ann', title: key, idempotency_key: key },
      });
    const chunk = async (url: string): Promise<Answer> => {
      const res = await fetch(url.replace('{index}', '0'), { method: 'PUT', body: bytes });
      return { status: res.status, body: (await res.json()) as Record<string, unknown>, headers: {} };
    };
    return async (r) => {
      const destination = async (key: string): Promise<{ id: string; url: string }> => {
        const a = await must(key, upload(key));
        return { id: a.body.upload_id as string, url: (a.body.upload as { url: string }).url };
      };
      const finished = await destination(`fin-${r}`);
      await must('chunk to finalize', chunk(finished.url));
      const open = await destination(`open-${r}`);
      return [
        { what: 'upload create', run: () => upload(`new-${r}`) },
        { what: 'chunk', run: () => chunk(open.url) },
        {
          what: 'finalize',
          run: () =>
            call(app, 'POST', `/api/videos/${finished.id}/finalize`, {
              token: ann,
              body: { total_chunks: 1, checksum: sha(bytes) },
            }),
        },
      ];
    };
  },
};

async function quietThenWrite(t: Test, c: Case): Promise<void> {
  const started = Date.now();
  const cluster = await startCluster(c.service, {
    nodes: 3,
    ...(c.workers !== undefined ? { workers: c.workers } : {}),
    ...(c.settings !== undefined ? { settings: c.settings } : {}),
    env: { RAFTKIT_SESSION_TIMEOUT_MS: String(SESSION_TIMEOUT_MS) },
  });
  const cleanups: Array<() => unknown> = [];
  try {
    const round = await c.prepare(cluster, cleanups);
    const before = await round('b');
    const after = await round('a');
    for (const w of before) {
      const a = await w.run();
      t.ok((w.ok ?? is2xx)(a), `${c.service} ${w.what}: written before the quiet (${describe(a)})`);
    }
    await sleep(QUIET_MS);
    // All at once, so each path meets the lapsed sessions rather than following another write that renewed them.
    const answers = await Promise.all(
      after.map((w) => w.run().catch((e: unknown): Answer => ({ status: 0, body: { error: String(e) }, headers: {} }))),
    );
    after.forEach((w, i) =>
      t.ok(
        (w.ok ?? is2xx)(answers[i]!),
        `${c.service} ${w.what}: the first write after ${QUIET_MS} ms idle succeeds (${describe(answers[i]!)})`,
      ),
    );
  } catch (e) {
    t.fail(`${c.service}: ${String(e)}`);
  } finally {
    for (const f of cleanups) await f();
    await cluster.down();
    t.comment(`${c.service}: ${((Date.now() - started) / 1000).toFixed(1)} s`);
  }
}

// Two clusters at a time: the machine has two cores.
t.test('each service answers its first writes after a quiet spell', async (t) => {
  await inPool([log, collab, flash, auction, feed, notify, video], 2, (c) => quietThenWrite(t, c));
});
