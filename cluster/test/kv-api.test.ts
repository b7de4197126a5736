/**
 * The key-value service's HTTP API on a real 5-member cluster (separate processes, TCP, LevelDB), started with
 * the `cluster` CLI: every endpoint and answer of packages/services/kv/README.md, idempotent retries across members, the
 * shared endpoints (healthz, metrics, status), every kind of bad input, and 503 with Retry-After without quorum.
 */
import { readFileSync } from 'node:fs';
import t, { type Test } from 'tap';
import { freeBases, memberRunning, TestCluster, until, type Answer } from './helpers/cluster.js';

t.setTimeout(150_000);

const [base] = await freeBases(1, 1);
// 100 ms ticks (elections after 1 to 2 s of silence): these checks assume the leader stays put, even on a busy machine.
const cluster = new TestCluster(base!, { nodes: 5, tickMs: 100 });
t.teardown(() => cluster.teardown());
await cluster.up();
const { id: leader } = await cluster.leader();
const followers = cluster.ids().filter((id) => id !== leader);
const [f1, f2, f3, f4] = followers as [string, string, string, string];
const pidsAtStart = cluster.state().members.map((m) => m.pid);

const kv = (key: string): string => `/v1/kv/${encodeURIComponent(key)}`;

/** An error answer of the shared shape: the status, a JSON body {error: {code, message, ...}} and its code. */
function isError(t: Test, a: Answer, status: number, code: string, what: string, field?: string): void {
  t.equal(a.status, status, `${what}: status ${status} (got ${a.status} ${a.text.slice(0, 200)})`);
  t.match(a.headers['content-type'], /^application\/json/, `${what}: JSON body`);
  t.equal(a.json?.error?.code, code, `${what}: code ${code}`);
  t.type(a.json?.error?.message, 'string', `${what}: a message`);
  t.ok((a.json?.error?.message ?? '').length > 0, `${what}: the message is not empty`);
  if (field !== undefined) t.equal(a.json?.error?.field, field, `${what}: names the field ${field}`);
}

t.test("members run with the service's node flags (kvService.memberNodeFlags)", async (t) => {
  const flags = ['--single-threaded-gc', '--heap-growing-percent=300'];
  t.same(cluster.state().memberNodeFlags, flags, 'cluster.json records them');
  for (const m of cluster.state().members) {
    const args = readFileSync(`/proc/${m.pid}/cmdline`, 'utf8').split('\0');
    const script = args.findIndex((a) => a.endsWith('member.js'));
    for (const flag of flags)
      t.ok(args.indexOf(flag) >= 0 && args.indexOf(flag) < script, `${m.id} runs node ${flag} ... member.js`);
  }
});

t.test('healthz and metrics need no token; status describes the member', async (t) => {
  for (const id of cluster.ids()) {
    const h = await cluster.call(id, 'GET', '/healthz', { token: null });
    t.equal(h.status, 200, `${id} /healthz without a token`);
    t.same(h.json, { status: 'ok', id, role: id === leader ? 'leader' : 'follower', leader }, `${id} /healthz body`);
  }
  const sampleLine =
    /^[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="[^"]*",?)*\})? [-+]?([0-9.]+([eE][-+]?[0-9]+)?|NaN|\+Inf|-Inf)$/;
  for (const id of [leader, f1]) {
    const m = await cluster.call(id, 'GET', '/metrics', { token: null });
    t.equal(m.status, 200, `${id} /metrics without a token`);
    t.match(m.headers['content-type'], /^text\/plain/, 'Prometheus text');
    for (const [name, type] of [
      ['raft_fsync_seconds', 'histogram'],
      ['raft_apply_seconds', 'histogram'],
      ['raft_snapshot_bytes', 'histogram'],
      ['raft_elections_total', 'counter'],
      ['raft_proposals_total', 'counter'],
      ['raft_forwarded_proposals_total', 'counter'],
    ]) {
      t.match(m.text, new RegExp(`^# TYPE ${name} ${type}$`, 'm'), `${id} /metrics declares ${name} as a ${type}`);
      t.match(
        m.text,
        new RegExp(`^${name}(_bucket|_sum|_count)?(\\{[^}]*\\})? `, 'm'),
        `${id} /metrics has samples of ${name}`,
      );
    }
    t.match(m.text, /^raft_fsync_seconds_count [1-9]\d*$/m, `${id} has fsynced`);
    const bad = m.text.split('\n').filter((l) => l.length > 0 && !l.startsWith('#') && !sampleLine.test(l));
    t.same(bad, [], `${id} /metrics: every sample line is well-formed`);
  }
  const elections = await Promise.all(
    cluster
      .ids()
      .map(async (id) =>
        Number(/^raft_elections_total (\d+)$/m.exec((await cluster.call(id, 'GET', '/metrics')).text)?.[1]),
      ),
  );
  t.ok(elections.reduce((a, b) => a + b, 0) >= 1, 'some member counted the election it started');

  const statuses = await cluster.statuses();
  for (const [id, s] of statuses) {
    t.ok(s !== null, `${id} answers /v1/cluster/status`);
    if (s === null) continue;
    t.equal(s.id, id);
    t.equal(s.role, id === leader ? 'leader' : 'follower', `${id} role`);
    t.equal(s.leader_id, leader, `${id} knows the leader`);
    for (const field of ['term', 'commit_index', 'applied_index', 'last_log_index', 'snapshot_index'] as const)
      t.type(s[field], 'number', `${id} ${field} is a number`);
    t.ok(s.term >= 1, `${id} term >= 1`);
    t.ok(
      s.commit_index >= 1 && s.applied_index <= s.commit_index && s.commit_index <= s.last_log_index,
      `${id} applied <= commit <= last (${s.applied_index}, ${s.commit_index}, ${s.last_log_index})`,
    );
    t.same([...s.voters].sort(), ['n1', 'n2', 'n3', 'n4', 'n5'], `${id} voters`);
    t.same(s.learners, [], `${id} learners`);
    // Only the leader tracks its peers' progress.
    t.same(
      s.peers.map((p) => p.id).sort(),
      id === leader ? cluster.ids().filter((x) => x !== id) : [],
      `${id} lists ${id === leader ? 'its four peers' : 'no peers'}`,
    );
    for (const p of s.peers) {
      t.type(p.match_index, 'number', `${id} peer ${p.id} has a match_index`);
      t.type(p.next_index, 'number', `${id} peer ${p.id} has a next_index`);
      t.equal(p.learner, false, `${id} peer ${p.id} is a voter`);
    }
  }
  const ls = statuses.get(leader)!;
  await until('the leader to see every follower caught up', async () => {
    const s = await cluster.status(leader);
    return s !== null && s.peers.every((p) => p.match_index === s.last_log_index && p.active);
  });
  t.ok(
    ls.peers.every((p) => p.match_index >= 1),
    "the leader tracks each follower's match_index",
  );
});

t.test('a token is needed everywhere else, and must be right', async (t) => {
  const calls: Array<[string, string, string | undefined]> = [
    ['GET', kv('auth'), undefined],
    ['PUT', kv('auth'), 'sneaky'],
    ['DELETE', kv('auth'), undefined],
    ['POST', kv('auth') + '/cas', '{"from": null, "to": "x"}'],
    ['GET', '/v1/cluster/status', undefined],
    ['POST', '/v1/client-sessions', undefined],
    ['PUT', '/v1/cluster/partition', '{"blocked": ["n1", "n2", "n3", "n4", "n5"]}'],
  ];
  for (const [method, path, body] of calls) {
    for (const [token, label] of [
      [null, 'no token'],
      ['wrong', 'a wrong token'],
      [cluster.token + 'x', 'the token plus a character'],
    ] as const) {
      const a = await cluster.call(f1, method, path, { token, body });
      isError(t, a, 401, 'unauthorized', `${method} ${path} with ${label}`);
      t.equal(a.headers['www-authenticate'], 'Bearer', `${method} ${path} with ${label}: WWW-Authenticate`);
    }
    const basic = await cluster.call(f1, method, path, {
      token: null,
      body,
      headers: { authorization: `Basic ${Buffer.from('a:b').toString('base64')}` },
    });
    isError(t, basic, 401, 'unauthorized', `${method} ${path} with Basic auth`);
  }
  const missing = await cluster.call(leader, 'GET', kv('auth'));
  t.equal(missing.status, 404, 'the unauthorized PUT wrote nothing');
  const s = await cluster.status(f2);
  t.equal(s?.leader_id, leader, 'the unauthorized partition request cut nothing');
});

t.test('put, get, delete and compare-and-set', async (t) => {
  const put = await cluster.call(f1, 'PUT', kv('greeting'), { body: 'hello' });
  t.equal(put.status, 200, 'PUT through a follower');
  t.same(Object.keys(put.json).sort(), ['key', 'revision']);
  t.equal(put.json.key, 'greeting');
  const r1 = put.json.revision as number;
  t.ok(Number.isInteger(r1) && r1 > 0, 'a revision');

  const get = await cluster.call(f2, 'GET', kv('greeting'));
  t.equal(get.status, 200, 'linearizable GET on another follower sees the write at once');
  t.same(get.json, { key: 'greeting', value: 'hello', revision: r1 });
  const explicit = await cluster.call(leader, 'GET', kv('greeting') + '?consistency=linearizable');
  t.same(explicit.json, { key: 'greeting', value: 'hello', revision: r1 }, '?consistency=linearizable');
  for (const id of cluster.ids()) {
    const seen = await until(`${id} to serve the write locally`, async () => {
      const a = await cluster.call(id, 'GET', kv('greeting') + '?consistency=serializable');
      return a.status === 200 ? a.json : null;
    });
    t.same(seen, { key: 'greeting', value: 'hello', revision: r1 }, `${id} serializable read`);
  }
  isError(
    t,
    await cluster.call(f3, 'GET', kv('greeting') + '?consistency=eventual'),
    400,
    'invalid_query',
    'an unknown consistency',
    'consistency',
  );

  const put2 = await cluster.call(f3, 'PUT', kv('greeting'), { body: 'hello again' });
  t.ok(put2.json.revision > r1, 'the revision grows with every write');
  t.same((await cluster.call(f4, 'GET', kv('greeting'))).json, {
    key: 'greeting',
    value: 'hello again',
    revision: put2.json.revision,
  });

  isError(t, await cluster.call(f1, 'GET', kv('never-written')), 404, 'not_found', 'GET of a missing key');
  isError(
    t,
    await cluster.call(f1, 'GET', kv('never-written') + '?consistency=serializable'),
    404,
    'not_found',
    'serializable GET of a missing key',
  );

  const del = await cluster.call(f4, 'DELETE', kv('greeting'));
  t.equal(del.status, 200, 'DELETE');
  t.equal(del.json.key, 'greeting');
  t.equal(del.json.deleted, true);
  t.ok(del.json.revision > put2.json.revision, 'the delete has a later revision');
  isError(t, await cluster.call(f1, 'GET', kv('greeting')), 404, 'not_found', 'GET after DELETE');
  isError(t, await cluster.call(f2, 'DELETE', kv('greeting')), 404, 'not_found', 'DELETE of a missing key');

  // Unusual keys and values round-trip; a key of exactly 1024 bytes is allowed, an empty value too.
  for (const [key, value] of [
    ['a/b c?d&e=f#g', 'slashes and query characters in the key'],
    ['ключ-🔑', 'значение ✓ 🔒'],
    ['k'.repeat(1024), 'a key of exactly 1024 bytes'],
    ['é'.repeat(512), 'a key of 1024 bytes in 512 characters'],
    ['empty', ''],
    ['json-looking', '{"not": "parsed"}'],
  ]) {
    const p = await cluster.call(f1, 'PUT', kv(key), { body: value });
    t.equal(p.status, 200, `PUT ${key.slice(0, 20)}`);
    t.same(
      (await cluster.call(f2, 'GET', kv(key))).json,
      { key, value, revision: p.json.revision },
      `GET ${key.slice(0, 20)} round-trips`,
    );
  }

  // Compare-and-set.
  const cas = (id: string, key: string, body: object) => cluster.call(id, 'POST', kv(key) + '/cas', { body });
  const c1 = await cas(f1, 'lock', { from: null, to: 'alice' });
  t.equal(c1.status, 200, 'CAS from null creates an absent key');
  t.same(Object.keys(c1.json).sort(), ['key', 'revision', 'value']);
  t.equal(c1.json.value, 'alice');
  const c2 = await cas(f2, 'lock', { from: null, to: 'bob' });
  isError(t, c2, 409, 'cas_mismatch', 'CAS from null on a present key');
  t.equal(c2.json.error.current, 'alice', 'the mismatch tells the current value');
  t.equal(c2.json.error.revision, c1.json.revision, 'and its revision');
  const c3 = await cas(leader, 'lock', { from: 'alice', to: 'bob' });
  t.equal(c3.status, 200, 'CAS from the current value');
  t.ok(c3.json.revision > c1.json.revision);
  t.same((await cluster.call(f3, 'GET', kv('lock'))).json, { key: 'lock', value: 'bob', revision: c3.json.revision });
  const c4 = await cas(f3, 'lock', { from: 'alice', to: 'carol' });
  isError(t, c4, 409, 'cas_mismatch', 'CAS from a stale value');
  t.equal(c4.json.error.current, 'bob');
  t.equal((await cluster.call(f3, 'GET', kv('lock'))).json.value, 'bob', 'a failed CAS changes nothing');
  const c5 = await cas(f4, 'lock', { from: 'bob', to: null });
  t.equal(c5.status, 200, 'CAS to null deletes');
  isError(t, await cluster.call(f1, 'GET', kv('lock')), 404, 'not_found', 'GET after CAS to null');
  const c6 = await cas(f1, 'lock', { from: 'bob', to: 'x' });
  isError(t, c6, 409, 'cas_mismatch', 'CAS on a deleted key');
  t.equal(c6.json.error.current, null, 'an absent key is current: null');

  // A lone surrogate travels in JSON but not in UTF-8: stored, it would read back as U+FFFD (once answered 200).
  for (const body of [
    { from: null, to: '\ud800' },
    { from: '\udfff', to: 'x' },
    { from: null, to: 'a\ud83d' },
  ]) {
    isError(t, await cas(f1, 'surrogate', body), 400, 'invalid_field', `CAS ${JSON.stringify(body)} is refused`);
  }
  isError(t, await cluster.call(f1, 'GET', kv('surrogate')), 404, 'not_found', 'nothing was written by a refused CAS');
  const emoji = await cas(f1, 'surrogate', { from: null, to: 'ok \ud83d\ude00' });
  t.equal(emoji.status, 200, 'a surrogate pair (an emoji) is fine');
  t.equal((await cluster.call(f2, 'GET', kv('surrogate'))).json.value, 'ok \ud83d\ude00', 'and round-trips');

  const forwarded = await Promise.all(
    followers.map(async (id) =>
      Number(
        /^raft_forwarded_proposals_total (\d+)$/m.exec((await cluster.call(id, 'GET', '/metrics')).text)?.[1] ?? 0,
      ),
    ),
  );
  t.ok(
    forwarded.every((n) => n > 0),
    `every follower counted the writes it forwarded (${forwarded.join(', ')})`,
  );
});

t.test(
  'concurrent writes to one member share entries, each with its own answer; one key never twice in an entry',
  async (t) => {
    const metric = async (name: string): Promise<number> =>
      Number(new RegExp(`^${name} (\\d+)$`, 'm').exec((await cluster.call(f1, 'GET', '/metrics')).text)?.[1] ?? NaN);
    const counts = async (): Promise<{ entries: number; commands: number }> => ({
      entries: await metric('kv_batched_entries'),
      commands: await metric('kv_batched_commands'),
    });
    // Whether requests share a turn depends on how they arrive (new connections trickle in); bursts on warm
    // connections usually do. A batcher that never batched would fail here after every try.
    let shared = false;
    for (let burst = 1; !shared && burst <= 5; burst++) {
      const before = await counts();
      const keys = Array.from({ length: 40 }, (_, i) => `burst-${burst}-${i}`);
      // Three writes to one key in the same burst: each its own entry, in arrival order, each a later revision.
      const same = ['one', 'two', 'three'];
      const answers = await Promise.all([
        ...keys.map((k) => cluster.call(f1, 'PUT', kv(k), { body: k })),
        ...same.map((v) => cluster.call(f1, 'PUT', kv(`burst-${burst}-same`), { body: v })),
      ]);
      t.ok(
        answers.every((a) => a.status === 200),
        `burst ${burst}: every write answered 200`,
      );
      t.ok(
        answers.slice(0, 40).every((a, i) => a.json.key === keys[i]),
        `burst ${burst}: each answer names its own key`,
      );
      const revisions = answers.slice(40).map((a) => a.json.revision as number);
      t.equal(
        new Set(revisions).size,
        3,
        `burst ${burst}: three writes to one key, three revisions (${revisions.join(', ')})`,
      );
      const last = await cluster.call(f2, 'GET', kv(`burst-${burst}-same`));
      t.equal(last.json.revision, Math.max(...revisions), `burst ${burst}: the key holds its latest write`);
      t.equal(
        last.json.value,
        same[revisions.indexOf(Math.max(...revisions))],
        `burst ${burst}: the value of that write`,
      );
      const values = await Promise.all(keys.map((k) => cluster.call(f3, 'GET', kv(k))));
      t.ok(
        values.every(
          (v, i) => v.status === 200 && v.json.value === keys[i] && v.json.revision === answers[i]!.json.revision,
        ),
        `burst ${burst}: every key reads back with the revision its write answered`,
      );
      const after = await counts();
      t.equal(after.commands - before.commands, 43, `burst ${burst}: the 43 writes went through the batcher`);
      shared = after.entries - before.entries < 43;
    }
    t.ok(shared, 'some writes of a burst shared one entry');
  },
);

t.test('a retried write applies once, whichever member gets the retry', async (t) => {
  const opened = await cluster.call(f2, 'POST', '/v1/client-sessions');
  t.equal(opened.status, 200, 'POST /v1/client-sessions on a follower');
  const client = opened.json.client_id as string;
  t.type(client, 'string');
  const session = (seq: number, ack?: number): Record<string, string> => ({
    'client-id': client,
    'client-seq': String(seq),
    ...(ack === undefined ? {} : { 'client-ack': String(ack) }),
  });

  // The same write (seq 1) to three members: one revision, the first value.
  const first = await cluster.call(f1, 'PUT', kv('idem'), { body: 'first', headers: session(1) });
  t.equal(first.status, 200);
  for (const id of [f3, leader, f4]) {
    const again = await cluster.call(id, 'PUT', kv('idem'), { body: 'retry-to-' + id, headers: session(1) });
    t.equal(again.status, 200, `the retry to ${id} succeeds`);
    t.same(again.json, first.json, `the retry to ${id} gets the first answer (same revision)`);
  }
  t.same(
    (await cluster.call(f2, 'GET', kv('idem'))).json,
    { key: 'idem', value: 'first', revision: first.json.revision },
    'the write applied once',
  );
  const status = await cluster.status(leader);
  t.ok(status !== null && status.commit_index >= first.json.revision, 'sanity: the write is committed');

  // A counter kept with CAS: each increment is sent to one member and retried on two others. Re-applying a retry
  // would fail its CAS (the value moved on) or bump the counter twice; applying once keeps every answer 200.
  const counter = await cluster.call(leader, 'PUT', kv('counter'), { body: '0', headers: session(2, 1) });
  t.equal(counter.status, 200);
  const members = cluster.ids();
  for (let i = 0; i < 6; i++) {
    const seq = 3 + i;
    const body = { from: String(i), to: String(i + 1) };
    const answers: Answer[] = [];
    for (let k = 0; k < 3; k++) {
      answers.push(
        await cluster.call(members[(i + k) % members.length]!, 'POST', kv('counter') + '/cas', {
          body,
          headers: session(seq, seq - 1),
        }),
      );
    }
    t.same(
      answers.map((a) => a.status),
      [200, 200, 200],
      `increment ${i + 1} and its two retries all succeed`,
    );
    t.ok(
      answers.every((a) => a.json.revision === answers[0]!.json.revision),
      `increment ${i + 1}: one revision for all three`,
    );
  }
  t.same(
    (await cluster.call(f1, 'GET', kv('counter'))).json.value,
    '6',
    'six increments, eighteen requests: the counter is 6',
  );

  // Retrying an acknowledged seq is refused rather than applied.
  isError(
    t,
    await cluster.call(f3, 'POST', kv('counter') + '/cas', { body: { from: '0', to: '1' }, headers: session(3) }),
    409,
    'stale_sequence',
    'a seq at or below Client-Ack',
  );
  t.equal((await cluster.call(f1, 'GET', kv('counter'))).json.value, '6', 'still 6');

  // Header mistakes.
  isError(
    t,
    await cluster.call(f1, 'PUT', kv('idem'), { body: 'x', headers: { 'client-id': client } }),
    400,
    'invalid_header',
    'Client-Id without Client-Seq',
    'Client-Seq',
  );
  isError(
    t,
    await cluster.call(f1, 'PUT', kv('idem'), { body: 'x', headers: { 'client-seq': '9' } }),
    400,
    'invalid_header',
    'Client-Seq without Client-Id',
    'Client-Id',
  );
  isError(
    t,
    await cluster.call(f1, 'PUT', kv('idem'), { body: 'x', headers: { 'client-id': client, 'client-seq': 'nine' } }),
    400,
    'invalid_header',
    'a Client-Seq that is not a number',
    'Client-Seq',
  );
  isError(
    t,
    await cluster.call(f1, 'PUT', kv('idem'), { body: 'x', headers: { 'client-id': client, 'client-seq': '0' } }),
    400,
    'invalid_header',
    'Client-Seq 0',
    'Client-Seq',
  );
  isError(
    t,
    await cluster.call(f1, 'PUT', kv('idem'), { body: 'x', headers: session(20, 20) }),
    400,
    'invalid_header',
    'Client-Ack not below Client-Seq',
    'Client-Ack',
  );
  isError(
    t,
    await cluster.call(f1, 'PUT', kv('idem'), {
      body: 'x',
      headers: { 'client-id': 'never-opened', 'client-seq': '1' },
    }),
    410,
    'unknown_session',
    'a session that was never opened',
  );
  t.same((await cluster.call(f2, 'GET', kv('idem'))).json.value, 'first', 'none of the refused writes applied');
});

t.test('bad input gets a 4xx naming the problem, and no member falls over', async (t) => {
  const cas = (body: string | object | undefined, key = 'bad') => cluster.call(f1, 'POST', kv(key) + '/cas', { body });
  isError(t, await cas('{"from": null, "to": '), 400, 'invalid_json', 'CAS with a truncated JSON body');
  isError(t, await cas('not json at all'), 400, 'invalid_json', 'CAS with a body that is not JSON');
  isError(t, await cas(undefined), 400, 'invalid_body', 'CAS without a body');
  isError(t, await cas('[1, 2]'), 400, 'invalid_body', 'CAS with a JSON array');
  isError(t, await cas('"a string"'), 400, 'invalid_body', 'CAS with a JSON string');
  isError(t, await cas({ to: 'x' }), 400, 'invalid_field', 'CAS without from', 'from');
  isError(t, await cas({ from: 'x' }), 400, 'invalid_field', 'CAS without to', 'to');
  isError(t, await cas({ from: 1, to: 'x' }), 400, 'invalid_field', 'CAS with a number from', 'from');
  isError(t, await cas({ from: null, to: { nested: true } }), 400, 'invalid_field', 'CAS with an object to', 'to');
  isError(t, await cas({ from: null, to: ['a'] }), 400, 'invalid_field', 'CAS with an array to', 'to');
  isError(t, await cas({ from: null, to: true }), 400, 'invalid_field', 'CAS with a boolean to', 'to');

  const longKey = 'k'.repeat(1025);
  const wideKey = 'é'.repeat(513); // 513 characters, 1026 bytes
  for (const key of [longKey, wideKey]) {
    const what = key === longKey ? 'a 1025-byte key' : 'a 1026-byte key of 513 characters';
    isError(t, await cluster.call(f1, 'PUT', kv(key), { body: 'v' }), 400, 'invalid_key', `PUT with ${what}`, 'key');
    isError(t, await cluster.call(f1, 'GET', kv(key)), 400, 'invalid_key', `GET with ${what}`, 'key');
    isError(t, await cluster.call(f1, 'DELETE', kv(key)), 400, 'invalid_key', `DELETE with ${what}`, 'key');
    isError(t, await cas({ from: null, to: 'v' }, key), 400, 'invalid_key', `CAS with ${what}`, 'key');
  }

  const tooBig = await cluster.call(f2, 'PUT', kv('big'), { body: Buffer.alloc(1024 * 1024 + 1, 'a') });
  isError(t, tooBig, 413, 'body_too_large', 'PUT of 1 MiB + 1 byte');
  isError(
    t,
    await cluster.call(f2, 'POST', kv('big') + '/cas', {
      body: JSON.stringify({ from: null, to: 'a'.repeat(1024 * 1024) }),
    }),
    413,
    'body_too_large',
    'CAS with a body over 1 MiB',
  );
  isError(t, await cluster.call(f2, 'GET', kv('big')), 404, 'not_found', 'the oversized values were not stored');
  const atLimit = await cluster.call(f2, 'PUT', kv('big'), { body: Buffer.alloc(1024 * 1024, 'b') });
  t.equal(atLimit.status, 200, 'PUT of exactly 1 MiB is accepted');
  const readBack = await cluster.call(f3, 'GET', kv('big'));
  t.equal(readBack.status, 200);
  t.equal(readBack.json?.value?.length, 1024 * 1024, 'and reads back whole from another member');

  for (const [bytes, what] of [
    [Buffer.from([0xff, 0xfe, 0x41]), 'invalid UTF-8 bytes'],
    [Buffer.from([0x61, 0xc3]), 'a truncated UTF-8 sequence'],
    [Buffer.from([0xed, 0xa0, 0x80]), 'an encoded surrogate'],
  ] as const) {
    isError(
      t,
      await cluster.call(f3, 'PUT', kv('binary'), { body: bytes }),
      400,
      'invalid_value',
      `PUT with ${what}`,
      'body',
    );
  }
  isError(t, await cluster.call(f3, 'GET', kv('binary')), 404, 'not_found', 'the non-UTF-8 values were not stored');
  isError(
    t,
    await cluster.call(f3, 'GET', '/v1/kv/%E0%A4%A'),
    400,
    'invalid_path',
    'a path with broken percent-encoding',
  );

  // The shared control endpoints validate too (each bad body is refused before anything happens).
  isError(
    t,
    await cluster.call(f4, 'PUT', '/v1/cluster/partition', { body: { blocked: 'n1' } }),
    400,
    'invalid_field',
    'partition with blocked not a list',
    'blocked',
  );
  isError(
    t,
    await cluster.call(f4, 'POST', '/v1/cluster/members', { body: { id: 'bad id!', address: '127.0.0.1:1' } }),
    400,
    'invalid_field',
    'add member with a bad id',
    'id',
  );
  isError(
    t,
    await cluster.call(f4, 'POST', '/v1/cluster/members', { body: { id: 'n9', address: 'nowhere' } }),
    400,
    'invalid_address',
    'add member with a bad address',
    'address',
  );
  isError(
    t,
    await cluster.call(leader, 'POST', '/v1/cluster/transfer-leader', { body: { to: 5 } }),
    400,
    'invalid_field',
    'transfer-leader to a number',
    'to',
  );
  isError(
    t,
    await cluster.call(leader, 'POST', '/v1/cluster/transfer-leader', { body: { to: 'n9' } }),
    400,
    'invalid_field',
    'transfer-leader to a non-member',
    'to',
  );
  isError(
    t,
    await cluster.call(f4, 'POST', '/v1/cluster/transfer-leader', { body: { to: f1 } }),
    421,
    'not_leader',
    'transfer-leader sent to a follower',
  );

  for (const id of cluster.ids())
    t.equal((await cluster.call(id, 'GET', '/healthz')).status, 200, `${id} still serves`);
  t.same(
    cluster.state().members.map((m) => m.pid),
    pidsAtStart,
    'no member restarted',
  );
  for (const pid of pidsAtStart) t.ok(memberRunning(pid, cluster.dataDir), `pid ${pid} runs`);
  t.equal((await cluster.leader()).id, leader, 'and the leader is unchanged');
});

t.test('unknown routes get 404 and wrong methods 405, both as JSON', async (t) => {
  for (const [method, path] of [
    ['GET', '/'],
    ['GET', '/nope'],
    ['GET', '/v1/kv'],
    ['GET', '/v1/kv/a/b/c'],
    ['POST', '/v2/kv/a'],
    ['DELETE', '/v1/cluster'],
  ]) {
    isError(t, await cluster.call(f1, method, path), 404, 'not_found', `${method} ${path}`);
  }
  for (const [method, path, allow] of [
    ['PATCH', kv('a'), /PUT.*GET.*DELETE|GET.*PUT.*DELETE/],
    ['POST', kv('a'), /PUT/],
    ['GET', kv('a') + '/cas', /^POST$/],
    ['PUT', kv('a') + '/cas', /^POST$/],
    ['POST', '/healthz', /^GET$/],
    ['DELETE', '/metrics', /^GET$/],
    ['GET', '/v1/client-sessions', /^POST$/],
  ] as const) {
    const a = await cluster.call(f1, method, path);
    isError(t, a, 405, 'method_not_allowed', `${method} ${path}`);
    t.match(a.headers.allow, allow, `${method} ${path}: Allow header`);
  }
});

t.test('without a quorum: 503 with Retry-After, never a guess', async (t) => {
  const value = await cluster.call(f1, 'PUT', kv('before-quorum-loss'), { body: 'kept' });
  t.equal(value.status, 200);
  await until(`${f1} and ${f2} to apply it`, async () => {
    const a = await Promise.all(
      [f1, f2].map((id) => cluster.call(id, 'GET', kv('before-quorum-loss') + '?consistency=serializable')),
    );
    return a.every((x) => x.status === 200);
  });
  // Three of five gone, the leader among them.
  for (const id of [leader, f3, f4]) t.equal((await cluster.cli('kill', id)).code, 0, `kill ${id}`);
  const started = Date.now();
  const answers = await Promise.all([
    cluster.call(f1, 'PUT', kv('no-quorum'), { body: 'x', timeoutMs: 30_000 }),
    cluster.call(f2, 'PUT', kv('no-quorum'), { body: 'y', timeoutMs: 30_000 }),
    cluster.call(f1, 'GET', kv('before-quorum-loss'), { timeoutMs: 30_000 }),
    cluster.call(f2, 'GET', kv('before-quorum-loss') + '?consistency=linearizable', { timeoutMs: 30_000 }),
    cluster.call(f2, 'DELETE', kv('before-quorum-loss'), { timeoutMs: 30_000 }),
    cluster.call(f1, 'POST', kv('before-quorum-loss') + '/cas', {
      body: { from: 'kept', to: 'lost' },
      timeoutMs: 30_000,
    }),
    cluster.call(f2, 'POST', '/v1/client-sessions', { timeoutMs: 30_000 }),
  ]);
  const names = [
    'PUT on ' + f1,
    'PUT on ' + f2,
    'linearizable GET on ' + f1,
    'linearizable GET on ' + f2,
    'DELETE',
    'CAS',
    'open a session',
  ];
  answers.forEach((a, i) => {
    isError(t, a, 503, 'unavailable', `${names[i]} without a quorum`);
    t.match(a.headers['retry-after'], /^[1-9]\d*$/, `${names[i]}: Retry-After in seconds`);
  });
  t.ok(Date.now() - started < 20_000, 'the refusals come within the request timeout');
  // Later calls, once the survivors know they have no leader, are refused too.
  await until(
    'the survivors to give up on the old leader',
    async () => {
      const h = await Promise.all([f1, f2].map((id) => cluster.call(id, 'GET', '/healthz')));
      return h.every((x) => x.json.leader === null);
    },
    15_000,
  );
  const late = await cluster.call(f1, 'PUT', kv('no-quorum'), { body: 'z' });
  isError(t, late, 503, 'unavailable', 'a PUT once no leader is known');
  t.match(late.headers['retry-after'], /^[1-9]\d*$/);
  const stale = await cluster.call(f2, 'GET', kv('before-quorum-loss') + '?consistency=serializable');
  t.same(stale.json?.value, 'kept', 'a serializable read still answers from local state');
  isError(
    t,
    await cluster.call(f2, 'GET', kv('no-quorum') + '?consistency=serializable'),
    404,
    'not_found',
    'and none of the refused writes is visible',
  );
});
