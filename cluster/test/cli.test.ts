/**
 * The `cluster` CLI's own contract, on real member processes: every error it promises (bad arguments, no cluster
 * running, a port in use, a data directory held by a running cluster, an unknown member) exits non-zero with one
 * line on stderr and leaves the running cluster alone; Ctrl-C during `up` leaves nothing half-started.
 */
import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import {
  finish,
  freeBases,
  isPortFree,
  memberRunning,
  runCli,
  spawnCli,
  TestCluster,
  until,
  type CliResult,
} from './helpers/cluster.js';
import { inPool, ownerOnlyModes } from '@raftkit/testkit';

t.setTimeout(150_000);
// The usual shell umask for whoever runs `cluster up`: the CLI and the processes it starts must restrict their files
// themselves.
process.umask(0o022);

const [base, foreignBase] = await freeBases(0, 2);
// Five members whose first election would take 50 s or more (10+ ticks of 5 s): `up` is still waiting when we interrupt it.
const cluster = new TestCluster(base!, { nodes: 5, tickMs: 5_000 });
t.teardown(() => cluster.teardown());

/** Run `calls` four at a time (each is a separate node process). */
const inParallel = <T>(calls: Array<() => Promise<T>>): Promise<T[]> => inPool(calls, 4, (call) => call());

/** The CLI failed the way the README promises: exit 1 and one line on stderr saying `pattern`. */
function failsWith(t: Test, r: CliResult, pattern: RegExp, what: string): void {
  t.equal(r.code, 1, `${what}: exit code 1 (stderr: ${r.stderr.trim()})`);
  t.match(r.stderr, pattern, `${what}: says why`);
  t.equal(r.stderr.trim().split('\n').length, 1, `${what}: one line on stderr`);
  t.equal(r.stdout, '', `${what}: nothing on stdout`);
}

t.test('bad arguments are refused before anything starts', async (t) => {
  const dir = join(cluster.root, 'bad-args');
  const cases: Array<[string[], RegExp]> = [
    [['up', '--nodes', '0'], /--nodes must be an integer from 1 to 15/],
    [['up', '--nodes', 'five'], /--nodes must be an integer/],
    [['up', '--nodes', '16'], /--nodes must be an integer from 1 to 15/],
    [['up', '--tick-ms', '0'], /--tick-ms must be an integer/],
    [['up', '--tick-ms', '1.5'], /--tick-ms must be an integer/],
    [['up', '--base-port', '65000'], /--base-port must be an integer/],
    [['up', '--base-port', 'http'], /--base-port must be an integer/],
    [['up', '--snapshot-every', '0'], /--snapshot-every must be an integer/],
    [['up', '--service', 'nope'], /'nope' is invalid.*kv/],
    [['up', '--no-such-flag'], /unknown option '--no-such-flag'/],
    [['up', '--service', 'log', '--set', 'replicas=4'], /^cluster: --set replicas: replicas must be 3 or 5 .*not 4/],
    [['up', '--service', 'log', '--set', 'replicas=three'], /^cluster: --set replicas: replicas must be 3 or 5/],
    [['up', '--service', 'log', '--nodes', '3', '--set', 'replicas=5'], /replicas=5 needs at least 5 members; .* 3/],
    [['up', '--service', 'kv', '--set', 'replicas=3'], /kv runs one Raft group on every member/],
  ];
  const results = await inParallel(
    cases.map(
      ([args]) =>
        () =>
          runCli(
            [...args, '--data', dir, ...(args.includes('--base-port') ? [] : ['--base-port', String(foreignBase)])],
            cluster.cwd,
          ),
    ),
  );
  cases.forEach(([args, pattern], i) => {
    t.not(results[i]!.code, 0, `${args.join(' ')}: exits non-zero`);
    t.match(results[i]!.stderr, pattern, `${args.join(' ')}: names the problem`);
  });
  const leaked = existsSync(join(dir, 'cluster.json'));
  t.notOk(leaked, 'no cluster state was written');
  // Had a bad argument slipped through, its cluster must not outlive the test.
  if (leaked) await runCli(['down', '--wipe', '--data', dir], cluster.cwd);
  for (let i = 1; i <= 5; i++) t.ok(await isPortFree(foreignBase! + i), `nothing listens on ${foreignBase! + i}`);

  const unknownCommand = await runCli(['launch'], cluster.cwd);
  t.not(unknownCommand.code, 0, 'an unknown command exits non-zero');
  t.match(unknownCommand.stderr, /unknown command 'launch'/);
  const missingMember = await runCli(['kill', '--data', dir], cluster.cwd);
  t.not(missingMember.code, 0, 'kill without a member exits non-zero');
  t.match(missingMember.stderr, /missing required argument 'member'/);

  // A stopped folder's recorded count is kept by an `up` that names none, and checked like a given one.
  const recorded = join(cluster.root, 'recorded-replicas');
  mkdirSync(recorded, { recursive: true });
  writeFileSync(join(recorded, 'cluster.json'), JSON.stringify({ service: 'log', members: [], replicas: 5 }));
  failsWith(
    t,
    await runCli(
      ['up', '--service', 'log', '--nodes', '3', '--data', recorded, '--base-port', String(foreignBase)],
      cluster.cwd,
    ),
    /^cluster: --set replicas: the folder records 5: replicas=5 needs at least 5 members/,
    'up of 3 members over a folder recording replicas=5',
  );
});

t.test('no cluster running', async (t) => {
  // An empty working directory and no --data: nothing under ./data to find.
  const nowhere = join(cluster.root, 'never-started');
  const cases: Array<[string[], RegExp, string]> = [
    [['status'], /^cluster: no cluster running/, 'status with no cluster under ./data'],
    [['kill', '1'], /^cluster: no cluster running/, 'kill with no cluster under ./data'],
    [['status', '--data', nowhere], /^cluster: no cluster in .*never-started/, 'status --data of an empty directory'],
    [['down', '--data', nowhere], /^cluster: no cluster in/, 'down --data of an empty directory'],
    [['restart', '2', '--data', nowhere], /^cluster: no cluster in/, 'restart --data of an empty directory'],
    [['add-node', '--data', nowhere], /^cluster: no cluster in/, 'add-node --data of an empty directory'],
  ];
  const results = await inParallel(
    cases.map(
      ([args]) =>
        () =>
          runCli(args, cluster.cwd),
    ),
  );
  cases.forEach(([, pattern, what], i) => failsWith(t, results[i]!, pattern, what));
  // Two clusters under ./data: the CLI will not guess.
  const two = join(cluster.root, 'two');
  for (const d of ['a', 'b']) {
    mkdirSync(join(two, 'data', d), { recursive: true });
    writeFileSync(join(two, 'data', d, 'cluster.json'), '{"members": []}');
  }
  failsWith(
    t,
    await runCli(['status'], two),
    /several clusters under \.\/data/,
    'status with two clusters under ./data',
  );
});

/** `up` of the five slow-to-elect members, interrupted with SIGINT once `ready` says so. */
async function interruptedUp(t: Test, ready: (pids: number[]) => Promise<void>): Promise<void> {
  const child = spawnCli(
    ['up', '--nodes', '5', '--data', cluster.dataDir, '--base-port', String(base), '--tick-ms', '5000'],
    cluster.cwd,
  );
  const done = finish(child, 60_000);
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  await until('up to start every member', () => stderr.includes('waiting for a leader'), 20_000, 20);
  cluster.recordPids();
  const pids = cluster.state().members.map((m) => m.pid);
  t.equal(pids.filter((p) => p !== null).length, 5, 'up recorded five member pids');
  await ready(pids as number[]);
  t.equal(child.exitCode, null, 'up is still waiting for a leader when interrupted');
  child.kill('SIGINT');
  const r = await done;
  t.equal(r.code, 130, `up exits with 130 (stderr: ${r.stderr.trim()})`);
  t.match(r.stderr, /interrupted: stopped the members that had started/);
  for (const pid of pids) t.notOk(memberRunning(pid, cluster.dataDir), `member pid ${pid} is gone`);
  t.same(
    cluster.state().members.map((m) => m.pid),
    [null, null, null, null, null],
    'cluster.json records no running member',
  );
  const status = await cluster.cli('status', '--json');
  t.equal(status.code, 0, 'status still works');
  const rows = JSON.parse(status.stdout) as Array<{ id: string; role: string; pid: number | null }>;
  t.same(
    rows.map((r) => [r.id, r.role, r.pid]),
    ['n1', 'n2', 'n3', 'n4', 'n5'].map((id) => [id, 'down', null]),
    'status shows every member down',
  );
  for (let i = 1; i <= 5; i++) {
    t.ok(await isPortFree(base! + i), `raft port ${base! + i} is free again`);
    t.ok(await isPortFree(base! + 100 + i), `HTTP port ${base! + 100 + i} is free again`);
  }
}

t.test('Ctrl-C right after up started the members leaves none running', (t) => interruptedUp(t, async () => {}));

t.test('Ctrl-C while the members are serving but no leader is elected leaves none running', (t) =>
  interruptedUp(t, async () => {
    for (const id of cluster.ids()) {
      await until(
        `${id} to serve /healthz`,
        async () => (await cluster.call(id, 'GET', '/healthz')).status === 200,
        20_000,
      );
    }
    const st = await cluster.statuses();
    t.ok(
      [...st.values()].every((s) => s !== null && s.role !== 'leader'),
      'no member leads yet',
    );
  }),
);

t.test('after an interrupted up, the same directory and ports start a cluster', async (t) => {
  const r = await cluster.cli(
    'up',
    '--nodes',
    '5',
    '--base-port',
    String(base),
    '--tick-ms',
    '50',
    '--auth-token',
    'chosen-token-1',
  );
  t.equal(r.code, 0, `up succeeds (stderr: ${r.stderr.trim()})`);
  t.match(r.stdout, /kv cluster up in .* \(leader n\d\)/);
  t.match(r.stdout, new RegExp(`n1  http://127\\.0\\.0\\.1:${base! + 101}  raft 127\\.0\\.0\\.1:${base! + 1}`));
  t.match(r.stdout, /token: chosen-token-1 /);
  const tokenFile = join(cluster.dataDir, 'token');
  t.equal(readFileSync(tokenFile, 'utf8').trim(), 'chosen-token-1', '--auth-token is written to DIR/token');
  t.equal(statSync(tokenFile).mode & 0o777, 0o600, 'which only its owner can read');
  await cluster.leader();
  t.equal(
    (await cluster.call('n3', 'GET', '/v1/cluster/status', { token: 'chosen-token-1' })).status,
    200,
    'the members accept it',
  );
  const logs = await cluster.cli('logs', '3');
  t.equal(logs.code, 0, 'cluster logs 3');
  const lines = logs.stdout
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as { member: string; msg: string; term?: number });
  t.ok(lines.length > 0 && lines.every((l) => l.member === 'n3'), "logs prints n3's JSON lines");
  t.ok(
    lines.some((l) => l.msg === 'member ready' && typeof l.term === 'number'),
    'with the term',
  );
});

t.test(
  "the data folder is its owner's only: folders 0700, files 0600 (LevelDB, logs, cluster.json, token)",
  async (t) => {
    const { id } = await cluster.leader();
    for (let i = 0; i < 5; i++)
      t.equal((await cluster.call(id, 'PUT', `/v1/kv/mode-${i}`, { body: String(i) })).status, 200, `put mode-${i}`);
    const modes = ownerOnlyModes(cluster.dataDir);
    t.ok(
      modes.files >= 5 * 4 && modes.folders >= 1 + 5 * 2,
      `every member's LevelDB files walked (${modes.files} files, ${modes.folders} folders)`,
    );
    t.same(modes.loose, [], 'no folder but 0700, no file but 0600');
  },
);

t.test('a data directory held by a running cluster', async (t) => {
  const before = cluster.state().members.map((m) => m.pid);
  const r = await runCli(
    ['up', '--data', cluster.dataDir, '--base-port', String(foreignBase), '--tick-ms', '50'],
    cluster.cwd,
  );
  failsWith(
    t,
    r,
    /^cluster: .*data is held by a running kv cluster \(pids \d+, \d+, \d+, \d+, \d+\); run cluster down/,
    'up on a held directory',
  );
  t.same(
    cluster.state().members.map((m) => m.pid),
    before,
    'cluster.json is untouched',
  );
  for (let i = 1; i <= 5; i++) t.ok(await isPortFree(foreignBase! + i), `no member started on ${foreignBase! + i}`);
  await cluster.leader();
});

t.test('a port in use', async (t) => {
  // The running cluster's own ports.
  const other = join(cluster.root, 'other');
  failsWith(
    t,
    await runCli(['up', '--data', other, '--base-port', String(base), '--tick-ms', '50'], cluster.cwd),
    new RegExp(`^cluster: port in use: 127\\.0\\.0\\.1:${base! + 1} \\(choose another --base-port\\)`),
    "up on a running cluster's ports",
  );
  t.notOk(existsSync(join(other, 'cluster.json')), 'no cluster state was written');

  // A foreign listener on one HTTP port of an otherwise free range: found before any member starts.
  const blocker: Server = createServer();
  await new Promise<void>((resolve) => blocker.listen(foreignBase! + 103, '127.0.0.1', () => resolve()));
  try {
    const r = await runCli(['up', '--data', other, '--base-port', String(foreignBase), '--tick-ms', '50'], cluster.cwd);
    failsWith(
      t,
      r,
      new RegExp(`^cluster: port in use: 127\\.0\\.0\\.1:${foreignBase! + 103}`),
      'up with one HTTP port taken',
    );
    t.notOk(existsSync(join(other, 'cluster.json')), 'no cluster state was written');
    for (let i = 1; i <= 5; i++) t.ok(await isPortFree(foreignBase! + i), `no member started on ${foreignBase! + i}`);
  } finally {
    await new Promise<void>((resolve) => blocker.close(() => resolve()));
  }
  await cluster.leader();
});

t.test('an unknown member', async (t) => {
  const pids = cluster.state().members.map((m) => m.pid);
  const unknown = [
    ['kill', '9'],
    ['restart', 'n7'],
    ['pause', '6'],
    ['resume', 'x'],
    ['transfer-leader', '42'],
    ['remove-node', 'n8'],
    ['logs', '9'],
    ['partition', '1,2|3,9'],
  ];
  const results = await inParallel(
    [...unknown, ['partition', '1,2'], ['partition', '1,2|2,3']].map((args) => () => cluster.cli(...args)),
  );
  unknown.forEach((args, i) =>
    failsWith(
      t,
      results[i]!,
      /^cluster: unknown member (9|n7|6|x|42|n8) \(members: n1, n2, n3, n4, n5\)/,
      args.join(' '),
    ),
  );
  failsWith(t, results[unknown.length]!, /expected at least two non-empty groups/, 'partition with one group');
  failsWith(t, results[unknown.length + 1]!, /a member is in two groups/, 'partition with a member twice');
  t.same(
    cluster.state().members.map((m) => m.pid),
    pids,
    'no member was touched',
  );
  for (const pid of pids) t.ok(memberRunning(pid, cluster.dataDir), `member pid ${pid} still runs`);
  await cluster.leader();
});

t.test('a member that is not running, and a cluster that is down', async (t) => {
  t.equal((await cluster.cli('kill', '2')).code, 0, 'kill 2');
  failsWith(t, await cluster.cli('kill', '2'), /^cluster: member n2 is not running/, 'kill of a killed member');
  failsWith(t, await cluster.cli('pause', 'n2'), /^cluster: member n2 is not running/, 'pause of a killed member');
  const down = await cluster.cli('down');
  t.equal(down.code, 0, 'down');
  t.match(down.stdout, /stopped 5 members/);
  failsWith(t, await cluster.cli('resume', '1'), /^cluster: member n1 is not running/, 'resume on a stopped cluster');
  const status = await cluster.cli('status', '--json');
  t.same(
    (JSON.parse(status.stdout) as Array<{ role: string }>).map((r) => r.role),
    ['down', 'down', 'down', 'down', 'down'],
    'status shows every member down',
  );
  const wiped = await cluster.cli('down', '--wipe');
  t.equal(wiped.code, 0, 'down --wipe');
  t.notOk(existsSync(cluster.dataDir), 'the data directory is gone');
  failsWith(t, await cluster.cli('status'), /^cluster: no cluster in /, 'status after down --wipe');
});
