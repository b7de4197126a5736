/**
 * Failures of a real 5-member kv cluster, caused through the `cluster` CLI under client traffic: one leader is
 * elected; killing it yields a new one within a few election timeouts and loses no acknowledged write; the
 * killed member, restarted, catches up from its log; a partitioned minority refuses writes and linearizable
 * reads while the majority goes on, and catches up once healed.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { freeBases, memberRunning, TestCluster, until, type StatusBody } from './helpers/cluster.js';
import { missingWrites, Traffic } from './helpers/traffic.js';

t.setTimeout(150_000);

const TICK_MS = 50;
/** The longest election timeout: 20 ticks (the core randomizes it between 10 and 20 ticks). */
const MAX_ELECTION_MS = 20 * TICK_MS;

const [base] = await freeBases(2, 1);
const cluster = new TestCluster(base!, { nodes: 5, tickMs: TICK_MS });
let traffic: Traffic | null = null;
t.teardown(async () => {
  await traffic?.stop();
  await cluster.teardown();
});
await cluster.up();
const endpoints = cluster.ids().map((id) => cluster.url(id));

let killed = '';

t.test('a new cluster elects exactly one leader, and every member knows it', async (t) => {
  await cluster.leader();
  // Every member answers, names the same leader in the same term, and exactly that member says it leads.
  const st = await until('every member to agree on the leader', async () => {
    const all = [...(await cluster.statuses()).values()];
    if (all.some((s) => s === null)) return null;
    const first = all[0]!;
    return all.every((s) => s!.leader_id === first.leader_id && s!.term === first.term) ? (all as StatusBody[]) : null;
  });
  const id = st[0]!.leader_id!;
  const leaders = st.filter((s) => s.role === 'leader');
  t.equal(leaders.length, 1, 'one member leads');
  t.equal(leaders[0]!.id, id, 'the one the others name');
  for (const s of st)
    t.equal(s.role, s.id === id ? 'leader' : 'follower', `${s.id} is ${s.id === id ? 'the leader' : 'a follower'}`);
  const status = await cluster.cli('status', '--json');
  const rows = JSON.parse(status.stdout) as Array<{ id: string; role: string; leader: string; pid: number }>;
  t.same(
    rows.map((r) => r.leader),
    [id, id, id, id, id],
    'cluster status agrees',
  );
  t.equal(rows.filter((r) => r.role === 'leader').length, 1, 'cluster status shows one leader');
  t.ok(
    rows.every((r) => memberRunning(r.pid, cluster.dataDir)),
    'cluster status shows the real pids',
  );
});

t.test('killing the leader under traffic: a new leader soon, no acknowledged write lost', async (t) => {
  traffic = new Traffic(endpoints, cluster.token, 'failover', 3);
  await traffic.progress(60);
  const old = await cluster.leader();
  killed = old.id;
  const pid = cluster.pid(killed);
  const k = await cluster.cli('kill', killed);
  t.equal(k.code, 0, `cluster kill ${killed}`);
  const killedAt = Date.now();
  t.notOk(memberRunning(pid, cluster.dataDir), 'the leader process is gone');
  t.equal(cluster.pid(killed), null, 'cluster.json records it stopped');
  const survivors = cluster.ids().filter((id) => id !== killed);
  const next = await cluster.leader({ ids: survivors, quorumOf: 5, not: killed, timeoutMs: 20_000 });
  const electedMs = Date.now() - killedAt;
  t.not(next.id, killed, `a new leader: ${next.id}`);
  t.ok(next.term > old.term, `in a later term (${old.term} -> ${next.term})`);
  t.ok(
    electedMs < 5 * MAX_ELECTION_MS,
    `elected within 5 election timeouts (${electedMs} ms; timeout at most ${MAX_ELECTION_MS} ms)`,
  );

  await traffic.progress(60);
  await traffic.stop();
  const acked = traffic.acked;
  t.ok(
    acked.some((a) => a.at < killedAt),
    'writes were acknowledged before the kill',
  );
  t.ok(acked.filter((a) => a.at > killedAt).length >= 60, 'and after it');
  t.same(traffic.errors, [], 'no write failed (the client retried across members)');
  t.same(
    await missingWrites(cluster, next.id, acked),
    [],
    `every one of ${acked.length} acknowledged writes is there (linearizable reads on the new leader)`,
  );
  const survivorStatus = await cluster.statuses(survivors);
  for (const [id, s] of survivorStatus) t.equal(s?.leader_id, next.id, `${id} follows ${next.id}`);
  // Revisions are log indexes: distinct writes have distinct revisions.
  t.equal(new Set(acked.map((a) => a.revision)).size, acked.length, 'every acknowledged write has its own revision');
  traffic = null;
});

t.test('the killed member, restarted, catches up from its log', async (t) => {
  const r = await cluster.cli('restart', killed);
  t.equal(r.code, 0, `cluster restart ${killed}`);
  t.match(r.stdout, new RegExp(`restarted ${killed} \\(pid \\d+\\)`));
  t.ok(memberRunning(cluster.pid(killed), cluster.dataDir), 'it runs');
  // Writes while it rejoins, then it must reach the leader's commit index.
  const leader = (await cluster.leader()).id;
  const extra = await cluster.call(leader, 'PUT', '/v1/kv/after-restart', { body: 'fresh' });
  t.equal(extra.status, 200);
  const target = (await cluster.status(leader))!.commit_index;
  const caughtUp = await until(`${killed} to apply up to ${target}`, async () => {
    const s = await cluster.status(killed);
    return s !== null && s.applied_index >= target ? s : null;
  });
  t.equal(caughtUp.role, 'follower', 'it rejoins as a follower');
  t.ok(caughtUp.leader_id !== null && caughtUp.leader_id !== killed, `of the current leader (${caughtUp.leader_id})`);
  t.equal(caughtUp.snapshot_index, 0, 'no snapshot was needed: its own log plus the entries it missed');
  const leaderStatus = (await cluster.status(leader))!;
  t.equal(leaderStatus.snapshot_index, 0, 'the leader never compacted, so it had every entry to send');
  t.equal(
    leaderStatus.peers.find((p) => p.id === killed)?.match_index !== undefined,
    true,
    'the leader tracks it again',
  );
  const fresh = await cluster.call(killed, 'GET', '/v1/kv/after-restart?consistency=serializable');
  t.same(
    fresh.json,
    { key: 'after-restart', value: 'fresh', revision: extra.json.revision },
    'it serves a write made after its restart from local state',
  );
  const reference = await cluster.call(leader, 'GET', '/v1/kv/failover-w0-0');
  const local = await cluster.call(killed, 'GET', '/v1/kv/failover-w0-0?consistency=serializable');
  t.same(local.json, reference.json, 'and the writes from before it died');
});

t.test('a partitioned minority refuses writes and linearizable reads while the majority goes on', async (t) => {
  const { id: oldLeader } = await cluster.leader();
  const others = cluster.ids().filter((id) => id !== oldLeader);
  const minority = [oldLeader, others[0]!];
  const majority = others.slice(1);
  const p = await cluster.cli('partition', `${minority.join(',')}|${majority.join(',')}`);
  t.equal(p.code, 0, `cluster partition ${minority.join(',')}|${majority.join(',')}`);
  t.equal(p.stderr, '', 'every member took the partition');
  const cutAt = Date.now();

  // The minority (with the old leader in it) is asked for writes and linearizable reads at once.
  const refusals = Promise.all(
    minority.flatMap((id) => [
      cluster.call(id, 'PUT', '/v1/kv/minority-' + id, { body: 'must not be acknowledged', timeoutMs: 30_000 }),
      cluster.call(id, 'GET', '/v1/kv/after-restart', { timeoutMs: 30_000 }),
      cluster.call(id, 'POST', '/v1/kv/after-restart/cas', {
        body: { from: 'fresh', to: 'minority' },
        timeoutMs: 30_000,
      }),
    ]),
  );
  // Meanwhile the majority elects its own leader and serves.
  const next = await cluster.leader({ ids: majority, quorumOf: 5, not: oldLeader, timeoutMs: 20_000 });
  t.ok(majority.includes(next.id), `the majority elects ${next.id}`);
  t.ok(Date.now() - cutAt < 20 * MAX_ELECTION_MS, `within ${Date.now() - cutAt} ms`);
  const w = await cluster.call(majority.find((id) => id !== next.id)!, 'PUT', '/v1/kv/majority', { body: 'goes on' });
  t.equal(w.status, 200, 'the majority accepts a write through a follower');
  const r = await cluster.call(majority.at(-1)!, 'GET', '/v1/kv/majority');
  t.same(
    r.json,
    { key: 'majority', value: 'goes on', revision: w.json.revision },
    'and serves a linearizable read of it',
  );
  const cas = await cluster.call(next.id, 'POST', '/v1/kv/after-restart/cas', {
    body: { from: 'fresh', to: 'majority' },
  });
  t.equal(cas.status, 200, 'and a compare-and-set');

  const answers = await refusals;
  const names = minority.flatMap((id) => [`PUT on ${id}`, `linearizable GET on ${id}`, `CAS on ${id}`]);
  answers.forEach((a, i) => {
    t.equal(a.status, 503, `${names[i]} in the minority: 503 (got ${a.status} ${a.text.slice(0, 160)})`);
    t.equal(a.json?.error?.code, 'unavailable', `${names[i]}: code unavailable`);
    t.match(a.headers['retry-after'], /^[1-9]\d*$/, `${names[i]}: Retry-After`);
  });
  const stepped = await until(
    `${oldLeader} to step down without a quorum`,
    async () => {
      const s = await cluster.status(oldLeader);
      return s !== null && s.role !== 'leader' ? s : null;
    },
    10_000,
  );
  t.not(stepped.role, 'leader', `${oldLeader} no longer claims to lead (${stepped.role})`);
  const stale = await cluster.call(minority[1]!, 'GET', '/v1/kv/after-restart?consistency=serializable');
  t.equal(stale.json?.value, 'fresh', 'a serializable read in the minority answers, from its (stale) local state');

  const h = await cluster.cli('heal');
  t.equal(h.code, 0, 'cluster heal');
  const healed = await cluster.leader({ timeoutMs: 20_000 });
  const target = (await cluster.status(healed.id))!.commit_index;
  const synced = await until('the minority to catch up', async () => {
    const all = await cluster.statuses();
    const leaderNow = all.get(healed.id)?.leader_id ?? null;
    const ok =
      leaderNow !== null &&
      [...all.values()].every(
        (s): s is StatusBody => s !== null && s.leader_id === leaderNow && s.applied_index >= target,
      );
    return ok ? all : null;
  });
  t.equal([...synced.values()].filter((s) => s!.role === 'leader').length, 1, 'one leader after healing');
  for (const id of minority) {
    const a = await cluster.call(id, 'GET', '/v1/kv/majority?consistency=serializable');
    t.same(a.json?.value, 'goes on', `${id} has the majority's write`);
    const c = await cluster.call(id, 'GET', '/v1/kv/after-restart?consistency=serializable');
    t.same(c.json?.value, 'majority', `${id} has the majority's compare-and-set, not its own`);
  }
});

t.test(
  'pause and resume: a frozen follower is unreachable, then catches up; down stops paused members too',
  async (t) => {
    const { id: leader } = await cluster.leader();
    const [frozen, alsoFrozen] = cluster.ids().filter((id) => id !== leader) as [string, string];
    const pid = cluster.pid(frozen);
    t.equal((await cluster.cli('pause', frozen)).code, 0, `cluster pause ${frozen}`);
    const rows = JSON.parse((await cluster.cli('status', '--json')).stdout) as Array<{
      id: string;
      role: string;
      pid: number | null;
    }>;
    const row = rows.find((r) => r.id === frozen)!;
    t.equal(row.role, 'unreachable', 'status shows it unreachable');
    t.equal(row.pid, pid, 'with its pid');
    const w = await cluster.call(leader, 'PUT', '/v1/kv/while-paused', { body: 'written' });
    t.equal(w.status, 200, 'four of five members still commit writes');
    t.equal((await cluster.cli('resume', frozen)).code, 0, `cluster resume ${frozen}`);
    const seen = await until(`${frozen} to catch up`, async () => {
      const a = await cluster.call(frozen, 'GET', '/v1/kv/while-paused?consistency=serializable');
      return a.status === 200 ? a.json : null;
    });
    t.same(
      seen,
      { key: 'while-paused', value: 'written', revision: w.json.revision },
      'and serves the write it missed',
    );

    t.equal((await cluster.cli('pause', alsoFrozen)).code, 0, `cluster pause ${alsoFrozen}`);
    const pids = cluster.state().members.map((m) => m.pid);
    const down = await cluster.cli('down');
    t.equal(down.code, 0, 'cluster down');
    // SIGCONT before SIGTERM: the paused member wakes up and stops cleanly instead of waiting for SIGKILL.
    const log = readFileSync(join(cluster.dataDir, alsoFrozen, 'member.log'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { msg: string; signal?: string });
    t.same(
      log.at(-1),
      { ...log.at(-1), msg: 'stopping', signal: 'SIGTERM' },
      `the paused ${alsoFrozen} stopped on SIGTERM`,
    );
    for (const p of pids) t.notOk(memberRunning(p, cluster.dataDir), `pid ${p} is gone`);
    const after = JSON.parse((await cluster.cli('status', '--json')).stdout) as Array<{ role: string }>;
    t.same(
      after.map((r) => r.role),
      ['down', 'down', 'down', 'down', 'down'],
      'status shows every member down',
    );
  },
);
