/**
 * The ranker as a real process on a real socket, fed by a real event log (a 3-member `log` cluster): it ranks,
 * serves a repeat visit from its recent ranking, refuses bad requests without dying, moves affinity when
 * engagement events arrive on `feed-engagement`, and the read path's client answers null (time order, no error)
 * when the process is paused with SIGSTOP or killed.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { LogClient } from '@raftkit/log';
import { RpcClient, RpcError } from '@raftkit/rpc';
import { startCluster, until } from '@raftkit/testkit';
import { RankerClient } from '../../src/workers/ranker/client.js';
import { encodeEngagement } from '../../src/workers/ranker/engagement.js';
import type { Candidate } from '../../src/workers/ranker/types.js';
import { ENGAGEMENT_TOPIC } from '../../src/rank-wire.js';

const MAIN = fileURLToPath(new URL('../../src/workers/ranker/main.js', import.meta.url));

const cluster = await startCluster('log', { nodes: 3 });
const log = new LogClient({ endpoints: cluster.members, token: cluster.token });
const hostPort = (url: string): string => url.replace(/^http:\/\//, '');
// Worker ports of the cluster's reserved range: a `log` cluster starts no workers, so they are free and ours.
const rankerTcp = `127.0.0.1:${cluster.base + 161}`;
const rankerHttp = `127.0.0.1:${cluster.base + 41}`;
let ranker: ChildProcess | null = null;
let output = '';

function startRanker(): ChildProcess {
  const options = {
    id: 'ranker1',
    httpAddress: rankerHttp,
    tcpAddress: rankerTcp,
    members: cluster.members.map(hostPort),
    token: cluster.token,
  };
  const child = spawn(process.execPath, [MAIN], {
    env: { ...process.env, FEED_RANKER_OPTIONS: JSON.stringify(options) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout!.on('data', (d: Buffer) => (output = (output + d.toString()).slice(-20_000)));
  child.stderr!.on('data', (d: Buffer) => (output = (output + d.toString()).slice(-20_000)));
  return child;
}

const client = new RankerClient({ addresses: [rankerTcp], token: cluster.token });

t.teardown(async () => {
  client.close();
  if (ranker !== null && ranker.exitCode === null) {
    ranker.kill('SIGCONT');
    ranker.kill('SIGKILL');
  }
  await log.close();
  await cluster.down();
});

await log.createTopic(ENGAGEMENT_TOPIC, { partitions: 2 });
ranker = startRanker();
await until('the ranker answers', async () => (await client.stats(1_000))[0]!.events_applied >= 0, 60_000, 200).catch(
  (e: unknown) => {
    throw new Error(`${String(e)}\n${output}`);
  },
);

const NOW = Date.now();
function candidates(n: number, authors: number, prefix = 'p'): Candidate[] {
  return Array.from({ length: n }, (_, i) => ({
    post_id: `${prefix}${String(i).padStart(5, '0')}`,
    author_id: `author${i % authors}`,
    created_at: NOW - i * 30_000,
    content_type: i % 3 === 0 ? 'media' : 'text',
    engagement: { likes: i % 7, comments: i % 3, shares: 0 },
  }));
}

t.test('ranks 1,000 candidates: every one once, best first; a repeat visit gets the recent ranking', async () => {
  const set = candidates(1_000, 50);
  // A generous deadline here: this asserts what is ranked, not how fast (the bench measures that).
  const first = await client.rankDetailed('viewer-1', set, { deadlineMs: 10_000, now: NOW });
  t.ok(first !== null, 'answered');
  t.equal(first!.ranked.length, 1_000);
  t.equal(new Set(first!.ranked.map((r) => r.post_id)).size, 1_000);
  t.ok(
    first!.ranked.every((r, i) => i === 0 || r.score <= first!.ranked[i - 1]!.score),
    'scores non-increasing',
  );
  t.equal(first!.cached, false);
  const again = await client.rankDetailed('viewer-1', [...set].reverse(), { deadlineMs: 10_000, now: NOW + 5_000 });
  t.equal(again!.cached, true, 'same candidates within 60 s: the recent ranking');
  t.same(again!.ranked, first!.ranked);
  t.equal(again!.ranked_at, first!.ranked_at);
  const changed = await client.rankDetailed('viewer-1', [...set, ...candidates(1, 1, 'new')], {
    deadlineMs: 10_000,
    now: NOW + 5_000,
  });
  t.equal(changed!.cached, false, 'a new post in the set: ranked afresh');
  const other = await client.rankDetailed('viewer-2', set, { deadlineMs: 10_000, now: NOW });
  t.equal(other!.cached, false, 'another viewer has no recent ranking');
});

t.test('bad requests get bad_request and the process keeps serving', async () => {
  const raw = new RpcClient({ address: rankerTcp, token: cluster.token, timeoutMs: 5_000 });
  t.teardown(() => raw.close());
  for (const request of [
    { op: 'rank', viewer: 'v', candidates: [{ post_id: 'x' }] },
    { op: 'drop-tables' },
    'rank',
    null,
  ]) {
    const error = await raw.call(request).then(
      () => null,
      (e: unknown) => e,
    );
    t.ok(error instanceof RpcError && error.code === 'bad_request', `${JSON.stringify(request)}: ${String(error)}`);
  }
  t.ok((await client.rankWithDeadline('viewer-3', candidates(10, 3), 10_000)) !== null, 'still ranking');
});

t.test('engagement events on the log move affinity and reorder the feed', async () => {
  const producer = log.producer(ENGAGEMENT_TOPIC);
  // Two posts alike but for age: the newer one first, until the viewer engages with the older one's author.
  const pair: Candidate[] = [
    {
      post_id: 'q1',
      author_id: 'quiet',
      created_at: NOW - 3_600_000,
      content_type: 'text',
      engagement: { likes: 0, comments: 0, shares: 0 },
    },
    {
      post_id: 'q2',
      author_id: 'loud',
      created_at: NOW - 1_800_000,
      content_type: 'text',
      engagement: { likes: 0, comments: 0, shares: 0 },
    },
  ];
  const before = await client.rankDetailed('fan', pair, { deadlineMs: 10_000, now: NOW, fresh: true });
  t.equal(before!.ranked[0]!.post_id, 'q2');
  t.equal(await client.affinity('fan', 'quiet'), null, 'no affinity yet');
  // A malformed record on the topic is skipped, not fatal.
  await producer.send('not an event', { key: 'fan' });
  for (let i = 0; i < 4; i++)
    await producer.send(
      encodeEngagement({
        type: i % 2 === 0 ? 'like' : 'comment',
        user_id: 'fan',
        author_id: 'quiet',
        post_id: `old${i}`,
        at: NOW - 60_000 + i,
      }),
      { key: 'fan' },
    );
  const affinity = await until(
    'the ranker applies the events',
    async () => {
      const a = await client.affinity('fan', 'quiet');
      return a !== null && a.interaction_count === 4 ? a : null;
    },
    60_000,
    200,
  );
  t.equal(affinity.last_interaction_at, NOW - 60_000 + 3);
  const stats = (await client.stats())[0]!;
  t.ok(stats.events_malformed >= 1, 'the malformed record was counted');
  const after = await client.rankDetailed('fan', pair, { deadlineMs: 10_000, now: NOW, fresh: true });
  t.equal(after!.ranked[0]!.post_id, 'q1', 'the author the viewer engages with now comes first');
  const stranger = await client.rankDetailed('stranger', pair, { deadlineMs: 10_000, now: NOW, fresh: true });
  t.equal(stranger!.ranked[0]!.post_id, 'q2', 'for another viewer nothing changed');
});

t.test(
  'a paused ranker (SIGSTOP): null within the deadline, time order, no error; it ranks again once resumed',
  async () => {
    const set = candidates(500, 40, 'paused');
    t.ok((await client.rankWithDeadline('viewer-4', set, 10_000)) !== null, 'ranks before the pause');
    ranker!.kill('SIGSTOP');
    try {
      const started = Date.now();
      const ranked = await client.rankWithDeadline('viewer-5', set);
      t.equal(ranked, null, 'no ranking from a paused ranker');
      // Not a speed assertion: the deadline holds far inside this bound even on a loaded machine.
      t.ok(Date.now() - started < 5_000, `settled in ${Date.now() - started} ms`);
      const order = await client.order('viewer-5', set);
      t.equal(order.scores, null);
      t.same(
        order.posts.map((p) => p.post_id),
        [...set].sort((a, b) => b.created_at - a.created_at).map((p) => p.post_id),
        'time order, newest first',
      );
    } finally {
      ranker!.kill('SIGCONT');
    }
    await until(
      'the resumed ranker ranks again',
      async () => (await client.rankWithDeadline('viewer-6', set, 5_000)) !== null,
      60_000,
      200,
    );
  },
);

t.test(
  'a killed ranker: null, no error, for as long as it is down; a restarted one rebuilds affinity from the log',
  async () => {
    const exited = new Promise((resolve) => ranker!.once('exit', resolve));
    ranker!.kill('SIGKILL');
    await exited;
    for (let i = 0; i < 3; i++)
      t.equal(await client.rankWithDeadline('viewer-7', candidates(100, 10)), null, `call ${i + 1}: null`);
    ranker = startRanker();
    await until(
      'the restarted ranker ranks',
      async () => (await client.rankWithDeadline('viewer-7', candidates(100, 10), 5_000)) !== null,
      60_000,
      200,
    );
    // The topic holds 4 events and 1 malformed record: once all 5 are read, the affinity is exactly the 4.
    await until(
      'the replay reaches the end of the topic',
      async () => {
        const s = (await client.stats())[0]!;
        return s.events_applied === 4 && s.events_malformed === 1;
      },
      60_000,
      200,
    );
    t.same(
      await client.affinity('fan', 'quiet'),
      { interaction_count: 4, last_interaction_at: NOW - 60_000 + 3 },
      'rebuilt, each event once',
    );
  },
);
